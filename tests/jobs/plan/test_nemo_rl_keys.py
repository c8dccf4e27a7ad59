"""The NeMo RL key lists are each supported release's grpo_math_1B.yaml (committed under
data/nemo-rl-<version>/ from the tag), and the rendered NeMo RL overrides compose on that yaml in
struct mode exactly as the release's entry composes them (nemo_rl/utils/config.py
parse_hydra_overrides at v0.5.0 and v0.7.0: OmegaConf.set_struct(cfg, True), hydra's
OverridesParser, then ConfigLoaderImpl._apply_overrides_to_config; then
OmegaConf.to_container(resolve=True); examples/run_grpo_math.py at v0.5.0, examples/run_grpo.py
at v0.7.0)."""

from __future__ import annotations

import dataclasses
import importlib.util

import pytest

from jobs.plan.preflight import check, key_file, nemo_rl_keys
from jobs.plan.render import owned_keys, render
from tests.conftest import skip_or_fail
from tests.jobs.plan.test_preflight import PROD, at_release
from tools import nemo_rl_keys as tool

VERSIONS = sorted(tool.COMMITS)
ROWS = {version: f"nemo-rl-{version}" for version in VERSIONS}


def need_omegaconf_and_hydra() -> None:
    for module in ("omegaconf", "hydra"):
        if importlib.util.find_spec(module) is None:
            skip_or_fail(f"{module} is not installed (requirements-dev.txt: hydra-core)")


def keys_of(version: str) -> dict[str, str]:
    return nemo_rl_keys(key_file("nemo-rl", version))


def compose(overrides, config=None, version="0.5.0"):
    """What the release's entry does with ``--config <yaml> <overrides>``."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf

    # run_grpo_math.py (v0.5.0) registers mul at import; run_grpo.py (v0.7.0) calls
    # register_omegaconf_resolvers(): mul, div and max (nemo_rl/utils/config.py).
    for name, resolver in (("mul", lambda a, b: a * b), ("div", lambda a, b: a / b), ("max", max)):
        if not OmegaConf.has_resolver(name):
            OmegaConf.register_new_resolver(name, resolver)
    cfg = tool.load_config(config or tool.base_config(version))
    OmegaConf.set_struct(cfg, True)
    parsed = OverridesParser.create().parse_overrides(overrides=list(overrides))
    ConfigLoaderImpl._apply_overrides_to_config(overrides=parsed, cfg=cfg)
    return OmegaConf.to_container(cfg, resolve=True)


# ---- the key list and the committed tag files ----------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_committed_configs_name_the_tag_commit(version):
    for local, upstream in tool.CONFIG_FILES.items():
        first = (tool.config_dir(version) / local).read_text().splitlines()[0]
        assert first == tool.header(upstream, version).rstrip("\n")
        assert tool.COMMITS[version] in first and f"v{version}" in first


def test_every_supported_release_has_a_key_list():
    from jobs.plan.versions import load_versions

    assert [row.framework_version for row in load_versions().rows_for("nemo-rl")] == ["0.7.0", "0.5.0"]
    assert set(VERSIONS) == {"0.5.0", "0.7.0"}


def test_key_list_has_v050_flat_data_layout():
    keys = keys_of("0.5.0")
    # In v0.5.0, absent from the old list: the data processor and environment of the flat layout.
    assert keys["data.env_name"] == '"math"'
    assert keys["data.processor"] == '"math_hf_data_processor"'
    assert keys["checkpointing.metric_name"] == '"val:accuracy"'
    assert keys["policy.dtensor_cfg.activation_checkpointing"] == "false"
    # The nested layout of later versions is not in v0.5.0.
    assert not any(k.startswith(("data.train.", "data.default.")) for k in keys)


def test_key_list_has_v070_nested_data_layout_and_no_async_key():
    """v0.7.0 (grpo_math_1B.yaml lines 366-392): data.train.*, data.validation, data.default.*;
    the flat keys are gone; checkpointing.is_async is not in the yaml (NotRequired in
    CheckpointingConfig), so the renderer adds it with `+`."""
    keys = keys_of("0.7.0")
    assert keys["data.train.dataset_name"] == '"OpenMathInstruct-2"'
    assert keys["data.train.split_validation_size"] == "0.05"
    assert keys["data.validation"] == "null"
    assert keys["data.default.processor"] == '"math_hf_data_processor"'
    assert "data.dataset_name" not in keys and "data.env_name" not in keys
    assert not any(k.startswith("checkpointing.is_async") for k in keys)


@pytest.mark.parametrize("version", VERSIONS)
def test_no_drift(version, capsys):
    need_omegaconf_and_hydra()
    assert tool.main(["--check", "--version", version]) == 0, capsys.readouterr().out


def test_drift_is_reported_with_a_diff(tmp_path, monkeypatch, capsys):
    need_omegaconf_and_hydra()
    stale = tmp_path / "nemo-rl-0.5.0-keys.txt"
    stale.write_text(tool.keys_path("0.5.0").read_text().replace(
        'checkpointing.keep_top_k\t3', 'checkpointing.keep_top_k\t5'))
    monkeypatch.setattr(tool, "DATA_DIR", tmp_path)
    monkeypatch.setattr(tool, "config_dir", lambda version="0.5.0": tool.ROOT / "data" / f"nemo-rl-{version}")
    assert tool.main(["--check", "--version", "0.5.0"]) == 1
    out = capsys.readouterr().out
    assert "-checkpointing.keep_top_k\t5" in out and "+checkpointing.keep_top_k\t3" in out


def test_edited_yaml_drifts_from_the_key_list(tmp_path, monkeypatch, capsys):
    """A key added to (or removed from) the tag's yaml makes --check fail."""
    need_omegaconf_and_hydra()
    edited = tmp_path / "grpo_math_1B.yaml"
    edited.write_text(tool.base_config("0.7.0").read_text().replace(
        "  keep_top_k: 3\n", "  keep_top_k: 3\n  keep_latest: true\n"))
    monkeypatch.setattr(tool, "base_config", lambda version="0.5.0": edited)
    assert tool.main(["--check", "--version", "0.7.0"]) == 1
    assert "+checkpointing.keep_latest\ttrue" in capsys.readouterr().out


