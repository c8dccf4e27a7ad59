"""The verl key snapshots match each supported release's installed tree (.verl-trees/<version>),
and the rendered verl overrides compose against that release's REAL config tree (what
verl.trainer.main_ppo would do)."""

from __future__ import annotations

import dataclasses
import importlib.util
import json

import pytest

from jobs.plan.preflight import check
from jobs.plan.render import render
from tests.jobs.plan.test_preflight import DEV, PROD, at_release
from tools import verl_snapshot

VERSIONS = verl_snapshot.supported_versions()
ROWS = {version: f"verl-{version}" for version in VERSIONS}


def need_verl(version: str) -> None:
    from tests.conftest import skip_or_fail

    if importlib.util.find_spec("hydra") is None:
        skip_or_fail("hydra-core is not installed")
    try:
        installed = verl_snapshot.installed_verl_version(version)
    except verl_snapshot.SnapshotError as err:
        skip_or_fail(str(err))
    if installed != version:
        skip_or_fail(f".verl-trees/{version} holds verl {installed}")


def test_every_supported_release_has_a_snapshot_and_the_default_is_first():
    assert VERSIONS[0] == verl_snapshot.verl_version() == "0.9.1" and "0.7.1" in VERSIONS
    for version in VERSIONS:
        data = json.loads(verl_snapshot.snapshot_path(version).read_text())
        assert data["verl_version"] == version
        keys = data["keys"]
        assert keys["algorithm.adv_estimator"] == "gae"
        assert keys["actor_rollout_ref.rollout.name"] == "???"
        assert keys["trainer.save_freq"] == -1


def test_what_changed_between_the_releases_is_in_the_snapshots():
    """The differences the program follows (docs/frameworks.md): 0.9.1 defines the runtime_env
    node the TensorBoard override replaces, and its V1 trainer switch; 0.7.1's legacy worker
    switch is gone."""
    old = json.loads(verl_snapshot.snapshot_path("0.7.1").read_text())["keys"]
    new = json.loads(verl_snapshot.snapshot_path("0.9.1").read_text())["keys"]
    assert "ray_kwargs.ray_init.runtime_env.py_executable" in new
    assert not any(key.startswith("ray_kwargs.ray_init.runtime_env") for key in old)
    assert new["trainer.use_v1"] is True and "trainer.use_v1" not in old
    assert "trainer.use_legacy_worker_impl" in old and "trainer.use_legacy_worker_impl" not in new


@pytest.mark.parametrize("version", VERSIONS)
def test_no_drift(version, capsys):
    need_verl(version)
    assert verl_snapshot.main(["--check", "--version", version]) == 0, capsys.readouterr().out


def test_drift_is_reported_with_a_diff(tmp_path, monkeypatch, capsys):
    version = VERSIONS[0]
    need_verl(version)
    committed = verl_snapshot.snapshot_path(version).read_text()
    stale = tmp_path / f"verl-{version}-config.json"
    stale.write_text(committed.replace('"trainer.save_freq": -1', '"trainer.save_freq": 5'))
    monkeypatch.setattr(verl_snapshot, "DATA_DIR", tmp_path)
    assert verl_snapshot.main(["--check", "--version", version]) == 1
    out = capsys.readouterr().out
    assert '-    "trainer.save_freq": 5,' in out and '+    "trainer.save_freq": -1,' in out


def test_an_unsupported_version_is_refused_with_the_supported_ones(capsys):
    assert verl_snapshot.main(["--check", "--version", "0.8.0"]) == 2
    assert "verl 0.8.0 is not a supported release (data/versions.yaml has 0.9.1, 0.7.1)" in capsys.readouterr().err


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


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("base", [s for _, s in VERL_SPECS], ids=[i for i, _ in VERL_SPECS])
def test_rendered_overrides_compose_against_verl(base, version):
    need_verl(version)
    spec = at_release(base, ROWS[version])
    assert [f for f in check(spec) if f.level == "error"] == []
    cfg = verl_snapshot.compose(render(spec).overrides, version)
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


@pytest.mark.parametrize("version", VERSIONS)
def test_misspelt_key_fails_in_verl_and_in_preflight(version):
    need_verl(version)
    from hydra.errors import ConfigCompositionException

    typo = "actor_rollout_ref.rollout.tensor_parallel_size=2"
    with pytest.raises(ConfigCompositionException):
        verl_snapshot.compose([typo], version)
    spec = at_release(DEV, ROWS[version])
    assert [f.level for f in check(dataclasses.replace(spec, extra_overrides=(typo,))) if f.level == "error"] == ["error"]


@pytest.mark.parametrize("override", ["trainer.use_legacy_worker_impl=disable",
                                      "actor_rollout_ref.rollout.skip_rollout=True"])
def test_a_key_the_chosen_release_no_longer_has_fails_in_verl_and_in_preflight(override):
    """A key of verl 0.7.1 that 0.9.1 removed: verl 0.9.1 itself refuses it, and preflight names
    the key, the release that has it and the release the stack runs."""
    need_verl("0.7.1")
    need_verl("0.9.1")
    from hydra.errors import ConfigCompositionException

    verl_snapshot.compose([override], "0.7.1")      # a key there
    with pytest.raises(ConfigCompositionException):
        verl_snapshot.compose([override], "0.9.1")
    findings = [f for f in check(dataclasses.replace(DEV, extra_overrides=(override,))) if f.level == "error"]
    key = override.split("=")[0]
    assert [(f.level, f.key) for f in findings] == [("error", "gke-grpo:job.extraOverrides")]
    assert (f"{key} is a key of verl 0.7.1 but not of verl 0.9.1's ppo_trainer config "
            "(verl-0.9.1-config.json), the release this stack runs (job.release): renamed or "
            "removed") in findings[0].message
    on_071 = dataclasses.replace(at_release(DEV, "verl-0.7.1"), extra_overrides=(override,))
    assert check(on_071) == []
