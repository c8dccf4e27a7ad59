"""One typed GRPO spec, built from the stack's validated config.

The spec is what identifies a run: its hash names the run, the run names the checkpoint
directory, and every attempt of the same spec resumes from that directory. Nodes and GPUs come
from the one GPU node count of the stack (gke-grpo:gpu.nodes), never typed again. The attempt
number is carried but not hashed: bumping it starts a new attempt of the same run.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from jobs.layout import DATA_LAYOUT

if TYPE_CHECKING:  # the Pulumi side only; nothing here needs Pulumi at run time
    from components.config import StackConfig


@dataclass(frozen=True)
class GrpoSpec:
    framework: str                      # "verl" | "nemo-rl"
    image: str                          # image reference, a row of data/versions.yaml
    framework_version: str              # verl / NeMo RL version of that row
    ray_version: str
    experiment_name: str
    model: str                          # Hugging Face model id
    dataset: str                        # "gsm8k"
    nodes: int                          # = gke-grpo:gpu.nodes
    gpus_per_node: int                  # from the machine shape
    gpu_type: str
    gpu_memory_gib: int
    generations_per_prompt: int
    prompts_per_step: int
    mini_batch_size: int
    micro_batch_size_per_gpu: int
    log_prob_micro_batch_size_per_gpu: int
    learning_rate: float
    kl_loss_coef: float
    kl_loss_type: str
    total_steps: Optional[int]
    total_epochs: Optional[int]
    max_prompt_length: int
    max_response_length: int
    rollout_engine: str
    rollout_tensor_parallel_size: int
    rollout_gpu_memory_utilization: float
    colocated_generation: bool
    generation_nodes: int
    checkpoint_every_steps: int
    checkpoints_to_keep: int
    validate_every_steps: int
    extra_overrides: tuple[str, ...]
    wandb: bool                         # a W&B key is configured (its value never is here)
    storage_kind: str                   # "gcs" | "lustre"
    storage_capacity_gib: Optional[int]  # Lustre capacity; None for Cloud Storage (unbounded)
    # Hugging Face Hub commit shas; None = unpinned (the Hub's main when first staged).
    model_revision: Optional[str] = None
    dataset_revision: Optional[str] = None
    # Training-side parallelism and batching (gke-grpo:job.*, mapped per framework in
    # jobs/render.py).
    training_tensor_parallel_size: int = 1
    sequence_parallel: bool = False
    activation_checkpointing: bool = True
    ulysses_sequence_parallel_size: int = 1
    dynamic_batch_size: bool = False
    max_tokens_per_gpu: Optional[int] = None
    sequence_packing: bool = True
    attempt: int = 1
    memory_check: str = "enforce"       # gke-grpo:job.memoryCheck: preflight's policy, not the run

    # ---- identity ---------------------------------------------------------------------------
    @property
    def spec_hash(self) -> str:
        """sha256 of every field but the attempt and the memory-check policy, canonical JSON:
        same spec, same hash."""
        fields = dataclasses.asdict(self)
        fields.pop("attempt")
        fields.pop("memory_check")
        canonical = json.dumps(fields, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()

    @property
    def short_hash(self) -> str:
        return self.spec_hash[:8]

    @property
    def run_id(self) -> str:
        """Names the run (and its checkpoint directory) across all its attempts."""
        return f"{self.experiment_name}-{self.short_hash}"

    def submission_id(self, attempt: Optional[int] = None) -> str:
        """The Ray job submission id of one attempt of this run."""
        return f"{self.run_id}-attempt-{self.attempt if attempt is None else attempt}"

    # ---- derived ----------------------------------------------------------------------------
    @property
    def total_gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def checkpoint_dir(self) -> str:
        return DATA_LAYOUT.run_checkpoint_dir(self.run_id)

    @property
    def model_dir(self) -> str:
        return DATA_LAYOUT.model_dir(self.model, self.model_revision)

    @property
    def dataset_dir(self) -> str:
        return DATA_LAYOUT.dataset_dir(self.dataset, self.dataset_revision)

    def with_attempt(self, attempt: int) -> "GrpoSpec":
        return dataclasses.replace(self, attempt=attempt)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "GrpoSpec":
        fields = json.loads(text)
        fields["extra_overrides"] = tuple(fields.get("extra_overrides", ()))
        return cls(**fields)


def spec_from_config(config: "StackConfig") -> GrpoSpec:
    """The run the stack's job config describes."""
    from components.versions import load_versions

    job = config.job
    versions = load_versions()
    row = versions.by_image(config.kuberay.image) if config.kuberay.image else None
    row = row or versions.for_framework(job.framework)
    gpu_memory = {"nvidia-b200": 180, "nvidia-h200-141gb": 141}[config.gpu.type]
    lustre = config.storage.lustre if config.storage.kind == "lustre" else None
    return GrpoSpec(
        framework=job.framework, image=row.image, framework_version=row.framework_version,
        ray_version=row.ray, experiment_name=job.experiment_name, model=job.model,
        dataset=job.dataset, nodes=config.gpu.nodes, gpus_per_node=config.gpus_per_node,
        gpu_type=config.gpu.type, gpu_memory_gib=gpu_memory,
        generations_per_prompt=job.generations_per_prompt, prompts_per_step=job.prompts_per_step,
        mini_batch_size=job.mini_batch_size, micro_batch_size_per_gpu=job.micro_batch_size_per_gpu,
        log_prob_micro_batch_size_per_gpu=job.log_prob_micro_batch_size_per_gpu,
        learning_rate=job.learning_rate, kl_loss_coef=job.kl_loss_coef,
        kl_loss_type=job.kl_loss_type, total_steps=job.total_steps, total_epochs=job.total_epochs,
        max_prompt_length=job.max_prompt_length, max_response_length=job.max_response_length,
        rollout_engine=job.rollout_engine,
        rollout_tensor_parallel_size=job.rollout_tensor_parallel_size,
        rollout_gpu_memory_utilization=job.rollout_gpu_memory_utilization,
        colocated_generation=job.colocated_generation, generation_nodes=job.generation_nodes,
        checkpoint_every_steps=job.checkpoint_every_steps,
        checkpoints_to_keep=job.checkpoints_to_keep,
        validate_every_steps=job.validate_every_steps,
        extra_overrides=tuple(job.extra_overrides), wandb=config.has_wandb_key,
        storage_kind=config.storage.kind,
        storage_capacity_gib=(lustre.capacity_gib if lustre else
                              (18_000 if config.storage.kind == "lustre" else None)),
        model_revision=job.model_revision, dataset_revision=job.dataset_revision,
        training_tensor_parallel_size=job.training_tensor_parallel_size,
        sequence_parallel=job.sequence_parallel,
        activation_checkpointing=job.activation_checkpointing,
        ulysses_sequence_parallel_size=job.ulysses_sequence_parallel_size,
        dynamic_batch_size=job.dynamic_batch_size, max_tokens_per_gpu=job.max_tokens_per_gpu,
        sequence_packing=job.sequence_packing,
        attempt=job.attempt, memory_check=job.memory_check,
    )