# ---- the rendered overrides on the real yaml ------------------------------------------------


SPECS = [
    ("prod", PROD),
    ("separate-generation-steps-wandb", dataclasses.replace(
        PROD, colocated_generation=False, generation_nodes=2, wandb=True, total_steps=None,
        total_epochs=2, kl_loss_type="k2", extra_overrides=(
            "grpo.max_val_samples=128", "+policy.generation.vllm_kwargs.max_num_seqs=256"))),
    ("packing-fixed-batch", dataclasses.replace(
        PROD, dynamic_batch_size=False, sequence_packing=True, training_tensor_parallel_size=4,
        sequence_parallel=True)),
]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("base", [s for _, s in SPECS], ids=[n for n, _ in SPECS])
def test_overrides_compose_in_struct_mode(base, version):
    need_omegaconf_and_hydra()
    spec = at_release(base, ROWS[version])
    assert [f for f in check(spec) if f.level == "error"] == []
    cfg = compose(render(spec).overrides, version=version)
    assert (cfg["cluster"]["num_nodes"], cfg["cluster"]["gpus_per_node"]) == (spec.nodes, spec.gpus_per_node)
    assert cfg["checkpointing"]["checkpoint_dir"] == spec.checkpoint_dir
    assert cfg["checkpointing"]["metric_name"] is None           # the newest K
    assert cfg["checkpointing"]["keep_top_k"] == spec.checkpoints_to_keep
    policy = cfg["policy"]
    assert policy["model_name"] == spec.model_dir
    assert policy["dtensor_cfg"]["tensor_parallel_size"] == spec.training_tensor_parallel_size
    assert policy["dtensor_cfg"]["sequence_parallel"] is spec.sequence_parallel
    assert policy["dtensor_cfg"]["activation_checkpointing"] is spec.activation_checkpointing
    assert policy["dynamic_batching"]["enabled"] is spec.dynamic_batch_size
    assert policy["sequence_packing"]["enabled"] is spec.sequence_packing
    # One meaning of the lengths; vLLM's max_model_len follows the total by interpolation.
    total = spec.max_prompt_length + spec.max_response_length
    assert cfg["data"]["max_input_seq_length"] == spec.max_prompt_length
    assert policy["generation"]["max_new_tokens"] == spec.max_response_length
    assert policy["max_total_sequence_length"] == total
    assert policy["generation"]["vllm_cfg"]["max_model_len"] == total
    assert policy["make_sequence_length_divisible_by"] == spec.training_tensor_parallel_size
    # Validation on the held-out slice of the train split, never the test split.
    data = cfg["data"]
    if version == "0.5.0":
        assert data["val_data_path"].endswith("/validation.jsonl")
        assert data["train_data_path"].endswith("/train.jsonl")
        assert (data["input_key"], data["output_key"]) == ("question", "answer")
    else:
        # What setup_response_data reads (nemo_rl/data/utils.py lines 171-177, 247-262 at
        # v0.7.0) and ResponseDataset takes: no slice of the training rows as a second
        # validation set.
        assert data["train"]["dataset_name"] == "ResponseDataset"
        assert data["train"]["data_path"].endswith("/train.jsonl")
        assert data["train"]["split_validation_size"] == 0
        assert (data["train"]["input_key"], data["train"]["output_key"]) == ("question", "answer")
        assert data["validation"] == {"dataset_name": "ResponseDataset", "input_key": "question",
                                      "output_key": "answer",
                                      "data_path": data["train"]["data_path"].replace("/train.jsonl", "/validation.jsonl")}
        assert data["default"]["processor"] == "math_hf_data_processor"
        # v0.7.0's DTensor v2 policy saves asynchronously unless told (data/versions.yaml).
        assert cfg["checkpointing"]["is_async"] is False
    assert "test.jsonl" not in str(cfg)
    assert cfg["logger"]["wandb_enabled"] is False
    assert cfg["loss_fn"]["reference_policy_kl_type"] in ("k1", "k2", "k3")


