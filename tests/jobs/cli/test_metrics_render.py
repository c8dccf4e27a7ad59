"""The rendered commands make each framework write TensorBoard files into the folder the run
driver names per trainer start (env GKE_GRPO_TENSORBOARD_DIR), and validate at the start.

verl: the TensorBoard writer lives in the TaskRunner actor and reads TENSORBOARD_DIR from the
actor's environment (verl/utils/tracking.py _TensorboardAdapter at 0.7.1 and 0.9.1); an actor
gets only the runtime_env ray.init passes. The test runs verl's own ``run_ppo``
(verl/trainer/main_ppo.py of each supported release, .verl-trees/<version>) on the rendered
config, with only the Ray calls captured, and checks the env_vars it hands to ray.init, then
resolves the config as the actor does (TaskRunner.run at 0.7.1, TaskRunnerV1.run at 0.9.1:
OmegaConf.resolve) in that environment.
NeMo RL v0.5.0 and v0.7.0: parse_hydra_overrides (nemo_rl/utils/config.py: OverridesParser +
ConfigLoaderImpl._apply_overrides_to_config) then OmegaConf.to_container(resolve=True)
(examples/run_grpo_math.py, examples/run_grpo.py at v0.7.0) in the driver process, whose env the
run driver sets.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import os
import types
from pathlib import Path

import pytest

from jobs.contract.records import TENSORBOARD_ENV
from jobs.plan.render import render
from tests.jobs.plan.test_preflight import DEV, PROD, at_release
from tests.jobs.plan.test_verl_snapshot import VERSIONS, need_verl

START_DIR = f"/data/runs/{DEV.run_id}/tensorboard/attempt-2-start-1"


def _verl_file(relative: str, version: str) -> Path:
    from tools import verl_snapshot

    return verl_snapshot.tree(version) / relative


def _run_ppo_of_installed_verl(namespace: dict, version: str):
    """verl's run_ppo function, compiled from its source file (importing verl.trainer.main_ppo
    would need torch, tensordict and the rest of verl's runtime)."""
    source = _verl_file("trainer/main_ppo.py", version).read_text()
    tree = ast.parse(source)
    (fn,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "run_ppo"]
    module = ast.Module(body=[fn], type_ignores=[])
    exec(compile(module, str(_verl_file("trainer/main_ppo.py", version)), "exec"), namespace)
    return namespace["run_ppo"]


def _constants_ppo(version: str) -> types.ModuleType:
    """verl/trainer/constants_ppo.py of the release, executed from its file. 0.9.1's imports
    verl.utils.device for the GPU's compute capability (importing verl needs tensordict and
    torch's GPU stack): a stand-in answers (None, None), what verl's CPU platform answers, which
    only decides Blackwell and Megatron variables this run does not use."""
    import sys

    device = types.ModuleType("verl.utils.device")
    device.get_device_capability = lambda device_id=0: (None, None)
    stand_ins = {"verl": types.ModuleType("verl"), "verl.utils": types.ModuleType("verl.utils"),
                 "verl.utils.device": device}
    saved = {name: sys.modules.get(name) for name in stand_ins}
    sys.modules.update(stand_ins)
    try:
        spec = importlib.util.spec_from_file_location(f"verl_constants_ppo_{version}",
                                                      _verl_file("trainer/constants_ppo.py", version))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        for name, value in saved.items():
            if value is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = value
    return module


class _CapturingRay:
    """The Ray calls run_ppo makes, captured: nothing here decides a value the test checks."""

    def __init__(self):
        self.init_kwargs = None

    def is_initialized(self):
        return False

    def init(self, **kwargs):
        self.init_kwargs = kwargs

    def get(self, value):
        return value

    def timeline(self, filename):   # pragma: no cover - only with ray_kwargs.timeline_json_file
        raise AssertionError("not configured")


