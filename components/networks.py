"""GpuNetworks: the cluster VPC, the gVNIC VPC and the RDMA (RoCE) VPC with one subnet per NIC.

A3 Ultra and A4 nodes have two gVNIC NICs and eight ConnectX-7 RDMA NICs. The first gVNIC sits
on the cluster VPC, the second on the gVNIC VPC; each RDMA NIC needs a subnet of its own in a
VPC created with the zone's RoCE network profile.

The nodes are private (no external address): a Cloud Router with Cloud NAT on the cluster VPC
lets them pull images and models; the cluster VPC carries jumbo frames like the other two.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pulumi
import pulumi_gcp as gcp

if TYPE_CHECKING:   # annotations only: the config models import components' siblings
    from components.config import NetworkConfig, ResourceNames, StackConfig

# Cloud NAT port allocation for the GPU nodes: dynamic, so a node that pulls multi-GB images and
# downloads from the Hub over many connections at once grows its share instead of running out of
# the fixed 64 ports static allocation gives every VM. Compute API RouterNat (as quoted by
# terraform-provider-google-beta v7.45.0 resource_compute_router_nat.go, enable_dynamic_port_
# allocation / min_ports_per_vm / max_ports_per_vm, read 2026-12-01): with dynamic allocation the
# minimum "must be set to a power of two greater than or equal to 32", the maximum "a power of
# two greater than minPortsPerVm" and at most 65536; static allocation "Defaults to 64". The
# minimum is that static default, so no node starts with fewer ports than before; the maximum is
# the API's ceiling (with AUTO_ONLY addresses Cloud NAT adds NAT IPs as ports run short).
# Dynamic allocation excludes endpoint-independent mapping (same source), which is set off.
NAT_MIN_PORTS_PER_VM = 64
NAT_MAX_PORTS_PER_VM = 65536


@dataclass(frozen=True)
class GpuNetworksArgs:
    project: str
    region: str
    names: ResourceNames           # every GCP name, derived from the cluster name
    network: NetworkConfig         # CIDRs and MTUs (gke-grpo:network)
    rdma_network_profile: str      # the zone's RoCE profile, set when the RDMA VPC is created
    services: Sequence[pulumi.Resource] = ()  # the APIs (ProjectServices) the networks need first


def gpu_networks_args(config: StackConfig, services: Sequence[pulumi.Resource] = ()) -> GpuNetworksArgs:
    return GpuNetworksArgs(project=config.project, region=config.region, names=config.names,
                           network=config.network,
                           rdma_network_profile=config.rdma_network_profile,
                           services=list(services))


class GpuNetworks(pulumi.ComponentResource):
    cluster_network: gcp.compute.Network
    cluster_subnet: gcp.compute.Subnetwork
    gvnic_network: gcp.compute.Network
    gvnic_subnet: gcp.compute.Subnetwork
    gvnic_firewall: gcp.compute.Firewall
    rdma_network: gcp.compute.Network
    rdma_subnets: list[gcp.compute.Subnetwork]
    router: gcp.compute.Router
    nat: gcp.compute.RouterNat
    pod_range_name: str
    service_range_name: str

    def __init__(self, name: str, args: GpuNetworksArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gke-grpo:components:GpuNetworks", name, None, opts)
        names = args.names
        network = args.network
        child = pulumi.ResourceOptions(parent=self)
        # The networks need compute.googleapis.com enabled first (ProjectServices); everything
        # else here depends on a network, so on the APIs through it.
        root = pulumi.ResourceOptions(parent=self, depends_on=list(args.services))

        # The cluster gets a VPC of its own: the tutorials' `default` network is shared with
        # whatever else lives in the project, and its auto subnets overlap nothing we control.
        self.cluster_network = gcp.compute.Network(
            f"{name}-cluster",
            name=names.cluster_network,
            project=args.project,
            auto_create_subnetworks=False,
            routing_mode="REGIONAL",
            # Lustre traffic and NCCL's bootstrap run on eth0, on this VPC: jumbo frames
            # (Google's Managed Lustre docs report ~10% more throughput at 8896; Cluster
            # Toolkit's vpc module defaults to 8896).
            mtu=network.cluster_mtu,
            opts=root,
        )
        self.pod_range_name = names.pod_range
        self.service_range_name = names.service_range
        self.cluster_subnet = gcp.compute.Subnetwork(
            f"{name}-cluster",
            name=names.cluster_subnet,
            project=args.project,
            region=args.region,
            network=self.cluster_network.id,
            ip_cidr_range=network.cluster_subnet_cidr,
            private_ip_google_access=True,
            secondary_ip_ranges=[
                gcp.compute.SubnetworkSecondaryIpRangeArgs(
                    range_name=names.pod_range, ip_cidr_range=network.pod_cidr),
                gcp.compute.SubnetworkSecondaryIpRangeArgs(
                    range_name=names.service_range, ip_cidr_range=network.service_cidr),
            ],
            opts=child,
        )

        # Private nodes have no external address: Cloud NAT gives them egress (image pulls,
        # Hugging Face downloads) without any inbound path. One subnet on this VPC: NAT all of
        # its ranges (node and pod addresses).
        self.router = gcp.compute.Router(
            f"{name}-router",
            name=names.router,
            project=args.project,
            region=args.region,
            network=self.cluster_network.id,
            opts=child,
        )
        self.nat = gcp.compute.RouterNat(
            f"{name}-nat",
            name=names.nat,
            project=args.project,
            region=args.region,
            router=self.router.name,
            nat_ip_allocate_option="AUTO_ONLY",
            source_subnetwork_ip_ranges_to_nat="ALL_SUBNETWORKS_ALL_IP_RANGES",
            enable_dynamic_port_allocation=True,
            enable_endpoint_independent_mapping=False,
            min_ports_per_vm=NAT_MIN_PORTS_PER_VM,
            max_ports_per_vm=NAT_MAX_PORTS_PER_VM,
            log_config=gcp.compute.RouterNatLogConfigArgs(enable=True, filter="ERRORS_ONLY"),
            opts=child,
        )

        self.gvnic_network = gcp.compute.Network(
            f"{name}-gvnic",
            name=names.gvnic_network,
            project=args.project,
            auto_create_subnetworks=False,
            mtu=network.gvnic_mtu,
            opts=root,
        )
        self.gvnic_subnet = gcp.compute.Subnetwork(
            f"{name}-gvnic",
            name=names.gvnic_subnet,
            project=args.project,
            region=args.region,
            network=self.gvnic_network.id,
            ip_cidr_range=network.gvnic_subnet_cidr,
            opts=child,
        )
        # NCCL's bootstrap and Gloo use the gVNIC NICs; traffic stays inside the GPU ranges.
        self.gvnic_firewall = gcp.compute.Firewall(
            f"{name}-gvnic-internal",
            name=names.gvnic_firewall,
            project=args.project,
            network=self.gvnic_network.id,
            direction="INGRESS",
            source_ranges=[network.gvnic_subnet_cidr],
            allows=[
                gcp.compute.FirewallAllowArgs(protocol="tcp", ports=["0-65535"]),
                gcp.compute.FirewallAllowArgs(protocol="udp", ports=["0-65535"]),
                gcp.compute.FirewallAllowArgs(protocol="icmp"),
            ],
            opts=child,
        )

        # The network profile can only be set when the VPC is created: changing it replaces the
        # network (and so every RDMA subnet), which Pulumi shows as a replacement in preview.
        self.rdma_network = gcp.compute.Network(
            f"{name}-rdma",
            name=names.rdma_network,
            project=args.project,
            auto_create_subnetworks=False,
            mtu=network.rdma_mtu,
            network_profile=args.rdma_network_profile,
            opts=root,
        )
        # Each subnet depends on the network only, so the engine creates all of them at once
        # (the tutorial's `&` ... `wait`).
        self.rdma_subnets = [
            gcp.compute.Subnetwork(
                f"{name}-rdma-{index}",
                name=names.rdma_subnet(index),
                project=args.project,
                region=args.region,
                network=self.rdma_network.id,
                ip_cidr_range=cidr,
                opts=child,
            )
            for index, cidr in enumerate(network.rdma_subnet_cidrs)
        ]

        self.register_outputs({
            "cluster_network": self.cluster_network.id,
            "cluster_subnet": self.cluster_subnet.id,
            "gvnic_network": self.gvnic_network.id,
            "gvnic_subnet": self.gvnic_subnet.id,
            "rdma_network": self.rdma_network.id,
            "rdma_subnets": [subnet.id for subnet in self.rdma_subnets],
            "nat": self.nat.name,
        })
