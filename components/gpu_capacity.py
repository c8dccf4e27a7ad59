"""GpuCapacity: where the GPU nodes come from, and what a GPU pod must say to land on them.

Standard: one node pool of the GPU machine (8 GPUs, driver installed by GKE, all nine extra
NICs attached) per capacity source of ``gke-grpo:gpu.capacity`` (a specific reservation, Spot
VMs or flex-start). With more than one source, a GKE ComputeClass (components/compute_class.py)
lists the pools in order and the GPU pods select the class; with one, they select the pool.
Autopilot: no pool; the node selectors and tolerations that make Autopilot provision the same
capacity for a pod (one source only: components/config/gpu_rules.py). Both expose
`pod_node_selector` and `pod_tolerations` (all values strings), which the KubeRay component puts
on the GPU worker group.

Pools start empty and scale with the GPU worker pods (Spot and flex-start from 0), except a
reservation's pool, which is held at its size: a reservation is billed whether its machines run
or not, and Google's documentation does not confirm that a specific-reservation A3 Ultra/A4
pool scales up from zero (it documents ANY location policy with 0 initial nodes for reservation
pools, and its own A3 Ultra/A4 blueprints size them statically: docs/gpu-capacity.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from components.capacity_output import capacity_output
from components.cluster import AUTOSCALED_POOL_IGNORE_CHANGES, CLOUD_PLATFORM_SCOPE, ROLE_LABEL
from components.compute_class import CLASS_LABEL, ComputeClass, ComputeClassArgs

if TYPE_CHECKING:   # annotations only: the config models import components' siblings
    from components.cluster import GkeCluster
    from components.config import CapacityPlan, GpuConfig, PlannedSource, Reservation, StackConfig
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
    gpu: GpuConfig            # gke-grpo:gpu (type, nodes, placement, driver...)
    capacity: CapacityPlan    # the sources in order, each with its pool's name and size
    compute_class_name: str   # used when there is more than one source
    auto_repair: bool         # reservation and Spot pools (flex-start: never)
    disk_size_gb: int
    # From GkeCluster:
    cluster_name: pulumi.Input[str]
    node_service_account_email: pulumi.Input[str] | None
    # From GpuNetworks: the second gVNIC and the RDMA NICs, in NIC order.
    gvnic_network: gcp.compute.Network
    gvnic_subnet: gcp.compute.Subnetwork
    rdma_network: gcp.compute.Network
    rdma_subnets: list[gcp.compute.Subnetwork]
    # From GkeCluster: the waterfall's ComputeClass is a Kubernetes object.
    kubernetes_provider: k8s.Provider | None = None
    # gke-grpo:job.layout split: (pool, nodes, index of its source), priced in the output.
    pools: tuple[tuple[str, int, int], ...] = ()


def gpu_capacity_args(config: StackConfig, cluster: GkeCluster, networks: GpuNetworks) -> GpuCapacityArgs:
    return GpuCapacityArgs(
        project=config.project, region=config.region, zone=config.zone,
        autopilot=config.autopilot, machine_type=config.machine_type,
        gpus_per_node=config.gpus_per_node, gpu=config.gpu, capacity=config.capacity,
        compute_class_name=config.compute_class_name, auto_repair=config.gpu_auto_repair,
        disk_size_gb=config.gpu_disk_size_gb, cluster_name=cluster.cluster.name,
        node_service_account_email=cluster.node_service_account_email,
        gvnic_network=networks.gvnic_network, gvnic_subnet=networks.gvnic_subnet,
        rdma_network=networks.rdma_network, rdma_subnets=list(networks.rdma_subnets),
        kubernetes_provider=cluster.provider, pools=config.pools)


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

    Waterfall (Standard): the ComputeClass alone (GKE rejects a pod that selects a class and a
    system label the class decides, such as gke-accelerator or gke-spot: "About custom
    ComputeClasses"), tolerating the class's taint that the pools carry. One source on Standard:
    the pool itself (gke-accelerator-count is an Autopilot provisioning label, not one a
    Standard node carries). Autopilot: the count, local-SSD ephemeral storage (Ray's /tmp,
    spilling and caches; GKE "Autopilot local SSD") and the zone of the RoCE network profile
    the RDMA VPC was created with."""
    kinds = {source.kind for source in args.capacity.sources}
    tolerations: list[dict[str, str]] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    if args.capacity.waterfall and not args.autopilot:
        selector = {CLASS_LABEL: args.compute_class_name}
        tolerations.append({"key": CLASS_LABEL, "operator": "Equal",
                            "value": args.compute_class_name, "effect": "NoSchedule"})
    else:
        source = args.capacity.sources[0]
        selector = {"cloud.google.com/gke-accelerator": args.gpu.type}
        if pool_name is not None:
            selector["cloud.google.com/gke-nodepool"] = pool_name
        else:
            selector["cloud.google.com/gke-accelerator-count"] = str(args.gpus_per_node)
            selector["cloud.google.com/gke-ephemeral-storage-local-ssd"] = "true"
            selector["topology.kubernetes.io/zone"] = args.zone
            # Autopilot consumes reservations only for the Accelerator compute class.
            selector["cloud.google.com/compute-class"] = "Accelerator"
            if source.reservation is not None:
                selector["cloud.google.com/reservation-name"] = source.reservation.name
                selector["cloud.google.com/reservation-affinity"] = "specific"
            elif source.kind == "flexStart":
                selector["cloud.google.com/gke-flex-start"] = "true"
        if source.kind == "spot":
            selector["cloud.google.com/gke-spot"] = "true"
    if "spot" in kinds:
        tolerations.append({"key": "cloud.google.com/gke-spot", "operator": "Equal",
                            "value": "true", "effect": "NoSchedule"})
    return selector, tolerations


