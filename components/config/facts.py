"""Facts about the machines, Managed Lustre and GKE versions that the config rules rely on."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

# --------------------------------------------------------------------------------------------
# Facts about the GPU machines (shared/reference/pulumi-and-kuberay.md, "Machines, capacity and
# Lustre", researched 2026-12-01 from the GKE cluster-autoscaler machine table and GCE GPU
# network docs). Compute Engine's "GB" of machine memory are binary (GiB). Allocatable follows
# GKE's reservation formula; see MachineShape.allocatable_*.
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MachineShape:
    gpu_type: str
    machine_type: str
    gpu_display_name: str
    gpus: int
    rdma_nics: int
    vcpus: int
    memory_gib: float
    local_ssd_gib: int
    nccl_tuner_file: str
    min_gke_version: str

    @property
    def allocatable_cpu(self) -> float:
        """vCPUs left for pods after GKE's CPU reservation (6% of core 1, 1% of core 2,
        0.5% of cores 3-4, 0.25% above)."""
        reserved = 0.06 + 0.01 + 2 * 0.005 + (self.vcpus - 4) * 0.0025
        return self.vcpus - reserved

    @property
    def allocatable_memory_gib(self) -> float:
        """Memory left for pods after GKE's reservation (25% of the first 4 GiB, 20% of the
        next 4, 10% of the next 8, 6% of the next 112, 2% above 128 GiB) and the 100 MiB
        eviction threshold."""
        m = self.memory_gib
        reserved = 0.25 * min(m, 4) + 0.20 * min(max(m - 4, 0), 4) + 0.10 * min(max(m - 8, 0), 8)
        reserved += 0.06 * min(max(m - 16, 0), 112) + 0.02 * max(m - 128, 0)
        return m - reserved - 100 / 1024


MACHINE_SHAPES: dict[str, MachineShape] = {
    "nvidia-b200": MachineShape(
        gpu_type="nvidia-b200", machine_type="a4-highgpu-8g", gpu_display_name="B200 180 GB",
        gpus=8, rdma_nics=8, vcpus=224, memory_gib=3968, local_ssd_gib=12000,
        nccl_tuner_file="/usr/local/gib/configs/tuner_config_a4.txtpb",
        min_gke_version="1.32.2-gke.1422000",
    ),
    "nvidia-h200-141gb": MachineShape(
        gpu_type="nvidia-h200-141gb", machine_type="a3-ultragpu-8g", gpu_display_name="H200 141 GB",
        gpus=8, rdma_nics=8, vcpus=224, memory_gib=2952, local_ssd_gib=12000,
        nccl_tuner_file="/usr/local/gib/configs/tuner_config_a3u.txtpb",
        min_gke_version="1.31.4-gke.1183000",
    ),
}

DEFAULT_KUBERAY_CHART_VERSION = "1.7.0"
SUPPORTED_KUBERAY_CHARTS = ((1, 6, 0), (1, 8, 0))  # [from, to)
# The KubeRay CRDs are vendored per chart version (data/kuberay-crds/v<version>/, copied from
# ray-project/kuberay helm-chart/kuberay-operator/crds/ at tag v<version>) and applied from
# those files: `pulumi up` fetches nothing. A chart version needs its CRDs vendored first.
KUBERAY_CRD_DIR = "data/kuberay-crds"

# Predefined Compute Engine shapes: GiB of memory per vCPU for <family>-<kind>-<vCPUs>.
_MEMORY_PER_VCPU = {
    ("e2", "standard"): 4, ("e2", "highmem"): 8, ("e2", "highcpu"): 1,
    ("n2", "standard"): 4, ("n2", "highmem"): 8, ("n2", "highcpu"): 1,
    ("n2d", "standard"): 4, ("n2d", "highmem"): 8, ("n2d", "highcpu"): 1,
    ("c2", "standard"): 4, ("c2d", "standard"): 4, ("c2d", "highmem"): 8, ("c2d", "highcpu"): 2,
    ("c3", "standard"): 4, ("c3", "highmem"): 8, ("c3", "highcpu"): 2,
    ("n4", "standard"): 4, ("n4", "highmem"): 8, ("n4", "highcpu"): 2,
}


def predefined_machine(machine_type: str) -> Optional[tuple[int, float]]:
    """(vCPUs, GiB) of a predefined <family>-<kind>-<vCPUs> machine type, None if unknown."""
    match = re.match(r"^([a-z0-9]+)-(standard|highmem|highcpu)-(\d+)$", machine_type)
    if not match or (match.group(1), match.group(2)) not in _MEMORY_PER_VCPU:
        return None
    vcpus = int(match.group(3))
    return vcpus, vcpus * _MEMORY_PER_VCPU[(match.group(1), match.group(2))]
# A current GKE minor for both stacks: third-party end-of-life listings give 2026-10-01 for
# 1.34 and Cluster Toolkit's gke-a4 / gke-a3-ultragpu blueprints pin version_prefix "1.35."
# (GoogleCloudPlatform/cluster-toolkit examples/gke-a4/gke-a4.yaml @104708037, 2026-06-25).
DEFAULT_GKE_MINOR = "1.35"
PROVISIONING_MODELS = ("reservation", "spot", "flex-start")
# Flex-start node pools serve ordinary pending GPU pods from this version on.
FLEX_START_MIN_GKE_VERSION = "1.32.2-gke.1652000"
FLEX_START_MAX_RUN_SECONDS = 7 * 24 * 3600

# Managed Lustre performance tiers, per unit throughput (MB/s per TiB) -> capacity rules.
# Source: https://docs.cloud.google.com/managed-lustre/docs/performance-tiers and
# .../managed-lustre/docs/increase-capacity, read 2026-12-01 (the older table in
# shared/reference, max 954,000 GiB for tier 1000, is stale). Capacity is a multiple of `step`
# up to `threshold`, then grows in `step_above` increments past it.


@dataclass(frozen=True)
class LustreTier:
    minimum_gib: int
    maximum_gib: int
    step_gib: int
    threshold_gib: Optional[int] = None
    step_above_gib: Optional[int] = None

    def capacity_problem(self, capacity: int) -> Optional[str]:
        if not self.minimum_gib <= capacity <= self.maximum_gib:
            return f"between {self.minimum_gib} and {self.maximum_gib} GiB"
        if self.threshold_gib is None or capacity <= self.threshold_gib:
            if capacity % self.step_gib:
                return (f"a multiple of {self.step_gib} GiB"
                        + (f" up to {self.threshold_gib} GiB" if self.threshold_gib else ""))
        elif (capacity - self.threshold_gib) % self.step_above_gib:
            return (f"{self.threshold_gib} GiB plus a multiple of {self.step_above_gib} GiB "
                    f"above {self.threshold_gib} GiB")
        return None


LUSTRE_TIERS: dict[int, LustreTier] = {
    125: LustreTier(72_000, 12_240_000, 72_000),
    250: LustreTier(36_000, 40_032_000, 36_000, 6_120_000, 288_000),
    500: LustreTier(18_000, 20_016_000, 18_000, 3_060_000, 144_000),
    1000: LustreTier(9_000, 10_008_000, 9_000, 1_530_000, 72_000),
}
# Below this node version the Lustre CSI driver needs the legacy LNet port 6988 (it clashes
# with gke-metadata-server on 988). Google's pages disagree (API reference: 1.33.2-gke.4655000;
# GKE how-to: 1.33.2-gke.4780000, both read 2026-12-01): we require the later one.
LUSTRE_MODERN_PORT_MIN_GKE_VERSION = "1.33.2-gke.4780000"
LUSTRE_CSI_MIN_GKE_VERSION = "1.32.2"
