"""The stages after training as the run plan carries them (jobs/plan/after_training.py), the
trainers' Hugging Face saves in the rendered overrides (composed against each supported verl
release's real config tree; in each NeMo RL release's key list), and the config keys gke-grpo:job.evaluate and
gke-grpo:job.export.hubRepo."""

from __future__ import annotations

import dataclasses

import pytest

from components.config import ConfigError, load_stack_config
from jobs.contract.converters import NEMO_RL_SAVE_CONSOLIDATED_OVERRIDE, VERL_SAVE_CONTENTS
from jobs.contract.run_plan import plan_from_dict
from jobs.head.evaluate import evaluate_parser
from jobs.head.export import export_parser
from jobs.plan.after_training import after_training_commands, every_steps, nemo_rl_prompt_file
from jobs.plan.plan_builder import build_plan
from jobs.plan.preflight import check, key_file, nemo_rl_keys
from jobs.plan.render import render
from tests.conftest import stack_config
from tests.jobs.plan.test_preflight import DEV, PROD, at_release
from tests.jobs.plan.test_verl_snapshot import need_verl
from tools import verl_snapshot


@pytest.mark.parametrize("version", verl_snapshot.supported_versions())
def test_verl_saves_hf_model_with_every_checkpoint_in_verls_own_config_tree(version):
    need_verl(version)
    rendered = render(at_release(DEV, f"verl-{version}"))
    cfg = verl_snapshot.compose(rendered.overrides, version)
    assert list(cfg.actor_rollout_ref.actor.checkpoint.save_contents) == list(VERL_SAVE_CONTENTS)
    # load_contents follows save_contents (${.save_contents}); verl loads by membership only.
    assert "model" in cfg.actor_rollout_ref.actor.checkpoint.load_contents
    config_py = (verl_snapshot.tree(version) / "trainer" / "config" / "config.py").read_text()
    assert "Options: 'model', 'optimizer', 'extra', 'hf_model'." in config_py
    # ... and the FSDP checkpoint manager writes <actor>/huggingface for it (0.9.1's V1 FSDP
    # engine uses the same manager: workers/engine/fsdp/transformer_impl.py).
    manager = (verl_snapshot.tree(version) / "utils" / "checkpoint" / "fsdp_checkpoint_manager.py").read_text()
    assert "if self.should_save_hf_model:" in manager and '"huggingface"' in manager


@pytest.mark.parametrize("row", ["nemo-rl-0.7.0", "nemo-rl-0.5.0"])
def test_nemo_rl_saves_consolidated_weights_with_a_key_of_the_release(row):
    spec = at_release(PROD, row)
    key, _, value = NEMO_RL_SAVE_CONSOLIDATED_OVERRIDE.partition("=")
    assert key in nemo_rl_keys(key_file("nemo-rl", spec.framework_version)) and value == "true"
    assert NEMO_RL_SAVE_CONSOLIDATED_OVERRIDE in render(spec).overrides


def test_verl_commands_parse_with_the_stages_own_parsers():
    export, evaluate = after_training_commands(DEV, "final")
    args = export_parser().parse_args(list(export.argv[3:]))
    assert (args.run_id, args.framework, args.checkpoint_dir) == (DEV.run_id, "verl", DEV.checkpoint_dir)
    assert args.every_steps is None and args.hub_repo is None
    assert evaluate is not None
    args = evaluate_parser().parse_args(list(evaluate.argv[3:]))
    assert args.dataset_dir == DEV.dataset_dir and args.base_model == DEV.model_dir
    assert args.max_response_length == DEV.max_response_length
    assert args.gpus == DEV.total_gpus and args.tensor_parallel_size == 1   # 7B fits one H200
    assert args.prompt_file is None and args.vllm_python is None


def test_nemo_rl_commands_use_the_runs_prompt_and_nemo_rls_vllm_venv():
    export, evaluate = after_training_commands(PROD, "every-2", hub_repo="org/qwen32b-grpo")
    args = export_parser().parse_args(list(export.argv[3:]))
    assert args.every_steps == 2 * PROD.checkpoint_every_steps and args.hub_repo == "org/qwen32b-grpo"
    args = evaluate_parser().parse_args(list(evaluate.argv[3:]))
    assert args.prompt_file == "/opt/nemo-rl/examples/prompts/cot.txt"
    assert args.vllm_python.startswith("/opt/ray_venvs/nemo_rl.models.generation.vllm.vllm_worker.")
    assert args.every_steps == 2 * PROD.checkpoint_every_steps
    # A user prompt file is the one the trainer reads, hence the one evaluated with: the key of
    # each release's data layout (v0.5.0 flat, v0.7.0 under data.default).
    for row, key in (("nemo-rl-0.5.0", "data.prompt_file"), ("nemo-rl-0.7.0", "data.default.prompt_file")):
        spec = at_release(PROD, row)
        custom = dataclasses.replace(spec, extra_overrides=(f"{key}=examples/prompts/math.txt",))
        assert [f for f in check(custom) if f.level == "error"] == [], row
        assert nemo_rl_prompt_file(custom, "/opt/nemo-rl") == "/opt/nemo-rl/examples/prompts/math.txt"
        assert nemo_rl_prompt_file(dataclasses.replace(spec, extra_overrides=(f"{key}=null",)),
                                   "/opt/nemo-rl") is None


def test_evaluate_none_keeps_the_export():
    export, evaluate = after_training_commands(DEV, "none")
    assert export is not None and evaluate is None
    with pytest.raises(ValueError):
        every_steps("sometimes", 10)


def test_the_plan_carries_both_stages_through_json():
    import json

    plan = build_plan(DEV, render(DEV), deadline_seconds=None, gpu_wait_seconds=60,
                      after_training=after_training_commands(DEV, "final"))
    again = plan_from_dict(json.loads(plan.to_json()))
    assert again.export == plan.export and again.evaluate == plan.evaluate
    bare = build_plan(DEV, render(DEV), deadline_seconds=None, gpu_wait_seconds=60)
    assert plan_from_dict(json.loads(bare.to_json())).export is None


def load(changes):
    raw, secrets = stack_config("dev", changes)
    return load_stack_config(raw, secrets, "dev")


@pytest.mark.parametrize(("changes", "key"), [
    ({"gke-grpo:job.evaluate": "every-0"}, "gke-grpo:job.evaluate"),
    ({"gke-grpo:job.evaluate": "sometimes"}, "gke-grpo:job.evaluate"),
    ({"gke-grpo:job.export": {"hubRepo": "org/x.git"}}, "gke-grpo:job.export.hubRepo"),
    ({"gke-grpo:job.export": {"hubRepo": "org/a--b"}}, "gke-grpo:job.export.hubRepo"),
    ({"gke-grpo:job.export": {"bucket": "gs://x"}}, "gke-grpo:job.export.bucket"),
])
def test_bad_keys_are_named(changes, key):
    with pytest.raises(ConfigError) as error:
        load(changes)
    assert key in str(error.value)


def test_defaults_and_good_values():
    config = load({})
    assert config.job.evaluate == "final" and config.job.export.hub_repo is None
    config = load({"gke-grpo:job.evaluate": "every-3", "gke-grpo:job.export": {"hubRepo": "org/model"}})
    assert config.job.evaluate == "every-3" and config.job.export.hub_repo == "org/model"
