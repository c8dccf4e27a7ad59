"""Rules of both frameworks: value ranges, checkpoints, the model's shape and context, revisions
and the dataset's size (rollout tensor parallelism: Rules.rollout_tp, which each framework's
rules call)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobs.contract.datasets import GSM8K_TRAINING_ROWS, GSM8K_VALIDATION_ROWS
from jobs.plan.checkpoint_storage import HF_WEIGHTS_BYTES_PER_PARAM, checkpoints_on_disk
from jobs.plan.preflight.rules import (
    CHECKPOINT_BYTES_PER_PARAM,
    GPU_NODES,
    JOB,
    LUSTRE_CAPACITY,
    MAX_GPU_MEMORY_UTILIZATION,
    Rules,
    divisors_text,
)

if TYPE_CHECKING:
    from jobs.plan.model_shapes import ModelShape


class CommonRules(Rules):
    # ---- values -------------------------------------------------------------------------------
    def values(self) -> bool:
        """Range checks; False when a value the arithmetic needs is unusable."""
        s = self.spec
        usable = True
        positive = {
            "promptsPerStep": s.prompts_per_step,
            "miniBatchSize": s.mini_batch_size,
            "microBatchSizePerGpu": s.micro_batch_size_per_gpu,
            "logProbMicroBatchSizePerGpu": s.log_prob_micro_batch_size_per_gpu,
            "maxPromptLength": s.max_prompt_length,
            "maxResponseLength": s.max_response_length,
            "rolloutTensorParallelSize": s.rollout_tensor_parallel_size,
        }
        for name, value in positive.items():
            if value < 1:
                self.error(JOB + name, f"is {value}; set it to 1 or more")
                usable = False
        if s.generations_per_prompt < 2:
            self.error(JOB + "generationsPerPrompt",
                       f"is {s.generations_per_prompt}; GRPO compares a group of responses per "
                       "prompt: set it to 2 or more (8 or 16 are usual)")
            usable = usable and s.generations_per_prompt >= 1
        if s.nodes < 1 or s.gpus_per_node < 1:
            self.error(GPU_NODES, f"is {s.nodes} ({s.gpus_per_node} GPUs per node); set it to 1 or more")
            usable = False
        if not s.learning_rate > 0:
            self.error(JOB + "learningRate", f"is {s.learning_rate}; set a positive learning "
                       "rate such as 1.0e-6")
        if not s.kl_loss_coef >= 0:
            self.error(JOB + "klLossCoef", f"is {s.kl_loss_coef}; set 0 (no KL term) or a positive "
                       "coefficient such as 0.001")
        if not 0 < s.rollout_gpu_memory_utilization <= MAX_GPU_MEMORY_UTILIZATION:
            self.error(JOB + "rolloutGpuMemoryUtilization",
                       f"is {s.rollout_gpu_memory_utilization}; set a fraction of the GPU's total "
                       f"memory above 0 and at most {MAX_GPU_MEMORY_UTILIZATION}")
        if s.total_steps is None and s.total_epochs is None:
            self.error(JOB + "totalSteps", "neither totalSteps nor totalEpochs is set; set one")
        if s.total_steps is not None and s.total_steps < 1:
            self.error(JOB + "totalSteps", f"is {s.total_steps}; set 1 or more")
        if s.total_epochs is not None and s.total_epochs < 1:
            self.error(JOB + "totalEpochs", f"is {s.total_epochs}; set 1 or more")
        if s.validate_every_steps < 0:
            self.error(JOB + "validateEverySteps", f"is {s.validate_every_steps}; set 0 (no "
                       "validation) or a step interval")
        if s.generation_nodes < 0:
            self.error(JOB + "generationNodes", f"is {s.generation_nodes}; set 0 or more")
            usable = False
        return usable

    def checkpoints(self) -> None:
        s = self.spec
        if s.checkpoint_every_steps < 1:
            self.error(JOB + "checkpointEverySteps",
                       f"is {s.checkpoint_every_steps}: checkpoints are off, so a preempted or "
                       "failed run cannot resume; set a step interval such as 10")
        if s.checkpoints_to_keep < 1:
            self.error(JOB + "checkpointsToKeep",
                       f"is {s.checkpoints_to_keep}; keep at least 1 checkpoint to resume from")

    def model(self) -> None:
        from jobs.plan.model_shapes import shape_for  # PyYAML: only when a check runs

        s = self.spec
        shape = shape_for(s.model)
        if shape is None:
            self.warning(JOB + "model", f"{s.model} is not in data/model-shapes.yaml: its "
                         "context length, checkpoint size and head counts (tensor-parallel "
                         "sizes) are not checked")
            return
        total = s.max_prompt_length + s.max_response_length
        if total > shape.max_position_embeddings:
            self.error(JOB + "maxResponseLength",
                       f"maxPromptLength + maxResponseLength = {total} tokens exceeds {s.model}'s "
                       f"context of {shape.max_position_embeddings}; shorten the prompt or the "
                       "response")
        if s.storage_capacity_gib and s.checkpoints_to_keep >= 1:
            hf = HF_WEIGHTS_BYTES_PER_PARAM * shape.parameters
            one = CHECKPOINT_BYTES_PER_PARAM * shape.parameters + hf
            count = checkpoints_on_disk(s.framework, s.checkpoints_to_keep)
            need = one * count + hf          # + the export of the final checkpoint
            capacity = s.storage_capacity_gib * 2**30
            if need > capacity:
                self.warning(LUSTRE_CAPACITY,
                             f"up to {count} checkpoints of {s.model} can be on disk at once "
                             f"(checkpointsToKeep {s.checkpoints_to_keep}, see jobs/head/checkpoints.py; "
                             f"~{one / 1e9:.0f} GB each with optimizer state and the Hugging Face "
                             f"weights the export copies), plus the export (~{hf / 1e9:.0f} GB): "
                             f"~{need / 2**30:,.0f} GiB, more than the {s.storage_capacity_gib:,} GiB "
                             "Lustre instance; lower gke-grpo:job.checkpointsToKeep or raise the capacity")
        self.heads(shape)

    def heads(self, shape: ModelShape) -> None:
        """Tensor-parallel sizes that split the attention heads (and KV heads) evenly."""
        s = self.spec
        heads, kv = shape.attention_heads, shape.kv_heads
        tp = s.rollout_tensor_parallel_size
        # vLLM's Qwen2Attention: heads % TP; KV heads partitioned when >= TP, else replicated.
        kv_ok = kv % tp == 0 if kv >= tp else tp % kv == 0
        if tp >= 1 and (heads % tp or not kv_ok):
            self.error(JOB + "rolloutTensorParallelSize",
                       f"is {tp}, which does not split {s.model}'s {heads} attention heads and "
                       f"{kv} KV heads evenly (vLLM needs heads % TP == 0 and KV heads % TP == 0, "
                       "or TP a multiple of the KV heads); use "
                       + divisors_text(heads, kv, replicate_kv=True))
        training_tp = s.training_tensor_parallel_size
        if s.framework == "nemo-rl" and training_tp > 1 and (heads % training_tp or kv % training_tp):
            self.error(JOB + "trainingTensorParallelSize",
                       f"is {training_tp}, which does not divide {s.model}'s {heads} attention "
                       f"heads and {kv} KV heads (NeMo RL's DTensor plan shards both); use "
                       + divisors_text(heads, kv, replicate_kv=False))
        sp = s.ulysses_sequence_parallel_size
        if s.framework == "verl" and sp > 1 and (heads % sp or (kv % sp and sp % kv)):
            self.error(JOB + "ulyssesSequenceParallelSize",
                       f"is {sp}, which does not split {s.model}'s {heads} attention heads and "
                       f"{kv} KV heads (verl's Ulysses needs heads % size == 0 and KV heads % "
                       "size == 0 or size % KV heads == 0); use "
                       + divisors_text(heads, kv, replicate_kv=True))

    def revisions(self) -> None:
        s = self.spec
        if s.model_revision is None:
            self.warning(JOB + "modelRevision", f"is not set: {s.model} is staged from the Hub's "
                         "current main the first time and that copy is kept; pin a commit sha so "
                         "a rerun trains the same weights")
        if s.dataset_revision is None:
            self.warning(JOB + "datasetRevision", f"is not set: {s.dataset} is staged from the "
                         "Hub's current main the first time and that copy is kept; pin a commit "
                         "sha of openai/gsm8k")

    def dataset(self) -> None:
        s = self.spec
        if s.dataset == "gsm8k" and s.prompts_per_step > GSM8K_TRAINING_ROWS:
            self.error(JOB + "promptsPerStep",
                       f"is {s.prompts_per_step}, more than GSM8K's {GSM8K_TRAINING_ROWS} training "
                       f"rows (the train split less {GSM8K_VALIDATION_ROWS} held out for "
                       "validation): an epoch would have no step; lower it")