def test_the_flat_data_keys_do_not_compose_on_v070():
    """Why the layout follows the release: v0.5.0's data.dataset_name is refused by v0.7.0's
    yaml in struct mode, as NeMo RL v0.7.0 itself would refuse it."""
    need_omegaconf_and_hydra()
    flat = render(at_release(PROD, "nemo-rl-0.5.0")).overrides
    with pytest.raises(Exception, match="dataset_name"):
        compose(flat, version="0.7.0")


@pytest.mark.parametrize("version", VERSIONS)
def test_prod_uses_nemo_rls_32b_recipe_settings(version):
    """The settings that decide whether Qwen2.5-32B fits, as NeMo RL's own 32B recipe
    (examples/configs/recipes/llm/grpo-qwen2.5-32b-32n8g-fsdp2tp8-actckpt.v3.yaml) at the
    release the stack runs; the log-prob batch follows the recipe of v0.7.0 (the prod stack's
    release: v0.5.0's recipe set 2, v0.7.0's follows the micro batch, 1)."""
    need_omegaconf_and_hydra()
    recipe = compose([], config=tool.recipe_32b(version), version=version)["policy"]
    ours = compose(render(at_release(PROD, ROWS[version])).overrides, version=version)["policy"]
    paths = [("dtensor_cfg", "tensor_parallel_size"), ("dtensor_cfg", "activation_checkpointing"),
             ("dtensor_cfg", "sequence_parallel"), ("train_micro_batch_size",),
             ("dynamic_batching", "enabled"), ("sequence_packing", "enabled"),
             ("make_sequence_length_divisible_by",), ("generation", "vllm_cfg", "tensor_parallel_size")]
    if version == "0.7.0":
        paths.append(("logprob_batch_size",))
    for path in paths:
        a, b = recipe, ours
        for part in path:
            a, b = a[part], b[part]
        assert a == b, path
    assert recipe["dtensor_cfg"]["tensor_parallel_size"] == 8
    assert recipe["dtensor_cfg"]["activation_checkpointing"] is True


@pytest.mark.parametrize("version", VERSIONS)
def test_unknown_key_fails_like_nemo_rl_and_plus_adds_one(version):
    need_omegaconf_and_hydra()
    from omegaconf.errors import ConfigAttributeError, ConfigKeyError

    spec = at_release(PROD, ROWS[version])
    with pytest.raises((ConfigAttributeError, ConfigKeyError, Exception)) as raised:
        compose([*render(spec).overrides, "grpo.num_generation_per_prompt=4"], version=version)
    assert "num_generation_per_prompt" in str(raised.value)
    cfg = compose([*render(spec).overrides, "+grpo.note=ok"], version=version)
    assert cfg["grpo"]["note"] == "ok"


@pytest.mark.parametrize("version", VERSIONS)
def test_every_plain_rendered_key_is_in_the_tag_and_plus_keys_are_not(version):
    keys = keys_of(version)
    spec = at_release(PROD, ROWS[version])
    prefixes = {".".join(k.split(".")[:i]) for k in keys for i in range(1, k.count(".") + 1)}
    for override in render(spec).overrides:
        head = override.split("=", 1)[0]
        if head.startswith("+"):
            assert head[1:] not in keys and head[1:] not in prefixes, override
        else:
            assert head in keys, override
    assert "checkpointing.metric_name" in owned_keys(spec)


def test_a_flat_data_key_on_v070_is_named_with_the_release_that_has_it():
    """data.env_name is a v0.5.0 key that v0.7.0 moved under data.default: preflight names the
    key, the release that has it and the release the stack runs, before anything is created."""
    findings = check(dataclasses.replace(PROD, extra_overrides=("data.env_name=math",)))
    assert [(f.level, f.key) for f in findings if f.level == "error"] == [("error", "gke-grpo:job.extraOverrides")]
    message = next(f.message for f in findings if f.level == "error")
    assert ("data.env_name is a key of nemo-rl 0.5.0 but not of NeMo RL 0.7.0's grpo_math_1B.yaml "
            "(nemo-rl-0.7.0-keys.txt), the release this stack runs (job.release)") in message
    assert [f for f in check(dataclasses.replace(at_release(PROD, "nemo-rl-0.5.0"),
                                                 extra_overrides=("data.env_name=math",)))
            if f.level == "error"] == []
