"""GpuNetworks under mocks: what the provider would receive, and the dependency graph."""

from __future__ import annotations

import pulumi
import pytest

from tests.conftest import preview_with, stack_config

NETWORK = "gcp:compute/network:Network"
SUBNET = "gcp:compute/subnetwork:Subnetwork"
FIREWALL = "gcp:compute/firewall:Firewall"


def _named(result, type_, name):
    [found] = [r for r in result.by_type(type_) if r.name == name]
    return found


def test_rdma_network_has_the_zones_roce_profile_and_jumbo_mtu(dev_preview):
    rdma = _named(dev_preview, NETWORK, "networks-rdma")
    assert rdma.inputs["networkProfile"] == (
        "projects/my-grpo-dev/global/networkProfiles/us-central1-b-vpc-roce")
    assert rdma.inputs["mtu"] == 8896
    assert rdma.inputs["autoCreateSubnetworks"] is False


def test_one_rdma_subnet_per_nic_each_independent(stack_preview):
    rdma = _named(stack_preview, NETWORK, "networks-rdma")
    subnets = sorted((r for r in stack_preview.by_type(SUBNET) if "-rdma-" in r.name), key=lambda r: r.name)
    assert [s.inputs["ipCidrRange"] for s in subnets] == [f"192.168.{i}.0/24" for i in range(1, 9)]
    assert [s.inputs["name"] for s in subnets] == [
        f"grpo-{stack_preview.stack}-rdma-sub-{i}" for i in range(8)]
    for subnet in subnets:
        # Only the network: no subnet waits for another, so the engine creates them in parallel.
        assert subnet.dependencies == [rdma.urn]
        assert subnet.inputs["network"].endswith(f"/networks/grpo-{stack_preview.stack}-rdma-net")
        assert subnet.inputs["region"] == "us-central1"


def test_gvnic_firewall_allows_tcp_udp_icmp_inside_the_gpu_range(dev_preview):
    firewall = dev_preview.one(FIREWALL)
    assert firewall.inputs["sourceRanges"] == ["192.168.0.0/24"]
    assert firewall.inputs["direction"] == "INGRESS"
    assert firewall.inputs["allows"] == [
        {"protocol": "tcp", "ports": ["0-65535"]},
        {"protocol": "udp", "ports": ["0-65535"]},
        {"protocol": "icmp"},
    ]
    assert firewall.inputs["network"].endswith("/networks/grpo-dev-gvnic-net")


def test_cluster_gets_its_own_network_never_default(stack_preview):
    networks = {r.inputs["name"] for r in stack_preview.by_type(NETWORK)}
    assert "default" not in networks
    cluster = _named(stack_preview, SUBNET, "networks-cluster")
    assert cluster.inputs["ipCidrRange"] == "10.0.0.0/20"
    assert cluster.inputs["privateIpGoogleAccess"] is True
    assert {r["rangeName"]: r["ipCidrRange"] for r in cluster.inputs["secondaryIpRanges"]} == {
        f"grpo-{stack_preview.stack}-pods": "10.4.0.0/14",
        f"grpo-{stack_preview.stack}-services": "10.8.0.0/20",
    }


def test_cidrs_follow_the_config():
    result = preview_with("dev", {"gke-grpo:network.gvnicSubnetCidr": "172.16.0.0/24",
                                  "gke-grpo:network.rdmaMtu": 4096})
    assert _named(result, SUBNET, "networks-gvnic").inputs["ipCidrRange"] == "172.16.0.0/24"
    assert _named(result, FIREWALL, "networks-gvnic-internal").inputs["sourceRanges"] == ["172.16.0.0/24"]
    assert _named(result, NETWORK, "networks-rdma").inputs["mtu"] == 4096


def test_every_child_is_parented_to_the_component(stack_preview):
    [component] = stack_preview.by_type("gke-grpo:components:GpuNetworks")
    children = [r for r in stack_preview.resources if r.name.startswith("networks-")]
    assert children and all(r.parent == component.urn for r in children)


# ---- the component on its own, under pulumi.runtime.set_mocks ------------------------------

class _Mocks(pulumi.runtime.Mocks):
    def new_resource(self, args):
        return f"{args.name}-id", {**args.inputs, "selfLink": f"https://example/{args.name}"}

    def call(self, args):
        return {}, []


