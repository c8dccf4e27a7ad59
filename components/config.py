"""Typed stack configuration: the one owner of every default, derived value and rule.

A stack's config (``Pulumi.<stack>.yaml``) is parsed and validated here as a whole before the
program registers a single resource. Problems are collected, never raised one at a time: a user
with three mistakes sees three lines, each naming the key as they would write it
(``gke-grpo:gpu.reservation.name``), the value they gave and what is allowed.

Shape errors (unknown keys, wrong types, values outside an enumeration) come from pydantic;
rules that span several keys (CIDR overlap, provisioning model, node counts, names) are checked
by ``_check_*`` functions that each append ``Problem``s. Derived values (machine type, NIC count,
NCCL tuner file, GCP resource names) are computed here and nowhere else.
"""

from __future__ import annotations

import ipaddress
import json
import re
from dataclasses import dataclass
from typing import Any, Literal, Mapping, Optional

import pulumi
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.alias_generators import to_camel

PROJECT = "gke-grpo"

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
_LUSTRE_FILESYSTEM = re.compile(r"^[A-Za-z][A-Za-z0-9]{0,7}$")

# GCP resource names (networks, subnets, firewalls, addresses, Lustre instances): RFC 1035.
_RFC1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_PROJECT_ID = re.compile(r"^[a-z][-a-z0-9]{4,28}[a-z0-9]$")
_REGION = re.compile(r"^[a-z]+-[a-z]+[0-9]+$")
_ZONE = re.compile(r"^([a-z]+-[a-z]+[0-9]+)-[a-z]$")
_BUCKET = re.compile(r"^[a-z0-9][-a-z0-9_.]{1,61}[a-z0-9]$")
_GKE_VERSION = re.compile(r"^(\d+)\.(\d+)(?:\.(\d+)(?:-gke\.(\d+))?)?$")
_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")


_QUANTITY = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$")
_QUANTITY_FACTORS = {
    None: 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
}


_CPU_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?m?$")


def cpu_cores(quantity: str) -> float:
    """A Kubernetes CPU quantity ("8", "500m") in cores."""
    if not _CPU_QUANTITY.match(quantity.strip()):
        raise ValueError(f"{quantity!r} is not a Kubernetes CPU quantity such as 8 or 500m")
    quantity = quantity.strip()
    return float(quantity[:-1]) / 1000 if quantity.endswith("m") else float(quantity)


def quantity_bytes(quantity: str, key: str = "quantity") -> int:
    """A Kubernetes memory/storage quantity ("32Gi", "64G", "0") in bytes."""
    match = _QUANTITY.match(quantity.strip())
    if not match:
        raise ValueError(f"{key}: {quantity!r} is not a Kubernetes quantity such as 32Gi")
    return int(float(match.group(1)) * _QUANTITY_FACTORS[match.group(2)])



