"""Area models: the shape of each `gke-grpo:<area>` object of the stack file, one module per area."""

from components.config.models.base import _Area
from components.config.models.cluster import (
    AuthorizedNetwork,
    ClusterConfig,
    HeadPool,
    MaintenanceExclusion,
    MaintenanceWindow,
)
from components.config.models.gpu import CapacitySource, GpuConfig, Reservation
from components.config.models.job import ExportConfig, HealthGateConfig, JobConfig
from components.config.models.kuberay import AutoscalerOptions, HeadResources, KubeRayConfig, WorkerResources
from components.config.models.layout import LayoutConfig, PoolConfig
from components.config.models.monitoring import MonitoringConfig
from components.config.models.network import NetworkConfig
from components.config.models.storage import GcsStorage, LustreStorage, StorageConfig

__all__ = ["AuthorizedNetwork", "AutoscalerOptions", "CapacitySource", "ClusterConfig", "ExportConfig", "GcsStorage", "GpuConfig", "HeadPool", "HeadResources", "HealthGateConfig", "JobConfig", "KubeRayConfig", "LayoutConfig", "LustreStorage", "MaintenanceExclusion", "MaintenanceWindow", "MonitoringConfig", "NetworkConfig", "PoolConfig", "Reservation", "StorageConfig", "WorkerResources", "_Area"]
