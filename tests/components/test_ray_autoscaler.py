"""The Ray v2 autoscaler's time-based settings per Ray version (data/ray-autoscaler-settings.yaml)
and what the RayCluster gives KubeRay's autoscaler sidecar, so that no GPU worker still starting is
deleted and recreated.

Upstream read for these tests (2026-12-06):
- ray-project/ray at ray-2.49.2 and ray-2.54.0, python/ray/autoscaler/v2/instance_manager/config.py
  (InstanceReconcileConfig: RAY_AUTOSCALER_RECONCILE_ALLOCATE_STATUS_TIMEOUT_S defaults to 300 in
  2.49.2, 60 * 60 in 2.54.0) and reconciler.py (an ALLOCATED instance past it goes to TERMINATING,
  in 2.54.0 through ALLOCATION_TIMEOUT); python/ray/_private/ray_constants.py env_integer (digits
  only, else the default).
- ray-project/kuberay v1.7.0 ray-operator/controllers/ray/common/pod.go: the sidecar runs the head's
  image; mergeAutoscalerOverrides appends autoscalerOptions.env to the sidecar's env.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from components.config import ConfigError, load_stack_config
from components.kuberay import allocate_timeout_note
from components.ray_autoscaler import ALLOCATE_TIMEOUT_ENV, load_autoscaler_settings, markdown_tables
from components.ray_cluster_updates import GIB_WAIT_SECONDS, worker_setup_script
from components.versions import load_versions
from tests.conftest import preview_with, skip_or_fail, stack_config

P = "gke-grpo:"
ROOT = Path(__file__).resolve().parents[2]
SETTINGS = load_autoscaler_settings()
KEY = P + "kuberay.autoscaler.allocateTimeoutSeconds"


def _autoscaler_options(result) -> dict:
    [cluster] = [r for r in result.resources if r.type == "kubernetes:ray.io/v1:RayCluster"]
    return cluster.inputs["spec"]["autoscalerOptions"]


# ---- the table ----------------------------------------------------------------------------------

def test_the_table_covers_every_ray_version_a_supported_image_carries():
    carried = {row.ray for row in load_versions().images}
    assert carried <= set(SETTINGS.versions), carried - set(SETTINGS.versions)
    for setting in SETTINGS.settings:
        assert set(setting.defaults) == set(SETTINGS.versions) == set(setting.on_expiry), setting.env
        assert setting.program in {"sets", "keeps"} and setting.file.startswith("python/ray/")
    for version, source in SETTINGS.versions.items():
        assert source.tag == f"ray-{version}" and re.fullmatch(r"[0-9a-f]{40}", source.commit)


def test_the_defaults_that_matter_are_as_read_at_each_tag():
    # Read at ray-2.49.2 and ray-2.54.0 (module docstring): the allocate timeout is the one
    # default that differs, by a factor of 12.
    assert SETTINGS.default(ALLOCATE_TIMEOUT_ENV, "2.49.2") == 300
    assert SETTINGS.default(ALLOCATE_TIMEOUT_ENV, "2.54.0") == 3600
    differing = [s.env for s in SETTINGS.settings if len(set(s.defaults.values())) > 1]
    assert differing == [ALLOCATE_TIMEOUT_ENV]
    assert [s.env for s in SETTINGS.settings if s.program == "sets"] == [ALLOCATE_TIMEOUT_ENV]


def test_the_installed_rays_defaults_are_the_tables():
    """The Ray this project's tests install (requirements-dev.txt, = a supported row) has the
    defaults the table gives its version."""
    try:
        import ray
        from ray.autoscaler._private import constants
        from ray.autoscaler.v2.instance_manager.config import InstanceReconcileConfig
    except ImportError:
        skip_or_fail("ray is not installed")
        return
    if ray.__version__ not in SETTINGS.versions:
        pytest.fail(f"the installed Ray {ray.__version__} has no column in data/ray-autoscaler-settings.yaml")
    defaults = InstanceReconcileConfig.__dataclass_fields__
    for setting in SETTINGS.settings:
        expected = setting.defaults[ray.__version__]
        if setting.field in defaults:
            assert defaults[setting.field].default == expected, setting.env
        else:
            assert getattr(constants, setting.field) == expected, setting.env


def test_the_gib_wait_in_the_bring_up_is_the_workers_own_bound():
    assert SETTINGS.bring_up["gib_wait_seconds"].seconds == GIB_WAIT_SECONDS == 600
    assert f"within {GIB_WAIT_SECONDS}s" in worker_setup_script("/x/set_nccl_env.sh", "/x/t.txtpb", multi_node=True)
    assert SETTINGS.bring_up_seconds == 900 + 900 + 600


@pytest.mark.parametrize("doc", ["docs/cost.md", "docs/gpu-capacity.md"])
def test_the_docs_tables_are_the_data(doc):
    assert markdown_tables() in (ROOT / doc).read_text(), \
        f"{doc}: paste components.ray_autoscaler.markdown_tables() output in place of its table"


# ---- what the RayCluster sets -------------------------------------------------------------------

def test_each_stack_sets_an_allocate_timeout_covering_the_gpu_wait_and_a_nodes_bring_up(stack_preview):
    config = load_stack_config(*stack_config(stack_preview.stack))
    options = _autoscaler_options(stack_preview)
    [env] = options["env"]
    assert env["name"] == ALLOCATE_TIMEOUT_ENV
    # Digits alone: Ray's env_integer silently falls back to its default otherwise.
    assert env["value"].isdigit()
    value = int(env["value"])
    assert value == config.job.gpu_wait_seconds + SETTINGS.bring_up_seconds == 4200
    # Above both versions' defaults: on neither would a worker starting within it be recycled.
    assert all(value > SETTINGS.default(ALLOCATE_TIMEOUT_ENV, v) for v in SETTINGS.versions)


def test_a_configured_allocate_timeout_is_what_the_sidecar_gets():
    result = preview_with("prod", {KEY: 7200})
    assert result.error is None, result.error
    assert _autoscaler_options(result)["env"] == [{"name": ALLOCATE_TIMEOUT_ENV, "value": "7200"}]


def test_an_allocate_timeout_without_the_bring_up_is_allowed_with_a_warning():
    assert allocate_timeout_note(4200, 1800) is None
    note = allocate_timeout_note(2000, 1800)
    assert note is not None and "1800 + 2400 = 4200" in note and "allocateTimeoutSeconds (2000)" in note


# ---- bad input: one message each, naming the key, before any resource ----------------------------

@pytest.mark.parametrize("value,allowed", [
    (-1, "a whole number of seconds above 0"),
    (0, "a whole number of seconds above 0"),
    ("3600", "input should be a valid integer"),
    (3600.5, "input should be a valid integer"),
    (True, "input should be a valid integer"),
    (1799, r"at least job.gpuWaitSeconds \(1800\)"),
])
def test_a_bad_allocate_timeout_is_refused_naming_its_key(value, allowed):
    raw, secrets = stack_config("prod", {KEY: value})
    with pytest.raises(ConfigError) as caught:
        load_stack_config(raw, secrets, "prod")
    problems = [(p.key, p.allowed) for p in caught.value.problems]
    assert len(problems) == 1 and problems[0][0] == KEY, problems
    assert re.match(allowed, problems[0][1]), problems


def test_a_refused_allocate_timeout_registers_no_resource():
    result = preview_with("dev", {KEY: 0})
    assert result.error is not None and KEY in result.error
    assert result.resources == [] and result.register_calls == 0


def test_the_gpu_wait_rule_is_not_reported_about_a_refused_gpu_wait():
    raw, secrets = stack_config("prod", {KEY: 1000, P + "job.gpuWaitSeconds": "soon"})
    with pytest.raises(ConfigError) as caught:
        load_stack_config(raw, secrets, "prod")
    assert [p.key for p in caught.value.problems] == [P + "job.gpuWaitSeconds"]
