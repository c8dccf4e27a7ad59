"""Capacity that ends on schedule, on the planning side: the plan's ``capacity_end`` and its margin
(jobs/plan/capacity_end.py), and the trainer overrides that take the end the run driver sets per
start (jobs/plan/render.py capacity_end_overrides), checked against each framework at its pinned
tag:

- verl 0.7.1 (.verl-trees/0.7.1): the composed config has
  ``trainer.esi_redundant_time`` (verl/trainer/config/ppo_trainer.yaml); verl's own ``run_ppo``
  (verl/trainer/main_ppo.py) hands MLP_CURRENT_CAPACITY_BLOCK_EXPIRATION_TIMESTAMP from the
  driver's environment to the TaskRunner actor's runtime_env; and verl's own
  ``should_save_ckpt_esi`` (verl/utils/checkpoint/checkpoint_manager.py), run in that actor
  environment with the composed margin, saves exactly inside the window before the end.
- verl 0.9.1: its default (V1) trainer never calls should_save_ckpt_esi, so nothing is
  rendered for it and preflight says the run relies on its periodic checkpoints
  (tests/components/test_grpo_job.py).
- NeMo RL v0.5.0 and v0.7.0: the override composes on the release's grpo_math_1B.yaml in struct
  mode and resolves, in the driver process, to the duration the driver sets (null without the
  driver).
"""

from __future__ import annotations

import ast
import dataclasses
import math
import os

import pytest

from jobs.contract.capacity_end import NEMO_RL_SAVE_BY_ENV, VERL_EXPIRATION_ENV
from jobs.plan.capacity_end import DEFAULT_MARGIN_SECONDS, capacity_end_margin, capacity_end_plan
from jobs.plan.checkpoint_interval import load_interruption_priors, prior_checkpoint_seconds
from jobs.plan.model_shapes import shape_for
from jobs.plan.plan_builder import build_plan
from jobs.plan.preflight import check
from jobs.plan.render import capacity_end_overrides, owned_keys, render
from tests.jobs.cli.test_metrics_render import _verl_file, run_ppo_on
from tests.jobs.plan.test_nemo_rl_keys import compose as nemo_rl_compose
from tests.jobs.plan.test_nemo_rl_keys import need_omegaconf_and_hydra
from tests.jobs.plan.test_preflight import DEV, DEV_071, PROD, PROD_050
from tests.jobs.plan.test_verl_snapshot import need_verl

END = 1_800_000_000


# ---- the margin and the plan's capacity_end ---------------------------------------------------

def test_the_margin_is_the_planners_checkpoint_time_rounded_up():
    expected, basis = prior_checkpoint_seconds(load_interruption_priors(), shape_for(PROD.model).parameters,
                                               PROD.storage_kind, PROD.storage_capacity_gib, 500)
    margin, said = capacity_end_margin(PROD, 500)
    assert margin == math.ceil(expected) and said == f"the planner's checkpoint time: {basis}"
    # The Lustre tier is the stack's: a slower tier gives a longer save, a larger margin.
    assert capacity_end_margin(PROD, 125)[0] > margin


def test_without_a_checkpoint_time_the_margin_is_the_stated_assumption():
    unknown = dataclasses.replace(DEV, model="example/not-a-known-model")
    margin, said = capacity_end_margin(unknown)
    assert margin == DEFAULT_MARGIN_SECONDS and "not in data/model-shapes.yaml" in said and "assumption" in said


def test_the_plan_has_a_capacity_end_only_when_a_source_ends_on_schedule():
    assert capacity_end_plan(DEV, flex_start_max_run_seconds=None, reservation_ends={}) is None
    ends = capacity_end_plan(DEV, flex_start_max_run_seconds=86400, reservation_ends={"r2": 2.0, "r1": 1.0})
    assert ends["flex_start_max_run_seconds"] == 86400.0
    assert ends["reservation_ends"] == [{"name": "r1", "ends_at": 1.0}, {"name": "r2", "ends_at": 2.0}]
    assert ends["margin_seconds"] == capacity_end_margin(DEV)[0]


def test_a_plan_with_a_capacity_end_needs_the_job_rendered_with_its_margin():
    ends = capacity_end_plan(PROD, flex_start_max_run_seconds=86400, reservation_ends={})
    with pytest.raises(ValueError, match="the trainer would not be told"):
        build_plan(PROD, render(PROD), deadline_seconds=None, gpu_wait_seconds=60, capacity_end=ends)
    plan = build_plan(PROD, render(PROD, ends["margin_seconds"]), deadline_seconds=None, gpu_wait_seconds=60,
                      capacity_end=ends)
    assert plan.capacity_end == ends


# ---- the rendered overrides -------------------------------------------------------------------

def test_the_overrides_are_rendered_only_for_capacity_that_ends():
    for spec in (DEV_071, PROD, PROD_050):
        assert capacity_end_overrides(spec, None) == ()
        assert not set(capacity_end_overrides(spec, 35.0)) & set(render(spec).overrides)
        assert set(capacity_end_overrides(spec, 35.0)) <= set(render(spec, 35.0).overrides)
        # The same command for every start: the end comes from the environment.
        assert render(spec, 35.0).overrides == render(spec.with_attempt(3), 35.0).overrides
    assert "trainer.esi_redundant_time=36" in render(DEV_071, 35.2).overrides
    assert not any(VERL_EXPIRATION_ENV in o for o in render(DEV_071).overrides)