def source_pod_placement(args: GpuCapacityArgs, index: int) -> tuple[dict[str, str], list[dict[str, str]]]:
    """Node selector and tolerations that bind a GPU pod to one source (a split layout's pool,
    jobs/contract/layouts.py): with one source, the stack's own placement; in a waterfall
    (Standard), that source's node pool, tolerating the class's taint its pools carry, instead
    of the ComputeClass (which would let GKE pick any source)."""
    if not (args.capacity.waterfall and not args.autopilot):
        return gpu_pod_placement(args, None if args.autopilot else args.capacity.sources[0].pool_name)
    source = args.capacity.sources[index]
    selector = {"cloud.google.com/gke-accelerator": args.gpu.type,
                "cloud.google.com/gke-nodepool": source.pool_name}
    tolerations = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                   {"key": CLASS_LABEL, "operator": "Equal", "value": args.compute_class_name,
                    "effect": "NoSchedule"}]
    if source.kind == "spot":
        selector["cloud.google.com/gke-spot"] = "true"
        tolerations.append({"key": "cloud.google.com/gke-spot", "operator": "Equal",
                            "value": "true", "effect": "NoSchedule"})
    return selector, tolerations


def describe_capacity(output: dict) -> list[str]:
    """The capacity plan in words (the preview's diagnostics and the offline preview's tree)."""
    lines = []
    for i, source in enumerate(output["sources"], 1):
        rate = source["hourlyPerNode"]
        money = "unknown" if rate is None else f"{rate:,.2f} {output['currency']}"
        pool = ""
        if source["nodePool"]:
            pool = (f", pool {source['nodePool']} held at {source['maxNodes']} nodes"
                    if source["kind"] == "reservation" and source["minNodes"] == source["maxNodes"]
                    else f", pool {source['nodePool']} {source['minNodes']}-{source['maxNodes']} nodes")
        lines.append(f"GPU capacity {i}. {source['source']}: {money} per node-hour, billed "
                     f"{source['billed']}{pool}")
    for pool in output.get("pools") or []:
        hourly = pool["hourly"]
        cost = "unknown" if hourly is None else f"{hourly:,.2f} {output['currency']} per hour"
        lines.append(f"{pool['pool']} pool: {pool['nodes']} node(s) from {pool['source']} "
                     f"(worker group {pool['workerGroup']}), {cost} while up")
    lines.append(f"GPU workers 0-{output['maxReplicas']} ({output['autoscaler']}); an idle worker "
                 f"goes after {output['idleTimeoutSeconds']} s when no run holds it"
                 + (f"; ComputeClass {output['computeClass']}" if output["computeClass"] else ""))
    return lines


