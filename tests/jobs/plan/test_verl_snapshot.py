"""The verl key snapshot matches the installed verl of data/versions.yaml, and the rendered verl
overrides compose against verl's REAL config tree (what verl.trainer.main_ppo would do)."""

from __future__ import annotations

import dataclasses
import importlib.util
import json

import pytest

from jobs.plan.preflight import check
from jobs.plan.render import render
from jobs.plan.versions import load_versions
from tests.jobs.plan.test_preflight import DEV, PROD
from tools import verl_snapshot

VERSION = load_versions().for_framework("verl").framework_version


def need_verl() -> None:
    from tests.conftest import skip_or_fail

    if importlib.util.find_spec("verl") is None:
        skip_or_fail(f"verl is not installed (pip install verl=={VERSION} --no-deps; make setup)")
    if importlib.util.find_spec("hydra") is None:
        skip_or_fail("hydra-core is not installed")
    if verl_snapshot.installed_verl_version() != VERSION:
        skip_or_fail(f"installed verl is {verl_snapshot.installed_verl_version()}, not {VERSION}")


def test_committed_snapshot_is_the_versions_table_version():
    data = json.loads(verl_snapshot.snapshot_path(VERSION).read_text())
    assert data["verl_version"] == VERSION
    keys = data["keys"]
    assert keys["algorithm.adv_estimator"] == "gae"
    assert keys["actor_rollout_ref.rollout.name"] == "???"
    assert keys["trainer.save_freq"] == -1


def test_no_drift(capsys):
    need_verl()
    assert verl_snapshot.main(["--check"]) == 0, capsys.readouterr().out


def test_drift_is_reported_with_a_diff(tmp_path, monkeypatch, capsys):
    need_verl()
    committed = verl_snapshot.snapshot_path(VERSION).read_text()
    stale = tmp_path / f"verl-{VERSION}-config.json"
    stale.write_text(committed.replace('"trainer.save_freq": -1', '"trainer.save_freq": 5'))
    monkeypatch.setattr(verl_snapshot, "DATA_DIR", tmp_path)
    assert verl_snapshot.main(["--check"]) == 1
    out = capsys.readouterr().out
    assert '-    "trainer.save_freq": 5,' in out and '+    "trainer.save_freq": -1,' in out


VERL_SPECS = [
    ("dev", DEV),
    # A verl config on the prod machines: 4 x 8 B200, steps, W&B, user extras.
    ("verl-b200-steps-wandb", dataclasses.replace(
        PROD, framework="verl", image=DEV.image, framework_version=DEV.framework_version,
        ray_version=DEV.ray_version, prompts_per_step=128, generations_per_prompt=16,
        mini_batch_size=64, micro_batch_size_per_gpu=4, total_steps=300, total_epochs=None,
        training_tensor_parallel_size=1, dynamic_batch_size=False, sequence_packing=True,
        ulysses_sequence_parallel_size=2, rollout_tensor_parallel_size=8,
        wandb=True, extra_overrides=("actor_rollout_ref.actor.clip_ratio_high=0.28",
                                     "+actor_rollout_ref.rollout.engine_kwargs.vllm.max_num_seqs=512"))),
]


@pytest.mark.parametrize("spec", [s for _, s in VERL_SPECS], ids=[i for i, _ in VERL_SPECS])
def test_rendered_overrides_compose_against_verl(spec):
    need_verl()
    assert check(spec) == []
    cfg = verl_snapshot.compose(render(spec).overrides)
    assert cfg.algorithm.adv_estimator == "grpo"
    assert cfg.actor_rollout_ref.rollout.n == spec.generations_per_prompt > 1
    assert cfg.actor_rollout_ref.rollout.name == "vllm"
    assert cfg.actor_rollout_ref.actor.strategy == "fsdp2"
    assert cfg.actor_rollout_ref.actor.use_kl_loss is True
    assert cfg.algorithm.use_kl_in_reward is False
    assert cfg.trainer.save_freq == spec.checkpoint_every_steps > 0
    assert cfg.trainer.default_local_dir == spec.checkpoint_dir
    assert cfg.trainer.resume_mode == "auto"
    assert cfg.trainer.nnodes == spec.nodes and cfg.trainer.n_gpus_per_node == spec.gpus_per_node
    assert cfg.trainer.val_before_train is True
    assert cfg.actor_rollout_ref.model.path == spec.model_dir
    assert cfg.data.train_batch_size == spec.prompts_per_step
    assert cfg.actor_rollout_ref.actor.optim.lr == spec.learning_rate
    assert list(cfg.trainer.logger) == ["console", "tensorboard"] + (["wandb"] if spec.wandb else [])
    # Parallelism and batching keys land where verl reads them; validation is the held-out slice.
    actor = cfg.actor_rollout_ref.actor
    assert actor.ulysses_sequence_parallel_size == spec.ulysses_sequence_parallel_size
    assert actor.use_dynamic_bsz is spec.dynamic_batch_size
    assert cfg.actor_rollout_ref.model.use_remove_padding is spec.sequence_packing
    assert cfg.actor_rollout_ref.model.enable_gradient_checkpointing is spec.activation_checkpointing
    assert cfg.actor_rollout_ref.rollout.tensor_model_parallel_size == spec.rollout_tensor_parallel_size
    if spec.max_tokens_per_gpu is not None:
        assert actor.ppo_max_token_len_per_gpu == spec.max_tokens_per_gpu
        # ref and rollout log-prob passes follow the actor's token budget and dynamic batching
        assert cfg.actor_rollout_ref.ref.log_prob_max_token_len_per_gpu == spec.max_tokens_per_gpu
        assert cfg.actor_rollout_ref.rollout.log_prob_use_dynamic_bsz is True
    assert cfg.data.val_files.endswith("/validation.parquet")
    assert cfg.data.max_response_length == spec.max_response_length


def test_misspelt_key_fails_in_verl_and_in_preflight():
    need_verl()
    from hydra.errors import ConfigCompositionException

    typo = "actor_rollout_ref.rollout.tensor_parallel_size=2"
    with pytest.raises(ConfigCompositionException):
        verl_snapshot.compose([typo])
    assert [f.level for f in check(dataclasses.replace(DEV, extra_overrides=(typo,)))] == ["error"]
