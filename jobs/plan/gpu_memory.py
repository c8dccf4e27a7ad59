"""Will it fit? Peak GPU memory per GPU of a GRPO spec, per colocated role and phase, before
anything runs (docs/memory-planner.md).

    plan_for_spec(spec) -> MemoryPlan        # phases, each a list of Terms; peak; KV check
    memory_findings(spec) -> list[Finding]   # warn above 85 % of the GPU, refuse above 100 %
    format_plan(plan) -> str                 # the breakdown preflight prints

The training estimate is calibrated on a real H200 (tools/calibrate_memory.py ->
data/memory-calibration-h200.json; tests/jobs/plan/test_gpu_memory.py requires every committed
measurement reproduced within 10 %). The per-GPU split (FSDP shards, tensor parallelism), the
phases the frameworks put on one GPU and vLLM's pool follow the frameworks' documented
behaviour and are not measured here (one GPU: no sharding); each term says which it is.

Stdlib + PyYAML (through jobs/plan/model_shapes.py): it runs in preflight and on the Ray head.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import yaml

from jobs.plan.model_shapes import ModelShape, shape_for

if TYPE_CHECKING:
    from jobs.contract.spec import GrpoSpec
    from jobs.plan.findings import Finding

GPU_MEMORY_FILE = Path(__file__).resolve().parents[2] / "data" / "gpu-memory.yaml"
GIB = 2**30
WARN_FRACTION = 0.85
MEMORY_CHECK_KEY = "gke-grpo:job.memoryCheck"
MEMORY_CHECK_MODES = ("enforce", "warn")

# ---- calibrated on one H200 (data/memory-calibration-h200.json, 2026-12-01) ---------------------
# Least-squares fits over the measured rows (docs/memory-planner.md shows the residuals):
# fp32 parameters + AdamW exp_avg + exp_avg_sq, resident between steps (12.30-12.69 bytes/param
# measured at step start = 12 + the root unit left gathered, below).
STATE_BYTES_PER_PARAM = 12
# fp32 gradients, present from backward to optimizer step.
GRAD_BYTES_PER_PARAM = 4
# torch AdamW's default foreach step allocates one fp32 temporary per parameter
# (_foreach_sqrt of exp_avg_sq): the optimizer step peaked at 20.01-20.17 bytes/param.
FOREACH_TEMP_BYTES_PER_PARAM = 4
# Logits of a training micro batch, per token per vocabulary entry: bf16 logits, their fp32
# log-softmax and its gradient (fit 12.22).
TRAIN_LOGIT_BYTES = 12.22
# Logits of a no-grad log-prob pass: bf16 logits + fp32 copy + fp32 log-softmax (fit 10.00).
LOGPROB_LOGIT_BYTES = 10.0
# Activations kept per token per layer, in bytes per hidden unit / intermediate unit:
# with gradient checkpointing (each layer's bf16 input; fit 1.82 x hidden) and without
# (fit 22.10 x hidden + 7.67 x intermediate; counting the tensors HF's Qwen2 layer saves gives
# about 20 x hidden + 8 x intermediate).
CHECKPOINTED_BYTES_PER_HIDDEN = 1.82
FULL_BYTES_PER_HIDDEN = 22.10
FULL_BYTES_PER_INTERMEDIATE = 7.67
# The root FSDP unit (the LM head, or the tied embedding) stays gathered in bf16 after a
# no-grad forward (FSDP2 does not reshard the root after forward) and the last unit's bf16
# gradient is live at the end of backward: 2 bytes x vocab x hidden each (measured within 1 %).
ROOT_BYTES_PER_PARAM = 2
# Allocations outside the model (NCCL, RNG, buffers): 70-156 MB measured.
ALLOCATOR_BASE_BYTES = 128 * 2**20
# Device memory outside PyTorch's allocator: CUDA context and libraries, per process
# (mem_get_info used - memory_reserved: 0.82-0.83 GiB measured).
CUDA_CONTEXT_BYTES = int(0.83 * GIB)

# ---- not measured here (one GPU): documented behaviour, marked as estimates ---------------------
# FSDP over N > 1 GPUs: two gathered bf16 units in flight (prefetch) plus one unit's bf16
# gradient and its fp32 reduce-scatter input: (2 x 2 + 2 + 4) bytes x the largest decoder layer.
FSDP_BUFFER_BYTES_PER_LAYER_PARAM = 10
BF16 = 2


@dataclass(frozen=True)
class GpuMemory:
    gpu_type: str
    name: str
    total_bytes: int
    measured: str | None


@lru_cache(maxsize=2)
def load_gpu_memory(path: Path | None = None) -> dict[str, GpuMemory]:
    document = yaml.safe_load((path or GPU_MEMORY_FILE).read_text(encoding="utf-8"))
    return {key: GpuMemory(gpu_type=key, name=str(row["name"]), total_bytes=int(row["total_bytes"]),
                           measured=row.get("measured"))
            for key, row in document["gpus"].items()}


@dataclass(frozen=True)
class Term:
    label: str
    bytes: float
    basis: str = "calibrated"        # calibrated (H200 fit) | arithmetic | framework | estimate


@dataclass(frozen=True)
class Phase:
    role: str                        # what shares the GPU at that moment
    terms: tuple[Term, ...]

    @property
    def total(self) -> float:
        return sum(t.bytes for t in self.terms)


@dataclass(frozen=True)
class KvCheck:
    pool_bytes: float
    weights_bytes: float
    kv_bytes: float
    kv_bytes_per_token: float
    capacity_tokens: int
    max_sequence_tokens: int
    sequences_per_replica: int
    batch_tokens_per_replica: int

    @property
    def one_sequence_fits(self) -> bool:
        return self.capacity_tokens >= self.max_sequence_tokens

    @property
    def batch_fits(self) -> bool:
        return self.capacity_tokens >= self.batch_tokens_per_replica


@dataclass(frozen=True)
class MemoryPlan:
    model: str
    gpu: GpuMemory
    framework: str
    phases: tuple[Phase, ...]
    kv: KvCheck | None
    notes: tuple[str, ...] = ()

    @property
    def peak(self) -> Phase:
        return max(self.phases, key=lambda p: p.total)

    @property
    def fraction(self) -> float:
        return self.peak.total / self.gpu.total_bytes


# ------------------------------------------------------------------------------------------------
# The calibrated training model (one FSDP actor; pure arithmetic, checked against the H200 data)
# ------------------------------------------------------------------------------------------------


def layer_parameters(shape: ModelShape) -> int:
    h, kv = shape.hidden_size, shape.kv_heads * shape.head_dim
    return 2 * h * h + h + 2 * (h * kv + kv) + 3 * h * shape.intermediate_size + 2 * h


def root_parameters(shape: ModelShape) -> int:
    """The root FSDP unit's big matrix: the LM head, or the embedding it is tied to (verl's
    apply_fsdp2 wraps each decoder layer and an untied embedding separately)."""
    return shape.vocab_size * shape.hidden_size


def activation_bytes_per_token(shape: ModelShape, checkpointing: bool, tp: int = 1) -> float:
    """Saved activations of all layers for one token. Tensor parallelism splits the
    intermediate width; the hidden-width tensors are kept whole (no sequence parallelism)."""
    if checkpointing:
        per_layer = CHECKPOINTED_BYTES_PER_HIDDEN * shape.hidden_size
    else:
        per_layer = (FULL_BYTES_PER_HIDDEN * shape.hidden_size
                     + FULL_BYTES_PER_INTERMEDIATE * shape.intermediate_size / tp)
    return shape.layers * per_layer


def actor_step_terms(shape: ModelShape, *, shards: int, tokens: int, checkpointing: bool,
                     tp: int = 1, sequence_parallel: int = 1, offload_params: bool = False,
                     offload_optimizer: bool = False) -> dict[str, tuple[Term, ...]]:
    """Per-GPU terms of one FSDP training step: 'forward_backward' and 'optimizer_step'.
    shards: GPUs over which every parameter is split (FSDP x TP); tokens: one micro batch."""
    p = shape.parameters / shards
    root = ROOT_BYTES_PER_PARAM * root_parameters(shape) / tp
    per_gpu_tokens = tokens / sequence_parallel
    params_bytes = 0 if offload_params else 4 * p
    optim_bytes = 0 if offload_optimizer else (STATE_BYTES_PER_PARAM - 4) * p
    base = [Term(f"fp32 parameters (1/{shards} each)", params_bytes),
            Term("AdamW exp_avg + exp_avg_sq (fp32)", optim_bytes),
            Term("allocator base (NCCL, buffers)", ALLOCATOR_BASE_BYTES)]
    if shards > 1:
        base.append(Term("FSDP gather/reduce buffers (2 layers in flight)",
                         FSDP_BUFFER_BYTES_PER_LAYER_PARAM * layer_parameters(shape) / tp,
                         "estimate"))
    activations = per_gpu_tokens * activation_bytes_per_token(shape, checkpointing, tp)
    logits = per_gpu_tokens * shape.vocab_size / tp * TRAIN_LOGIT_BYTES
    grads = GRAD_BYTES_PER_PARAM * p
    gathered_root = Term("root unit gathered in bf16 (LM head / tied embedding)", root)
    ckpt = "with" if checkpointing else "without"
    early = activations + logits
    late = grads + root
    if early >= late:
        backward = (Term(f"activations, {int(per_gpu_tokens):,} tokens {ckpt} checkpointing",
                         activations),
                    Term(f"logits + log-softmax, {int(per_gpu_tokens):,} tokens x "
                         f"{shape.vocab_size:,}", logits))
    else:
        backward = (Term("fp32 gradients (end of backward)", grads),
                    Term("last unit's bf16 gradient", root))
    optimizer = (Term("fp32 gradients", grads),
                 Term("AdamW foreach temporary (fp32)", FOREACH_TEMP_BYTES_PER_PARAM * p))
    if offload_optimizer:
        optimizer = (Term("fp32 gradients", grads), Term("optimizer step on CPU", 0, "framework"))
    return {
        "forward_backward": (*base, gathered_root, *backward),
        "optimizer_step": tuple(base) + optimizer,
    }


def logprob_terms(shape: ModelShape, *, shards: int, tokens: int, tp: int = 1,
                  sequence_parallel: int = 1) -> tuple[Term, ...]:
    """The transient of a no-grad log-prob forward (actor or reference) on top of what the
    model keeps resident."""
    per_gpu_tokens = tokens / sequence_parallel
    return (Term("root unit gathered in bf16", ROOT_BYTES_PER_PARAM * root_parameters(shape) / tp),
            Term(f"log-prob logits, {int(per_gpu_tokens):,} tokens x {shape.vocab_size:,}",
                 per_gpu_tokens * shape.vocab_size / tp * LOGPROB_LOGIT_BYTES))


def calibration_estimate(shape: ModelShape, tokens: int, checkpointing: bool) -> dict[str, float]:
    """What the planner predicts for one calibration row (one GPU, no sharding): the peak
    allocated bytes of each measured phase."""
    step = actor_step_terms(shape, shards=1, tokens=tokens, checkpointing=checkpointing)
    resident = (STATE_BYTES_PER_PARAM * shape.parameters + ALLOCATOR_BASE_BYTES)
    return {
        "forward_backward": sum(t.bytes for t in step["forward_backward"]),
        "optimizer_step": sum(t.bytes for t in step["optimizer_step"]),
        "logprob_forward": resident + sum(t.bytes for t in logprob_terms(shape, shards=1,
                                                                          tokens=tokens)),
    }


def reference_estimate(shape: ModelShape, tokens: int) -> float:
    """Peak allocated bytes of a bf16 reference model (one GPU) during a no-grad log-prob
    forward: its bf16 parameters, the root unit gathered, the logits."""
    return (BF16 * shape.parameters + ALLOCATOR_BASE_BYTES
            + sum(t.bytes for t in logprob_terms(shape, shards=1, tokens=tokens)))


# ------------------------------------------------------------------------------------------------
# vLLM: weights / TP and the KV cache it sizes from gpu_memory_utilization x total memory
# ------------------------------------------------------------------------------------------------


def kv_check(shape: ModelShape, gpu: GpuMemory, *, utilization: float, tp: int,
             sequences: int, replicas: int, max_sequence_tokens: int) -> KvCheck:
    pool = utilization * gpu.total_bytes
    weights = BF16 * shape.parameters / tp
    kv_heads_per_gpu = math.ceil(shape.kv_heads / tp)     # replicated when TP > KV heads
    per_token = 2 * shape.layers * kv_heads_per_gpu * shape.head_dim * BF16
    kv = pool - weights
    per_replica = math.ceil(sequences / max(replicas, 1))
    return KvCheck(pool_bytes=pool, weights_bytes=weights, kv_bytes=kv,
                   kv_bytes_per_token=per_token,
                   capacity_tokens=max(int(kv // per_token), 0),
                   max_sequence_tokens=max_sequence_tokens, sequences_per_replica=per_replica,
                   batch_tokens_per_replica=per_replica * max_sequence_tokens)


def vllm_terms(kv: KvCheck) -> tuple[Term, ...]:
    return (Term("vLLM weights (bf16 / TP)", kv.weights_bytes, "arithmetic"),
            Term("vLLM KV cache + activations (rest of its pool)", max(kv.kv_bytes, 0),
                 "framework"),
            Term("vLLM process CUDA context", CUDA_CONTEXT_BYTES))


# ------------------------------------------------------------------------------------------------
# The frameworks as jobs/plan/render.py renders them
# ------------------------------------------------------------------------------------------------


def _overrides(spec: GrpoSpec) -> dict[str, str]:
    """key -> value of what jobs/plan/render.py gives the framework (extra overrides last, so they
    win): the plan reads the parallelism, checkpointing and batch keys the trainer will see."""
    from jobs.plan.render import nemo_rl_overrides, verl_overrides

    rendered = verl_overrides(spec) if spec.framework == "verl" else nemo_rl_overrides(spec)
    values = {}
    for override in rendered:
        if "=" in override and not override.startswith("~"):
            key, value = override.split("=", 1)
            values[key.lstrip("+")] = value
    return values


def _override_bool(values: dict[str, str], key: str, default: bool) -> bool:
    value = values.get(key)
    return default if value is None else value.strip().lower() in ("true", "1", "yes")


def _override_int(values: dict[str, str], key: str, default: int) -> int:
    try:
        return int(values[key]) if key in values else default
    except ValueError:
        return default


def _override_float(values: dict[str, str], key: str, default: float) -> float:
    try:
        return float(values[key]) if key in values else default
    except ValueError:
        return default


def _phase(role: str, *groups: Iterable[Term]) -> Phase:
    terms: list[Term] = []
    for group in groups:
        terms.extend(group)
    return Phase(role, tuple(t for t in terms if t.bytes or t.basis == "framework"))


def plan_for_spec(spec: GrpoSpec, gpus: dict[str, GpuMemory] | None = None) -> MemoryPlan | None:
    """The plan of `spec`, or None when its model is not in data/model-shapes.yaml or its GPU
    type not in data/gpu-memory.yaml (preflight warns)."""
    shape = shape_for(spec.model)
    gpu = (gpus or load_gpu_memory()).get(spec.gpu_type)
    if shape is None or gpu is None or spec.total_gpus < 1:
        return None
    sequence = spec.max_prompt_length + spec.max_response_length
    values = _overrides(spec)
    if spec.framework == "verl":
        return _plan_verl(spec, shape, gpu, sequence, values)
    if spec.framework == "nemo-rl":
        return _plan_nemo_rl(spec, shape, gpu, sequence, values)
    return None


def _plan_verl(spec: GrpoSpec, shape: ModelShape, gpu: GpuMemory, sequence: int,
               values: dict[str, str]) -> MemoryPlan:
    # verl (jobs/plan/render.py): FSDP2 over every GPU, gradient checkpointing rendered on, the
    # reference model a separate bf16 FSDP module (fsdp_workers.py builds non-actor roles in
    # bf16), vLLM colocated with its weights and KV cache released between rollouts
    # (free_cache_engine / sleep mode).
    n = spec.total_gpus
    a = "actor_rollout_ref."
    sp = max(_override_int(values, a + "actor.ulysses_sequence_parallel_size", 1), 1)
    checkpointing = _override_bool(values, a + "model.enable_gradient_checkpointing", True)
    offload_params = _override_bool(values, a + "actor.fsdp_config.param_offload", False)
    offload_optim = _override_bool(values, a + "actor.fsdp_config.optimizer_offload", False)
    ref_offload = _override_bool(values, a + "ref.fsdp_config.param_offload", False)
    p = shape.parameters / n
    root = ROOT_BYTES_PER_PARAM * root_parameters(shape)
    actor_resident = (
        Term("actor fp32 parameters", 0 if offload_params else 4 * p),
        Term("actor AdamW states", 0 if offload_optim else 8 * p),
        Term("actor root unit left gathered (bf16)", root),
        Term("allocator base", ALLOCATOR_BASE_BYTES))
    ref_weights = Term(f"reference model bf16 (1/{n})", 0 if ref_offload else BF16 * p,
                       "framework")
    ref = (ref_weights, Term("reference root unit left gathered (bf16)", root))
    context = (Term("trainer CUDA context", CUDA_CONTEXT_BYTES),)
    micro = _override_int(values, a + "actor.ppo_micro_batch_size_per_gpu", spec.micro_batch_size_per_gpu)
    lp_micro = max(_override_int(values, a + "rollout.log_prob_micro_batch_size_per_gpu",
                        spec.log_prob_micro_batch_size_per_gpu),
                   _override_int(values, a + "ref.log_prob_micro_batch_size_per_gpu",
                        spec.log_prob_micro_batch_size_per_gpu))
    train_tokens, lp_tokens = micro * sequence, lp_micro * sequence
    if _override_bool(values, a + "actor.use_dynamic_bsz", False):
        # A dynamic micro batch holds up to the token budget per GPU, times the Ulysses size
        # (verl/workers/actor/dp_actor.py, 0.7.1: ppo_max_token_len_per_gpu *
        # ulysses_sequence_parallel_size); the log-prob passes follow the actor's budget.
        budget = _override_int(values, a + "actor.ppo_max_token_len_per_gpu", 16384) * sp
        train_tokens = lp_tokens = max(budget, sequence)
    step = actor_step_terms(shape, shards=n, tokens=train_tokens,
                            checkpointing=checkpointing, sequence_parallel=sp,
                            offload_params=offload_params, offload_optimizer=offload_optim)
    lp = logprob_terms(shape, shards=n, tokens=lp_tokens, sequence_parallel=sp)
    tp = max(_override_int(values, a + "rollout.tensor_model_parallel_size",
                  spec.rollout_tensor_parallel_size), 1)
    utilization = _override_float(values, a + "rollout.gpu_memory_utilization",
                         spec.rollout_gpu_memory_utilization)
    kv = kv_check(shape, gpu, utilization=utilization, tp=tp,
                  sequences=spec.prompts_per_step * spec.generations_per_prompt,
                  replicas=max(n // max(tp, 1), 1), max_sequence_tokens=sequence)
    asleep = (Term("vLLM asleep (weights and KV cache released)", 0, "framework"),
              Term("vLLM process CUDA context", CUDA_CONTEXT_BYTES))
    phases = (
        _phase("rollout: vLLM + resident actor and reference", actor_resident, ref, context,
               vllm_terms(kv)),
        # The reference's pass (the later one): the actor's root is left gathered by its own
        # pass, the reference gathers its root (in lp) and holds its logits.
        _phase("log-prob pass (reference, after the actor's) + vLLM asleep", actor_resident,
               (ref_weights,), lp, context, asleep),
        _phase("actor forward+backward + reference + vLLM asleep", step["forward_backward"], ref,
               context, asleep),
        _phase("actor optimizer step + reference + vLLM asleep", step["optimizer_step"], ref,
               context, asleep),
    )
    return MemoryPlan(spec.model, gpu, "verl", phases, kv)


def _plan_nemo_rl(spec: GrpoSpec, shape: ModelShape, gpu: GpuMemory, sequence: int,
                  values: dict[str, str]) -> MemoryPlan:
    # NeMo RL (jobs/plan/render.py: DTensor policy unless megatron_cfg is enabled): FSDP2 x TP over
    # the training GPUs; colocated generation moves the policy's weights and optimizer to the
    # CPU before vLLM generates (dtensor_policy_worker_v2 offload_before_refit /
    # offload_after_refit) and puts vLLM to sleep for training; the reference policy's weights
    # are held in CPU memory and swapped in for its log-probs.
    notes = []
    if _override_bool(values, "policy.megatron_cfg.enabled", False):
        notes.append("policy.megatron_cfg.enabled: the Megatron backend is not modelled; the "
                     "DTensor estimate is shown instead")
        tp = _override_int(values, "policy.megatron_cfg.tensor_model_parallel_size", 1)
        checkpointing = _override_bool(values, "policy.megatron_cfg.activation_checkpointing", False)
    else:
        tp = _override_int(values, "policy.dtensor_cfg.tensor_parallel_size", 1)
        checkpointing = _override_bool(values, "policy.dtensor_cfg.activation_checkpointing", False)
    tp = max(tp, 1)
    cpu_offload = _override_bool(values, "policy.dtensor_cfg.cpu_offload", False)
    gen_nodes = 0 if spec.colocated_generation else spec.generation_nodes
    train_gpus = max((spec.nodes - gen_nodes) * spec.gpus_per_node, 1)
    gen_gpus = gen_nodes * spec.gpus_per_node if gen_nodes else spec.total_gpus
    cp = max(_override_int(values, "policy.dtensor_cfg.context_parallel_size", 1), 1)
    sequence = _override_int(values, "policy.max_total_sequence_length", sequence)
    micro = _override_int(values, "policy.train_micro_batch_size", spec.micro_batch_size_per_gpu)
    lp_micro = _override_int(values, "policy.logprob_batch_size", spec.log_prob_micro_batch_size_per_gpu)
    step = actor_step_terms(shape, shards=train_gpus, tokens=micro * sequence,
                            checkpointing=checkpointing, tp=tp, sequence_parallel=cp,
                            offload_params=cpu_offload, offload_optimizer=cpu_offload)
    p = shape.parameters / train_gpus
    resident = (Term("policy fp32 parameters", 0 if cpu_offload else 4 * p),
                Term("policy AdamW states", 0 if cpu_offload else 8 * p),
                Term("allocator base", ALLOCATOR_BASE_BYTES))
    lp = logprob_terms(shape, shards=train_gpus, tokens=lp_micro * sequence, tp=tp,
                       sequence_parallel=cp)
    context = (Term("policy worker CUDA context", CUDA_CONTEXT_BYTES),)
    g = "policy.generation.vllm_cfg."
    vtp = max(_override_int(values, g + "tensor_parallel_size", spec.rollout_tensor_parallel_size), 1)
    vllm_pp = max(_override_int(values, g + "pipeline_parallel_size", 1), 1)
    utilization = _override_float(values, g + "gpu_memory_utilization", spec.rollout_gpu_memory_utilization)
    kv = kv_check(shape, gpu, utilization=utilization, tp=vtp * vllm_pp,
                  sequences=spec.prompts_per_step * spec.generations_per_prompt,
                  replicas=max(gen_gpus // max(vtp * vllm_pp, 1), 1), max_sequence_tokens=sequence)
    ref = (Term("reference policy weights (held on the CPU, swapped in)", 0, "framework"),)
    if spec.colocated_generation:
        asleep = (Term("vLLM asleep (weights and KV cache released)", 0, "framework"),
                  Term("vLLM process CUDA context", CUDA_CONTEXT_BYTES))
        offloaded = (Term("policy weights + optimizer offloaded to the CPU", 0, "framework"),)
        phases = (
            _phase("generation: vLLM (policy offloaded)", offloaded, context, vllm_terms(kv)),
            _phase("log-prob pass (policy or reference) + vLLM asleep", resident, ref, lp,
                   context, asleep),
            _phase("policy forward+backward + vLLM asleep", step["forward_backward"], context,
                   asleep),
            _phase("policy optimizer step + vLLM asleep", step["optimizer_step"], context, asleep),
        )
    else:
        phases = (
            _phase("generation GPUs: vLLM", vllm_terms(kv)),
            _phase("training GPUs: log-prob pass", resident, ref, lp, context),
            _phase("training GPUs: forward+backward", step["forward_backward"], context),
            _phase("training GPUs: optimizer step", step["optimizer_step"], context),
        )
    return MemoryPlan(spec.model, gpu, "nemo-rl", phases, kv, tuple(notes))


# ------------------------------------------------------------------------------------------------
# Findings and the breakdown
# ------------------------------------------------------------------------------------------------


def _gib(value: float) -> str:
    return f"{value / GIB:,.1f} GiB"


def format_plan(plan: MemoryPlan) -> str:
    gpu = plan.gpu
    lines = [f"GPU memory plan: {plan.model} ({plan.framework}) on {gpu.name} "
             f"({_gib(gpu.total_bytes)} per GPU; estimate, docs/memory-planner.md)"]
    for phase in plan.phases:
        mark = "  <- peak" if phase is plan.peak else ""
        lines.append(f"  {phase.role}: {_gib(phase.total)} "
                     f"({phase.total / gpu.total_bytes:.0%}){mark}")
        for term in phase.terms:
            basis = "" if term.basis == "calibrated" else f" [{term.basis}]"
            lines.append(f"      {_gib(term.bytes):>11}  {term.label}{basis}")
    if plan.kv:
        kv = plan.kv
        lines.append(f"  vLLM KV cache: {_gib(kv.kv_bytes)} per GPU = {kv.capacity_tokens:,} "
                     f"tokens; a rollout replica holds {kv.sequences_per_replica:,} sequences x "
                     f"{kv.max_sequence_tokens:,} = {kv.batch_tokens_per_replica:,} tokens"
                     + ("" if kv.batch_fits else " (more than the cache: vLLM runs them in waves)"))
    lines.extend(f"  note: {n}" for n in plan.notes)
    return "\n".join(lines)


def _key_to_change(plan: MemoryPlan) -> str:
    labels = " ".join(t.label for t in plan.peak.terms if t.bytes >= 0.25 * plan.peak.total)
    if "vLLM" in labels:
        return "gke-grpo:job.rolloutGpuMemoryUtilization"
    if "activations" in labels or "logits" in labels:
        return ("gke-grpo:job.logProbMicroBatchSizePerGpu" if "log-prob" in labels
                else "gke-grpo:job.microBatchSizePerGpu")
    return "gke-grpo:gpu.nodes"


def memory_findings(spec: GrpoSpec, memory_check: str = "enforce") -> list[Finding]:
    """Preflight findings of the plan: a warning above 85 % of the GPU's memory, an error above
    100 % (a warning when gke-grpo:job.memoryCheck is 'warn'), each with the breakdown."""
    from jobs.plan.findings import Finding

    if memory_check not in MEMORY_CHECK_MODES:
        return [Finding("error", MEMORY_CHECK_KEY, f"is {memory_check!r}; one of "
                        + ", ".join(repr(m) for m in MEMORY_CHECK_MODES))]
    plan = plan_for_spec(spec)
    if plan is None:
        return [Finding("warning", "gke-grpo:job.model",
                        f"{spec.model} on {spec.gpu_type}: no shape in data/model-shapes.yaml or "
                        "no memory in data/gpu-memory.yaml; GPU memory is not checked")]
    findings = []
    peak, total = plan.peak, plan.gpu.total_bytes
    where = f"{peak.role} needs ~{_gib(peak.total)} per GPU, {plan.fraction:.0%} of {_gib(total)}"
    if plan.fraction > 1:
        level: Literal["error", "warning"] = "error" if memory_check == "enforce" else "warning"
        findings.append(Finding(level, _key_to_change(plan),
                                f"will not fit: {where}; lower it (or enable activation "
                                "checkpointing, add tensor parallelism or GPUs); "
                                f"{MEMORY_CHECK_KEY}: warn runs it anyway\n" + format_plan(plan)))
    elif plan.fraction > WARN_FRACTION:
        findings.append(Finding("warning", _key_to_change(plan),
                                f"tight: {where} (above {WARN_FRACTION:.0%})\n" + format_plan(plan)))
    kv = plan.kv
    if kv is not None:
        if kv.kv_bytes <= 0 or not kv.one_sequence_fits:
            findings.append(Finding(
                "error" if memory_check == "enforce" else "warning",
                "gke-grpo:job.rolloutGpuMemoryUtilization",
                f"vLLM's pool ({spec.rollout_gpu_memory_utilization} x {_gib(total)}) minus its "
                f"weights ({_gib(kv.weights_bytes)} per GPU) leaves {_gib(max(kv.kv_bytes, 0))} "
                f"of KV cache, {kv.capacity_tokens:,} tokens, less than one "
                f"{kv.max_sequence_tokens:,}-token sequence: vLLM refuses to start; raise it or "
                "the rollout tensor parallelism"))
        elif not kv.batch_fits:
            findings.append(Finding(
                "warning", "gke-grpo:job.rolloutGpuMemoryUtilization",
                f"vLLM's KV cache holds {kv.capacity_tokens:,} tokens per replica but a rollout "
                f"step puts {kv.sequences_per_replica:,} sequences x {kv.max_sequence_tokens:,} "
                f"tokens on it: it generates in waves (slower, not an error)"))
    return findings


def replace_shape(shape: ModelShape, layers: int) -> ModelShape:
    """`shape` with fewer layers (the calibration's layer-reduced models), parameters recounted."""
    from jobs.plan.model_shapes import parameter_count

    params = parameter_count(layers=layers, hidden_size=shape.hidden_size,
                             attention_heads=shape.attention_heads, kv_heads=shape.kv_heads,
                             intermediate_size=shape.intermediate_size,
                             vocab_size=shape.vocab_size,
                             tie_word_embeddings=shape.tie_word_embeddings)
    return dataclasses.replace(shape, layers=layers, parameters=params)
