"""GpuCapacity built from its own args (no stack config): the pools, the waterfall's
ComputeClass and the GPU pods' placement. The stack-level variants (every cluster mode and
provisioning model) are in test_cluster.py; the waterfall at stack level in
test_capacity_waterfall.py."""

from __future__ import annotations

import json
import re

import jsonschema
import pytest

from components.config import GpuConfig, capacity_plan
from components.gpu_capacity import GpuCapacity, GpuCapacityArgs, reservation_value
from tests.components.harness import build
from tests.conftest import ROOT

POOL = "gcp:container/nodePool:NodePool"
CLASS = "kubernetes:cloud.google.com/v1:ComputeClass"
COMPUTE_CLASS_SCHEMA = ROOT / "tests" / "fixtures" / "computeclass.schema.json"


def _capacity(autopilot: bool, gpu: GpuConfig):
    import pulumi_gcp as gcp
    import pulumi_kubernetes as k8s

    def program():
        gvnic = gcp.compute.Network("gvnic", name="u-gvnic", auto_create_subnetworks=False)
        gvnic_subnet = gcp.compute.Subnetwork("gvnic-sub", name="u-gvnic-sub", network=gvnic.id,
                                              ip_cidr_range="192.168.0.0/24")
        rdma = gcp.compute.Network("rdma", name="u-rdma", auto_create_subnetworks=False)
        subnets = [gcp.compute.Subnetwork(f"rdma-{i}", name=f"u-rdma-{i}", network=rdma.id,
                                          ip_cidr_range=f"192.168.{i + 1}.0/24") for i in range(2)]
        return GpuCapacity("gpu", GpuCapacityArgs(
            project="p-1", region="us-east5", zone="us-east5-a", autopilot=autopilot,
            machine_type="a4-highgpu-8g", gpus_per_node=8, gpu=gpu,
            capacity=capacity_plan(gpu, machine_type="a4-highgpu-8g"),
            compute_class_name="unit-cluster-gpu",
            auto_repair=False, disk_size_gb=700, cluster_name="unit-cluster",
            node_service_account_email="nodes@p-1.iam.gserviceaccount.com",
            gvnic_network=gvnic, gvnic_subnet=gvnic_subnet, rdma_network=rdma, rdma_subnets=subnets,
            kubernetes_provider=k8s.Provider("k8s", kubeconfig="{}")))

    return build(program, project="p-1", region="us-east5")


def _gpu(**fields) -> GpuConfig:
    # As the loader hands an area to its model (components/config/loader.py): lists as tuples.
    return GpuConfig.model_validate(_as_tuples({"type": "nvidia-b200", "nodes": 2, **fields}))


def _as_tuples(value):
    if isinstance(value, list):
        return tuple(_as_tuples(item) for item in value)
    if isinstance(value, dict):
        return {key: _as_tuples(item) for key, item in value.items()}
    return value


def test_standard_pool_from_its_own_args():
    built = _capacity(False, _gpu(provisioningModel="spot", maxNodes=3))
    pool = built.one(POOL).inputs
    # A Spot pool's name ends in the hash of its replacing fields (create-before-delete).
    assert re.fullmatch(r"a4-highgpu-8g-pool-[0-9a-f]{6}", pool["name"])
    assert (pool["cluster"], pool["location"], pool["nodeLocations"]) == (
        "unit-cluster", "us-east5", ["us-east5-a"])
    assert pool["autoscaling"]["totalMaxNodeCount"] == 3
    assert pool["management"]["autoRepair"] is False
    node = pool["nodeConfig"]
    assert node["diskSizeGb"] == 700 and node["spot"] is True
    assert node["serviceAccount"] == "nodes@p-1.iam.gserviceaccount.com"
    # gVNIC plus the two RDMA subnets handed over, in NIC order.
    assert [n["subnetwork"] for n in pool["networkConfig"]["additionalNodeNetworkConfigs"]] == [
        "u-gvnic-sub", "u-rdma-0", "u-rdma-1"]
    assert built.value.pod_node_selector["cloud.google.com/gke-nodepool"] == pool["name"]


