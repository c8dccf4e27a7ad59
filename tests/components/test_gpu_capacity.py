"""GpuCapacity built from its own args (no stack config): the pool and the GPU pods' placement.
The stack-level variants (every cluster mode and provisioning model) are in test_cluster.py."""

from __future__ import annotations

import pytest

from components.config import GpuConfig
from components.gpu_capacity import GpuCapacity, GpuCapacityArgs, reservation_value
from tests.components.harness import build

POOL = "gcp:container/nodePool:NodePool"


def _capacity(autopilot: bool, gpu: GpuConfig):
    import pulumi_gcp as gcp

    def program():
        gvnic = gcp.compute.Network("gvnic", name="u-gvnic", auto_create_subnetworks=False)
        gvnic_subnet = gcp.compute.Subnetwork("gvnic-sub", name="u-gvnic-sub", network=gvnic.id,
                                              ip_cidr_range="192.168.0.0/24")
        rdma = gcp.compute.Network("rdma", name="u-rdma", auto_create_subnetworks=False)
        subnets = [gcp.compute.Subnetwork(f"rdma-{i}", name=f"u-rdma-{i}", network=rdma.id,
                                          ip_cidr_range=f"192.168.{i + 1}.0/24") for i in range(2)]
        return GpuCapacity("gpu", GpuCapacityArgs(
            project="p-1", region="us-east5", zone="us-east5-a", autopilot=autopilot,
            machine_type="a4-highgpu-8g", gpus_per_node=8, gpu=gpu, min_nodes=0, max_nodes=3,
            auto_repair=False, disk_size_gb=700, cluster_name="unit-cluster",
            node_service_account_email="nodes@p-1.iam.gserviceaccount.com",
            gvnic_network=gvnic, gvnic_subnet=gvnic_subnet, rdma_network=rdma, rdma_subnets=subnets))

    return build(program, project="p-1", region="us-east5")


def _gpu(**fields) -> GpuConfig:
    return GpuConfig.model_validate({"type": "nvidia-b200", "nodes": 2, **fields})


def test_standard_pool_from_its_own_args():
    built = _capacity(False, _gpu(provisioningModel="spot"))
    pool = built.one(POOL).inputs
    assert (pool["name"], pool["cluster"], pool["location"], pool["nodeLocations"]) == (
        "a4-highgpu-8g-pool", "unit-cluster", "us-east5", ["us-east5-a"])
    assert pool["autoscaling"]["totalMaxNodeCount"] == 3
    assert pool["management"]["autoRepair"] is False
    node = pool["nodeConfig"]
    assert node["diskSizeGb"] == 700 and node["spot"] is True
    assert node["serviceAccount"] == "nodes@p-1.iam.gserviceaccount.com"
    # gVNIC plus the two RDMA subnets handed over, in NIC order.
    assert [n["subnetwork"] for n in pool["networkConfig"]["additionalNodeNetworkConfigs"]] == [
        "u-gvnic-sub", "u-rdma-0", "u-rdma-1"]
    assert built.value.pod_node_selector["cloud.google.com/gke-nodepool"] == "a4-highgpu-8g-pool"


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
