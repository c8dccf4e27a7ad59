"""Preflight: every rule of shared/reference/grpo-frameworks.md checked on a GRPO spec before
anything is created or submitted.

    check(spec) -> list[Finding]
    python -m jobs preflight --stack STACK [--config-file FILE]

A Finding names the key as a user writes it (``gke-grpo:job.microBatchSizePerGpu``) and says what
to change. Errors stop a run; warnings are printed and do not. ``check`` is pure and fast (no
verl, no hydra, no network: the verl key snapshot and the NeMo RL key list are committed files
read once), because it also runs inside ``pulumi up`` before any resource is registered.

What is checked:
- both frameworks: value ranges (learning rate > 0, 0 < rollout gpu memory utilization <= 0.95,
  KL coefficient >= 0, lengths, batch sizes and steps > 0); generations per prompt > 1;
  checkpoints on (cadence > 0, keep >= 1); prompt + response within the model's context;
  one prompts-per-step batch fits in GSM8K's training rows (the train split less the held-out
  validation slice); rollout tensor parallelism within the run's GPUs; checkpoint size x the
  most checkpoints that can accumulate (jobs/checkpoints.py checkpoints_on_disk) against the
  Lustre capacity (warning); model and dataset revisions pinned (warning when absent);
  tensor-parallel sizes divide the model's attention and KV heads (data/model-shapes.yaml):
  vLLM rollout TP as vLLM's Qwen2Attention requires (heads % TP == 0; KV heads % TP == 0, or
  TP % KV heads == 0 when TP exceeds them), NeMo RL training TP both exactly
  (nemo_rl/models/dtensor/parallelize.py, v0.5.0), verl Ulysses as verl's monkey_patch.py;
  gke-grpo:job.extraOverrides: syntax, keys the stack config owns, keys unknown to the
  framework's config (verl: data/verl-<version>-config.json; NeMo RL:
  data/nemo-rl-0.5.0-keys.txt, ``+key=`` for new keys).
- verl (N = nodes x GPUs per node): rollout engine vllm | sglang; (prompts x n) % N == 0;
  prompts >= mini batch; mini x n / N a positive integer divisible by the per-GPU micro batch
  (verl floors silently: exactness required); N % rollout TP == 0; the rollout TP fits in a node
  or is a multiple of the GPUs per node; generation colocated (no generation nodes); KL type one
  of verl's; Ulysses sequence parallelism needs sequence packing (use_remove_padding) and
  divides the GPUs; no training TP or sequence parallelism (FSDP only); with a dynamic batch
  size the micro-batch rule is verl's token budget instead (maxTokensPerGpu >= prompt +
  response, verl/utils/seqlen_balancing.py).
- NeMo RL: engine vllm; B = prompts x generations divisible by the global batch; training GPUs
  (all, or the nodes left by separate generation) / (TP x CP x PP) an integer dp; global batch
  % dp == 0; without sequence packing or dynamic batching (global batch / dp) % micro batch == 0;
  vLLM GPUs % (vLLM TP x PP) == 0; megatron xor dtensor; separate generation leaves training
  nodes; generation nodes only when generation is not colocated; dynamic batching excludes
  sequence packing (nemo_rl/models/policy/lm_policy.py, v0.5.0); no Ulysses, no
  maxTokensPerGpu (verl keys); W&B is off (warning when a key is configured).
- GPU memory (jobs/memory_plan.py, docs/memory-planner.md): the estimated peak per GPU of each
  colocated phase; a warning above 85 %, an error above 100 % (a warning with
  gke-grpo:job.memoryCheck: warn); vLLM's KV cache must hold one whole sequence.

Exit codes of ``main``: 0 no errors (warnings may be printed); 2 the stack config is invalid or
unreadable, or preflight found errors.
"""

from __future__ import annotations

import argparse
import difflib
import functools
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from jobs.checkpoints import checkpoints_on_disk
from jobs.credentials import looks_like_secret_name, looks_like_secret_value, redact
from jobs.prepare import GSM8K_TRAINING_ROWS, GSM8K_VALIDATION_ROWS
from jobs.render import NEMO_RL_KL_TYPES, override_key, owned_keys

