"""The validated stack config and the GCP names derived from it."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Literal

from components.config.capacity import CapacityPlan, capacity_plan
from components.config.facts import DEFAULT_KUBERAY_CHART_VERSION, MACHINE_SHAPES, MachineShape
from components.config.models import (
    ClusterConfig,
    GcsStorage,
    GpuConfig,
    HeadPool,
    JobConfig,
    KubeRayConfig,
    LustreStorage,
    MonitoringConfig,
    NetworkConfig,
    StorageConfig,
)
from components.config.patterns import _version_tuple
from components.ray_autoscaler import load_autoscaler_settings

# --------------------------------------------------------------------------------------------
# The validated whole
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StackConfig:
    """Everything the program needs, validated. Secrets are not held here: only whether they
    are set (their values stay Pulumi secrets, read with ``require_secret``)."""

    stack: str
    project: str
    region: str
    environment: Literal["dev", "prod"]
    cluster: ClusterConfig
    gpu: GpuConfig
    network: NetworkConfig
    storage: StorageConfig
    kuberay: KubeRayConfig
    job: JobConfig
    has_wandb_key: bool
    monitoring: MonitoringConfig = field(default_factory=MonitoringConfig)

    # ---- derived values: one place each ---------------------------------------------------
    @property
    def is_prod(self) -> bool:
        return self.environment == "prod"

    @property
    def zone(self) -> str:
        return self.cluster.zone

    @property
    def shape(self) -> MachineShape:
        return MACHINE_SHAPES[self.gpu.type]

    @property
    def machine_type(self) -> str:
        return self.shape.machine_type

    @property
    def gpus_per_node(self) -> int:
        return self.shape.gpus

    @property
    def autopilot(self) -> bool:
        return self.cluster.mode == "autopilot"

    @property
    def gpu_min_nodes(self) -> int:
        return 0 if self.gpu.min_nodes is None else self.gpu.min_nodes

    @property
    def gpu_max_nodes(self) -> int:
        return self.gpu.nodes if self.gpu.max_nodes is None else self.gpu.max_nodes

    @property
    def gpu_auto_repair(self) -> bool:
        """Auto-repair of the Spot and reservation pools (flex-start pools never: GKE does not
        repair flex-start nodes)."""
        if self.gpu.auto_repair is not None:
            return self.gpu.auto_repair
        return self.gpu.provisioning_model != "flex-start"

    @property
    def capacity(self) -> CapacityPlan:
        """The GPU capacity sources in order (gpu.capacity, or provisioningModel's one)."""
        return capacity_plan(self.gpu, machine_type=self.machine_type)

    @property
    def pools(self) -> tuple[tuple[str, int, int], ...]:
        """A split layout's pools as (pool, nodes, index of the source it draws from; the config
        rules resolved each); () for the colocated layout."""
        from components.config.capacity import resolve_reference
        from jobs.contract.layouts import POOLS, SPLIT

        layout = self.job.layout
        if layout.kind != SPLIT:
            return ()
        found = []
        for name in POOLS:
            pool = getattr(layout, name)
            index = resolve_reference(self.capacity, pool.capacity)
            assert index is not None, "the config rules resolved every pool's source"
            found.append((name, pool.nodes, index))
        return tuple(found)

    @property
    def run_source_index(self) -> int:
        """The source a run's nodes are priced at: a split layout's pools' (one source: the
        layout rules), else the first of the waterfall."""
        return self.pools[0][2] if self.pools else 0

    @property
    def compute_class_name(self) -> str:
        return compute_class_name(self.cluster.name)

    @property
    def deletion_protection(self) -> bool:
        if self.cluster.deletion_protection is not None:
            return self.cluster.deletion_protection
        return self.is_prod

    @property
    def bucket_name(self) -> str | None:
        if self.storage.kind != "gcs":
            return None
        gcs = self.storage.gcs or GcsStorage()
        return gcs.bucket_name or self.names.bucket(self.project)

    @property
    def head_ephemeral_storage_gib(self) -> int:
        head = self.kuberay.head.ephemeral_storage_gib
        if head is not None:
            return head
        return 5 if self.autopilot else 50

    @property
    def soft_delete_retention_days(self) -> int:
        """The checkpoint bucket's soft-delete retention: configured, else off in dev (rotated
        checkpoints would stay billed for the retention period) and 7 days in prod."""
        gcs = self.storage.gcs or GcsStorage()
        if gcs.soft_delete_retention_days is not None:
            return gcs.soft_delete_retention_days
        return 7 if self.is_prod else 0

    @property
    def lustre_peering_prefix_length(self) -> int:
        return ipaddress.IPv4Network(self.network.lustre_peering_cidr).prefixlen

    @property
    def lustre_peering_address(self) -> str:
        return str(ipaddress.IPv4Network(self.network.lustre_peering_cidr).network_address)

    @property
    def node_service_account_id(self) -> str:
        return self.names.node_service_account

    @property
    def lustre_instance_id(self) -> str | None:
        if self.storage.kind != "lustre":
            return None
        lustre = self.storage.lustre or LustreStorage()
        return lustre.instance_id or self.names.lustre_instance

    @property
    def helm_chart_version(self) -> str | None:
        """kuberay-operator chart version when KubeRay comes from Helm (default: KubeRay 1.7.0,
        the version of the CRD schemas in shared/schemas)."""
        if self.kuberay.operator != "helm":
            return None
        return self.kuberay.helm_chart_version or DEFAULT_KUBERAY_CHART_VERSION

    @property
    def autoscaler_allocate_timeout_seconds(self) -> int:
        """RAY_AUTOSCALER_RECONCILE_ALLOCATE_STATUS_TIMEOUT_S for the autoscaler sidecar:
        kuberay.autoscaler.allocateTimeoutSeconds, else job.gpuWaitSeconds + a GPU node's
        bring-up (data/ray-autoscaler-settings.yaml)."""
        return load_autoscaler_settings().allocate_timeout(
            self.job.gpu_wait_seconds, self.kuberay.autoscaler.allocate_timeout_seconds)

    @property
    def gpu_disk_size_gb(self) -> int:
        return self.gpu.disk_size_gb or 500

    @property
    def head_pool(self) -> HeadPool | None:
        if self.autopilot:
            return None
        return self.cluster.head_pool or HeadPool()

    @property
    def kubernetes_minor(self) -> str:
        version = _version_tuple(self.cluster.min_master_version)
        if version is None:    # impossible: types.GkeVersion checked it
            raise ValueError(f"not a GKE version: {self.cluster.min_master_version!r}")
        return f"{version[0]}.{version[1]}"

    @property
    def names(self) -> ResourceNames:
        return ResourceNames(self.cluster.name, self.shape.rdma_nics)

    @property
    def rdma_network_profile(self) -> str:
        return (
            f"projects/{self.project}/global/networkProfiles/{self.zone}-vpc-roce"
        )


def compute_class_name(cluster_name: str) -> str:
    """The GKE ComputeClass of a waterfall: cluster-scoped, so named after the cluster."""
    return f"{cluster_name}-gpu"


@dataclass(frozen=True)
class ResourceNames:
    """GCP names the program sets, all derived from the cluster name."""

    cluster: str
    rdma_nics: int

    @property
    def cluster_network(self) -> str:
        return f"{self.cluster}-net"

    @property
    def cluster_subnet(self) -> str:
        return f"{self.cluster}-sub"

    @property
    def gvnic_network(self) -> str:
        return f"{self.cluster}-gvnic-net"

    @property
    def gvnic_subnet(self) -> str:
        return f"{self.cluster}-gvnic-sub"

    @property
    def gvnic_firewall(self) -> str:
        return f"{self.cluster}-gvnic-internal"

    @property
    def rdma_network(self) -> str:
        return f"{self.cluster}-rdma-net"

    def rdma_subnet(self, index: int) -> str:
        return f"{self.cluster}-rdma-sub-{index}"

    @property
    def lustre_range(self) -> str:
        return f"{self.cluster}-lustre-range"

    @property
    def lustre_firewall(self) -> str:
        return f"{self.cluster}-lustre-lnet"

    @property
    def lustre_instance(self) -> str:
        return f"{self.cluster}-lustre"

    def bucket(self, project: str) -> str:
        return f"{self.cluster}-{project}"

    @property
    def pod_range(self) -> str:
        return f"{self.cluster}-pods"

    @property
    def node_service_account(self) -> str:
        """The GKE nodes' own service account id (6-30 characters: the cluster name is cut)."""
        return f"{self.cluster[:23].rstrip('-')}-nodes"

    @property
    def router(self) -> str:
        return f"{self.cluster}-router"

    @property
    def nat(self) -> str:
        return f"{self.cluster}-nat"

    @property
    def service_range(self) -> str:
        return f"{self.cluster}-services"

    def all_rfc1035(self) -> list[str]:
        names = [
            self.cluster_network, self.cluster_subnet, self.gvnic_network, self.gvnic_subnet,
            self.gvnic_firewall, self.rdma_network, self.pod_range, self.service_range,
            self.lustre_range, self.lustre_firewall, self.lustre_instance, self.router, self.nat,
        ]
        return names + [self.rdma_subnet(i) for i in range(self.rdma_nics)]

