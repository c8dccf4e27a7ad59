"""Area models: the shape of each `gke-grpo:<area>` object of the stack file."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

from components.config.facts import DEFAULT_GKE_MINOR
from components.config.types import (
    ActiveDeadlineSeconds,
    AuthorizedCidr,
    BucketName,
    ClusterName,
    CpuQuantity,
    ExclusionTime,
    ExperimentName,
    FiniteFloat,
    FlexStartRunSeconds,
    GkeVersion,
    GpuNodes,
    HelmChartVersion,
    HubModelId,
    HubRevision,
    KubernetesNamespace,
    LustreFilesystem,
    LustreInstanceId,
    LustrePeeringCidr,
    LustreThroughputTier,
    MaintenanceExclusionName,
    MaxGpuNodes,
    MetadataCacheTtlSeconds,
    MinGpuNodes,
    PinnedImage,
    ProjectId,
    Quantity,
    RayClusterName,
    Recurrence,
    ReservationBlock,
    ReservationName,
    RetiredPeeringPrefixLength,
    SoftDeleteRetentionDays,
    SubnetCidr,
    WindowTime,
    Zone,
)

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
    start_time: WindowTime = Field("2025-01-04T02:00:00Z", description="RFC 3339")
    end_time: WindowTime = Field("2025-01-04T10:00:00Z", description="RFC 3339")
    recurrence: Recurrence = Field("FREQ=WEEKLY;BYDAY=SA,SU", description="RFC 5545 RRULE")


class MaintenanceExclusion(_Area):
    name: MaintenanceExclusionName = Field(description="exclusion name")
    start_time: ExclusionTime = Field(description="RFC 3339")
    end_time: ExclusionTime = Field(description="RFC 3339")
    scope: Literal["NO_UPGRADES", "NO_MINOR_UPGRADES", "NO_MINOR_OR_NODE_UPGRADES"] = Field(
        "NO_MINOR_OR_NODE_UPGRADES",
        description="or `NO_UPGRADES`, `NO_MINOR_UPGRADES`",
    )


class HeadPool(_Area):
    """Standard clusters: the non-Spot CPU node pool that hosts the Ray head."""

    machine_type: str = Field(
        "c2-standard-16",
        description="the head pool's predefined machine type; the head's requests must fit it",
    )
    min_nodes: int = Field(1, ge=1, description="autoscaling minimum of the head pool")
    max_nodes: int = Field(
        3,
        ge=1,
        description="autoscaling maximum of the head pool (at least `minNodes`)",
    )
    disk_size_gb: int = Field(
        200,
        ge=50,
        le=65536,
        description="boot disk of the head pool's nodes, GB (50-65536)",
    )


class AuthorizedNetwork(_Area):
    cidr_block: AuthorizedCidr = Field(description="an IPv4 CIDR allowed to reach the control plane")
    display_name: str = Field(description="a label for it")


class ClusterConfig(_Area):
    name: ClusterName = Field(description="GKE cluster name (1-40 chars); every GCP name derives from it")
    mode: Literal["autopilot", "standard"] = Field(description="`autopilot` or `standard`")
    zone: Zone = Field(
        description="zone of the GPU nodes (and the RoCE profile); must lie in `gcp:region`",
    )
    release_channel: Literal["RAPID", "REGULAR", "STABLE"] = Field(
        "REGULAR",
        description="`RAPID`, `REGULAR` or `STABLE`",
    )
    # A GKE version or version prefix ("1.35", "1.35.1-gke.1396000") passed as
    # min_master_version; also decides the Kubernetes minor that manifests are validated for.
    min_master_version: GkeVersion = Field(
        DEFAULT_GKE_MINOR,
        description=("GKE version or prefix; checked against the GPU, flex-start and Lustre "
                     "minimums"),
    )
    # How kubectl, Pulumi and reviewers reach the control plane (docs/deploy.md): "dns" = the
    # DNS-based endpoint, authorized by IAM (container.clusters.connect), IP endpoints off;
    # "authorizedNetworks" = the IP endpoint, open only to masterAuthorizedNetworks.
    control_plane_access: Literal["dns", "authorizedNetworks"] = Field(
        "dns",
        description=("`dns` (DNS-based endpoint, IAM-authorized; IP endpoint private) or "
                     "`authorizedNetworks` (IP endpoint open to `masterAuthorizedNetworks` only); "
                     "[docs/deploy.md](docs/deploy.md)"),
    )
    master_authorized_networks: tuple[AuthorizedNetwork, ...] = Field(
        (),
        description="required with `authorizedNetworks`, refused with `dns`; never `0.0.0.0/0`",
    )
    maintenance_window: MaintenanceWindow = Field(
        MaintenanceWindow(),
        description="the recurring window upgrades may use",
        json_schema_extra={"defaultText": "weekends"},
    )
    maintenance_exclusions: tuple[MaintenanceExclusion, ...] = Field(
        (),
        description="list of exclusions covering long runs",
    )
    head_pool: HeadPool | None = Field(
        None,
        description="the Ray head's non-Spot CPU pool; refused on Autopilot",
        json_schema_extra={"defaultText": "Standard: always created"},
    )
    # Omitted: on in prod, off in dev. Turn it off (and `pulumi up`) before destroying prod.
    deletion_protection: bool | None = Field(
        None,
        description="GKE deletion protection",
        json_schema_extra={"defaultText": "prod: true, dev: false"},
    )


class Reservation(_Area):
    name: ReservationName = Field(description="reservation name")
    block: ReservationBlock | None = Field(None, description="one block of the reservation (Standard only)")
    # Shared reservations owned by another project.
    project: ProjectId | None = Field(
        None,
        description="owner of a shared reservation (Standard only)",
        json_schema_extra={"defaultText": "this project"},
    )


class GpuConfig(_Area):
    type: Literal["nvidia-b200", "nvidia-h200-141gb"] = Field(
        description="`nvidia-b200` or `nvidia-h200-141gb`",
    )
    # Checked by _check_gpu rather than typed as an enumeration, so "on-demand" gets a
    # message that explains why these machines cannot have it.
    provisioning_model: str = Field(description="`reservation`, `spot` or `flex-start`")
    nodes: GpuNodes = Field(description="GPU nodes the run uses (≥ 1): the one owner of the node count")
    machine_type: str | None = Field(
        None,
        description="Standard only; must match the GPU",
        json_schema_extra={"defaultText": "derived from `type`"},
    )
    min_nodes: MinGpuNodes | None = Field(
        None,
        description="Standard only; ≤ `nodes`; 0 with flex-start",
        json_schema_extra={"defaultText": "0"},
    )
    max_nodes: MaxGpuNodes | None = Field(
        None,
        description="Standard only; ≥ `nodes`",
        json_schema_extra={"defaultText": "`nodes`"},
    )
    reservation: Reservation | None = Field(
        None,
        description="the reservation to consume",
        json_schema_extra={"defaultText": "required with `reservation`"},
    )
    max_run_duration_seconds: FlexStartRunSeconds | None = Field(
        None,
        description="flex-start only; at most 604800 (7 days)",
    )
    auto_repair: bool | None = Field(
        None,
        description="Standard only; must be false with flex-start",
        json_schema_extra={"defaultText": "true; false for flex-start"},
    )
    compact_placement: bool | None = Field(
        None,
        description="Standard only; also with flex-start (A3 Ultra and A4 support it)",
        json_schema_extra={"defaultText": "false"},
    )
    disk_size_gb: int | None = Field(
        None,
        ge=100,
        le=65536,
        description="Standard only; Hyperdisk boot disk",
        json_schema_extra={"defaultText": "500"},
    )
    driver_version: Literal["DEFAULT", "LATEST"] = Field(
        "DEFAULT",
        description="GPU driver GKE installs: `DEFAULT` or `LATEST`",
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


class GcsStorage(_Area):
    bucket_name: BucketName | None = Field(
        None,
        description="the checkpoint and data bucket",
        json_schema_extra={"defaultText": "`<cluster name>-<project>`"},
    )
    hierarchical_namespace: bool = Field(
        True,
        description="atomic directory renames for checkpoint writers",
    )
    # Default: "<cluster name>-<project>" (the tutorial's naming, unique per project).
    # Omitted: 0 (off) in dev, where rotated checkpoints would otherwise stay billed for 7
    # days after deletion; 7 in prod (StackConfig.soft_delete_retention_days).
    soft_delete_retention_days: SoftDeleteRetentionDays | None = Field(
        None,
        description="0 (off) or 7-90; see [docs/deploy.md](docs/deploy.md#4-soft-delete)",
        json_schema_extra={"defaultText": "dev: 0 (off), prod: 7"},
    )
    skip_bucket_access_check: bool = Field(
        False,
        description="true hides IAM mistakes until the first I/O",
    )
    file_cache_size_gib: int = Field(
        500,
        ge=0,
        description="gcsfuse file cache on the node's local SSD",
    )
    metadata_cache_ttl_seconds: MetadataCacheTtlSeconds = Field(
        600,
        description="gcsfuse metadata cache TTL (-1: never expire)",
    )
    # gcsfuse sidecar resources (Kubernetes quantities). Omitted: computed by SharedStorage
    # from the cluster mode and the file cache size ("0", unlimited, is Standard-only).
    sidecar_cpu_limit: CpuQuantity | None = Field(
        None,
        description="gcsfuse sidecar CPU limit",
        json_schema_extra={"defaultText": "computed"},
    )
    sidecar_memory_limit: Quantity | None = Field(
        None,
        description="gcsfuse sidecar memory limit",
        json_schema_extra={"defaultText": "computed"},
    )
    sidecar_ephemeral_storage_limit: Quantity | None = Field(
        None,
        description="must exceed the file cache",
        json_schema_extra={"defaultText": "computed"},
    )


class LustreStorage(_Area):
    # Default: "<cluster name>-lustre".
    instance_id: LustreInstanceId | None = Field(
        None,
        description="the Managed Lustre instance id",
        json_schema_extra={"defaultText": "`<cluster name>-lustre`"},
    )
    filesystem: LustreFilesystem = Field("lustrefs", description="1-8 letters or digits")
    capacity_gib: int = Field(
        18_000,
        description="checked against the tier's minimum, maximum and step",
    )
    throughput_tier: LustreThroughputTier = Field(500, description="MB/s per TiB: 125, 250, 500 or 1000")
    # Replaced by network.lustrePeeringCidr (its prefix length); refused when set.
    peering_prefix_length: RetiredPeeringPrefixLength | None = Field(
        None,
        description="refused: replaced by `network.lustrePeeringCidr`",
    )
    # True: the legacy LNet port 6988 on the cluster's Lustre CSI driver, the instance created
    # with gke_support_enabled, and the firewall opening 6988 - one choice, applied to all three.
    legacy_port: bool = Field(
        False,
        description="LNet port 6988 (cluster, instance and firewall together)",
    )


class StorageConfig(_Area):
    kind: Literal["gcs", "lustre"] = Field(description="`gcs` or `lustre`")
    gcs: GcsStorage | None = Field(
        None,
        description="Cloud Storage FUSE settings (only with `kind: gcs`)",
        json_schema_extra={"defaultText": "defaults"},
    )
    lustre: LustreStorage | None = Field(
        None,
        description="Managed Lustre settings (only with `kind: lustre`)",
        json_schema_extra={"defaultText": "defaults"},
    )


class HeadResources(_Area):
    cpu: int = Field(12, ge=2, description="Standard: checked against the head pool's machine")
    memory_gib: int = Field(
        48,
        ge=4,
        description="Standard: checked against the head pool's machine",
    )
    # Requested explicitly: Autopilot's default is 1 GiB. Omitted: 50 on Standard; 5 on
    # Autopilot, whose general-purpose pods get at most 10 GiB (sidecar included), so there the
    # head's /tmp/ray is a disk-backed generic ephemeral volume instead (components/kuberay.py).
    ephemeral_storage_gib: int | None = Field(
        None,
        ge=1,
        description=("requested ephemeral storage (Autopilot default: 1 GiB). Autopilot: with the sidecar "
                     "at most 10 GiB; `/tmp/ray` is a 100 GiB disk-backed ephemeral volume there"),
        json_schema_extra={"defaultText": "Standard: 50, Autopilot: 5"},
    )


class WorkerResources(_Area):
    # Omitted: computed from the machine's allocatable (components/config/machines.py MachineShape).
    cpu: int | None = Field(
        None,
        ge=1,
        description="checked against the machine's allocatable",
        json_schema_extra={"defaultText": "allocatable - 6 (- sidecar)"},
    )
    memory_gib: int | None = Field(
        None,
        ge=1,
        description="checked against the machine's allocatable",
        json_schema_extra={"defaultText": "allocatable - 64 GiB (- sidecar)"},
    )
    shm_gib: int = Field(250, ge=1, description="`/dev/shm` memory emptyDir")
    # /tmp and /tmp/ray (Ray spilling, runtime envs, vLLM and torch compile caches) on the
    # node's local SSD; requested explicitly (Autopilot's default is 1 GiB).
    ephemeral_storage_gib: int = Field(
        1000,
        ge=10,
        description=("requested ephemeral storage (`/tmp`, `/tmp/ray`) on local SSD; Autopilot: the pod, "
                     "sidecar included, within `data/autopilot-gpu-limits.yaml`"),
    )


class KubeRayConfig(_Area):
    operator: Literal["addon", "helm"] = Field(
        description="`addon` (GKE's Ray addon) or `helm` (kuberay-operator release)",
    )
    helm_chart_version: HelmChartVersion | None = Field(
        None,
        description=("only with `helm`; a version whose CRDs are vendored in `data/kuberay-crds/` "
                     "(1.7.0)"),
        json_schema_extra={"defaultText": "1.7.0 with `helm`"},
    )
    namespace: KubernetesNamespace = Field(
        "grpo",
        description="namespace of the Ray cluster, storage claim and secrets",
    )
    ray_cluster_name: RayClusterName = Field("grpo", description="RayCluster name")
    image: PinnedImage | None = Field(
        None,
        description="Ray image; must be a row of the table for `job.framework`",
        json_schema_extra={"defaultText": "the framework's row of `data/versions.yaml`"},
    )
    # GKE's Ray addon: the namespace of its operator, if you know it, to narrow the
    # NetworkPolicy (with Helm the program knows: kuberay-system).
    operator_namespace: str | None = Field(
        None,
        description="addon only: the managed operator's namespace, to narrow the NetworkPolicy",
    )
    head: HeadResources = Field(HeadResources(), description="Ray head resources",
                                json_schema_extra={"defaultText": "defaults"})
    worker: WorkerResources = Field(WorkerResources(), description="GPU worker resources",
                                    json_schema_extra={"defaultText": "defaults"})


class HealthGateConfig(_Area):
    """gke-grpo:job.healthGate: the run driver's fabric and storage gate (jobs/head/fabric_gate.py,
    docs/health-gates.md). Omitted thresholds come from data/health-gates.yaml (sourced)."""

    mode: Literal["enforce", "warn", "off"] = Field(
        "enforce",
        description="`enforce` (a failed gate ends the attempt, exit 6), `warn`, `off`",
    )
    min_bus_bandwidth_gbps: float | None = Field(
        None,
        gt=0,
        description="minimum mean busbw over the sizes",
        json_schema_extra={"defaultText": "100 (data/health-gates.yaml)"},
    )
    published_fraction: float | None = Field(
        None,
        gt=0,
        le=1,
        description="of the machine's published 2-node busbw",
        json_schema_extra={"defaultText": "0.75 (data/health-gates.yaml)"},
    )
    collectives: tuple[Literal["all_gather", "all_reduce"], ...] = Field(
        ("all_gather", "all_reduce"),
        description="NCCL collectives the gate measures",
    )
    message_sizes_mib: tuple[int, ...] = Field(
        (1024, 2048, 4096, 8192), description="1-16384 each")
    warmup_iterations: int = Field(2, ge=0, le=50, description="per size")
    iterations: int = Field(5, ge=1, le=100, description="timed, per size")
    storage_probe_gib: int = Field(
        8,
        ge=0,
        le=1024,
        description="bytes written and read back on /data; 0 skips the probe",
    )
    timeout_seconds: int = Field(900, ge=60, description="bound of each stage of the gate")


class JobConfig(_Area):
    enabled: bool = Field(True, description="create the RayJob with `pulumi up`")
    framework: Literal["verl", "nemo-rl"] = Field(description="`verl` or `nemo-rl`")
    attempt: int = Field(
        1,
        ge=1,
        description="bump to start a new attempt of the same run (resumes)",
    )
    experiment_name: ExperimentName = Field(description="names the run and its checkpoint directory")
    model: HubModelId = Field("Qwen/Qwen2.5-32B-Instruct", description="Hugging Face model id")
    # Hugging Face Hub commit shas (40 hex): optional, a warning says when absent.
    model_revision: HubRevision | None = Field(
        None,
        description=("Hub commit sha of the model: download, marker, directory, spec hash "
                     "([docs/frameworks.md](docs/frameworks.md))"),
        json_schema_extra={"defaultText": "unset (warning)"},
    )
    dataset: Literal["gsm8k"] = Field("gsm8k", description="the training dataset")
    dataset_revision: HubRevision | None = Field(
        None,
        description="Hub commit sha of `openai/gsm8k`",
        json_schema_extra={"defaultText": "unset (warning)"},
    )
    generations_per_prompt: int = Field(8, description="GRPO group size (rollout n)")
    prompts_per_step: int = Field(256, description="prompts per step (verl train batch)")
    mini_batch_size: int = Field(256, description="verl PPO mini batch / NeMo RL global batch")
    micro_batch_size_per_gpu: int = Field(8, description="training micro batch per GPU")
    log_prob_micro_batch_size_per_gpu: int = Field(8, description="log-prob micro batch per GPU")
    learning_rate: FiniteFloat = Field(
        1e-6,
        description="optimizer learning rate",
        json_schema_extra={"defaultText": "1e-6"},
    )
    kl_loss_coef: FiniteFloat = Field(0.001, description="KL as a loss term")
    kl_loss_type: str = Field("low_var_kl", description="KL estimator of the KL loss term")
    total_steps: int | None = Field(
        None,
        description="exactly one of `totalSteps`, `totalEpochs`",
    )
    total_epochs: int | None = Field(
        None,
        description="exactly one of `totalSteps`, `totalEpochs`",
    )
    max_prompt_length: int = Field(512, description="longest prompt, tokens (both frameworks)")
    max_response_length: int = Field(
        1024,
        description="most tokens generated per response (both frameworks)",
    )
    rollout_engine: str = Field("vllm", description="rollout (generation) engine")
    rollout_tensor_parallel_size: int = Field(
        8,
        description="tensor parallel size of the rollout engine",
    )
    rollout_gpu_memory_utilization: FiniteFloat = Field(
        0.6,
        description="fraction of total GPU memory for vLLM",
    )
    colocated_generation: bool = Field(True, description="NeMo RL: generation on the training GPUs")
    generation_nodes: int = Field(0, description="NeMo RL, non-colocated: nodes for generation")
    checkpoint_every_steps: int = Field(10, description="steps between checkpoints")
    checkpoints_to_keep: int = Field(2, description="checkpoints kept; older ones are deleted")
    validate_every_steps: int = Field(10, description="steps between validations")
    active_deadline_seconds: ActiveDeadlineSeconds = Field(
        7 * 24 * 3600,
        ge=600,
        description=("the run's time budget from its first trainer start, enforced by the run "
                     "driver"),
    )
    # How long an attempt waits for all its GPUs before failing (Spot and flex-start capacity
    # can take a while to arrive).
    gpu_wait_seconds: int = Field(
        1800,
        ge=60,
        description="how long an attempt waits for all its GPUs before failing",
    )
    # How often the run driver restarts the trainer after lost workers (preempted or repaired
    # nodes, NCCL timeouts, dead actors) before the attempt fails (docs/run-driver.md).
    max_restarts: int = Field(
        20,
        ge=0,
        description=("trainer restarts after lost workers per attempt "
                     "([docs/run-driver.md](docs/run-driver.md))"),
    )
    extra_overrides: tuple[str, ...] = Field(
        (),
        description="extra framework overrides, checked by preflight",
    )
    # Training-side parallelism (jobs/plan/render.py maps each to the framework's key; preflight
    # refuses one a framework does not have).
    # NeMo RL policy.dtensor_cfg.tensor_parallel_size
    training_tensor_parallel_size: int = Field(
        1,
        description="NeMo RL DTensor TP (must divide heads and KV heads)",
    )
    # NeMo RL policy.dtensor_cfg.sequence_parallel
    sequence_parallel: bool = Field(False, description="NeMo RL DTensor sequence parallelism")
    # NeMo RL dtensor_cfg / verl model gradient ckpt
    activation_checkpointing: bool = Field(
        True,
        description="NeMo RL DTensor / verl gradient checkpointing",
    )
    # verl actor.ulysses_sequence_parallel_size
    ulysses_sequence_parallel_size: int = Field(1, description="verl Ulysses sequence parallelism")
    # verl actor.use_dynamic_bsz / NeMo RL dynamic_batching
    dynamic_batch_size: bool = Field(
        False,
        description="verl `use_dynamic_bsz` / NeMo RL dynamic batching",
    )
    # verl ppo_max_token_len_per_gpu (dynamic batch size)
    max_tokens_per_gpu: int | None = Field(
        None,
        description="verl `ppo_max_token_len_per_gpu` (with `dynamicBatchSize`)",
    )
    # NeMo RL sequence_packing / verl use_remove_padding
    sequence_packing: bool = Field(
        True,
        description="NeMo RL sequence packing / verl `use_remove_padding`",
    )
    # What preflight does with a GPU-memory estimate above 100 % (jobs/plan/gpu_memory.py):
    # refuse (enforce) or only warn (warn). Not part of the run's identity.
    memory_check: Literal["enforce", "warn"] = Field(
        "enforce",
        description=("`warn`: preflight only warns when the GPU-memory estimate exceeds the GPU "
                     "([docs/memory-planner.md](docs/memory-planner.md))"),
    )
    # The fabric/storage gate before the first trainer start; "off" is allowed and warned about.
    health_gate: HealthGateConfig = Field(
        HealthGateConfig(),
        description=("fabric/storage gate before the trainer "
                     "([docs/health-gates.md](docs/health-gates.md)); `off` (warned)"),
        json_schema_extra={"defaultText": "enforce"},
    )

    @field_validator("health_gate", mode="before")
    @classmethod
    def _health_gate_shorthand(cls, value: Any) -> Any:
        # `healthGate: off` is short for {"mode": "off"}.
        if value == "off":
            return {"mode": "off"}
        if isinstance(value, str):
            raise ValueError('"off" or an object such as {"mode": "warn"}')
        return value