if TYPE_CHECKING:
    from jobs.model_shapes import ModelShape
    from jobs.spec import GrpoSpec

ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = ROOT / "data"
NEMO_RL_KEYS_VERSION = "0.5.0"
NEMO_RL_KEYS_FILE = DATA_DIR / f"nemo-rl-{NEMO_RL_KEYS_VERSION}-keys.txt"

JOB = "gke-grpo:job."
GPU_NODES = "gke-grpo:gpu.nodes"
GPU_TYPE = "gke-grpo:gpu.type"
LUSTRE_CAPACITY = "gke-grpo:storage.lustre.capacityGib"
EXTRA = JOB + "extraOverrides"

# Highest rollout gpu_memory_utilization accepted: vLLM's fraction is of TOTAL GPU memory
# (grpo-frameworks.md), and the colocated trainer needs what is left.
MAX_GPU_MEMORY_UTILIZATION = 0.95
VERL_ENGINES = ("vllm", "sglang")
NEMO_RL_ENGINES = ("vllm",)
# verl 0.7.1 verl/trainer/ppo/core_algos.py kl_penalty_forward (read 2026-12-01 from the
# installed package): the estimators actor.kl_loss_type accepts.
VERL_KL_TYPES = ("kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3")
# Checkpoint with optimizer state: fp32 master weights + AdamW moments + bf16 weights, about 12
# bytes per parameter (grpo-frameworks.md: "A 32B checkpoint with optimizer state is about
# 390 GB (12 bytes x params)").
CHECKPOINT_BYTES_PER_PARAM = 12


# Parameters, context and head counts come from data/model-shapes.yaml (jobs/model_shapes.py);
# a model not in it is not checked for them (a warning says so).


from jobs.findings import Finding  # noqa: E402 - one module, no circle with jobs.memory_plan


# ------------------------------------------------------------------------------------------------
# Key lists (committed files, read once)
# ------------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def verl_keys(version: str) -> frozenset[str]:
    """Dotted keys of verl's composed ppo_trainer config (tools/verl_snapshot.py)."""
    path = DATA_DIR / f"verl-{version}-config.json"
    return frozenset(json.loads(path.read_text())["keys"])


@functools.lru_cache(maxsize=None)
def nemo_rl_keys(path: Path = NEMO_RL_KEYS_FILE) -> dict[str, str]:
    """NeMo RL key -> its default (JSON text) in v0.5.0's grpo_math_1B.yaml
    (tools/nemo_rl_keys.py)."""
    keys: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if line and not line.startswith("#"):
            key, default = line.split("\t")
            keys[key] = default
    return keys


def _prefixes(keys) -> frozenset[str]:
    out: set[str] = set()
    for key in keys:
        parts = key.split(".")
        out.update(".".join(parts[:i]) for i in range(1, len(parts)))
    return frozenset(out)


@functools.lru_cache(maxsize=None)
def _verl_prefixes(version: str) -> frozenset[str]:
    return _prefixes(verl_keys(version))


@functools.lru_cache(maxsize=None)
def _nemo_rl_prefixes() -> frozenset[str]:
    return _prefixes(nemo_rl_keys())


def _suggest(key: str, known) -> str:
    match = difflib.get_close_matches(key, list(known), n=1, cutoff=0.8)
    return f" (did you mean {match[0]}?)" if match else ""


# ------------------------------------------------------------------------------------------------
# The checks
# ------------------------------------------------------------------------------------------------


