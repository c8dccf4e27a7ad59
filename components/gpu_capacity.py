"""GpuCapacity: where the GPU nodes come from, and what a GPU pod must say to land on them.

Standard: one node pool of the GPU machine (8 GPUs, driver installed by GKE, all nine extra
NICs attached) consuming a specific reservation, Spot VMs or flex-start. Autopilot: no pool;
the node selectors and tolerations that make Autopilot provision the same capacity for a pod.
Both expose `pod_node_selector` and `pod_tolerations` (all values strings), which the KubeRay
component puts on the GPU worker group.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pulumi
import pulumi_gcp as gcp

from components.cluster import AUTOSCALED_POOL_IGNORE_CHANGES, CLOUD_PLATFORM_SCOPE, ROLE_LABEL

if TYPE_CHECKING:   # annotations only: the config models import components' siblings
    from components.cluster import GkeCluster
    from components.config import GpuConfig, Reservation, StackConfig
    from components.networks import GpuNetworks

RESERVATION_KEY = "compute.googleapis.com/reservation-name"
# GKE adds this taint by itself only when a GPU pool joins a cluster that already has a non-GPU
# pool; stated explicitly, as Cluster Toolkit's gke-node-pool does (gpu_taint, main.tf
# @104708037), so CPU pods never land on a GPU node whatever the creation order.
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}
# ForceNew and echoed back differently by GKE: a diff here would rebuild a reserved pool in the
# middle of a run. Cluster Toolkit ignores it for the same reason (gke-node-pool main.tf
# lifecycle.ignore_changes, "tied to machine types").
GPU_POOL_IGNORE_CHANGES = [*AUTOSCALED_POOL_IGNORE_CHANGES, "nodeConfig.ephemeralStorageLocalSsdConfig"]


@dataclass(frozen=True)
class GpuCapacityArgs:
    project: str
    region: str
    zone: str
    autopilot: bool
    machine_type: str
    gpus_per_node: int
    gpu: GpuConfig            # gke-grpo:gpu (type, provisioning model, reservation, driver...)
    min_nodes: int
    max_nodes: int
    auto_repair: bool
    disk_size_gb: int
    # From GkeCluster:
    cluster_name: pulumi.Input[str]
    node_service_account_email: pulumi.Input[str] | None
    # From GpuNetworks: the second gVNIC and the RDMA NICs, in NIC order.
    gvnic_network: gcp.compute.Network
    gvnic_subnet: gcp.compute.Subnetwork
    rdma_network: gcp.compute.Network
    rdma_subnets: list[gcp.compute.Subnetwork]


def gpu_capacity_args(config: StackConfig, cluster: GkeCluster, networks: GpuNetworks) -> GpuCapacityArgs:
    return GpuCapacityArgs(
        project=config.project, region=config.region, zone=config.zone,
        autopilot=config.autopilot, machine_type=config.machine_type,
        gpus_per_node=config.gpus_per_node, gpu=config.gpu, min_nodes=config.gpu_min_nodes,
        max_nodes=config.gpu_max_nodes, auto_repair=config.gpu_auto_repair,
        disk_size_gb=config.gpu_disk_size_gb, cluster_name=cluster.cluster.name,
        node_service_account_email=cluster.node_service_account_email,
        gvnic_network=networks.gvnic_network, gvnic_subnet=networks.gvnic_subnet,
        rdma_network=networks.rdma_network, rdma_subnets=list(networks.rdma_subnets))


def reservation_value(reservation: Reservation, project: str) -> str:
    """The reservation affinity value: a bare name, a shared reservation of another project,
    or one block of a reservation."""
    owner = reservation.project or project
    if reservation.block:
        return f"projects/{owner}/reservations/{reservation.name}/reservationBlocks/{reservation.block}"
    if reservation.project:
        return f"projects/{owner}/reservations/{reservation.name}"
    return reservation.name


def gpu_pod_placement(args: GpuCapacityArgs,
                      pool_name: str | None) -> tuple[dict[str, str], list[dict[str, str]]]:
    """Node selector and tolerations for a GPU pod. Every value is a string: the API rejects
    the tutorial's integer `gke-accelerator-count: 8` (tutorial defect 2).

    Standard: the pool itself (gke-accelerator-count is an Autopilot provisioning label, not
    one a Standard node carries). Autopilot: the count, local-SSD ephemeral storage (Ray's
    /tmp, spilling and caches; GKE "Autopilot local SSD") and the zone of the RoCE network
    profile the RDMA VPC was created with."""
    selector: dict[str, str] = {"cloud.google.com/gke-accelerator": args.gpu.type}
    tolerations: list[dict[str, str]] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    model = args.gpu.provisioning_model
    if pool_name is not None:
        selector["cloud.google.com/gke-nodepool"] = pool_name
    else:
        selector["cloud.google.com/gke-accelerator-count"] = str(args.gpus_per_node)
        selector["cloud.google.com/gke-ephemeral-storage-local-ssd"] = "true"
        selector["topology.kubernetes.io/zone"] = args.zone
        # Autopilot consumes reservations only for the Accelerator compute class.
        selector["cloud.google.com/compute-class"] = "Accelerator"
        if model == "reservation":
            assert args.gpu.reservation is not None, \
                "the config requires gpu.reservation with provisioningModel reservation"
            selector["cloud.google.com/reservation-name"] = args.gpu.reservation.name
            selector["cloud.google.com/reservation-affinity"] = "specific"
        elif model == "flex-start":
            selector["cloud.google.com/gke-flex-start"] = "true"
    if model == "spot":
        selector["cloud.google.com/gke-spot"] = "true"
        tolerations.append({"key": "cloud.google.com/gke-spot", "operator": "Equal",
                            "value": "true", "effect": "NoSchedule"})
    return selector, tolerations


class GpuCapacity(pulumi.ComponentResource):
    node_pool: gcp.container.NodePool | None
    pool_name: str | None
    pod_node_selector: dict[str, str]
    pod_tolerations: list[dict[str, str]]

    def __init__(self, name: str, args: GpuCapacityArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gke-grpo:components:GpuCapacity", name, None, opts)
        self.node_pool = None
        self.pool_name = None
        if not args.autopilot:
            self.pool_name = f"{args.machine_type}-pool"
            self.node_pool = self._node_pool(name, args)
        self.pod_node_selector, self.pod_tolerations = gpu_pod_placement(args, self.pool_name)
        self.register_outputs({
            "pool_name": self.pool_name,
            "pod_node_selector": self.pod_node_selector,
        })

    def _node_pool(self, name: str, args: GpuCapacityArgs) -> gcp.container.NodePool:
        gpu = args.gpu
        model = gpu.provisioning_model
        if model == "reservation":
            assert gpu.reservation is not None, "the config requires gpu.reservation with provisioningModel reservation"
            affinity = gcp.container.NodePoolNodeConfigReservationAffinityArgs(
                consume_reservation_type="SPECIFIC_RESERVATION", key=RESERVATION_KEY,
                values=[reservation_value(gpu.reservation, args.project)])
        else:
            affinity = gcp.container.NodePoolNodeConfigReservationAffinityArgs(
                consume_reservation_type="NO_RESERVATION")
        # The first gVNIC NIC is on the cluster VPC; the second and all eight RDMA NICs come
        # from these additional node networks, in NIC order.
        extra_networks = [gcp.container.NodePoolNetworkConfigAdditionalNodeNetworkConfigArgs(
            network=args.gvnic_network.name, subnetwork=args.gvnic_subnet.name)]
        extra_networks += [
            gcp.container.NodePoolNetworkConfigAdditionalNodeNetworkConfigArgs(
                network=args.rdma_network.name, subnetwork=subnet.name)
            for subnet in args.rdma_subnets
        ]
        if model == "flex-start":
            # GKE uses short-lived upgrades for flex-start nodes (GKE "Node upgrade strategies",
            # read 2026-12-01): running nodes are not upgraded in place, new ones come up at the
            # new version; a node lives at most maxRunDurationSeconds. No surge settings apply.
            upgrade_settings = None
        else:
            # No surge: a reservation has no spare machine to surge into, and a surge node
            # would only be preempted on Spot. Upgrades happen one node at a time, inside the
            # maintenance window, never outside it (see the cluster's maintenance policy).
            upgrade_settings = gcp.container.NodePoolUpgradeSettingsArgs(
                strategy="SURGE", max_surge=0, max_unavailable=1)
        return gcp.container.NodePool(
            f"{name}-pool",
            name=self.pool_name,
            project=args.project,
            location=args.region,
            cluster=args.cluster_name,
            node_locations=[args.zone],
            # A reservation is paid for either way: bring the run's nodes up at once. Spot and
            # flex-start start empty and scale up for pending pods (flex-start requires 0).
            initial_node_count=gpu.nodes if model == "reservation" else 0,
            autoscaling=gcp.container.NodePoolAutoscalingArgs(
                total_min_node_count=args.min_nodes,
                total_max_node_count=args.max_nodes,
                location_policy="ANY"),
            management=gcp.container.NodePoolManagementArgs(
                auto_repair=args.auto_repair,
                # Release-channel clusters require auto-upgrade; the maintenance policy and
                # exclusions decide when it may happen.
                auto_upgrade=True),
            upgrade_settings=upgrade_settings,
            placement_policy=gcp.container.NodePoolPlacementPolicyArgs(type="COMPACT")
            if gpu.compact_placement else None,
            network_config=gcp.container.NodePoolNetworkConfigArgs(
                additional_node_network_configs=extra_networks),
            node_config=gcp.container.NodePoolNodeConfigArgs(
                machine_type=args.machine_type,
                guest_accelerators=[gcp.container.NodePoolNodeConfigGuestAcceleratorArgs(
                    type=gpu.type, count=args.gpus_per_node,
                    gpu_driver_installation_config=gcp.container.NodePoolNodeConfigGuestAcceleratorGpuDriverInstallationConfigArgs(
                        gpu_driver_version=gpu.driver_version),
                )],
                reservation_affinity=affinity,
                spot=model == "spot",
                flex_start=True if model == "flex-start" else None,
                max_run_duration=f"{gpu.max_run_duration_seconds}s"
                if gpu.max_run_duration_seconds else None,
                gvnic=gcp.container.NodePoolNodeConfigGvnicArgs(enabled=True),
                # A3 Ultra and A4 boot from Hyperdisk; their 32 local SSDs back ephemeral
                # storage (container images, the gcsfuse file cache, /tmp).
                disk_type="hyperdisk-balanced",
                disk_size_gb=args.disk_size_gb,
                ephemeral_storage_local_ssd_config=gcp.container.NodePoolNodeConfigEphemeralStorageLocalSsdConfigArgs(
                    local_ssd_count=32),
                labels={ROLE_LABEL: "gpu-worker"},
                taints=[gcp.container.NodePoolNodeConfigTaintArgs(**GPU_TAINT)],
                service_account=args.node_service_account_email,
                oauth_scopes=[CLOUD_PLATFORM_SCOPE],
                workload_metadata_config=gcp.container.NodePoolNodeConfigWorkloadMetadataConfigArgs(
                    mode="GKE_METADATA"),
            ),
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=[args.gvnic_subnet, *args.rdma_subnets],
                ignore_changes=GPU_POOL_IGNORE_CHANGES,
            ),
        )
