"""`gke-grpo:network`: the cluster, gVNIC and RDMA ranges."""

from __future__ import annotations

from pydantic import Field

from components.config.models.base import _Area
from components.config.types import (
    LustrePeeringCidr,
    SubnetCidr,
)


class NetworkConfig(_Area):
    cluster_subnet_cidr: SubnetCidr = Field("10.0.0.0/20", description="cluster subnet (nodes)")
    pod_cidr: SubnetCidr = Field("10.4.0.0/14", description="pod secondary range")
    service_cidr: SubnetCidr = Field("10.8.0.0/20", description="service secondary range")
    gvnic_subnet_cidr: SubnetCidr = Field(
        "192.168.0.0/24",
        description="second gVNIC NIC's subnet; also the firewall's source",
    )
    rdma_subnet_cidrs: tuple[SubnetCidr, ...] = Field(
        tuple(f"192.168.{n + 1}.0/24" for n in range(8)),
        description="exactly one per RDMA NIC (8)",
        json_schema_extra={"defaultText": "`192.168.1.0/24` … `192.168.8.0/24`"},
    )
    # Cluster Toolkit's value for A3 Ultra / A4 RoCE networks: jumbo frames for RDMA.
    rdma_mtu: int = Field(8896, ge=1300, le=8896, description="RDMA VPC MTU (1300-8896)")
    gvnic_mtu: int = Field(8896, ge=1300, le=8896, description="gVNIC VPC MTU (1300-8896)")
    # Jumbo frames on the cluster VPC too: Lustre traffic and NCCL's bootstrap use eth0
    # (Google's Managed Lustre docs report ~10% more throughput with MTU 8896).
    cluster_mtu: int = Field(
        8896,
        ge=1300,
        le=8896,
        description="cluster VPC MTU (1300-8896): Lustre and NCCL's bootstrap use eth0",
    )
    # The private-services-access range Managed Lustre takes its addresses from (a /24 per
    # instance); explicit so it is checked disjoint from every other range of the stack.
    lustre_peering_cidr: LustrePeeringCidr = Field(
        "10.96.0.0/20",
        description=("private-services range for Managed Lustre (/8-/24); disjoint from every other "
                     "range"),
    )