def test_autopilot_has_no_pool_only_placement():
    built = _capacity(True, _gpu(provisioningModel="reservation", reservation={"name": "r-1"}))
    assert built.of_type(POOL) == []
    selector = built.value.pod_node_selector
    assert selector["cloud.google.com/reservation-name"] == "r-1"
    assert selector["topology.kubernetes.io/zone"] == "us-east5-a"
    assert selector["cloud.google.com/gke-accelerator-count"] == "8"


@pytest.mark.parametrize("reservation,expected", [
    ({"name": "r"}, "r"),
    ({"name": "r", "project": "owner-project"}, "projects/owner-project/reservations/r"),
    ({"name": "r", "block": "b1"}, "projects/p-1/reservations/r/reservationBlocks/b1"),
])
def test_reservation_value(reservation, expected):
    gpu = _gpu(provisioningModel="reservation", reservation=reservation)
    assert reservation_value(gpu.reservation, "p-1") == expected


# ---- the waterfall -------------------------------------------------------------------------

SOURCES = {
    "reservation": {"kind": "reservation", "name": "r-1"},
    "flexStart": {"kind": "flexStart", "maxRunDurationSeconds": 86400},
    "spot": {"kind": "spot"},
}


def _waterfall(*kinds: str, **gpu_fields):
    return _capacity(False, _gpu(capacity=[SOURCES[k] for k in kinds], **gpu_fields))


def _pools(built) -> dict[str, dict]:
    return {r.inputs["name"]: r for r in built.of_type(POOL)}


@pytest.mark.parametrize("kinds", [("spot",), ("reservation", "spot"),
                                   ("reservation", "flexStart", "spot"), ("flexStart", "spot")])
def test_one_pool_per_source_and_a_class_in_list_order(kinds):
    built = _waterfall(*kinds)
    names = [s.pool_name for s in capacity_plan(_gpu(capacity=[SOURCES[k] for k in kinds]),
                                                machine_type="a4-highgpu-8g").sources]
    assert sorted(_pools(built)) == sorted(names) and len(set(names)) == len(kinds)
    classes = built.of_type(CLASS)
    selector = built.value.pod_node_selector
    if len(kinds) == 1:
        # One source: no class, the pods select the pool.
        assert classes == [] and selector["cloud.google.com/gke-nodepool"] == names[0]
        return
    [compute_class] = classes
    manifest = {"apiVersion": compute_class.inputs["apiVersion"], "kind": compute_class.inputs["kind"],
                "metadata": compute_class.inputs["metadata"], "spec": compute_class.inputs["spec"]}
    jsonschema.validate(manifest, json.loads(COMPUTE_CLASS_SCHEMA.read_text()))
    spec = manifest["spec"]
    assert [p["nodepools"] for p in spec["priorities"]] == [[n] for n in names]
    assert spec["nodePoolAutoCreation"] == {"enabled": False}
    assert spec["whenUnsatisfiable"] == "DoNotScaleUp"
    assert spec["activeMigration"] == {"optimizeRulePriority": False}
    # The pods select the class alone, and tolerate its taint, which every pool carries.
    assert selector == {"cloud.google.com/compute-class": "unit-cluster-gpu"}
    tolerations = built.value.pod_tolerations
    assert {"key": "cloud.google.com/compute-class", "operator": "Equal", "value": "unit-cluster-gpu",
            "effect": "NoSchedule"} in tolerations
    for pool in _pools(built).values():
        node = pool.inputs["nodeConfig"]
        assert node["labels"]["cloud.google.com/compute-class"] == "unit-cluster-gpu"
        assert {"key": "cloud.google.com/compute-class", "value": "unit-cluster-gpu",
                "effect": "NO_SCHEDULE"} in node["taints"]
        assert {"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"} in node["taints"]
        assert len(pool.inputs["networkConfig"]["additionalNodeNetworkConfigs"]) == 3
    assert ("spot" in kinds) == any(t["key"] == "cloud.google.com/gke-spot" for t in tolerations)