class GpuCapacity(pulumi.ComponentResource):
    node_pool: gcp.container.NodePool | None     # the first source's pool (Standard)
    node_pools: list[gcp.container.NodePool]     # one per source, in order (Standard)
    pool_name: str | None
    compute_class: ComputeClass | None           # Standard with more than one source
    pod_node_selector: dict[str, str]
    pod_tolerations: list[dict[str, str]]
    stack_output: dict                           # gpuCapacity: the plan the jobs CLI reads

    def __init__(self, name: str, args: GpuCapacityArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gke-grpo:components:GpuCapacity", name, None, opts)
        self.node_pools = []
        self.compute_class = None
        waterfall = args.capacity.waterfall and not args.autopilot
        if not args.autopilot:
            self.node_pools = [self._node_pool(name, args, source, waterfall)
                               for source in args.capacity.sources]
        self.node_pool = self.node_pools[0] if self.node_pools else None
        self.pool_name = args.capacity.sources[0].pool_name if self.node_pools else None
        if waterfall:
            assert args.kubernetes_provider is not None, "the ComputeClass needs the cluster's provider"
            self.compute_class = ComputeClass(f"{name}-class", ComputeClassArgs(
                name=args.compute_class_name,
                pool_names=[source.pool_name for source in args.capacity.sources],
                kubernetes_provider=args.kubernetes_provider, pools=list(self.node_pools)),
                opts=pulumi.ResourceOptions(parent=self))
        self.pod_node_selector, self.pod_tolerations = gpu_pod_placement(
            args, None if waterfall else self.pool_name)
        self._args = args
        self.stack_output = capacity_output(args, self.compute_class.name if self.compute_class else None,
                                            standard=bool(self.node_pools))
        # Said on every preview/up: the waterfall, what each source costs, the idle timeout.
        pulumi.log.info("; ".join(describe_capacity(self.stack_output)), resource=self)
        for source in args.capacity.sources:
            if self.node_pools and source.reservation is not None and \
                    source.min_nodes < source.initial_nodes:
                pulumi.log.warn(
                    f"GPU pool {source.pool_name} ({source.label}): minimum {source.min_nodes} "
                    f"below its {source.initial_nodes} reserved nodes (gpu.minNodes): GKE may "
                    "remove idle reserved nodes, which are billed anyway, and Google's docs do "
                    "not confirm that a specific-reservation pool scales back up from zero",
                    resource=self)
        self.register_outputs({
            "pool_name": self.pool_name,
            "pool_names": [source.pool_name for source in args.capacity.sources] if self.node_pools else [],
            "compute_class": args.compute_class_name if waterfall else None,
            "pod_node_selector": self.pod_node_selector,
        })

    def source_placement(self, index: int) -> tuple[dict[str, str], list[dict[str, str]]]:
        """What a GPU pod must say to land on the nodes of source ``index`` alone."""
        return source_pod_placement(self._args, index)

    @property
    def placement_dependencies(self) -> list[pulumi.Resource]:
        """What a GPU worker pod needs to exist before it is created: the pools and the class."""
        return [*self.node_pools[1:], *([self.compute_class.resource] if self.compute_class else [])]

    def _node_pool(self, name: str, args: GpuCapacityArgs, source: PlannedSource,
                   waterfall: bool) -> gcp.container.NodePool:
        gpu = args.gpu
        if source.reservation is not None:
            affinity = gcp.container.NodePoolNodeConfigReservationAffinityArgs(
                consume_reservation_type="SPECIFIC_RESERVATION", key=RESERVATION_KEY,
                values=[reservation_value(source.reservation, args.project)])
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
        flex_start = source.kind == "flexStart"
        if flex_start:
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
        labels = {ROLE_LABEL: "gpu-worker"}
        taints = [gcp.container.NodePoolNodeConfigTaintArgs(**GPU_TAINT)]
        if waterfall:
            # GKE requires both on a manually created pool of a ComputeClass ("About custom
            # ComputeClasses": node label and NoSchedule taint cloud.google.com/compute-class).
            labels[CLASS_LABEL] = args.compute_class_name
            taints.append(gcp.container.NodePoolNodeConfigTaintArgs(
                key=CLASS_LABEL, value=args.compute_class_name, effect="NO_SCHEDULE"))
        pool_resource_name = f"{name}-pool" + (f"-{source.resource_suffix}" if source.resource_suffix else "")
        return gcp.container.NodePool(
            pool_resource_name,
            name=source.pool_name,
            project=args.project,
            location=args.region,
            cluster=args.cluster_name,
            node_locations=[args.zone],
            # A reservation is paid for either way: its pool holds its nodes. Spot and
            # flex-start start empty and scale up for pending pods (flex-start requires 0).
            initial_node_count=source.initial_nodes,
            autoscaling=gcp.container.NodePoolAutoscalingArgs(
                total_min_node_count=source.min_nodes,
                total_max_node_count=source.max_nodes,
                location_policy="ANY"),
            management=gcp.container.NodePoolManagementArgs(
                # Flex-start: Cluster Toolkit's gke-node-pool precondition "enable_flex_start
                # needs node auto_repair set to false" (modules/compute/gke-node-pool/main.tf
                # @v1.95.0).
                auto_repair=False if flex_start else args.auto_repair,
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
                # Flex-start: no reservation and no Spot on the same pool (Cluster Toolkit's
                # preconditions, same file).
                reservation_affinity=affinity,
                spot=source.kind == "spot",
                flex_start=True if flex_start else None,
                max_run_duration=f"{source.max_run_duration_seconds}s"
                if source.max_run_duration_seconds else None,
                gvnic=gcp.container.NodePoolNodeConfigGvnicArgs(enabled=True),
                # A3 Ultra and A4 boot from Hyperdisk; their 32 local SSDs back ephemeral
                # storage (container images, the gcsfuse file cache, /tmp).
                disk_type="hyperdisk-balanced",
                disk_size_gb=args.disk_size_gb,
                ephemeral_storage_local_ssd_config=gcp.container.NodePoolNodeConfigEphemeralStorageLocalSsdConfigArgs(
                    local_ssd_count=32),
                labels=labels,
                taints=taints,
                service_account=args.node_service_account_email,
                oauth_scopes=[CLOUD_PLATFORM_SCOPE],
                workload_metadata_config=gcp.container.NodePoolNodeConfigWorkloadMetadataConfigArgs(
                    mode="GKE_METADATA"),
            ),
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=[args.gvnic_subnet, *args.rdma_subnets],
                ignore_changes=GPU_POOL_IGNORE_CHANGES,
                # Fixed names (components/config/capacity.py): the old pool must go first, or
                # the new one's create fails on the name (and a reservation's capacity is the
                # old pool's until then). Hash-named pools keep Pulumi's create-before-delete.
                delete_before_replace=not source.create_before_delete,
            ),
        )
