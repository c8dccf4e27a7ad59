"""Area models: the shape of each `gke-grpo:<area>` object of the stack file."""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

from components.config.facts import DEFAULT_GKE_MINOR
from components.config.problems import PROJECT

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
