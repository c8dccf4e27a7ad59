"""Autopilot's per-pod bound for the GPU machines: Google's published row could not be read, so
it is derived conservatively from the node (allocatable less the system reserve), marked
unconfirmed in the preview, the worker pod (with its gcsfuse sidecar) fits under it, and a
configured size that does not is refused before anything is created."""

from __future__ import annotations

import math

import pytest

from components.autopilot_limits import autopilot_limit_output, load_pod_limits
from components.config import MACHINE_SHAPES
from components.config.patterns import quantity_bytes
from components.kuberay_limits import SYSTEM_RESERVE_CPU, SYSTEM_RESERVE_MEMORY_GIB
from tests.conftest import preview_with

P = "gke-grpo:"


@pytest.mark.parametrize("gpu_type", sorted(MACHINE_SHAPES))
def test_unpublished_rows_are_derived_from_the_node_and_marked_unconfirmed(gpu_type):
    shape = MACHINE_SHAPES[gpu_type]
    limit = load_pod_limits()[(gpu_type, shape.gpus)]
    assert not limit.confirmed and "unconfirmed" in limit.source
    assert limit.cpu == math.floor(shape.allocatable_cpu - SYSTEM_RESERVE_CPU)
    assert limit.memory_gib == math.floor(shape.allocatable_memory_gib - SYSTEM_RESERVE_MEMORY_GIB)
    # Strictly below the machine: a published maximum can only be lower than the node holds.
    assert limit.cpu < shape.vcpus and limit.memory_gib < shape.memory_gib
    assert limit.ephemeral_storage_gib == math.floor(shape.local_ssd_gib * 0.9)   # nodefs 10% eviction


def _worker_pod_totals(result) -> dict[str, float]:
    [cluster] = [r for r in result.resources if r.type == "kubernetes:ray.io/v1:RayCluster"]
    template = cluster.inputs["spec"]["workerGroupSpecs"][0]["template"]
    requests = template["spec"]["containers"][0]["resources"]["requests"]
    notes = template["metadata"]["annotations"]
    return {
        "cpu": float(requests["cpu"]) + float(notes["gke-gcsfuse/cpu-limit"]),
        "memory": (quantity_bytes(requests["memory"]) + quantity_bytes(notes["gke-gcsfuse/memory-limit"])) / 2**30,
        "ephemeral": (quantity_bytes(requests["ephemeral-storage"])
                      + quantity_bytes(notes["gke-gcsfuse/ephemeral-storage-limit"])) / 2**30,
    }


@pytest.mark.parametrize("gpu_type", sorted(MACHINE_SHAPES))
def test_the_preview_exports_the_bound_and_the_worker_pod_fits_it(gpu_type):
    result = preview_with("dev", {P + "gpu.type": gpu_type})
    assert result.error is None, result.error
    exported = result.outputs["autopilotPodLimit"]
    assert exported == autopilot_limit_output(gpu_type, 8) and exported["confirmed"] is False
    totals = _worker_pod_totals(result)
    assert totals["cpu"] <= exported["cpu"]
    assert totals["memory"] <= exported["memoryGib"]
    assert totals["ephemeral"] <= exported["ephemeralStorageGib"]


def test_standard_stacks_export_no_autopilot_bound(prod_preview):
    assert "autopilotPodLimit" not in prod_preview.outputs


@pytest.mark.parametrize("key,value", [("kuberay.worker.cpu", 212), ("kuberay.worker.memoryGib", 2800)])
def test_a_configured_worker_above_the_bound_is_refused(key, value):
    # 212 CPUs + the sidecar's 8 > 217; 2800 GiB + 32 > 2822 (H200 on Autopilot).
    result = preview_with("dev", {P + key: value})
    assert {p.key for p in result.problems} == {P + key}, result.error
    assert all("at most" in p.allowed or "unconfirmed" in p.allowed for p in result.problems)
    assert result.resources == []
