"""The NeMo RL key list is v0.5.0's grpo_math_1B.yaml (committed under data/nemo-rl-0.5.0/ from
the tag), and the rendered NeMo RL overrides compose on that yaml in struct mode exactly as
examples/run_grpo_math.py composes them (nemo_rl/utils/config.py parse_hydra_overrides at
v0.5.0: OmegaConf.set_struct(cfg, True), hydra's OverridesParser, then
ConfigLoaderImpl._apply_overrides_to_config; then OmegaConf.to_container(resolve=True))."""

from __future__ import annotations

import dataclasses
import importlib.util

import pytest

from jobs.plan.preflight import check, nemo_rl_keys
from jobs.plan.render import owned_keys, render
from tests.conftest import skip_or_fail
from tests.jobs.plan.test_preflight import PROD
from tools import nemo_rl_keys as tool


def need_omegaconf_and_hydra() -> None:
    for module in ("omegaconf", "hydra"):
        if importlib.util.find_spec(module) is None:
            skip_or_fail(f"{module} is not installed (requirements-dev.txt: hydra-core)")


def compose(overrides, config=None):
    """What run_grpo_math.py does with ``--config <yaml> <overrides>`` (v0.5.0)."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf

    if not OmegaConf.has_resolver("mul"):   # run_grpo_math.py registers it at import
        OmegaConf.register_new_resolver("mul", lambda a, b: a * b)
    cfg = tool.load_config(config)
    OmegaConf.set_struct(cfg, True)
    parsed = OverridesParser.create().parse_overrides(overrides=list(overrides))
    ConfigLoaderImpl._apply_overrides_to_config(overrides=parsed, cfg=cfg)
    return OmegaConf.to_container(cfg, resolve=True)


# ---- the key list and the committed tag files ----------------------------------------------


def test_committed_configs_name_the_tag_commit():
    for local, upstream in tool.CONFIG_FILES.items():
        first = (tool.CONFIG_DIR / local).read_text().splitlines()[0]
        assert first == tool.header(upstream).rstrip("\n")
        assert "6c7089300fded94abfa49bb9cbf9eb357d862461" in first and "v0.5.0" in first


def test_key_list_has_v050_flat_data_layout():
    keys = nemo_rl_keys()
    # In v0.5.0, absent from the old list: the data processor and environment of the flat layout.
    assert keys["data.env_name"] == '"math"'
    assert keys["data.processor"] == '"math_hf_data_processor"'
    assert keys["checkpointing.metric_name"] == '"val:accuracy"'
    assert keys["policy.dtensor_cfg.activation_checkpointing"] == "false"
    # The nested layout of later versions is not in v0.5.0.
    assert not any(k.startswith(("data.train.", "data.default.")) for k in keys)


def test_no_drift(capsys):
    need_omegaconf_and_hydra()
    assert tool.main(["--check"]) == 0, capsys.readouterr().out


def test_drift_is_reported_with_a_diff(tmp_path, monkeypatch, capsys):
    need_omegaconf_and_hydra()
    stale = tmp_path / "nemo-rl-0.5.0-keys.txt"
    stale.write_text(tool.keys_path().read_text().replace(
        'checkpointing.keep_top_k\t3', 'checkpointing.keep_top_k\t5'))
    monkeypatch.setattr(tool, "DATA_DIR", tmp_path)
    assert tool.main(["--check"]) == 1
    out = capsys.readouterr().out
    assert "-checkpointing.keep_top_k\t5" in out and "+checkpointing.keep_top_k\t3" in out


def test_edited_yaml_drifts_from_the_key_list(tmp_path, monkeypatch, capsys):
    """A key added to (or removed from) the tag's yaml makes --check fail."""
    need_omegaconf_and_hydra()
    edited = tmp_path / "grpo_math_1B.yaml"
    edited.write_text(tool.BASE_CONFIG.read_text().replace(
        "  keep_top_k: 3\n", "  keep_top_k: 3\n  keep_latest: true\n"))
    monkeypatch.setattr(tool, "BASE_CONFIG", edited)
    assert tool.main(["--check"]) == 1
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


@pytest.mark.parametrize("spec", [s for _, s in SPECS], ids=[n for n, _ in SPECS])
def test_overrides_compose_in_struct_mode(spec):
    need_omegaconf_and_hydra()
    assert [f for f in check(spec) if f.level == "error"] == []
    cfg = compose(render(spec).overrides)
    assert cfg["cluster"] == {"num_nodes": spec.nodes, "gpus_per_node": spec.gpus_per_node}
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
    assert cfg["data"]["val_data_path"].endswith("/validation.jsonl")
    assert "test.jsonl" not in str(cfg)
    assert cfg["logger"]["wandb_enabled"] is False
    assert cfg["loss_fn"]["reference_policy_kl_type"] in ("k1", "k2", "k3")


def test_prod_uses_nemo_rls_32b_recipe_settings():
    """The settings that decide whether Qwen2.5-32B fits, as NeMo RL's own 32B recipe
    (examples/configs/recipes/llm/grpo-qwen2.5-32b-32n8g-fsdp2tp8-actckpt.v3.yaml at v0.5.0)."""
    need_omegaconf_and_hydra()
    recipe = compose([], config=tool.RECIPE_32B)["policy"]
    ours = compose(render(PROD).overrides)["policy"]
    for path in (("dtensor_cfg", "tensor_parallel_size"), ("dtensor_cfg", "activation_checkpointing"),
                 ("dtensor_cfg", "sequence_parallel"), ("train_micro_batch_size",),
                 ("logprob_batch_size",), ("dynamic_batching", "enabled"),
                 ("sequence_packing", "enabled"), ("make_sequence_length_divisible_by",),
                 ("generation", "vllm_cfg", "tensor_parallel_size")):
        a, b = recipe, ours
        for part in path:
            a, b = a[part], b[part]
        assert a == b, path
    assert recipe["dtensor_cfg"]["tensor_parallel_size"] == 8
    assert recipe["dtensor_cfg"]["activation_checkpointing"] is True


def test_unknown_key_fails_like_nemo_rl_and_plus_adds_one():
    need_omegaconf_and_hydra()
    from omegaconf.errors import ConfigAttributeError, ConfigKeyError

    with pytest.raises((ConfigAttributeError, ConfigKeyError, Exception)) as raised:
        compose([*render(PROD).overrides, "grpo.num_generation_per_prompt=4"])
    assert "num_generation_per_prompt" in str(raised.value)
    cfg = compose([*render(PROD).overrides, "+grpo.note=ok"])
    assert cfg["grpo"]["note"] == "ok"


def test_every_plain_rendered_key_is_in_the_tag_and_plus_keys_are_not():
    keys = nemo_rl_keys()
    prefixes = {".".join(k.split(".")[:i]) for k in keys for i in range(1, k.count(".") + 1)}
    for override in render(PROD).overrides:
        head = override.split("=", 1)[0]
        if head.startswith("+"):
            assert head[1:] not in keys and head[1:] not in prefixes, override
        else:
            assert head in keys, override
    assert "checkpointing.metric_name" in owned_keys(PROD)