# --------------------------------------------------------------------------------------------
# Problems
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the stack config: the key as a user writes it, the value given
    (``None`` when absent) and what would be accepted."""

    key: str
    given: Any
    allowed: str

    def __str__(self) -> str:
        # Nothing secret is ever echoed (jobs/credentials.py) and echoed values are cut short.
        from jobs.config_file import truncate
        from jobs.credentials import looks_like_secret_name, redact

        key = truncate(redact(self.key), 160)
        if self.given is NOT_SHOWN:
            return f"{key}: {redact(self.allowed)}"
        if self.given is _ABSENT:
            given = "(not set)"
        elif self.given is HIDDEN or looks_like_secret_name(re.split(r"[.:]", self.key)[-1].split("[")[0]):
            given = "(value hidden)"
        else:
            try:
                given = truncate(redact(json.dumps(self.given, default=str)), 120)
            except (ValueError, RecursionError):
                given = "(a value that cannot be shown)"
        return f"{key}: given {given}; {redact(self.allowed)}"


class _Absent:
    def __repr__(self) -> str:
        return "(not set)"


_ABSENT = _Absent()
# For problems whose message already says what was given (the job preflight's findings).
NOT_SHOWN = object()
# For values never to be echoed: secrets (--secret), unknown keys (a typo of hfToken).
HIDDEN = object()


class ConfigError(pulumi.RunError):
    """The stack config is invalid; ``problems`` lists every problem found.

    A ``pulumi.RunError``: the Pulumi CLI prints its message alone, without a Python traceback.
    """

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        lines = [f"  - {p}" for p in problems]
        noun = "problem" if len(problems) == 1 else "problems"
        super().__init__(f"the stack config has {len(problems)} {noun}:\n" + "\n".join(lines))


# --------------------------------------------------------------------------------------------
# Area models (the shape of each `gke-grpo:<area>` object). Field names are snake_case in
# Python and camelCase in the stack file.
# --------------------------------------------------------------------------------------------


class _Area(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=False, extra="forbid", frozen=True,
        strict=True,
    )


class MaintenanceWindow(_Area):
    start_time: str = "2025-01-04T02:00:00Z"
    end_time: str = "2025-01-04T10:00:00Z"
    recurrence: str = "FREQ=WEEKLY;BYDAY=SA,SU"


class MaintenanceExclusion(_Area):
    name: str
    start_time: str
    end_time: str
    scope: Literal["NO_UPGRADES", "NO_MINOR_UPGRADES", "NO_MINOR_OR_NODE_UPGRADES"] = (
        "NO_MINOR_OR_NODE_UPGRADES"
    )


class HeadPool(_Area):
    """Standard clusters: the non-Spot CPU node pool that hosts the Ray head."""

    machine_type: str = "c2-standard-16"
    min_nodes: int = Field(1, ge=1)
    max_nodes: int = Field(3, ge=1)
    disk_size_gb: int = Field(200, ge=50, le=65536)


class AuthorizedNetwork(_Area):
    cidr_block: str
    display_name: str


class ClusterConfig(_Area):
    name: str
    mode: Literal["autopilot", "standard"]
    zone: str
    release_channel: Literal["RAPID", "REGULAR", "STABLE"] = "REGULAR"
    # A GKE version or version prefix ("1.35", "1.35.1-gke.1396000") passed as
    # min_master_version; also decides the Kubernetes minor that manifests are validated for.
    min_master_version: str = DEFAULT_GKE_MINOR
    # How kubectl, Pulumi and reviewers reach the control plane (docs/deploy.md): "dns" = the
    # DNS-based endpoint, authorized by IAM (container.clusters.connect), IP endpoints off;
    # "authorizedNetworks" = the IP endpoint, open only to masterAuthorizedNetworks.
    control_plane_access: Literal["dns", "authorizedNetworks"] = "dns"
    master_authorized_networks: tuple[AuthorizedNetwork, ...] = ()
    maintenance_window: MaintenanceWindow = MaintenanceWindow()
    maintenance_exclusions: tuple[MaintenanceExclusion, ...] = ()
    head_pool: Optional[HeadPool] = None
    # Omitted: on in prod, off in dev. Turn it off (and `pulumi up`) before destroying prod.
    deletion_protection: Optional[bool] = None


class Reservation(_Area):
    name: str
    block: Optional[str] = None
    # Shared reservations owned by another project.
    project: Optional[str] = None


class GpuConfig(_Area):
    type: Literal["nvidia-b200", "nvidia-h200-141gb"]
    # Checked by _check_gpu rather than typed as an enumeration, so "on-demand" gets a
    # message that explains why these machines cannot have it.
    provisioning_model: str
    # Range checked in _check_gpu, so a bad count does not hide the other GPU rules.
    nodes: int
    machine_type: Optional[str] = None
    min_nodes: Optional[int] = Field(None, ge=0)
    max_nodes: Optional[int] = Field(None, ge=1)
    reservation: Optional[Reservation] = None
    max_run_duration_seconds: Optional[int] = Field(None, ge=600)
    auto_repair: Optional[bool] = None
    compact_placement: Optional[bool] = None
    disk_size_gb: Optional[int] = Field(None, ge=100, le=65536)
    driver_version: Literal["DEFAULT", "LATEST"] = "DEFAULT"


class NetworkConfig(_Area):
    cluster_subnet_cidr: str = "10.0.0.0/20"
    pod_cidr: str = "10.4.0.0/14"
    service_cidr: str = "10.8.0.0/20"
    gvnic_subnet_cidr: str = "192.168.0.0/24"
    rdma_subnet_cidrs: tuple[str, ...] = tuple(f"192.168.{n + 1}.0/24" for n in range(8))
    # Cluster Toolkit's value for A3 Ultra / A4 RoCE networks: jumbo frames for RDMA.
    rdma_mtu: int = Field(8896, ge=1300, le=8896)
    gvnic_mtu: int = Field(8896, ge=1300, le=8896)
    # Jumbo frames on the cluster VPC too: Lustre traffic and NCCL's bootstrap use eth0
    # (Google's Managed Lustre docs report ~10% more throughput with MTU 8896).
    cluster_mtu: int = Field(8896, ge=1300, le=8896)
    # The private-services-access range Managed Lustre takes its addresses from (a /24 per
    # instance); explicit so it is checked disjoint from every other range of the stack.
    lustre_peering_cidr: str = "10.96.0.0/20"


class GcsStorage(_Area):
    bucket_name: Optional[str] = None
    hierarchical_namespace: bool = True
    # Default: "<cluster name>-<project>" (the tutorial's naming, unique per project).
    # Omitted: 0 (off) in dev, where rotated checkpoints would otherwise stay billed for 7
    # days after deletion; 7 in prod (StackConfig.soft_delete_retention_days).
    soft_delete_retention_days: Optional[int] = None
    skip_bucket_access_check: bool = False
    file_cache_size_gib: int = Field(500, ge=0)
    metadata_cache_ttl_seconds: int = Field(600, ge=-1)
    # gcsfuse sidecar resources (Kubernetes quantities). Omitted: computed by SharedStorage
    # from the cluster mode and the file cache size ("0", unlimited, is Standard-only).
    sidecar_cpu_limit: Optional[str] = None
    sidecar_memory_limit: Optional[str] = None
    sidecar_ephemeral_storage_limit: Optional[str] = None


class LustreStorage(_Area):
    # Default: "<cluster name>-lustre".
    instance_id: Optional[str] = None
    filesystem: str = "lustrefs"
    capacity_gib: int = 18_000
    throughput_tier: int = 500
    # Replaced by network.lustrePeeringCidr (its prefix length); refused when set.
    peering_prefix_length: Optional[int] = None
    # True: the legacy LNet port 6988 on the cluster's Lustre CSI driver, the instance created
    # with gke_support_enabled, and the firewall opening 6988 - one choice, applied to all three.
    legacy_port: bool = False


class StorageConfig(_Area):
    kind: Literal["gcs", "lustre"]
    gcs: Optional[GcsStorage] = None
    lustre: Optional[LustreStorage] = None


class HeadResources(_Area):
    cpu: int = Field(12, ge=2)
    memory_gib: int = Field(48, ge=4)
    # Requested explicitly: Autopilot's default is 1 GiB. Omitted: 50 on Standard; 5 on
    # Autopilot, whose general-purpose pods get at most 10 GiB (sidecar included), so there the
    # head's /tmp/ray is a disk-backed generic ephemeral volume instead (components/kuberay.py).
    ephemeral_storage_gib: Optional[int] = Field(None, ge=1)


class WorkerResources(_Area):
    # Omitted: computed from the machine's allocatable (components/config.py MachineShape).
    cpu: Optional[int] = Field(None, ge=1)
    memory_gib: Optional[int] = Field(None, ge=1)
    shm_gib: int = Field(250, ge=1)
    # /tmp and /tmp/ray (Ray spilling, runtime envs, vLLM and torch compile caches) on the
    # node's local SSD; requested explicitly (Autopilot's default is 1 GiB).
    ephemeral_storage_gib: int = Field(1000, ge=10)


class KubeRayConfig(_Area):
    operator: Literal["addon", "helm"]
    helm_chart_version: Optional[str] = None
    namespace: str = "grpo"
    ray_cluster_name: str = "grpo"
    image: Optional[str] = None
    # GKE's Ray addon: the namespace of its operator, if you know it, to narrow the
    # NetworkPolicy (with Helm the program knows: kuberay-system).
    operator_namespace: Optional[str] = None
    head: HeadResources = HeadResources()
    worker: WorkerResources = WorkerResources()


class HealthGateConfig(_Area):
    """gke-grpo:job.healthGate: the run driver's fabric and storage gate (jobs/health.py,
    docs/health-gates.md). Omitted thresholds come from data/health-gates.yaml (sourced)."""

    mode: Literal["enforce", "warn", "off"] = "enforce"
    min_bus_bandwidth_gbps: Optional[float] = Field(None, gt=0)
    published_fraction: Optional[float] = Field(None, gt=0, le=1)
    collectives: tuple[Literal["all_gather", "all_reduce"], ...] = ("all_gather", "all_reduce")
    message_sizes_mib: tuple[int, ...] = (1024, 2048, 4096, 8192)
    warmup_iterations: int = Field(2, ge=0, le=50)
    iterations: int = Field(5, ge=1, le=100)
    storage_probe_gib: int = Field(8, ge=0, le=1024)
    timeout_seconds: int = Field(900, ge=60)


class JobConfig(_Area):
    enabled: bool = True
    framework: Literal["verl", "nemo-rl"]
    attempt: int = Field(1, ge=1)
    experiment_name: str
    model: str = "Qwen/Qwen2.5-32B-Instruct"
    # Hugging Face Hub commit shas (40 hex): optional, a warning says when absent.
    model_revision: Optional[str] = None
    dataset: Literal["gsm8k"] = "gsm8k"
    dataset_revision: Optional[str] = None
    generations_per_prompt: int = 8
    prompts_per_step: int = 256
    mini_batch_size: int = 256
    micro_batch_size_per_gpu: int = 8
    log_prob_micro_batch_size_per_gpu: int = 8
    learning_rate: float = 1e-6
    kl_loss_coef: float = 0.001
    kl_loss_type: str = "low_var_kl"
    total_steps: Optional[int] = None
    total_epochs: Optional[int] = None
    max_prompt_length: int = 512
    max_response_length: int = 1024
    rollout_engine: str = "vllm"
    rollout_tensor_parallel_size: int = 8
    rollout_gpu_memory_utilization: float = 0.6
    colocated_generation: bool = True
    generation_nodes: int = 0
    checkpoint_every_steps: int = 10
    checkpoints_to_keep: int = 2
    validate_every_steps: int = 10
    active_deadline_seconds: int = Field(7 * 24 * 3600, ge=600)
    # How long an attempt waits for all its GPUs before failing (Spot and flex-start capacity
    # can take a while to arrive).
    gpu_wait_seconds: int = Field(1800, ge=60)
    # How often the run driver restarts the trainer after lost workers (preempted or repaired
    # nodes, NCCL timeouts, dead actors) before the attempt fails (docs/run-driver.md).
    max_restarts: int = Field(20, ge=0)
    extra_overrides: tuple[str, ...] = ()
    # Training-side parallelism (jobs/render.py maps each to the framework's key; preflight
    # refuses one a framework does not have).
    training_tensor_parallel_size: int = 1      # NeMo RL policy.dtensor_cfg.tensor_parallel_size
    sequence_parallel: bool = False             # NeMo RL policy.dtensor_cfg.sequence_parallel
    activation_checkpointing: bool = True       # NeMo RL dtensor_cfg / verl model gradient ckpt
    ulysses_sequence_parallel_size: int = 1     # verl actor.ulysses_sequence_parallel_size
    dynamic_batch_size: bool = False            # verl actor.use_dynamic_bsz / NeMo RL dynamic_batching
    max_tokens_per_gpu: Optional[int] = None    # verl ppo_max_token_len_per_gpu (dynamic batch size)
    sequence_packing: bool = True               # NeMo RL sequence_packing / verl use_remove_padding
    # What preflight does with a GPU-memory estimate above 100 % (jobs/memory_plan.py):
    # refuse (enforce) or only warn (warn). Not part of the run's identity.
    memory_check: Literal["enforce", "warn"] = "enforce"
    # The fabric/storage gate before the first trainer start; "off" is allowed and warned about.
    health_gate: HealthGateConfig = HealthGateConfig()

    @field_validator("health_gate", mode="before")
    @classmethod
    def _health_gate_shorthand(cls, value: Any) -> Any:
        # `healthGate: off` is short for {"mode": "off"}.
        if value == "off":
            return {"mode": "off"}
        if isinstance(value, str):
            raise ValueError('"off" or an object such as {"mode": "warn"}')
        return value


AREAS: dict[str, type[_Area]] = {
    "cluster": ClusterConfig,
    "gpu": GpuConfig,
    "network": NetworkConfig,
    "storage": StorageConfig,
    "kuberay": KubeRayConfig,
    "job": JobConfig,
}
REQUIRED_AREAS = ("cluster", "gpu", "storage", "kuberay", "job")
SECRET_KEYS = {"hfToken": True, "wandbApiKey": False}  # key -> required
# The required secrets the offline readers (preview, preflight, jobs CLI) stand in for when a
# stack file does not set them (jobs/config_file.py read_stack_file).
OFFLINE_SECRET_KEYS = tuple(f"{PROJECT}:{name}" for name, required in SECRET_KEYS.items() if required)
SCALAR_KEYS = {"environment"}
# Keys of other namespaces this program reads; `gcp:*` provider settings beyond these are
# the provider's business and pass through untouched.
GCP_REQUIRED = ("project", "region")


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
        if self.gpu.auto_repair is not None:
            return self.gpu.auto_repair
        return self.gpu.provisioning_model != "flex-start"

    @property
    def deletion_protection(self) -> bool:
        if self.cluster.deletion_protection is not None:
            return self.cluster.deletion_protection
        return self.is_prod

    @property
    def bucket_name(self) -> Optional[str]:
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
    def lustre_instance_id(self) -> Optional[str]:
        if self.storage.kind != "lustre":
            return None
        lustre = self.storage.lustre or LustreStorage()
        return lustre.instance_id or self.names.lustre_instance

    @property
    def helm_chart_version(self) -> Optional[str]:
        """kuberay-operator chart version when KubeRay comes from Helm (default: KubeRay 1.7.0,
        the version of the CRD schemas in shared/schemas)."""
        if self.kuberay.operator != "helm":
            return None
        return self.kuberay.helm_chart_version or DEFAULT_KUBERAY_CHART_VERSION

    @property
    def gpu_disk_size_gb(self) -> int:
        return self.gpu.disk_size_gb or 500

    @property
    def head_pool(self) -> Optional[HeadPool]:
        if self.autopilot:
            return None
        return self.cluster.head_pool or HeadPool()

    @property
    def kubernetes_minor(self) -> str:
        major, minor = _GKE_VERSION.match(self.cluster.min_master_version).groups()[:2]
        return f"{major}.{minor}"

    @property
    def names(self) -> "ResourceNames":
        return ResourceNames(self.cluster.name, self.shape.rdma_nics)

    @property
    def rdma_network_profile(self) -> str:
        return (
            f"projects/{self.project}/global/networkProfiles/{self.zone}-vpc-roce"
        )


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


# --------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------


def _user_key(area: str, loc: tuple) -> str:
    path = ".".join(str(part) for part in loc)
    return f"{PROJECT}:{area}" + (f".{path}" if path else "")


def _lookup(raw: Any, loc: tuple) -> Any:
    value = raw
    for part in loc:
        try:
            value = value[part]
        except (KeyError, IndexError, TypeError):
            return _ABSENT
    return value


def _allowed_from_pydantic(error: dict) -> str:
    kind = error["type"]
    if kind == "extra_forbidden":
        return "unknown key (a typo?); see the config reference in README.md"
    if kind == "missing":
        return "required"
    return error["msg"][0].lower() + error["msg"][1:]


def _parse_area(area: str, raw_value: Any, problems: list[Problem]) -> Optional[_Area]:
    """Parse one area. On shape errors the offending top-level fields are reported, dropped and
    the rest parsed again, so that rules spanning several keys still run on what is valid and a
    user sees every problem at once. Returns None when nothing usable is left."""
    model = AREAS[area]
    if isinstance(raw_value, str):
        try:
            raw_value = json.loads(raw_value)
        except json.JSONDecodeError:
            problems.append(Problem(f"{PROJECT}:{area}", raw_value, "must be an object"))
            return None
    if not isinstance(raw_value, dict):
        problems.append(Problem(f"{PROJECT}:{area}", raw_value, "must be an object"))
        return None
    # Stack files are YAML: lists arrive as lists; strict mode would refuse them for tuples.
    remaining = _lists_to_tuples(raw_value)
    reported: set[tuple] = set()
    while True:
        try:
            return model.model_validate(remaining)
        except ValidationError as err:
            dropped = False
            for e in err.errors():
                loc = tuple(e["loc"])
                if loc not in reported:
                    reported.add(loc)
                    # An unknown key's value is never echoed (a mistyped credential).
                    given = HIDDEN if e["type"] == "extra_forbidden" else _lookup(raw_value, loc)
                    problems.append(Problem(_user_key(area, loc), given,
                                            _allowed_from_pydantic(e)))
                if loc and loc[0] in remaining:
                    remaining = {k: v for k, v in remaining.items() if k != loc[0]}
                    dropped = True
            if not dropped:
                return None


def _lists_to_tuples(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_lists_to_tuples(v) for v in value)
    if isinstance(value, dict):
        return {k: _lists_to_tuples(v) for k, v in value.items()}
    return value


def load_stack_config(
    raw: Mapping[str, Any], secret_keys: set[str] | frozenset[str] = frozenset(), stack: str = "dev"
) -> StackConfig:
    """Validate a stack's whole config. ``raw`` maps full keys (``gke-grpo:gpu``,
    ``gcp:project``) to values as the Pulumi engine hands them over (objects as JSON strings
    or already parsed). Raises ``ConfigError`` listing every problem."""
    problems: list[Problem] = []

    for key in sorted(raw):
        namespace, _, name = key.partition(":")
        if namespace != PROJECT:
            continue
        if name not in AREAS and name not in SECRET_KEYS and name not in SCALAR_KEYS:
            known = sorted([*AREAS, *SECRET_KEYS, *SCALAR_KEYS])
            # Never echo an unknown key's value: it may be a mistyped credential (hf_token).
            problems.append(Problem(key, HIDDEN, "unknown key (a typo?); known keys: "
                                    + ", ".join(f"{PROJECT}:{k}" for k in known)))
    if "gcp:zone" in raw:
        problems.append(Problem("gcp:zone", raw["gcp:zone"],
                                f"not used: set the zone as {PROJECT}:cluster.zone"))

    project = raw.get("gcp:project", _ABSENT)
    region = raw.get("gcp:region", _ABSENT)
    if not isinstance(project, str) or not _PROJECT_ID.match(project):
        problems.append(Problem("gcp:project", project, "a GCP project id: 6-30 characters, "
                                "lowercase letters, digits and hyphens, starting with a letter"))
    if not isinstance(region, str) or not _REGION.match(region):
        problems.append(Problem("gcp:region", region, "a GCP region such as us-central1"))

    environment = raw.get(f"{PROJECT}:environment", _ABSENT)
    if environment not in ("dev", "prod"):
        problems.append(Problem(f"{PROJECT}:environment", environment,
                                'one of "dev", "prod" (prod protects data stores and the cluster)'))

    for name, required in SECRET_KEYS.items():
        key = f"{PROJECT}:{name}"
        if key not in raw:
            if required:
                problems.append(Problem(key, _ABSENT, f"required: pulumi config set --secret {key} <value>"))
        elif key not in secret_keys:
            # Never echo the value: it is a credential stored in plain text.
            problems.append(Problem(key, "(plain text, hidden)",
                                    f"must be a secret: pulumi config set --secret {key} <value>"))

    parsed: dict[str, Optional[_Area]] = {}
    for area in AREAS:
        key = f"{PROJECT}:{area}"
        if key in raw:
            parsed[area] = _parse_area(area, raw[key], problems)
        elif area in REQUIRED_AREAS:
            problems.append(Problem(key, _ABSENT, "required; see the config reference in README.md"))
            parsed[area] = None
        else:
            parsed[area] = AREAS[area]()

    shape_keys = [p.key for p in problems]
    rule_problems: list[Problem] = []
    valid_region = region if isinstance(region, str) and _REGION.match(region) else None
    valid_project = project if isinstance(project, str) and _PROJECT_ID.match(project) else None
    _Rules(rule_problems, parsed, valid_region, valid_project).run()
    # A field that failed its shape check was dropped and defaulted: a rule about it would
    # report a value the user never gave.
    problems += [p for p in rule_problems if not any(
        p.key == k or p.key.startswith(k + ".") or k.startswith(p.key + ".") for k in shape_keys)]

    if problems:
        raise ConfigError(_hide_secret_values(problems, secret_keys))
    return StackConfig(
        stack=stack, project=project, region=region, environment=environment,
        has_wandb_key=f"{PROJECT}:wandbApiKey" in raw, **parsed,
    )


def _hide_secret_values(problems: list[Problem], secret_keys) -> list[Problem]:
    """Problems under a key set with --secret (decrypted for the program) never show a value."""
    secret = {k.replace(":config:", ":", 1) for k in secret_keys}
    return [Problem(p.key, HIDDEN, p.allowed)
            if p.given is not NOT_SHOWN and any(p.key == k or p.key.startswith((k + ".", k + "["))
                                               for k in secret) else p
            for p in problems]


def _version_tuple(version: str) -> Optional[tuple[int, int, int, int]]:
    match = _GKE_VERSION.match(version)
    if not match:
        return None
    return tuple(int(part) if part is not None else 0 for part in match.groups())


def version_at_least(version: str, minimum: str) -> bool:
    """True when every GKE version matching ``version`` (possibly a prefix such as "1.33")
    is at least ``minimum``."""
    return _version_tuple(version) >= _version_tuple(minimum)


class _Rules:
    """Rules spanning several keys. Each check reads only areas that parsed."""

    def __init__(self, problems: list[Problem], parsed: dict[str, Optional[_Area]],
                 region: Optional[str], project: Optional[str] = None):
        self.problems = problems
        self.cluster: Optional[ClusterConfig] = parsed["cluster"]
        self.gpu: Optional[GpuConfig] = parsed["gpu"]
        self.network: Optional[NetworkConfig] = parsed["network"]
        self.storage: Optional[StorageConfig] = parsed["storage"]
        self.kuberay: Optional[KubeRayConfig] = parsed["kuberay"]
        self.job: Optional[JobConfig] = parsed["job"]
        self.region = region
        self.project = project

    def add(self, key: str, given: Any, allowed: str) -> None:
        self.problems.append(Problem(f"{PROJECT}:{key}", given, allowed))

    def run(self) -> None:
        if self.cluster:
            self._check_cluster()
        if self.gpu:
            self._check_gpu()
        if self.network:
            self._check_network()
        if self.storage:
            self._check_storage()
        if self.kuberay:
            self._check_kuberay()
        if self.job:
            self._check_job()
        from components.config_guards import check_guards   # values no API accepts (issue 14)
        check_guards(self)

    # ---- cluster --------------------------------------------------------------------------
    def _check_cluster(self) -> None:
        c = self.cluster
        if len(c.name) > 40 or not _RFC1035.match(c.name):
            self.add("cluster.name", c.name, "1-40 characters: lowercase letters, digits and "
                     "hyphens, starting with a letter and not ending with a hyphen")
        else:
            for derived in ResourceNames(c.name, 8).all_rfc1035():
                if len(derived) > 63:
                    self.add("cluster.name", c.name, f"too long: the derived name {derived!r} "
                             "exceeds GCP's 63 characters")
                    break
        zone_match = _ZONE.match(c.zone)
        if not zone_match:
            self.add("cluster.zone", c.zone, "a GCP zone such as us-central1-b")
        elif self.region and zone_match.group(1) != self.region:
            self.add("cluster.zone", c.zone, f"a zone of the region gcp:region={self.region} "
                     f"(for example {self.region}-b)")
        if not _GKE_VERSION.match(c.min_master_version):
            self.add("cluster.minMasterVersion", c.min_master_version,
                     'a GKE version or prefix such as "1.33" or "1.33.5-gke.1308000"')
        else:
            major, minor = _version_tuple(c.min_master_version)[:2]
            if (major, minor) < (1, 31):
                self.add("cluster.minMasterVersion", c.min_master_version,
                         "1.31 or later: A3 Ultra and A4 GPU nodes need it")
        window = c.maintenance_window
        for field, value in (("startTime", window.start_time), ("endTime", window.end_time)):
            if not _RFC3339.match(value):
                self.add(f"cluster.maintenanceWindow.{field}", value,
                         "an RFC 3339 UTC time such as 2025-01-04T02:00:00Z")
        from components.config_guards import rfc3339
        start, end = rfc3339(window.start_time), rfc3339(window.end_time)
        if _RFC3339.match(window.start_time) and _RFC3339.match(window.end_time) \
                and start is not None and end is not None and end <= start:
            self.add("cluster.maintenanceWindow.endTime", window.end_time,
                     f"a time after maintenanceWindow.startTime ({window.start_time})")
        if not window.recurrence.startswith("FREQ="):
            self.add("cluster.maintenanceWindow.recurrence", window.recurrence,
                     "an RFC 5545 RRULE such as FREQ=WEEKLY;BYDAY=SA,SU")
        for i, exclusion in enumerate(c.maintenance_exclusions):
            if not _RFC1035.match(exclusion.name) or len(exclusion.name) > 63:
                self.add(f"cluster.maintenanceExclusions[{i}].name", exclusion.name,
                         "lowercase letters, digits and hyphens, at most 63 characters")
            for field, value in (("startTime", exclusion.start_time), ("endTime", exclusion.end_time)):
                if not _RFC3339.match(value):
                    self.add(f"cluster.maintenanceExclusions[{i}].{field}", value,
                             "an RFC 3339 UTC time such as 2026-12-01T00:00:00Z")
        if c.mode == "autopilot" and c.head_pool is not None:
            self.add("cluster.headPool", c.head_pool.model_dump(by_alias=True, exclude_unset=True),
                     "not allowed on Autopilot: Autopilot has no node pools; the Ray head runs on "
                     "Autopilot's default on-demand (non-Spot) capacity")
        if c.head_pool is not None and c.head_pool.min_nodes > c.head_pool.max_nodes:
            self.add("cluster.headPool.minNodes", c.head_pool.min_nodes,
                     f"at most headPool.maxNodes ({c.head_pool.max_nodes})")
        self._check_control_plane_access()

    def _check_control_plane_access(self) -> None:
        """The control plane is never open to the internet by default: the DNS-based endpoint
        (IAM decides who connects) or the IP endpoint limited to named networks."""
        c = self.cluster
        networks = c.master_authorized_networks
        if c.control_plane_access == "dns" and networks:
            self.add("cluster.masterAuthorizedNetworks",
                     [n.model_dump(by_alias=True) for n in networks],
                     'only with cluster.controlPlaneAccess "authorizedNetworks": with "dns" the IP '
                     "endpoints are off and IAM (container.clusters.connect) decides who connects")
        if c.control_plane_access == "authorizedNetworks" and not networks:
            self.add("cluster.masterAuthorizedNetworks", [], 'at least one {"cidrBlock": '
                     '"203.0.113.0/24", "displayName": "office"} with controlPlaneAccess '
                     '"authorizedNetworks" (or use controlPlaneAccess "dns")')
        for i, network in enumerate(networks):
            key = f"cluster.masterAuthorizedNetworks[{i}].cidrBlock"
            try:
                net = ipaddress.IPv4Network(network.cidr_block, strict=True)
            except ValueError as err:
                self.add(key, network.cidr_block, f"an IPv4 CIDR such as 203.0.113.0/24 ({err})")
                continue
            if net.prefixlen == 0:
                self.add(key, network.cidr_block, "a range narrower than 0.0.0.0/0: that would "
                         "open the control plane to the whole internet")

    # ---- gpu --------------------------------------------------------------------------------
    def _check_gpu(self) -> None:
        g = self.gpu
        shape = MACHINE_SHAPES[g.type]
        autopilot = self.cluster is not None and self.cluster.mode == "autopilot"
        model = g.provisioning_model
        if model not in PROVISIONING_MODELS:
            hint = ""
            if model in ("on-demand", "ondemand", "standard", "on_demand"):
                hint = (f"{shape.machine_type} has no plain on-demand capacity; ")
            self.add("gpu.provisioningModel", model, hint + "one of reservation, spot, "
                     "flex-start (a reservation you own, Spot VMs, or flex-start for up to 7 days)")
        if g.machine_type is not None:
            if autopilot:
                self.add("gpu.machineType", g.machine_type, "not allowed on Autopilot (a node "
                         "pool setting): Autopilot picks the machine from gpu.type")
            elif g.machine_type != shape.machine_type:
                self.add("gpu.machineType", g.machine_type,
                         f"{g.type} runs on {shape.machine_type} only (omit the key: it is "
                         "derived from gpu.type)")
        if model == "reservation":
            if g.reservation is None:
                self.add("gpu.reservation", None, 'required when provisioningModel is '
                         '"reservation": {"name": "<reservation name>"}')
        elif g.reservation is not None:
            self.add("gpu.reservation", g.reservation.model_dump(by_alias=True, exclude_none=True),
                     'only with provisioningModel "reservation"')
        if g.reservation is not None:
            r = g.reservation
            if len(r.name) > 63 or not _RFC1035.match(r.name):
                self.add("gpu.reservation.name", r.name, "a reservation name: lowercase letters, "
                         "digits and hyphens, at most 63 characters")
            if r.block is not None and autopilot:
                self.add("gpu.reservation.block", r.block, "Standard clusters only: this program "
                         "selects a reservation block through a node pool's reservation affinity")
            elif r.block is not None and (len(r.block) > 63 or not _RFC1035.match(r.block)):
                self.add("gpu.reservation.block", r.block, "a reservation block name: lowercase "
                         "letters, digits and hyphens, at most 63 characters")
            if r.project is not None and autopilot:
                self.add("gpu.reservation.project", r.project, "Standard clusters only: this "
                         "program consumes a shared reservation through a node pool's affinity")
            elif r.project is not None and not _PROJECT_ID.match(r.project):
                self.add("gpu.reservation.project", r.project, "a GCP project id")
        if g.max_run_duration_seconds is not None:
            if autopilot:
                self.add("gpu.maxRunDurationSeconds", g.max_run_duration_seconds, "Standard clusters "
                         "only: it is a node pool setting (Autopilot flex-start nodes get GKE's default)")
            elif model != "flex-start":
                self.add("gpu.maxRunDurationSeconds", g.max_run_duration_seconds,
                         'only with provisioningModel "flex-start"')
            elif g.max_run_duration_seconds > FLEX_START_MAX_RUN_SECONDS:
                self.add("gpu.maxRunDurationSeconds", g.max_run_duration_seconds,
                         f"at most {FLEX_START_MAX_RUN_SECONDS} (7 days, flex-start's limit)")
        if model == "flex-start" and g.auto_repair:
            self.add("gpu.autoRepair", g.auto_repair, "false (or omitted) with flex-start: GKE "
                     "does not auto-repair flex-start nodes")
        if model == "flex-start" and self.cluster is not None and not version_at_least(
                self.cluster.min_master_version, FLEX_START_MIN_GKE_VERSION) and _GKE_VERSION.match(
                self.cluster.min_master_version):
            self.add("cluster.minMasterVersion", self.cluster.min_master_version,
                     f"at least {FLEX_START_MIN_GKE_VERSION} for flex-start GPU node pools")
        if self.cluster is not None and _GKE_VERSION.match(self.cluster.min_master_version) and \
                not version_at_least(self.cluster.min_master_version, shape.min_gke_version):
            self.add("cluster.minMasterVersion", self.cluster.min_master_version,
                     f"at least {shape.min_gke_version} for {g.type}")
        if autopilot:
            pool_only = {
                "minNodes": (g.min_nodes, "autoscaling bounds"),
                "maxNodes": (g.max_nodes, "autoscaling bounds"),
                "autoRepair": (g.auto_repair, "auto-repair"),
                "compactPlacement": (g.compact_placement, "compact placement"),
                "diskSizeGb": (g.disk_size_gb, "the node boot disk"),
            }
            for key, (value, what) in pool_only.items():
                if value is not None:
                    self.add(f"gpu.{key}", value, f"not allowed on Autopilot: {what} is a node "
                             "pool setting and Autopilot manages nodes itself (remove the key)")
        if g.nodes < 1:
            self.add("gpu.nodes", g.nodes, "at least 1: the number of GPU nodes the run uses")
        if not autopilot:
            min_nodes = 0 if g.min_nodes is None else g.min_nodes
            max_nodes = g.nodes if g.max_nodes is None else g.max_nodes
            if min_nodes > g.nodes:
                self.add("gpu.minNodes", min_nodes, f"at most gpu.nodes ({g.nodes})")
            if max_nodes < g.nodes:
                self.add("gpu.maxNodes", max_nodes, f"at least gpu.nodes ({g.nodes}): the run "
                         "needs that many nodes at once")
            # Compact placement with flex-start is allowed: Cluster Toolkit's gke-node-pool
            # precondition supports it on A3 Ultra, A4 and H4D (modules/compute/gke-node-pool/
            # main.tf @104708037, 2026-06-25), the only machines this program deploys.
            if model == "flex-start" and min_nodes > 0:
                self.add("gpu.minNodes", min_nodes, "0 (or omitted) with flex-start: a minimum "
                         "would hold a granted node, and pay for it, for up to 7 days "
                         "(maxRunDurationSeconds) with nothing running on it")

    # ---- network ----------------------------------------------------------------------------
    def _check_network(self) -> None:
        n = self.network
        # Both shapes have 8 RDMA NICs; the GPU type decides when it parsed.
        shape = MACHINE_SHAPES[self.gpu.type if self.gpu else "nvidia-b200"]
        nics = shape.rdma_nics
        ranges: list[tuple[str, ipaddress.IPv4Network]] = []
        for key, value in (("network.clusterSubnetCidr", n.cluster_subnet_cidr),
                           ("network.podCidr", n.pod_cidr),
                           ("network.serviceCidr", n.service_cidr),
                           ("network.gvnicSubnetCidr", n.gvnic_subnet_cidr),
                           ("network.lustrePeeringCidr", n.lustre_peering_cidr)):
            parsed = self._cidr(key, value)
            if parsed:
                ranges.append((key, parsed))
            if parsed and key == "network.lustrePeeringCidr" and not 8 <= parsed.prefixlen <= 24:
                self.add(key, value, "a prefix between /8 and /24 (private service access gives "
                         "each Lustre instance a /24)")
        if len(n.rdma_subnet_cidrs) != nics:
            self.add("network.rdmaSubnetCidrs", list(n.rdma_subnet_cidrs),
                     f"exactly {nics} CIDRs: one subnet per RDMA NIC of {shape.machine_type}")
        for i, value in enumerate(n.rdma_subnet_cidrs):
            parsed = self._cidr(f"network.rdmaSubnetCidrs[{i}]", value)
            if parsed:
                ranges.append((f"network.rdmaSubnetCidrs[{i}]", parsed))
        for i, (key_a, net_a) in enumerate(ranges):
            for key_b, net_b in ranges[i + 1:]:
                if net_a.overlaps(net_b):
                    self.add(key_b, str(net_b), f"a range disjoint from {PROJECT}:{key_a} "
                             f"({net_a})")

    def _cidr(self, key: str, value: str) -> Optional[ipaddress.IPv4Network]:
        try:
            net = ipaddress.IPv4Network(value, strict=True)
        except ValueError as err:
            self.add(key, value, f"an IPv4 CIDR such as 10.0.0.0/20 ({err})")
            return None
        if not net.is_private:
            self.add(key, value, "a private (RFC 1918) range")
            return None
        if net.prefixlen > 29:
            self.add(key, value, "a prefix of /29 or larger: GCP subnets need at least 8 addresses")
            return None
        return net

    # ---- storage ----------------------------------------------------------------------------
    def _check_storage(self) -> None:
        s = self.storage
        other = "lustre" if s.kind == "gcs" else "gcs"
        if getattr(s, other) is not None:
            self.add(f"storage.{other}", getattr(s, other).model_dump(by_alias=True, exclude_none=True),
                     f'only with storage.kind "{other}" (kind is "{s.kind}")')
        if s.kind == "gcs":
            self._check_gcs(s.gcs or GcsStorage())
        if s.kind == "lustre":
            self._check_lustre(s.lustre or LustreStorage())

    def _check_gcs(self, gcs: "GcsStorage") -> None:
        key = "storage.gcs.bucketName"
        name = gcs.bucket_name
        if name is None and self.cluster is not None and self.project:
            name, key = ResourceNames(self.cluster.name, 8).bucket(self.project), "cluster.name"
        if name is not None and (not _BUCKET.match(name) or name.startswith("goog")
                                 or "google" in name or ".." in name):
            what = "" if key.endswith("bucketName") else (
                f"the default bucket name {name!r} (<cluster name>-<project>) is invalid; set "
                f"{PROJECT}:storage.gcs.bucketName or shorten the cluster name. A bucket name is ")
            self.add(key, gcs.bucket_name if key.endswith("bucketName") else self.cluster.name,
                     what + "3-63 characters: lowercase letters, digits, hyphens, underscores "
                     "and dots, starting and ending with a letter or digit, not starting with "
                     '"goog" nor containing "google"')
        if gcs.soft_delete_retention_days is not None and \
                gcs.soft_delete_retention_days not in range(7, 91) and gcs.soft_delete_retention_days != 0:
            self.add("storage.gcs.softDeleteRetentionDays", gcs.soft_delete_retention_days,
                     "0 (soft delete off) or 7-90 days (Cloud Storage's allowed range)")
        if gcs.metadata_cache_ttl_seconds == 0:
            self.add("storage.gcs.metadataCacheTtlSeconds", 0, "a positive TTL or -1 (never "
                     "expire): 0 turns gcsfuse's metadata cache off (a defect of the tutorial)")
        autopilot = self.cluster is not None and self.cluster.mode == "autopilot"
        for field, value, cpu in (("sidecarCpuLimit", gcs.sidecar_cpu_limit, True),
                                  ("sidecarMemoryLimit", gcs.sidecar_memory_limit, False),
                                  ("sidecarEphemeralStorageLimit", gcs.sidecar_ephemeral_storage_limit, False)):
            if value is None:
                continue
            valid = _CPU_QUANTITY.match(value) if cpu else _QUANTITY.match(value)
            if not valid:
                self.add(f"storage.gcs.{field}", value, "a Kubernetes quantity such as "
                         + ('"8" or "500m"' if cpu else '"32Gi"'))
                continue
            zero = float(re.match(r"[0-9.]+", value).group(0)) == 0
            if autopilot and zero:
                self.add(f"storage.gcs.{field}", value, 'a non-zero limit: "0" (unlimited) '
                         "works on Standard clusters only")
            elif field == "sidecarEphemeralStorageLimit" and not zero and \
                    quantity_bytes(value) <= gcs.file_cache_size_gib * 2**30:
                self.add(f"storage.gcs.{field}", value, f"more than the file cache "
                         f"({gcs.file_cache_size_gib}Gi, storage.gcs.fileCacheSizeGib): the "
                         "cache lives in the sidecar's ephemeral storage")

    def _check_lustre(self, lustre: "LustreStorage") -> None:
        tier = LUSTRE_TIERS.get(lustre.throughput_tier)
        if tier is None:
            self.add("storage.lustre.throughputTier", lustre.throughput_tier,
                     "one of " + ", ".join(str(t) for t in LUSTRE_TIERS) + " (MB/s per TiB)")
        else:
            problem = tier.capacity_problem(lustre.capacity_gib)
            if problem:
                self.add("storage.lustre.capacityGib", lustre.capacity_gib,
                         f"{problem} for throughput tier {lustre.throughput_tier}")
        if not _LUSTRE_FILESYSTEM.match(lustre.filesystem):
            self.add("storage.lustre.filesystem", lustre.filesystem,
                     "1-8 letters or digits, starting with a letter (a Lustre fsname)")
        if lustre.instance_id is not None and (
                len(lustre.instance_id) > 63 or not _RFC1035.match(lustre.instance_id)):
            self.add("storage.lustre.instanceId", lustre.instance_id, "1-63 characters: lowercase "
                     "letters, digits and hyphens, starting with a letter")
        if lustre.peering_prefix_length is not None:
            self.add("storage.lustre.peeringPrefixLength", lustre.peering_prefix_length,
                     "not used any more: the private-services range is network.lustrePeeringCidr "
                     '(for example "10.96.0.0/20"), checked disjoint from every other range')
        version = self.cluster.min_master_version if self.cluster else None
        if version and _GKE_VERSION.match(version):
            if not version_at_least(version, LUSTRE_CSI_MIN_GKE_VERSION):
                self.add("cluster.minMasterVersion", version,
                         f"at least {LUSTRE_CSI_MIN_GKE_VERSION} for the Lustre CSI driver")
            elif not lustre.legacy_port and not version_at_least(
                    version, LUSTRE_MODERN_PORT_MIN_GKE_VERSION):
                self.add("storage.lustre.legacyPort", False,
                         f"true when nodes may be older than {LUSTRE_MODERN_PORT_MIN_GKE_VERSION} "
                         f"(cluster.minMasterVersion is {version}); or raise "
                         "cluster.minMasterVersion to that version and keep the modern port 988")

    # ---- kuberay ----------------------------------------------------------------------------
    def _check_kuberay(self) -> None:
        k = self.kuberay
        if not _DNS1123_LABEL.match(k.namespace) or len(k.namespace) > 63:
            self.add("kuberay.namespace", k.namespace, "a Kubernetes namespace name: lowercase "
                     "letters, digits and hyphens, at most 63 characters")
        if not _RFC1035.match(k.ray_cluster_name) or len(k.ray_cluster_name) > 40:
            self.add("kuberay.rayClusterName", k.ray_cluster_name, "lowercase letters, digits and "
                     "hyphens, starting with a letter, at most 40 characters (KubeRay derives "
                     "service names from it)")
        if k.operator == "addon" and k.helm_chart_version is not None:
            self.add("kuberay.helmChartVersion", k.helm_chart_version,
                     'only with kuberay.operator "helm": the GKE Ray addon and the Helm operator '
                     "must never both run")
        if k.operator == "helm" and k.operator_namespace is not None:
            self.add("kuberay.operatorNamespace", k.operator_namespace, 'only with kuberay.operator '
                     '"addon": the Helm release lives in kuberay-system')
        self._check_image()
        self._check_worker()
        self._check_head()
        self._check_chart_version()
        if k.helm_chart_version is not None and not re.match(r"^\d+\.\d+\.\d+$", k.helm_chart_version):
            self.add("kuberay.helmChartVersion", k.helm_chart_version,
                     'an exact chart version such as "1.7.0"')

    def _check_chart_version(self) -> None:
        version = self.kuberay.helm_chart_version
        if version is None or not re.match(r"^\d+\.\d+\.\d+$", version):
            return
        parts = tuple(int(p) for p in version.split("."))
        if not SUPPORTED_KUBERAY_CHARTS[0] <= parts < SUPPORTED_KUBERAY_CHARTS[1]:
            self.add("kuberay.helmChartVersion", version, "a kuberay-operator 1.6.x or 1.7.x chart: the "
                     "program installs RayCronJob's CRD (1.6.0+) and its RayCluster/RayJob are "
                     "validated against the 1.7.0 CRD schemas")
            return
        from components.kuberay_crds import vendored_chart_versions
        vendored = vendored_chart_versions()
        if version not in vendored:
            self.add("kuberay.helmChartVersion", version, "a chart version whose CRDs are vendored "
                     f"under {KUBERAY_CRD_DIR}/ (" + ", ".join(vendored) + "): the CRDs are applied "
                     "from the repository, never fetched at `pulumi up`; vendor "
                     "helm-chart/kuberay-operator/crds/*.yaml of that tag first")

    def _check_image(self) -> None:
        from components.versions import image_reference_problem, load_versions

        image = self.kuberay.image
        if image is None:
            return
        problem = image_reference_problem(image)
        if problem:
            self.add("kuberay.image", image, f"a pinned image: it {problem}")
            return
        versions = load_versions()
        row = versions.by_image(image)
        if row is None:
            self.add("kuberay.image", image, "an image of the supported-versions table "
                     "(data/versions.yaml): " + ", ".join(r.image for r in versions.images))
        elif self.job is not None and row.framework != self.job.framework:
            self.add("kuberay.image", image, f"an image for job.framework {self.job.framework!r} "
                     f"(this one is for {row.framework!r})")

    def _check_worker(self) -> None:
        worker = self.kuberay.worker
        if self.gpu is None:
            return
        shape = MACHINE_SHAPES[self.gpu.type]
        # Same headroom as components/kuberay.py: system DaemonSets need room on the node.
        from components.kuberay_limits import SYSTEM_RESERVE_CPU, SYSTEM_RESERVE_MEMORY_GIB, worker_size_limit
        sidecar_cpu, sidecar_memory, sidecar_note = 0.0, 0.0, ""
        if self.storage is not None and self.storage.kind == "gcs" and self.cluster is not None:
            # The gcsfuse sidecar shares the worker's node; with a limit its request counts.
            from components.storage import gcsfuse_sidecar_limits
            try:
                limits = gcsfuse_sidecar_limits(self.storage.gcs or GcsStorage(),
                                                self.cluster.mode == "autopilot")
                sidecar_cpu, sidecar_memory = limits.budget()
            except ValueError:
                pass  # an unreadable quantity is reported by _check_gcs
            if sidecar_cpu or sidecar_memory:
                sidecar_note = f" and the gcsfuse sidecar takes {limits.cpu} CPU, {limits.memory}"
        max_cpu, max_memory = worker_size_limit(shape.allocatable_cpu, shape.allocatable_memory_gib, sidecar_cpu, sidecar_memory)
        if worker.cpu is not None and worker.cpu > max_cpu:
            self.add("kuberay.worker.cpu", worker.cpu, f"at most {max_cpu}: {shape.machine_type} "
                     f"has ~{shape.allocatable_cpu:.2f} allocatable CPUs and GKE's system "
                     f"DaemonSets need ~{SYSTEM_RESERVE_CPU}{sidecar_note}")
        if worker.memory_gib is not None and worker.memory_gib > max_memory:
            self.add("kuberay.worker.memoryGib", worker.memory_gib, f"at most {max_memory}: "
                     f"{shape.machine_type} has ~{shape.allocatable_memory_gib:.0f} GiB allocatable "
                     f"and GKE's system DaemonSets need ~{SYSTEM_RESERVE_MEMORY_GIB} GiB{sidecar_note}")
        if self.cluster is not None and self.cluster.mode == "autopilot":
            self._check_autopilot_worker_pod(shape)
        memory = worker.memory_gib or max_memory
        if worker.shm_gib >= memory:
            self.add("kuberay.worker.shmGib", worker.shm_gib, f"less than the worker's memory "
                     f"({memory} GiB): /dev/shm is memory the worker's limit counts")

    def _check_autopilot_worker_pod(self, shape: "MachineShape") -> None:
        """The GPU worker pod as a whole (Ray container + gcsfuse sidecar) within Autopilot's
        per-pod maximum for its GPU shape (data/autopilot-gpu-limits.yaml): Autopilot rejects a
        pod above it."""
        from components.autopilot_limits import pod_limit_for
        from components.storage import gcsfuse_sidecar_limits

        limit = pod_limit_for(shape.gpu_type, shape.gpus)
        if limit is None:
            self.add("gpu.type", shape.gpu_type, f"a GPU type with {shape.gpus} GPUs in Autopilot's "
                     "per-pod maximums (data/autopilot-gpu-limits.yaml)")
            return
        worker = self.kuberay.worker
        sidecar_cpu = sidecar_memory = sidecar_storage = 0.0
        if self.storage is not None and self.storage.kind == "gcs":
            try:
                limits = gcsfuse_sidecar_limits(self.storage.gcs or GcsStorage(), True)
                sidecar_cpu, sidecar_memory = limits.budget()
                sidecar_storage = quantity_bytes(limits.ephemeral_storage) / 2**30
            except ValueError:
                return  # reported by _check_gcs
        # Omitted CPU and memory are sized to fit by components/kuberay.py (worker_resources);
        # what the config states explicitly is checked.
        asked = {
            "kuberay.worker.cpu": (worker.cpu, sidecar_cpu, limit.cpu, "CPUs"),
            "kuberay.worker.memoryGib": (worker.memory_gib, sidecar_memory, limit.memory_gib,
                                         "GiB of memory"),
            "kuberay.worker.ephemeralStorageGib": (worker.ephemeral_storage_gib, sidecar_storage,
                                                   limit.ephemeral_storage_gib,
                                                   "GiB of ephemeral storage"),
        }
        for key, (value, sidecar, maximum, what) in asked.items():
            total = None if value is None else value + sidecar
            if total is not None and total > maximum:
                self.add(key, _lookup(worker.model_dump(by_alias=True), (key.rsplit(".", 1)[1],)),
                         f"a GPU worker pod of at most {maximum:g} {what} on Autopilot "
                         f"({shape.gpus} x {shape.gpu_type}, {limit.source}); this pod asks "
                         f"{total:g} including the gcsfuse sidecar")

    def _check_autopilot_head_pod(self) -> None:
        """The head pod's ephemeral storage (container + gcsfuse sidecar) within Autopilot's
        general-purpose per-pod maximum (data/autopilot-gpu-limits.yaml)."""
        from components.autopilot_limits import general_purpose_ephemeral_storage_gib
        from components.storage import HEAD_SIDECAR_AUTOPILOT

        asked = self.kuberay.head.ephemeral_storage_gib
        if asked is None:
            return
        sidecar = 0.0
        if self.storage is not None and self.storage.kind == "gcs":
            sidecar = quantity_bytes(HEAD_SIDECAR_AUTOPILOT.ephemeral_storage) / 2**30
        maximum = general_purpose_ephemeral_storage_gib()
        if asked + sidecar > maximum:
            self.add("kuberay.head.ephemeralStorageGib", asked, f"at most {maximum - sidecar:g} on "
                     f"Autopilot: a pod without local SSD gets at most {maximum:g} GiB of ephemeral "
                     f"storage{' and the gcsfuse sidecar takes %g' % sidecar if sidecar else ''}; "
                     "/tmp/ray is on its own disk-backed volume there")

    def _check_head(self) -> None:
        """The head's requests fit its Standard pool's machine (plus a small sidecar)."""
        if self.cluster is not None and self.cluster.mode == "autopilot" and self.kuberay is not None:
            self._check_autopilot_head_pod()
        if self.cluster is None or self.cluster.mode != "standard" or self.kuberay is None:
            return
        pool = self.cluster.head_pool or HeadPool()
        shape = predefined_machine(pool.machine_type)
        key = "cluster.headPool.machineType" if self.cluster.head_pool else "kuberay.head"
        if shape is None:
            self.add("cluster.headPool.machineType", pool.machine_type, "a predefined machine type "
                     "such as c2-standard-16 or n2-highmem-16 (<family>-standard|highmem|highcpu-<vCPUs>)")
            return
        vcpus, memory_gib = shape
        probe = MachineShape("", pool.machine_type, "", 0, 0, vcpus, memory_gib, 0, "", "")
        head = self.kuberay.head
        # One vCPU and 2 GiB for the node's system pods and the gcsfuse sidecar's requests.
        if head.cpu > probe.allocatable_cpu - 1 or head.memory_gib > probe.allocatable_memory_gib - 2:
            self.add(key if key == "kuberay.head" else "kuberay.head", head.model_dump(by_alias=True),
                     f"at most {int(probe.allocatable_cpu - 1)} CPUs and "
                     f"{int(probe.allocatable_memory_gib - 2)} GiB on the head pool's "
                     f"{pool.machine_type} ({vcpus} vCPUs, {memory_gib:g} GiB); or choose a larger "
                     "cluster.headPool.machineType")

    # ---- job ----------------------------------------------------------------------------------
    def _check_job(self) -> None:
        j = self.job
        if not re.match(r"^[a-z0-9][-a-z0-9_.]{0,62}$", j.experiment_name):
            self.add("job.experimentName", j.experiment_name, "1-63 characters: lowercase "
                     "letters, digits, '-', '_' and '.' (it names checkpoint directories)")
        if (j.total_steps is None) == (j.total_epochs is None):
            self.add("job.totalSteps", j.total_steps, "set exactly one of job.totalSteps and "
                     "job.totalEpochs")
        for key, revision in (("job.modelRevision", j.model_revision),
                              ("job.datasetRevision", j.dataset_revision)):
            if revision is not None and not re.match(r"^[0-9a-f]{40}$", revision):
                self.add(key, revision, "a Hugging Face Hub commit sha: 40 lower-case hex "
                         "characters (the model or dataset page, 'Files and versions', History)")
        gate = j.health_gate
        if gate.mode != "off":
            sizes = gate.message_sizes_mib
            if not sizes or any(not 1 <= size <= 16384 for size in sizes):
                self.add("job.healthGate.messageSizesMib", list(sizes), "1 to 16384 MiB each, at "
                         "least one (1024-8192 measure the large-message bandwidth the thresholds "
                         "are published for)")
            if not gate.collectives:
                self.add("job.healthGate.collectives", [], 'at least one of "all_gather", "all_reduce"')


def read_pulumi_config() -> tuple[dict[str, Any], set[str]]:
    """The whole config map of the running program and the keys that hold secrets.

    ``pulumi.Config`` only answers for keys one asks about; unknown-key detection needs the
    whole map, which the language host hands over either through ``set_all_config`` or the
    PULUMI_CONFIG environment variable (older CLIs).
    """
    from pulumi.runtime import config as runtime_config

    raw: dict[str, Any] = dict(runtime_config.get_config_env())
    raw.update(runtime_config.CONFIG.get())
    secret_keys = set(runtime_config.get_config_secret_keys_env())
    secret_keys.update(key for key in raw if runtime_config.is_config_secret(key))
    # Pulumi hands project keys over as "<project>:<key>"; old CLIs used "<project>:config:<key>".
    normalised = {key.replace(":config:", ":", 1): value for key, value in raw.items()}
    secret_keys = {key.replace(":config:", ":", 1) for key in secret_keys}
    return normalised, secret_keys
