"""One typed GRPO spec; the Pulumi program builds it from the stack's validated config
(components/run_spec.py spec_from_config) and the stack exports it (output runSpec).

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

from jobs.contract.layout import DATA_LAYOUT
from jobs.contract.layouts import COLOCATED, Pool

# Fields added with the split layout (gke-grpo:job.layout): hashed only when the layout is split,
# so a colocated run keeps the run id (and checkpoint directory) it had before they existed.
LAYOUT_FIELDS = ("layout", "asynchronous_trainer", "rollout_nodes", "trainer_nodes",
                 "staleness_threshold", "trigger_parameter_sync_step", "max_trajectory_age_steps")


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
    total_steps: int | None
    total_epochs: int | None
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
    storage_capacity_gib: int | None  # Lustre capacity; None for Cloud Storage (unbounded)
    # Hugging Face Hub commit shas; None = unpinned (the Hub's main when first staged).
    model_revision: str | None = None
    dataset_revision: str | None = None
    # Training-side parallelism and batching (gke-grpo:job.*, mapped per framework in
    # jobs/plan/render.py).
    training_tensor_parallel_size: int = 1
    sequence_parallel: bool = False
    activation_checkpointing: bool = True
    ulysses_sequence_parallel_size: int = 1
    dynamic_batch_size: bool = False
    max_tokens_per_gpu: int | None = None
    sequence_packing: bool = True
    attempt: int = 1
    memory_check: str = "enforce"       # gke-grpo:job.memoryCheck: preflight's policy, not the run
    # gke-grpo:job.layout (jobs/contract/layouts.py): "colocated", or "split" into a rollout pool and
    # a trainer pool (nodes adding up to `nodes`) run by the framework's asynchronous trainer.
    layout: str = COLOCATED
    asynchronous_trainer: str | None = None     # fully-async | one-step-off | async-grpo
    rollout_nodes: int = 0
    trainer_nodes: int = 0
    staleness_threshold: float | None = None   # verl async_training.staleness_threshold
    trigger_parameter_sync_step: int | None = None   # verl fully-async
    max_trajectory_age_steps: int | None = None      # NeMo RL grpo.async_grpo

    # ---- identity ---------------------------------------------------------------------------
    @property
    def spec_hash(self) -> str:
        """sha256 of every field but the attempt and the memory-check policy (and a colocated
        run's layout fields, all at their defaults), canonical JSON: same spec, same hash."""
        fields = dataclasses.asdict(self)
        fields.pop("attempt")
        fields.pop("memory_check")
        if self.layout == COLOCATED:
            for name in LAYOUT_FIELDS:
                fields.pop(name)
        canonical = json.dumps(fields, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()

    @property
    def short_hash(self) -> str:
        return self.spec_hash[:8]

    @property
    def run_id(self) -> str:
        """Names the run (and its checkpoint directory) across all its attempts."""
        return f"{self.experiment_name}-{self.short_hash}"

    def submission_id(self, attempt: int | None = None) -> str:
        """The Ray job submission id of one attempt of this run."""
        return f"{self.run_id}-attempt-{self.attempt if attempt is None else attempt}"

    # ---- derived ----------------------------------------------------------------------------
    @property
    def total_gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def split(self) -> bool:
        return self.layout != COLOCATED

    @property
    def pools(self) -> tuple[Pool, ...]:
        """A split run's pools, rollout first; () when colocated."""
        if not self.split:
            return ()
        return (Pool("rollout", self.rollout_nodes), Pool("trainer", self.trainer_nodes))

    @property
    def checkpoint_dir(self) -> str:
        return DATA_LAYOUT.run_checkpoint_dir(self.run_id)

    @property
    def model_dir(self) -> str:
        return DATA_LAYOUT.model_dir(self.model, self.model_revision)

    @property
    def dataset_dir(self) -> str:
        return DATA_LAYOUT.dataset_dir(self.dataset, self.dataset_revision)

    def with_attempt(self, attempt: int) -> GrpoSpec:
        return dataclasses.replace(self, attempt=attempt)

    def to_json(self) -> str:
        fields = dataclasses.asdict(self)
        if self.layout == COLOCATED:       # the stack's runSpec output stays as it was
            for name in LAYOUT_FIELDS:
                fields.pop(name)
        return json.dumps(fields, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> GrpoSpec:
        fields = json.loads(text)
        fields["extra_overrides"] = tuple(fields.get("extra_overrides", ()))
        return cls(**fields)
