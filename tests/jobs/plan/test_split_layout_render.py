"""The split layout's rendering (jobs/plan/render_layouts.py): verl's asynchronous trainers compose
against verl 0.9.1's own config trees (.verl-trees/0.9.1, what their hydra.main entries load), NeMo
RL's async GRPO overrides compose in struct mode against both releases' grpo_math_1B.yaml, and a
colocated spec renders exactly as before."""

from __future__ import annotations

import dataclasses
import os

import pytest

from jobs.plan.preflight import check
from jobs.plan.render import owned_keys, render
from jobs.plan.render_layouts import VERL_ONE_STEP_OFF_SEARCHPATH, verl_require_batches
from tests.jobs.plan.test_nemo_rl_keys import compose as nemo_compose
from tests.jobs.plan.test_preflight import DEV, PROD, PROD_050
from tests.jobs.plan.test_verl_snapshot import need_verl
from tools import verl_snapshot

# verl 0.9.1, 1 rollout + 1 trainer node of 8 GPUs; miniBatchSize 64 x verl's default trigger 4
# = 256 prompts per weight version = promptsPerStep.
FULLY_ASYNC = dataclasses.replace(DEV, layout="split", asynchronous_trainer="fully-async",
                                  rollout_nodes=1, trainer_nodes=1, mini_batch_size=64)
ONE_STEP_OFF = dataclasses.replace(DEV, layout="split", asynchronous_trainer="one-step-off",
                                   rollout_nodes=1, trainer_nodes=1)
# NeMo RL 0.7.0, 2 generation + 2 training nodes: what components/run_spec.py builds for a split.
ASYNC_GRPO = dataclasses.replace(PROD, layout="split", asynchronous_trainer="async-grpo",
                                 rollout_nodes=2, trainer_nodes=2, colocated_generation=False,
                                 generation_nodes=2, max_trajectory_age_steps=2)