@pytest.fixture(scope="module")
def component():
    pulumi.runtime.set_mocks(_Mocks(), project="gke-grpo", stack="unit", preview=False)
    from components.config import load_stack_config
    from components.networks import GpuNetworks, gpu_networks_args
    config = load_stack_config(*stack_config("prod"))
    return GpuNetworks("unit-networks", gpu_networks_args(config))


@pulumi.runtime.test
def test_component_outputs_resolve_to_the_configured_names(component):
    def check(values):
        cluster, rdma, subnet_names = values
        assert cluster == "grpo-prod-net"
        assert rdma == "grpo-prod-rdma-net"
        assert subnet_names == [f"grpo-prod-rdma-sub-{i}" for i in range(8)]

    return pulumi.Output.all(
        component.cluster_network.name, component.rdma_network.name,
        pulumi.Output.all(*[s.name for s in component.rdma_subnets]),
    ).apply(check)


# ---- private nodes' egress, jumbo frames on the cluster VPC ----------------------------

def test_cluster_vpc_has_jumbo_frames(stack_preview):
    # Lustre traffic and NCCL's bootstrap use eth0, on the cluster VPC.
    assert _named(stack_preview, NETWORK, "networks-cluster").inputs["mtu"] == 8896


def test_cloud_nat_gives_the_private_nodes_egress(stack_preview):
    cluster_vpc = _named(stack_preview, NETWORK, "networks-cluster")
    [router] = stack_preview.by_type("gcp:compute/router:Router")
    [nat] = stack_preview.by_type("gcp:compute/routerNat:RouterNat")
    assert router.inputs["network"] == f"projects/my-grpo-{stack_preview.stack}/global/networks/grpo-{stack_preview.stack}-net"
    assert router.inputs["region"] == nat.inputs["region"] == "us-central1"
    assert cluster_vpc.urn in router.dependencies and router.urn in nat.dependencies
    assert nat.inputs["router"] == router.inputs["name"]
    assert nat.inputs["natIpAllocateOption"] == "AUTO_ONLY"
    assert nat.inputs["sourceSubnetworkIpRangesToNat"] == "ALL_SUBNETWORKS_ALL_IP_RANGES"


def test_cloud_nat_allocates_ports_dynamically(stack_preview):
    """Dynamic port allocation within the Compute API's rules (powers of two, min >= 32, max <=
    65536 and above min; exclusive with endpoint-independent mapping), starting at static
    allocation's default of 64 ports per VM (components/networks.py cites the API text)."""
    [nat] = stack_preview.by_type("gcp:compute/routerNat:RouterNat")
    inputs = nat.inputs
    assert inputs["enableDynamicPortAllocation"] is True
    assert inputs["enableEndpointIndependentMapping"] is False
    low, high = inputs["minPortsPerVm"], inputs["maxPortsPerVm"]
    assert low == 64 and high == 65536
    for ports in (low, high):
        assert ports & (ports - 1) == 0, ports
    assert 32 <= low < high <= 65536


def test_built_from_its_own_args_alone():
    """Two RDMA subnets, other CIDRs and names: everything comes from GpuNetworksArgs."""
    from components.config import NetworkConfig, ResourceNames
    from components.networks import GpuNetworks, GpuNetworksArgs
    from tests.components.harness import build

    network = NetworkConfig().model_copy(update={
        "rdma_subnet_cidrs": ("10.200.1.0/24", "10.200.2.0/24"), "rdma_mtu": 4096})
    built = build(lambda: GpuNetworks("net", GpuNetworksArgs(
        project="p-1", region="europe-west4", names=ResourceNames("unit", 2), network=network,
        rdma_network_profile="projects/p-1/global/networkProfiles/europe-west4-a-vpc-roce")))
    rdma = [s for s in built.of_type(SUBNET) if "-rdma-" in s.name]
    assert sorted((s.inputs["name"], s.inputs["ipCidrRange"]) for s in rdma) == [
        ("unit-rdma-sub-0", "10.200.1.0/24"), ("unit-rdma-sub-1", "10.200.2.0/24")]
    assert {s.inputs["region"] for s in built.of_type(SUBNET)} == {"europe-west4"}
    [rdma_network] = [n for n in built.of_type(NETWORK) if n.name == "net-rdma"]
    assert rdma_network.inputs["mtu"] == 4096
    assert rdma_network.inputs["networkProfile"].endswith("europe-west4-a-vpc-roce")
    assert len(built.value.rdma_subnets) == 2