def test_verl_091_gets_no_capacity_end_keys_its_trainer_never_reads():
    """0.9.1's V1 trainer (trainer/ppo/v1/trainer_base.py fit) never calls should_save_ckpt_esi:
    neither the margin nor the end in the runtime env is rendered (data/versions.yaml
    verl_saves_before_capacity_end)."""
    assert capacity_end_overrides(DEV, 35.0) == ()
    assert render(DEV, 35.0).overrides == render(DEV).overrides
    assert not any(VERL_EXPIRATION_ENV in o for o in render(DEV, 35.0).overrides)


@pytest.mark.parametrize("override", ["trainer.esi_redundant_time=600",
                                      "checkpointing.checkpoint_must_save_by=00:01:00:00"])
def test_the_capacity_end_keys_belong_to_the_stack_not_to_extra_overrides(override):
    spec = DEV_071 if override.startswith("trainer") else PROD
    assert override.split("=")[0] in owned_keys(spec)
    errors = [f for f in check(dataclasses.replace(spec, extra_overrides=(override,))) if f.level == "error"]
    assert errors and "gke-grpo:job.extraOverrides" in {f.key for f in errors}


@pytest.mark.parametrize("name", [VERL_EXPIRATION_ENV, NEMO_RL_SAVE_BY_ENV])
def test_a_user_cannot_read_the_drivers_variables_either(name):
    bad = dataclasses.replace(DEV, extra_overrides=(f"+a=${{oc.env:{name}}}",))
    with pytest.raises(ValueError, match="refused OmegaConf interpolation"):
        render(bad)


# ---- verl 0.7.1 -------------------------------------------------------------------------------

def _should_save_ckpt_esi():
    """verl's should_save_ckpt_esi compiled from verl 0.7.1's source (its module imports torch and
    transformers, which the test environment leaves out)."""
    path = _verl_file("utils/checkpoint/checkpoint_manager.py", "0.7.1")
    tree = ast.parse(path.read_text())
    (fn,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "should_save_ckpt_esi"]
    namespace: dict = {"os": os}
    exec(compile(ast.Module(body=[fn], type_ignores=[]), str(path), "exec"), namespace)
    return namespace["should_save_ckpt_esi"]


def _actor_environment(monkeypatch, driver_env: dict[str, str]):
    """The composed config, run through verl's run_ppo with the driver's environment; returns the
    TaskRunner's config after its OmegaConf.resolve, with the process environment set to what the
    actor gets (its runtime_env's env_vars)."""
    from omegaconf import OmegaConf

    from tools import verl_snapshot

    config = verl_snapshot.compose(render(DEV_071, 35.0).overrides, "0.7.1")
    for key in (VERL_EXPIRATION_ENV, "SAGEMAKER_CURRENT_CAPACITY_BLOCK_EXPIRATION_TIMESTAMP"):
        monkeypatch.delenv(key, raising=False)
    for key, value in driver_env.items():
        monkeypatch.setenv(key, value)
    env_vars, actor_config = run_ppo_on(config, "0.7.1")
    for key in driver_env:
        monkeypatch.delenv(key)                  # the actor has only its runtime_env
    for key, value in env_vars.items():
        monkeypatch.setenv(key, value)
    OmegaConf.resolve(actor_config)
    return env_vars, actor_config


def test_verl_saves_inside_the_window_before_the_end_the_driver_set(monkeypatch):
    need_verl("0.7.1")
    import time as real_time

    env_vars, config = _actor_environment(monkeypatch, {VERL_EXPIRATION_ENV: str(END)})
    assert env_vars[VERL_EXPIRATION_ENV] == str(END)
    margin = config.trainer.esi_redundant_time
    assert margin == 35 and isinstance(margin, int)
    assert config.trainer.save_freq > 0                       # verl saves only with a save_freq
    should_save = _should_save_ckpt_esi()
    step = 300.0                                              # the longest step so far
    window = 60 + step + margin                               # verl's save_ckpt_duration default: 60
    for now, expected in ((END - window - 1, False), (END - window + 1, True), (END - 1, True),
                          (END + 1, False)):
        monkeypatch.setattr(real_time, "time", lambda now=now: float(now))
        assert should_save(max_steps_duration=step, redundant_time=margin) is expected, now
    # Before any step of this start (longest step 0) verl does not save.
    monkeypatch.setattr(real_time, "time", lambda: float(END - 10))
    assert should_save(max_steps_duration=0, redundant_time=margin) is False


def test_verl_without_the_driver_sees_no_end(monkeypatch):
    need_verl("0.7.1")
    import time as real_time

    env_vars, _config = _actor_environment(monkeypatch, {})
    assert env_vars[VERL_EXPIRATION_ENV] == ""
    monkeypatch.setattr(real_time, "time", lambda: float(END))
    assert _should_save_ckpt_esi()(max_steps_duration=300.0, redundant_time=35) is False


# ---- NeMo RL v0.5.0 and v0.7.0 -----------------------------------------------------------------

@pytest.mark.parametrize("spec", [PROD, PROD_050], ids=["0.7.0", "0.5.0"])
@pytest.mark.parametrize("driver", ["02:03:04:05", None], ids=["driver", "no-driver"])
def test_nemo_rl_resolves_the_duration_the_driver_sets(monkeypatch, driver, spec):
    need_omegaconf_and_hydra()
    if driver:
        monkeypatch.setenv(NEMO_RL_SAVE_BY_ENV, driver)
    else:
        monkeypatch.delenv(NEMO_RL_SAVE_BY_ENV, raising=False)
    version = spec.framework_version
    config = nemo_rl_compose(render(spec, 35.0).overrides, version=version)
    assert config["checkpointing"]["checkpoint_must_save_by"] == driver
    assert config["checkpointing"]["enabled"] is True          # grpo_train saves only when enabled
    assert nemo_rl_compose(render(spec).overrides, version=version)["checkpointing"]["checkpoint_must_save_by"] is None