def compose_async_verl(trainer: str, overrides: tuple[str, ...]):
    """What verl's asynchronous entry composes: its own config folder as the primary config, and
    ppo_trainer from verl's trainer/config. Installed, fully-async finds it at
    pkg://verl.trainer.config (its yaml) and one-step-off at the rendered command-line searchpath;
    importing verl here needs torch and tensordict, so the same folder of the tree is named by
    path instead (a hydra.searchpath override replaces the yaml's, hydra 1.3
    config_loader_impl.py _process_config_searchpath)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    tree = verl_snapshot.tree("0.9.1")
    folder, name = {"fully-async": ("fully_async_policy", "fully_async_ppo_trainer"),
                    "one-step-off": ("one_step_off_policy", "one_step_off_ppo_trainer")}[trainer]
    searchpath = f"hydra.searchpath=[file://{tree / 'trainer' / 'config'}]"
    rest = [o for o in overrides if o != VERL_ONE_STEP_OFF_SEARCHPATH]
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(tree / "experimental" / folder / "config"), version_base=None):
        return compose(name, overrides=[searchpath, *rest])


def test_colocated_specs_render_as_before():
    """The split module is never reached by a colocated spec: no layout key is rendered."""
    for spec in (DEV, PROD, PROD_050):
        rendered = render(spec)
        assert not any(o.startswith(("rollout.", "async_training.", "grpo.async_grpo.", "hydra."))
                       for o in rendered.overrides)
    assert render(DEV).argv[:3] == ("python3", "-m", "verl.trainer.main_ppo")


def test_fully_async_overrides():
    spec = FULLY_ASYNC
    assert check(spec) == [f for f in check(spec) if f.level == "warning"]
    rendered = render(spec)
    assert rendered.argv[:3] == ("python3", "-m", "verl.experimental.fully_async_policy.fully_async_main")
    o = rendered.overrides
    for expected in ("data.train_batch_size=0", "data.gen_batch_size=1", "trainer.nnodes=1",
                     "trainer.n_gpus_per_node=8", "rollout.nnodes=1", "rollout.n_gpus_per_node=8",
                     "actor_rollout_ref.hybrid_engine=False", "actor_rollout_ref.rollout.mode=async",
                     "rollout.total_rollout_steps=null", "async_training.require_batches=1",
                     "trainer.total_epochs=2"):
        assert expected in o, expected
    # verl's defaults stay verl's when the layout leaves them.
    assert not any(x.startswith(("async_training.staleness_threshold", "async_training.trigger"))
                   for x in o)
    assert not any(x.startswith("trainer.total_training_steps") for x in o)
    set_both = dataclasses.replace(spec, staleness_threshold=0.5, trigger_parameter_sync_step=2,
                                   total_steps=20, total_epochs=None)
    o = render(set_both).overrides
    assert "async_training.staleness_threshold=0.5" in o
    assert "async_training.trigger_parameter_sync_step=2" in o
    assert verl_require_batches(set_both) == 2 and "async_training.require_batches=2" in o   # 256 / (64 x 2)
    assert "rollout.total_rollout_steps=5120" in o          # 20 steps x 256 prompts
    assert {"rollout.nnodes", "async_training.require_batches", "actor_rollout_ref.hybrid_engine"} <= owned_keys(spec)


@pytest.mark.parametrize("spec", [FULLY_ASYNC, dataclasses.replace(
    FULLY_ASYNC, staleness_threshold=0.3, trigger_parameter_sync_step=2, total_steps=20, total_epochs=None)])
def test_fully_async_composes_against_verl(spec):
    need_verl("0.9.1")
    cfg = compose_async_verl("fully-async", render(spec).overrides)
    async_training = cfg.async_training
    assert cfg.data.train_batch_size == 0 and cfg.data.gen_batch_size == 1
    assert cfg.actor_rollout_ref.hybrid_engine is False
    assert cfg.actor_rollout_ref.rollout.mode == "async"
    assert cfg.actor_rollout_ref.rollout.calculate_log_probs is True
    assert cfg.trainer.nnodes == spec.trainer_nodes and cfg.rollout.nnodes == spec.rollout_nodes
    assert cfg.trainer.n_gpus_per_node == cfg.rollout.n_gpus_per_node == spec.gpus_per_node
    trigger = spec.trigger_parameter_sync_step or 4          # the yaml's default
    assert async_training.trigger_parameter_sync_step == trigger
    assert async_training.staleness_threshold == (spec.staleness_threshold
                                                   if spec.staleness_threshold is not None else 0.1)
    # One weight version (verl's step) holds promptsPerStep prompts.
    assert (cfg.actor_rollout_ref.actor.ppo_mini_batch_size * async_training.require_batches
            * trigger) == spec.prompts_per_step
    assert cfg.rollout.total_rollout_steps == (
        None if spec.total_steps is None else spec.total_steps * spec.prompts_per_step)
    # The program's own settings are where the async tree reads them.
    assert cfg.actor_rollout_ref.model.path == spec.model_dir
    assert cfg.trainer.default_local_dir == spec.checkpoint_dir
    assert cfg.trainer.save_freq == spec.checkpoint_every_steps
    assert "TENSORBOARD_DIR" in str(cfg.ray_kwargs.ray_init.runtime_env)


def test_one_step_off_composes_against_verl_only_with_the_package_searchpath(tmp_path):
    need_verl("0.9.1")
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import MissingConfigException

    spec = ONE_STEP_OFF
    assert [f for f in check(spec) if f.level == "error"] == []
    rendered = render(spec)
    assert rendered.argv[:3] == ("python3", "-m", "verl.experimental.one_step_off_policy.main_ppo")
    assert rendered.overrides[0] == VERL_ONE_STEP_OFF_SEARCHPATH
    from hydra.core.override_parser.overrides_parser import OverridesParser

    (searchpath,) = OverridesParser.create().parse_overrides([VERL_ONE_STEP_OFF_SEARCHPATH])
    assert searchpath.get_key_element() == "hydra.searchpath"
    assert searchpath.value() == ["pkg://verl.trainer.config"]
    cfg = compose_async_verl("one-step-off", rendered.overrides)
    assert cfg.data.train_batch_size == spec.prompts_per_step
    assert cfg.actor_rollout_ref.hybrid_engine is False
    assert cfg.trainer.nnodes == 1 and cfg.rollout.nnodes == 1
    assert "async_training" not in cfg              # it reads no staleness setting
    # Without the searchpath its yaml's file://verl/trainer/config is relative to the working
    # directory, which holds no verl checkout where verl is pip-installed.
    tree = verl_snapshot.tree("0.9.1")
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        GlobalHydra.instance().clear()
        folder = tree / "experimental" / "one_step_off_policy" / "config"
        with (initialize_config_dir(config_dir=str(folder), version_base=None),
              pytest.raises(MissingConfigException, match="ppo_trainer")):
            compose("one_step_off_ppo_trainer", overrides=[])
    finally:
        os.chdir(cwd)


@pytest.mark.parametrize("base", [ASYNC_GRPO, dataclasses.replace(ASYNC_GRPO, image=PROD_050.image,
                                  framework_version="0.5.0", ray_version=PROD_050.ray_version)])
def test_async_grpo_composes_in_struct_mode(base):
    spec = base
    rendered = render(spec)
    assert rendered.overrides[-4:] == (
        "grpo.async_grpo.enabled=True", "grpo.async_grpo.max_trajectory_age_steps=2",
        "policy.generation.vllm_cfg.async_engine=True", "loss_fn.use_importance_sampling_correction=True")
    cfg = nemo_compose(rendered.overrides, version=spec.framework_version)
    assert cfg["grpo"]["async_grpo"]["enabled"] is True
    assert cfg["grpo"]["async_grpo"]["max_trajectory_age_steps"] == 2
    assert cfg["policy"]["generation"]["vllm_cfg"]["async_engine"] is True
    assert cfg["loss_fn"]["use_importance_sampling_correction"] is True
    colocated = cfg["policy"]["generation"]["colocated"]
    assert colocated["enabled"] is False
    assert colocated["resources"] == {"num_nodes": 2, "gpus_per_node": 8}
    assert cfg["cluster"] == {**cfg["cluster"], "num_nodes": 4, "gpus_per_node": 8}
    # What async GRPO refuses stays off (examples/run_grpo.py lines 159-186 at v0.7.0).
    assert cfg["grpo"]["use_dynamic_sampling"] is False


def test_async_grpo_leaves_the_age_to_nemo_rl_when_unset():
    o = render(dataclasses.replace(ASYNC_GRPO, max_trajectory_age_steps=None)).overrides
    assert not any(x.startswith("grpo.async_grpo.max_trajectory_age_steps") for x in o)
    assert "grpo.async_grpo.enabled=True" in o
