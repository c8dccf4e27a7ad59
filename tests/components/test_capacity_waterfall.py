"""The capacity waterfall at stack level (the offline preview of the real __main__.py): Standard
with one to three sources and Autopilot with one, the RayCluster validated against the KubeRay
1.7.0 CRD in each, the ComputeClass against the schema written from Google's reference, and the
wiring between them (pools, class, worker pods, dependencies, the gpuCapacity output)."""

from __future__ import annotations

import json

import jsonschema
import pytest

from tests.conftest import DELETE, ROOT, preview_with
from tests.crd_schemas import validate_custom_resource

P = "gke-grpo:"
RES = {"kind": "reservation", "name": "grpo-b200-reservation", "nodePool": "a4-highgpu-8g-pool"}
FLEX = {"kind": "flexStart", "maxRunDurationSeconds": 86400}
SPOT = {"kind": "spot"}
LIST = {P + "gpu.provisioningModel": DELETE, P + "gpu.reservation": DELETE}
CLASS = "kubernetes:cloud.google.com/v1:ComputeClass"
POOL = "gcp:container/nodePool:NodePool"
RAY_CLUSTER = "kubernetes:ray.io/v1:RayCluster"
SCHEMA = json.loads((ROOT / "tests" / "fixtures" / "computeclass.schema.json").read_text())

VARIANTS = {
    "standard-1": ("prod", {**LIST, P + "gpu.capacity": [SPOT]}),
    "standard-2": ("prod", {**LIST, P + "gpu.capacity": [RES, SPOT]}),
    "standard-3": ("prod", {**LIST, P + "gpu.capacity": [RES, FLEX, SPOT]}),
    "autopilot-1": ("dev", {P + "gpu.provisioningModel": DELETE, P + "gpu.capacity": [{"kind": "flexStart"}]}),
}


@pytest.fixture(scope="module", params=sorted(VARIANTS))
def variant(request):
    stack, changes = VARIANTS[request.param]
    result = preview_with(stack, changes)
    assert result.error is None, result.error
    return request.param, result


def test_the_offline_target_of_each_variant_is_its_outputs(variant):
    from components.config import load_stack_config
    from components.stack_target import TARGET_OUTPUTS, target_outputs
    from tests.conftest import stack_config

    name, result = variant
    stack, changes = VARIANTS[name]
    offline = target_outputs(load_stack_config(*stack_config(stack, changes), stack))
    assert offline == {k: result.outputs[k] for k in TARGET_OUTPUTS}


def test_each_variant_renders_a_valid_ray_cluster_and_class(variant):
    name, result = variant
    sources = int(name.rsplit("-", 1)[1])
    ray_cluster = result.one(RAY_CLUSTER)
    validate_custom_resource(ray_cluster.inputs)
    group = ray_cluster.inputs["spec"]["workerGroupSpecs"][0]
    selector = group["template"]["spec"]["nodeSelector"]
    pools = result.by_type(POOL)
    gpu_pools = [p for p in pools if "guestAccelerators" in p.inputs.get("nodeConfig", {})]
    classes = result.by_type(CLASS)
    capacity = result.outputs["gpuCapacity"]
    assert len(capacity["sources"]) == sources and capacity["idleTimeoutSeconds"] == 60
    if name.startswith("autopilot"):
        assert gpu_pools == [] and classes == []
        assert selector["cloud.google.com/gke-flex-start"] == "true"
        return
    assert len(gpu_pools) == sources
    if sources == 1:
        assert classes == [] and selector == {"cloud.google.com/gke-accelerator": "nvidia-b200",
                                              "cloud.google.com/gke-nodepool": gpu_pools[0].inputs["name"],
                                              "cloud.google.com/gke-spot": "true"}
        assert gpu_pools[0].inputs["name"].startswith("a4-highgpu-8g-spot-")
        return
    [compute_class] = classes
    manifest = {k: compute_class.inputs[k] for k in ("apiVersion", "kind", "metadata", "spec")}
    jsonschema.validate(manifest, SCHEMA)
    assert manifest["metadata"]["name"] == capacity["computeClass"] == "grpo-prod-gpu"
    order = [p["nodepools"][0] for p in manifest["spec"]["priorities"]]
    assert order == [s["nodePool"] for s in capacity["sources"]]
    assert order[0] == "a4-highgpu-8g-pool"       # kept by nodePool: same pool, same resource
    assert selector == {"cloud.google.com/compute-class": "grpo-prod-gpu"}
    # The RayCluster waits for every pool and for the class: no worker pod selects a missing class.
    assert compute_class.urn in ray_cluster.dependencies
    assert all(p.urn in ray_cluster.dependencies for p in gpu_pools)


def test_the_former_pool_is_the_same_resource_with_the_class_label_added():
    before = preview_with("prod")
    after = preview_with("prod", {**LIST, P + "gpu.capacity": [RES, SPOT]})
    [old] = [p for p in before.by_type(POOL) if p.inputs["name"] == "a4-highgpu-8g-pool"]
    [new] = [p for p in after.by_type(POOL) if p.inputs["name"] == "a4-highgpu-8g-pool"]
    assert old.urn == new.urn
    changed = {k for k in set(old.inputs) | set(new.inputs) if old.inputs.get(k) != new.inputs.get(k)}
    assert changed == {"nodeConfig"}
    node_changes = {k for k in set(old.inputs["nodeConfig"]) | set(new.inputs["nodeConfig"])
                    if old.inputs["nodeConfig"].get(k) != new.inputs["nodeConfig"].get(k)}
    assert node_changes == {"labels", "taints"}      # the class's label and taint, nothing else