def run_ppo_on(config, version: str):
    """``config`` through the release's own run_ppo (its source, with its own
    get_ppo_ray_runtime_env) and a captured Ray: (the runtime_env's env_vars it hands ray.init,
    the config it ships to the TaskRunner)."""
    from omegaconf import OmegaConf

    constants_module = _constants_ppo(version)
    ray = _CapturingRay()
    shipped = {}
    runner = types.SimpleNamespace(remote=lambda: types.SimpleNamespace(
        run=types.SimpleNamespace(remote=lambda cfg: shipped.setdefault("config", cfg))))
    run_ppo = _run_ppo_of_installed_verl({"ray": ray, "OmegaConf": OmegaConf, "os": os,
                                          "get_ppo_ray_runtime_env": constants_module.get_ppo_ray_runtime_env,
                                          "is_cuda_available": False}, version)
    run_ppo(config, task_runner_class=runner)
    return ray.init_kwargs["runtime_env"]["env_vars"], shipped["config"]


@pytest.mark.parametrize("version", VERSIONS)
def test_verl_hands_the_start_folder_to_its_actor(monkeypatch, version):
    need_verl(version)
    from omegaconf import OmegaConf

    from tools import verl_snapshot

    config = verl_snapshot.compose(render(at_release(DEV, f"verl-{version}")).overrides, version)
    assert list(config.trainer.logger) == ["console", "tensorboard"]
    assert config.trainer.val_before_train is True

    monkeypatch.setenv(TENSORBOARD_ENV, START_DIR)
    env_vars, actor_config = run_ppo_on(config, version)
    assert env_vars["TENSORBOARD_DIR"] == START_DIR == env_vars[TENSORBOARD_ENV]
    assert env_vars["NCCL_DEBUG"] == "WARN"                  # verl's own runtime env still merged in

    # In the actor: only the runtime_env's variables, then TaskRunner.run's OmegaConf.resolve.
    monkeypatch.delenv(TENSORBOARD_ENV)
    for key, value in env_vars.items():
        monkeypatch.setenv(key, value)
    OmegaConf.resolve(actor_config)
    assert os.environ["TENSORBOARD_DIR"] == START_DIR        # what _TensorboardAdapter reads


@pytest.mark.parametrize("version", VERSIONS)
def test_verl_without_the_driver_writes_into_the_run_directory(monkeypatch, version):
    need_verl(version)
    from omegaconf import OmegaConf

    from tools import verl_snapshot

    monkeypatch.delenv(TENSORBOARD_ENV, raising=False)
    spec = at_release(DEV, f"verl-{version}")
    config = verl_snapshot.compose(render(spec).overrides, version)
    runtime_env = config.ray_kwargs.ray_init.get("runtime_env")
    assert OmegaConf.to_container(runtime_env)["env_vars"]["TENSORBOARD_DIR"] == \
        f"/data/runs/{spec.run_id}/tensorboard/attempt-0-start-0"


def _apply_like_nemo_rl(overrides, version):
    """The overrides composed on the release's real grpo_math_1B.yaml in struct mode, as its entry
    does (tests/jobs/plan/test_nemo_rl_keys.py)."""
    from tests.jobs.plan.test_nemo_rl_keys import compose

    return compose(overrides, version=version)


@pytest.mark.parametrize("version", ["0.7.0", "0.5.0"])
@pytest.mark.parametrize("env", [START_DIR, None], ids=["driver", "no-driver"])
def test_nemo_rl_log_dir_is_the_start_folder(monkeypatch, env, version):
    if env:
        monkeypatch.setenv(TENSORBOARD_ENV, env)
    else:
        monkeypatch.delenv(TENSORBOARD_ENV, raising=False)
    spec = at_release(PROD, f"nemo-rl-{version}")
    config = _apply_like_nemo_rl(render(spec).overrides, version)
    assert config["logger"]["tensorboard_enabled"] is True
    assert config["logger"]["log_dir"] == (env or f"/data/runs/{spec.run_id}/tensorboard/attempt-0-start-0")
    assert config["grpo"]["val_at_start"] is True


def test_the_command_is_the_same_for_every_start():
    # The env reference, not a path, is in the argv: the driver reuses one plan for all starts.
    for spec in (DEV, PROD, dataclasses.replace(DEV, wandb=True)):
        assert render(spec).overrides == render(spec.with_attempt(3)).overrides
        assert any(f"oc.env:{TENSORBOARD_ENV}" in o for o in render(spec).overrides)
