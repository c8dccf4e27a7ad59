"""`gke-grpo:job`: the GRPO run and its health gate."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from components.config.models.base import _Area
from components.config.models.layout import LayoutConfig
from components.config.types import (
    ActiveDeadlineSeconds,
    EvaluateMode,
    ExperimentName,
    FiniteFloat,
    HubModelId,
    HubRevision,
    ReleaseId,
)


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

class ExportConfig(_Area):
    """gke-grpo:job.export: where the Hugging Face export of the run goes besides
    /data/exports/<run-id>/step-<n> (docs/export-evaluate-serve.md)."""

    hub_repo: HubModelId | None = Field(
        None,
        description=("Hugging Face model repo `<namespace>/<name>` the newest export is pushed to "
                     "(created private; the stack's hfToken, read from its mounted file)"),
        json_schema_extra={"defaultText": "unset (no upload)"},
    )


class JobConfig(_Area):
    enabled: bool = Field(True, description="create the RayJob with `pulumi up`")
    framework: Literal["verl", "nemo-rl"] = Field(description="`verl` or `nemo-rl`")
    release: ReleaseId | None = Field(
        None,
        description=("the framework release: a row id of `data/versions.yaml` for `job.framework` "
                     "(its image, Ray and framework version; "
                     "[docs/frameworks.md](docs/frameworks.md#supported-releases))"),
        json_schema_extra={"defaultText": "the release the stack was deployed with; for a new "
                                          "stack, the framework's newest row"},
    )
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
    layout: LayoutConfig = Field(
        LayoutConfig(),
        description=("where rollouts and training run: `colocated`, or `split` onto a rollout "
                     "pool and a trainer pool, each on its own capacity source "
                     "([docs/layouts.md](docs/layouts.md))"),
        json_schema_extra={"defaultText": "colocated"},
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
    # How often the run driver restarts the trainer after lost nodes (preempted, deleted or
    # vanished, as the cluster reports them) before the attempt fails (docs/run-driver.md).
    max_restarts: int = Field(
        20,
        ge=0,
        description=("trainer restarts after lost nodes per attempt "
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
    # After a completed trainer: which checkpoints are evaluated on GSM8K's test split.
    evaluate: EvaluateMode = Field(
        "final",
        description=("GSM8K test-split evaluation after training: `none`, `final` (base model and "
                     "the last checkpoint) or `every-K` (also every K-th checkpoint left on disk) "
                     "([docs/export-evaluate-serve.md](docs/export-evaluate-serve.md))"),
    )
    export: ExportConfig = Field(
        ExportConfig(),
        description="the Hugging Face export's upload",
        json_schema_extra={"defaultText": "no upload"},
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