def test_each_source_keeps_its_pool_when_sources_are_added_removed_or_reordered():
    def pools(*kinds):
        return {name: (r.name, r.inputs["nodeConfig"].get("spot"))
                for name, r in _pools(_waterfall(*kinds)).items()}

    three = pools("reservation", "flexStart", "spot")
    for kinds in (("spot", "reservation"), ("flexStart",), ("spot", "flexStart", "reservation")):
        for name, identity in pools(*kinds).items():
            assert three[name] == identity, (kinds, name)


def test_the_former_single_pool_keeps_its_name_and_resource_name():
    legacy = _capacity(False, _gpu(provisioningModel="reservation", reservation={"name": "r-1"}))
    [old] = legacy.of_type(POOL)
    kept = _waterfall_with_pool_name("a4-highgpu-8g-pool")
    new = _pools(kept)["a4-highgpu-8g-pool"]
    assert (new.name, new.urn) == (old.name, old.urn)
    assert new.inputs["nodeConfig"]["reservationAffinity"] == old.inputs["nodeConfig"]["reservationAffinity"]


def _waterfall_with_pool_name(pool: str):
    return _capacity(False, _gpu(capacity=[{**SOURCES["reservation"], "nodePool": pool}, SOURCES["spot"]]))


def test_pool_sizes_per_source():
    pools = {(r.inputs["nodeConfig"].get("spot") and "spot") or
             ("flex" if r.inputs["nodeConfig"].get("flexStart") else "reservation"): r.inputs
             for r in _waterfall("reservation", "flexStart", "spot", maxNodes=3).of_type(POOL)}
    reserved, flex, spot = pools["reservation"], pools["flex"], pools["spot"]
    # A reservation's pool is held at its size (the run's nodes unless its maxNodes says).
    assert (reserved["initialNodeCount"], reserved["autoscaling"]["totalMinNodeCount"],
            reserved["autoscaling"]["totalMaxNodeCount"]) == (2, 2, 2)
    assert reserved["nodeConfig"]["reservationAffinity"]["consumeReservationType"] == "SPECIFIC_RESERVATION"
    # Spot and flex-start scale from 0 to gpu.maxNodes.
    for pool in (flex, spot):
        assert (pool["initialNodeCount"], pool["autoscaling"]["totalMinNodeCount"],
                pool["autoscaling"]["totalMaxNodeCount"]) == (0, 0, 3)
        assert pool["autoscaling"]["locationPolicy"] == "ANY"
        assert pool["nodeConfig"]["reservationAffinity"]["consumeReservationType"] == "NO_RESERVATION"
    # Cluster Toolkit's flex-start constraints: no auto-repair, no reservation, no Spot.
    assert flex["management"]["autoRepair"] is False and flex["nodeConfig"]["spot"] is False
    assert flex["nodeConfig"]["flexStart"] is True and flex["nodeConfig"]["maxRunDuration"] == "86400s"
    assert spot["nodeConfig"]["spot"] is True and "flexStart" not in spot["nodeConfig"]


def test_autopilot_single_source_keeps_its_selectors_and_has_no_class():
    built = _capacity(True, _gpu(capacity=[SOURCES["spot"]]))
    assert built.of_type(POOL) == [] and built.of_type(CLASS) == []
    assert built.value.pod_node_selector["cloud.google.com/gke-spot"] == "true"
    assert built.value.pod_node_selector["cloud.google.com/compute-class"] == "Accelerator"


def test_a_class_name_with_a_reserved_prefix_fails_the_schema():
    manifest = {"apiVersion": "cloud.google.com/v1", "kind": "ComputeClass",
                "metadata": {"name": "gke-gpu"}, "spec": {"priorities": [{"nodepools": ["p"]}]}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(manifest, json.loads(COMPUTE_CLASS_SCHEMA.read_text()))
    manifest["metadata"]["name"] = "grpo-gpu"
    manifest["spec"]["priorities"] = [{"nodepools": ["p"], "spot": True}]     # nodepools alone
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(manifest, json.loads(COMPUTE_CLASS_SCHEMA.read_text()))
