"""A split layout's RayCluster (gke-grpo:job.layout, docs/layouts.md): one GPU worker group per
pool, each bound to its capacity source and advertising its pool's Ray custom resource, read by
Ray's own KubeRay translation on every Ray version a supported image carries, and valid against
the vendored KubeRay CRD. Checked on the committed golden previews (tests/tools/test_preview.py
keeps them equal to the program's output)."""

from __future__ import annotations

import json
import subprocess

import pytest

from components.ray_pods import pool_start_resources
from jobs.contract.layouts import POOL_GROUPS, POOL_RESOURCES
from tests.conftest import skip_or_fail
from tests.crd_schemas import validate_custom_resource
from tools.golden import golden_path
from tools.kuberay_scenarios import ray_python, supported_ray_versions

SPLIT_GOLDENS = ("dev-split", "prod-split")


def ray_cluster(golden: str) -> dict:
    preview = json.loads(golden_path(golden).read_text())
    inputs = next(r["inputs"] for r in preview["resources"] if r["type"].endswith(":RayCluster"))
    return {"apiVersion": inputs["apiVersion"], "kind": "RayCluster",
            "metadata": {"name": "grpo", "namespace": "grpo"}, "spec": inputs["spec"]}


@pytest.mark.parametrize("golden", SPLIT_GOLDENS)
def test_each_pool_is_a_worker_group_of_its_own(golden):
    cluster = ray_cluster(golden)
    validate_custom_resource(cluster)
    groups = {g["groupName"]: g for g in cluster["spec"]["workerGroupSpecs"]}
    assert set(groups) == set(POOL_GROUPS.values())
    spec = json.loads(golden_path(golden).read_text())["outputs"]["runSpec"]
    for pool, group_name in POOL_GROUPS.items():
        group = groups[group_name]
        assert group["minReplicas"] == 0 and group["maxReplicas"] == spec[f"{pool}_nodes"]
        assert group["rayStartParams"]["resources"] == pool_start_resources(pool)
        assert "replicas" not in group          # the autoscaler owns it


def test_a_colocated_cluster_keeps_its_one_group():
    groups = ray_cluster("dev")["spec"]["workerGroupSpecs"]
    assert [g["groupName"] for g in groups] == ["gpu-workers"]
    assert "resources" not in groups[0]["rayStartParams"]


TRANSLATE = """
import json, sys
from ray.autoscaler._private.kuberay.autoscaling_config import _derive_autoscaling_config_from_ray_cr
config = _derive_autoscaling_config_from_ray_cr(json.loads(sys.stdin.read()))
print(json.dumps({name: [t["resources"], t["max_workers"]] for name, t in config["available_node_types"].items()}))
"""


@pytest.mark.parametrize("version", supported_ray_versions())
@pytest.mark.parametrize("golden", SPLIT_GOLDENS)
def test_rays_own_translation_gives_each_group_its_pool_resource(golden, version):
    # The autoscaler plans with what ray/autoscaler/_private/kuberay/autoscaling_config.py reads
    # from the RayCluster (rayStartParams.resources through _get_custom_resources): the image's
    # Ray runs it in the autoscaler sidecar, so every supported version is asked.
    python = ray_python(version)
    if python is None:
        skip_or_fail(f"no environment with Ray {version} (make setup installs .venv-ray-{version})")
    cluster = ray_cluster(golden)
    done = subprocess.run([python, "-c", TRANSLATE], input=json.dumps(cluster), capture_output=True,
                          text=True, timeout=120, check=True)
    node_types = json.loads(done.stdout)
    for pool, group in POOL_GROUPS.items():
        resources, max_workers = node_types[group]
        assert resources[POOL_RESOURCES[pool]] == 1
        other = next(r for p, r in POOL_RESOURCES.items() if p != pool)
        assert other not in resources
        assert resources["GPU"] == 8 and max_workers >= 1