class _Checker:
    def __init__(self, spec: "GrpoSpec"):
        self.spec = spec
        self.findings: list[Finding] = []

    def error(self, key: str, message: str) -> None:
        self.findings.append(Finding("error", key, message))

    def warning(self, key: str, message: str) -> None:
        self.findings.append(Finding("warning", key, message))

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
        from jobs.model_shapes import shape_for  # PyYAML: only when a check runs

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
            one = CHECKPOINT_BYTES_PER_PARAM * shape.parameters
            count = checkpoints_on_disk(s.framework, s.checkpoints_to_keep)
            need = one * count
            capacity = s.storage_capacity_gib * 2**30
            if need > capacity:
                self.warning(LUSTRE_CAPACITY,
                             f"up to {count} checkpoints of {s.model} can be on disk at once "
                             f"(checkpointsToKeep {s.checkpoints_to_keep}, see jobs/checkpoints.py; "
                             f"~{one / 1e9:.0f} GB each with optimizer state): ~{need / 2**30:,.0f} "
                             f"GiB, more than the {s.storage_capacity_gib:,} GiB Lustre instance; "
                             "lower gke-grpo:job.checkpointsToKeep or raise the capacity")
        self.heads(shape)

    def heads(self, shape: "ModelShape") -> None:
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
                       + _divisors_text(heads, kv, replicate_kv=True))
        training_tp = s.training_tensor_parallel_size
        if s.framework == "nemo-rl" and training_tp > 1 and (heads % training_tp or kv % training_tp):
            self.error(JOB + "trainingTensorParallelSize",
                       f"is {training_tp}, which does not divide {s.model}'s {heads} attention "
                       f"heads and {kv} KV heads (NeMo RL's DTensor plan shards both); use "
                       + _divisors_text(heads, kv, replicate_kv=False))
        sp = s.ulysses_sequence_parallel_size
        if s.framework == "verl" and sp > 1 and (heads % sp or (kv % sp and sp % kv)):
            self.error(JOB + "ulyssesSequenceParallelSize",
                       f"is {sp}, which does not split {s.model}'s {heads} attention heads and "
                       f"{kv} KV heads (verl's Ulysses needs heads % size == 0 and KV heads % "
                       "size == 0 or size % KV heads == 0); use "
                       + _divisors_text(heads, kv, replicate_kv=True))

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

    def rollout_tp(self) -> bool:
        s = self.spec
        tp, n = s.rollout_tensor_parallel_size, s.total_gpus
        if tp > n:
            self.error(JOB + "rolloutTensorParallelSize",
                       f"is {tp}: one rollout replica asks for more GPUs than the run has "
                       f"({n} = {s.nodes} nodes x {s.gpus_per_node}); lower it or add nodes "
                       f"({GPU_NODES})")
            return False
        return True

    # ---- verl ---------------------------------------------------------------------------------
    def verl(self, usable: bool) -> None:
        s = self.spec
        if s.rollout_engine not in VERL_ENGINES:
            self.error(JOB + "rolloutEngine", f"is {s.rollout_engine!r}; verl rolls out with "
                       + " or ".join(repr(e) for e in VERL_ENGINES))
        if s.kl_loss_type not in VERL_KL_TYPES:
            self.error(JOB + "klLossType", f"is {s.kl_loss_type!r}; verl's KL estimators are "
                       + ", ".join(VERL_KL_TYPES) + " (GRPO recipes use low_var_kl)")
        if not s.colocated_generation:
            self.error(JOB + "colocatedGeneration", "is false; verl's FSDP GRPO here rolls out on "
                       "the training GPUs (hybrid engine): set it true (separate generation nodes "
                       "are a NeMo RL option)")
        if s.generation_nodes:
            self.error(JOB + "generationNodes", f"is {s.generation_nodes}; verl rolls out on the "
                       "training GPUs: set it to 0")
        if s.training_tensor_parallel_size != 1:
            self.error(JOB + "trainingTensorParallelSize",
                       f"is {s.training_tensor_parallel_size}; verl's FSDP actor has no tensor "
                       "parallelism: set it to 1 (ulyssesSequenceParallelSize splits long "
                       "sequences instead)")
        if s.sequence_parallel:
            self.error(JOB + "sequenceParallel", "is true; it is NeMo RL's DTensor sequence "
                       "parallelism: set it false (verl: ulyssesSequenceParallelSize)")
        sp = s.ulysses_sequence_parallel_size
        if sp < 1:
            self.error(JOB + "ulyssesSequenceParallelSize", f"is {sp}; set 1 or more")
            usable = False
        elif sp > 1 and not s.sequence_packing:
            self.error(JOB + "ulyssesSequenceParallelSize",
                       f"is {sp} while sequencePacking is false; verl's Ulysses sequence "
                       "parallelism needs use_remove_padding: set sequencePacking true")
        if s.max_tokens_per_gpu is not None:
            if not s.dynamic_batch_size:
                self.error(JOB + "maxTokensPerGpu", f"is {s.max_tokens_per_gpu} while "
                           "dynamicBatchSize is false; set dynamicBatchSize true or drop it")
            elif s.max_tokens_per_gpu < s.max_prompt_length + s.max_response_length:
                self.error(JOB + "maxTokensPerGpu",
                           f"is {s.max_tokens_per_gpu}, less than one sequence "
                           f"(maxPromptLength + maxResponseLength = "
                           f"{s.max_prompt_length + s.max_response_length}); verl packs whole "
                           "sequences into a micro batch: raise it")
        if not usable:
            return
        n_gpus = s.total_gpus
        n = s.generations_per_prompt
        if (s.prompts_per_step * n) % n_gpus:
            self.error(JOB + "promptsPerStep",
                       f"promptsPerStep x generationsPerPrompt = {s.prompts_per_step} x {n} = "
                       f"{s.prompts_per_step * n} responses per step do not split evenly over "
                       f"{n_gpus} GPUs; make promptsPerStep x generationsPerPrompt a multiple of "
                       f"{n_gpus}")
        if s.prompts_per_step < s.mini_batch_size:
            self.error(JOB + "miniBatchSize",
                       f"is {s.mini_batch_size}, more than promptsPerStep ({s.prompts_per_step}); "
                       "verl's mini batch counts prompts: set it to promptsPerStep or a divisor")
        per_gpu, rest = divmod(s.mini_batch_size * n, n_gpus)
        if rest or per_gpu < 1:
            self.error(JOB + "miniBatchSize",
                       f"miniBatchSize x generationsPerPrompt / GPUs = {s.mini_batch_size} x {n} "
                       f"/ {n_gpus} is not a positive integer; make miniBatchSize x "
                       f"generationsPerPrompt a multiple of {n_gpus}")
        elif not s.dynamic_batch_size and per_gpu % s.micro_batch_size_per_gpu:
            self.error(JOB + "microBatchSizePerGpu",
                       f"is {s.micro_batch_size_per_gpu}, which does not divide the per-GPU mini "
                       f"batch of {per_gpu} (miniBatchSize x generationsPerPrompt / GPUs); use a "
                       f"divisor of {per_gpu}")
        if self.rollout_tp():
            tp, gpn = s.rollout_tensor_parallel_size, s.gpus_per_node
            if n_gpus % tp:
                self.error(JOB + "rolloutTensorParallelSize",
                           f"is {tp}, which does not divide the run's {n_gpus} GPUs; use a "
                           f"divisor of {n_gpus}")
            elif tp > gpn and tp % gpn:
                self.error(JOB + "rolloutTensorParallelSize",
                           f"is {tp}: a rollout replica must fit in one node ({gpn} GPUs) or span "
                           f"whole nodes; use a divisor or a multiple of {gpn}")
        if sp > 1 and n_gpus % sp:
            self.error(JOB + "ulyssesSequenceParallelSize",
                       f"is {sp}, which does not divide the run's {n_gpus} GPUs; use a divisor "
                       f"of {n_gpus}")

    # ---- NeMo RL ------------------------------------------------------------------------------
    def nemo_rl(self, usable: bool, overrides: dict[str, str]) -> None:
        s = self.spec
        if s.rollout_engine not in NEMO_RL_ENGINES:
            self.error(JOB + "rolloutEngine", f"is {s.rollout_engine!r}; NeMo RL 0.5.0 GRPO "
                       "generates with 'vllm' here")
        if s.kl_loss_type not in NEMO_RL_KL_TYPES:
            self.error(JOB + "klLossType", f"is {s.kl_loss_type!r}; NeMo RL's reference-policy "
                       "KL estimators are k1, k2, k3 (loss_fn.reference_policy_kl_type); "
                       + ", ".join(f"{k} = {v}" for k, v in NEMO_RL_KL_TYPES.items()
                                   if k not in ("k1", "k2", "k3")))
        if s.wandb:
            self.warning("gke-grpo:wandbApiKey", "is set but W&B stays off for NeMo RL: NeMo RL "
                         "copies the driver's whole environment into the job's runtime env "
                         "(visible through Ray's state API), so the head holds no W&B key; "
                         "TensorBoard logs are written instead")
        if s.ulysses_sequence_parallel_size != 1:
            self.error(JOB + "ulyssesSequenceParallelSize",
                       f"is {s.ulysses_sequence_parallel_size}; Ulysses is verl's: set it to 1 "
                       "(NeMo RL: trainingTensorParallelSize with sequenceParallel)")
        if s.max_tokens_per_gpu is not None:
            self.error(JOB + "maxTokensPerGpu", f"is {s.max_tokens_per_gpu}; it is verl's token "
                       "budget: drop it (NeMo RL sizes dynamic batches from the micro batch x the "
                       "sequence length)")
        if s.dynamic_batch_size and s.sequence_packing:
            self.error(JOB + "sequencePacking", "is true while dynamicBatchSize is true; NeMo RL "
                       "allows only one of them (\"Dynamic Batching is exclusive of Sequence "
                       "Packing\"): set one false")
        if s.training_tensor_parallel_size < 1:
            self.error(JOB + "trainingTensorParallelSize",
                       f"is {s.training_tensor_parallel_size}; set 1 or more")
            usable = False
        if s.colocated_generation and s.generation_nodes:
            self.error(JOB + "generationNodes", f"is {s.generation_nodes} while "
                       "colocatedGeneration is true; set it to 0, or set colocatedGeneration "
                       "false to give generation its own nodes")
        gen_nodes = 0
        if not s.colocated_generation:
            if s.generation_nodes < 1:
                self.error(JOB + "generationNodes", "is 0 while colocatedGeneration is false; "
                           "give generation 1 or more nodes")
                usable = False
            elif s.generation_nodes > s.nodes:
                self.error(JOB + "generationNodes",
                           f"is {s.generation_nodes}: more GPU nodes than the run has "
                           f"({GPU_NODES} = {s.nodes}); lower it or add nodes")
                usable = False
            elif s.generation_nodes == s.nodes:
                self.error(JOB + "generationNodes",
                           f"is {s.generation_nodes}, all of the run's {s.nodes} nodes: separate "
                           "generation must leave nodes for training; lower it or add nodes")
                usable = False
            else:
                gen_nodes = s.generation_nodes
        if not usable:
            return
        get = functools.partial(_override_int, overrides)
        megatron = _as_bool(overrides.get("policy.megatron_cfg.enabled", "False"))
        dtensor = _as_bool(overrides.get("policy.dtensor_cfg.enabled", "True"))
        if megatron == dtensor:
            self.error(EXTRA, "NeMo RL trains with exactly one backend: set "
                       "policy.megatron_cfg.enabled and policy.dtensor_cfg.enabled to opposite "
                       "values")
            return
        if megatron:
            tp = get("policy.megatron_cfg.tensor_model_parallel_size", 1)
            pp = get("policy.megatron_cfg.pipeline_model_parallel_size", 1)
            cp = get("policy.megatron_cfg.context_parallel_size", 1)
        else:
            tp = s.training_tensor_parallel_size
            pp = 1
            cp = get("policy.dtensor_cfg.context_parallel_size", 1)
        if min(tp, pp, cp) < 1:
            self.error(EXTRA, "training parallel sizes (TP, PP, CP) must be 1 or more")
            return
        train_gpus = (s.nodes - gen_nodes) * s.gpus_per_node
        gen_gpus = gen_nodes * s.gpus_per_node if gen_nodes else s.total_gpus
        batch = s.prompts_per_step * s.generations_per_prompt
        gbs = s.mini_batch_size
        if batch % gbs:
            self.error(JOB + "miniBatchSize",
                       f"is {gbs} (NeMo RL's policy.train_global_batch_size, in samples), which "
                       f"does not divide the {batch} samples of a step (promptsPerStep x "
                       f"generationsPerPrompt = {s.prompts_per_step} x {s.generations_per_prompt});"
                       f" use a divisor of {batch}")
        model_parallel = tp * pp * cp
        if train_gpus % model_parallel:
            self.error(EXTRA, f"training TP x PP x CP = {model_parallel} does not divide the "
                       f"{train_gpus} training GPUs; choose sizes whose product divides it")
        else:
            dp = train_gpus // model_parallel
            if gbs % dp:
                self.error(JOB + "miniBatchSize",
                           f"is {gbs}, not a multiple of the data-parallel size {dp} ({train_gpus} "
                           f"training GPUs / TP x PP x CP {model_parallel}); use a multiple of {dp}")
            else:
                if not s.sequence_packing and not s.dynamic_batch_size and (gbs // dp) % s.micro_batch_size_per_gpu:
                    self.error(JOB + "microBatchSizePerGpu",
                               f"is {s.micro_batch_size_per_gpu}, which does not divide the "
                               f"per-rank batch of {gbs // dp} (miniBatchSize / data-parallel "
                               f"size {dp}) with sequence packing and dynamic batching off; use a "
                               f"divisor of {gbs // dp}")
        if self.rollout_tp():
            vllm_pp = get("policy.generation.vllm_cfg.pipeline_parallel_size", 1)
            per_replica = s.rollout_tensor_parallel_size * max(vllm_pp, 1)
            if gen_gpus % per_replica:
                self.error(JOB + "rolloutTensorParallelSize",
                           f"vLLM TP x PP = {per_replica} does not divide the {gen_gpus} "
                           "generation GPUs; use a divisor")

    # ---- extra overrides ------------------------------------------------------------------------
    def extras(self) -> dict[str, str]:
        """Syntax, ownership and known keys of gke-grpo:job.extraOverrides; returns the plain
        key -> value map for the rules that read them."""
        s = self.spec
        values: dict[str, str] = {}
        owned = owned_keys(s)
        if s.framework == "verl":
            try:
                known = verl_keys(s.framework_version)
            except FileNotFoundError:
                self.error(EXTRA, f"no verl key snapshot data/verl-{s.framework_version}-config.json"
                           " to check overrides against: run python -m tools.verl_snapshot")
                return values
            prefixes = _verl_prefixes(s.framework_version)
            where = f"verl {s.framework_version}'s ppo_trainer config"
        else:
            if s.framework_version != NEMO_RL_KEYS_VERSION:
                self.warning(EXTRA, f"NeMo RL {s.framework_version}: overrides are checked against "
                             f"the {NEMO_RL_KEYS_VERSION} key list ({NEMO_RL_KEYS_FILE.name})")
            known = frozenset(nemo_rl_keys())
            prefixes = _nemo_rl_prefixes()
            where = "NeMo RL 0.5.0's grpo_math_1B.yaml (data/nemo-rl-0.5.0-keys.txt)"
        for override in s.extra_overrides:
            if _carries_credential(override):
                continue
            prefix, key = override_key(override)
            if ("=" not in override and prefix != "~") or not key or " " in key:
                self.error(EXTRA, f"{override!r} is not a key=value override")
                continue
            if key in owned:
                self.error(EXTRA, f"{key} is set from the stack config ({override!r}); change "
                           "the gke-grpo:job or gke-grpo:gpu value that owns it instead")
                continue
            exists = key in known or key in prefixes
            if prefix == "+":
                if exists:
                    self.error(EXTRA, f"{key} already exists in {where}: drop the '+' "
                               f"({override!r})")
                continue
            if prefix == "++":
                continue
            if not exists:
                self.error(EXTRA, f"{key} is not a key of {where}{_suggest(key, known)}; "
                           "fix the spelling, or write +" + key + "=... to add a new key")
                continue
            if prefix == "":
                values[key] = override.split("=", 1)[1]
        return values

    def credentials_in_overrides(self) -> None:
        """No credential in gke-grpo:job.extraOverrides: they end up in the RayJob's entrypoint,
        which the RayJob object and the Ray dashboard show to anyone who can read them. The
        override is named by position and key, never echoed."""
        for i, override in enumerate(self.spec.extra_overrides):
            if _carries_credential(override):
                key = redact(str(override).split("=", 1)[0])
                self.error(EXTRA, f"item {i} ({key}=...) carries a credential: overrides reach "
                           "the RayJob's entrypoint, which the dashboard shows; give secrets to "
                           "the pods as Kubernetes Secrets (gke-grpo:hfToken, gke-grpo:wandbApiKey)")

    def run(self) -> list[Finding]:
        s = self.spec
        self.credentials_in_overrides()
        usable = self.values()
        self.checkpoints()
        self.dataset()
        self.revisions()
        if usable:
            self.model()
        overrides = self.extras()
        if s.framework == "verl":
            self.verl(usable)
        elif s.framework == "nemo-rl":
            self.nemo_rl(usable, overrides)
        else:
            self.error(JOB + "framework", f"is {s.framework!r}; one of 'verl', 'nemo-rl'")
        if usable and s.framework in ("verl", "nemo-rl"):
            from jobs.memory_plan import memory_findings   # GPU memory (docs/memory-planner.md)
            self.findings.extend(memory_findings(s, s.memory_check))
        return self.findings


def _carries_credential(override: str) -> bool:
    text = str(override)
    key = text.split("=", 1)[0]
    return looks_like_secret_value(text) or (
        "=" in text and looks_like_secret_name(key) and not text.split("=", 1)[1].startswith("$")
        and text.split("=", 1)[1].strip().lower() not in ("", "null", "none", "~"))


def _divisors_text(heads: int, kv: int, *, replicate_kv: bool) -> str:
    fits = [tp for tp in range(1, heads + 1) if heads % tp == 0 and (
        kv % tp == 0 if kv >= tp or not replicate_kv else tp % kv == 0)]
    return "one of " + ", ".join(str(tp) for tp in fits)


def _as_bool(value: str) -> bool:
    return str(value).strip().lower() in ("true", "1", "yes")


def _as_int(value: str) -> Optional[int]:
    try:
        return int(str(value).strip())
    except ValueError:
        return None


def _override_int(overrides: dict[str, str], key: str, default: int) -> int:
    value = _as_int(overrides[key]) if key in overrides else default
    return default if value is None else value


def check(spec: "GrpoSpec") -> list[Finding]:
    """Every preflight rule on ``spec``: errors first, then warnings, in rule order."""
    findings = _Checker(spec).run()
    return [f for f in findings if f.level == "error"] + [f for f in findings if f.level == "warning"]


def errors(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.level == "error"]


# ------------------------------------------------------------------------------------------------
# CLI: python -m jobs preflight --stack STACK [--config-file FILE]
# ------------------------------------------------------------------------------------------------

EXIT_OK, EXIT_FAILED = 0, 2


def main(argv: Optional[list[str]] = None) -> int:
    """Load and validate the stack config, build the spec, print findings. Exit 0 when there is
    no error (warnings allowed), 2 on an invalid or unreadable config or a preflight error."""
    parser = argparse.ArgumentParser(prog="python -m jobs preflight",
                                     description="Check a stack's GRPO job against the rules of "
                                                 "verl / NeMo RL before anything runs.")
    parser.add_argument("--stack", required=True, help="stack name: reads Pulumi.<stack>.yaml")
    parser.add_argument("--config-file", type=Path, default=None,
                        help="a stack file to read instead of Pulumi.<stack>.yaml")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return EXIT_FAILED if exit_.code else EXIT_OK

    from jobs.stack_outputs import StackError, offline_spec

    # The stack file's spec, from components/run_spec.py run as a subprocess: jobs/ imports
    # nothing of components/ (the layers of .importlinter).
    try:
        spec = offline_spec(args.stack, args.config_file)
    except StackError as err:
        print(f"preflight: {err}", file=sys.stderr)
        return EXIT_FAILED
    findings = check(spec)
    for finding in findings:
        print(finding)
    from jobs.memory_plan import format_plan, plan_for_spec
    plan = plan_for_spec(spec)
    if plan is not None and not any(f.message.endswith(format_plan(plan)) for f in findings):
        print(format_plan(plan))
    failed = errors(findings)
    warnings = len(findings) - len(failed)
    print(f"preflight {args.stack}: {spec.framework} run {spec.run_id} on {spec.total_gpus} GPUs: "
          f"{len(failed)} error(s), {warnings} warning(s)")
    return EXIT_FAILED if failed else EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
