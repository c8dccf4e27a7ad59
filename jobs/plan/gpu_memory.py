"""Will it fit? Peak GPU memory per GPU of a GRPO spec, per colocated role and phase, before
anything runs (docs/memory-planner.md).

    plan_for_spec(spec) -> MemoryPlan        # phases, each a list of Terms; peak; KV check
    memory_findings(spec) -> list[Finding]   # warn above 85 % of the GPU, refuse above 100 %
    format_plan(plan) -> str                 # the breakdown preflight prints

The training and log-prob estimates (jobs/plan/memory_model.py, each framework's own log-prob
path in jobs/plan/logprob_paths.py) are calibrated on a real H200 (tools/calibrate_memory.py ->
data/memory-calibration-h200*.json; tests/jobs/plan/test_gpu_memory.py requires every committed
measurement reproduced within 10 %). The per-GPU split (FSDP shards, tensor parallelism), the
phases the frameworks put on one GPU and vLLM's pool follow the frameworks' documented
behaviour and are not measured here (one GPU: no sharding); each term says which it is.

Stdlib + PyYAML (through jobs/plan/model_shapes.py): it runs in preflight and on the Ray head.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import yaml

from jobs.plan.logprob_paths import LogProbPath, UnmeasuredVersion
from jobs.plan.memory_model import (
    ALLOCATOR_BASE_BYTES,
    BF16,
    GIB,
    ROOT_BYTES_PER_PARAM,
    Term,
    actor_step_terms,
    logprob_terms,
)
from jobs.plan.model_shapes import ModelShape, shape_for

if TYPE_CHECKING:
    from jobs.contract.spec import GrpoSpec
    from jobs.plan.findings import Finding

GPU_MEMORY_FILE = Path(__file__).resolve().parents[2] / "data" / "gpu-memory.yaml"
WARN_FRACTION = 0.85
MEMORY_CHECK_KEY = "gke-grpo:job.memoryCheck"
MEMORY_CHECK_MODES = ("enforce", "warn")
# Device memory outside PyTorch's allocator: CUDA context and libraries, per process
# (mem_get_info used - memory_reserved: 0.82-0.83 GiB measured on the H200).
CUDA_CONTEXT_BYTES = int(0.83 * GIB)


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
    type not in data/gpu-memory.yaml (preflight warns). Raises UnmeasuredVersion when its
    framework_version has no log-prob path in jobs/plan/logprob_paths.py."""
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


def verl_path(values: dict[str, str], response_fraction: float, version: str) -> LogProbPath:
    """verl `version`'s log-prob path from the rendered overrides, with its defaults, the same at
    0.7.1 and 0.9.1 (verl/trainer/config/actor/actor.yaml use_torch_compile: true, model/
    hf_model.yaml use_fused_kernels: False, impl_backend: torch, rollout/rollout.yaml temperature:
    1.0). The loss computes the entropy when actor.entropy_coeff != 0 or actor.calculate_entropy
    (0.7.1 dp_actor.py update_policy; 0.9.1 verl/trainer/ppo/v1/trainer_base.py lines 1831-1833)."""
    a, m = "actor_rollout_ref.actor.", "actor_rollout_ref.model."
    return LogProbPath(
        "verl", version, remove_padding=_override_bool(values, m + "use_remove_padding", False),
        response_fraction=response_fraction,
        entropy_in_loss=(_override_float(values, a + "entropy_coeff", 0.0) != 0
                         or _override_bool(values, a + "calculate_entropy", False)),
        torch_compile=_override_bool(values, a + "use_torch_compile", True),
        chunking=_override_bool(values, a + "entropy_from_logits_with_chunking", False),
        entropy_checkpointing=_override_bool(values, a + "entropy_checkpointing", False),
        fused=_override_bool(values, m + "use_fused_kernels", False),
        fused_backend=values.get(m + "fused_kernel_options.impl_backend", "torch"),
        temperature=_override_float(values, "actor_rollout_ref.rollout.temperature", 1.0))


def _plan_verl(spec: GrpoSpec, shape: ModelShape, gpu: GpuMemory, sequence: int,
               values: dict[str, str]) -> MemoryPlan:
    # verl (jobs/plan/render.py): FSDP2 over every GPU, gradient checkpointing rendered on, the
    # reference model a separate bf16 FSDP module (fsdp_workers.py builds non-actor roles in
    # bf16), vLLM colocated with its weights and KV cache released between rollouts
    # (free_cache_engine / sleep mode). Each step: the actor's old log-probs with the entropy
    # (fsdp_workers.py compute_log_prob: calculate_entropy = not is_lora), the reference's
    # log-probs, then update_policy. A split run (jobs/plan/render_layouts.py) trains on the
    # trainer pool alone and keeps vLLM on the rollout pool's GPUs (hybrid_engine false).
    n = spec.trainer_nodes * spec.gpus_per_node if spec.split else spec.total_gpus
    rollout_gpus = spec.rollout_nodes * spec.gpus_per_node if spec.split else n
    a = "actor_rollout_ref."
    sp = max(_override_int(values, a + "actor.ulysses_sequence_parallel_size", 1), 1)
    checkpointing = _override_bool(values, a + "model.enable_gradient_checkpointing", True)
    offload_params = _override_bool(values, a + "actor.fsdp_config.param_offload", False)
    offload_optim = _override_bool(values, a + "actor.fsdp_config.optimizer_offload", False)
    ref_offload = _override_bool(values, a + "ref.fsdp_config.param_offload", False)
    path = verl_path(values, spec.max_response_length / max(sequence, 1), spec.framework_version)
    p = shape.parameters / n
    root = ROOT_BYTES_PER_PARAM * path.root_parameters(shape)
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
        # ulysses_sequence_parallel_size; 0.9.1: verl/workers/engine/utils.py line 111,
        # max_token_len_per_gpu * sp_size, set from the same keys in
        # verl/workers/engine_workers.py lines 620-626); the log-prob passes' budget defaults to the actor's
        # (rollout.log_prob_max_token_len_per_gpu, verl/trainer/config/rollout/rollout.yaml).
        budget = _override_int(values, a + "actor.ppo_max_token_len_per_gpu", 16384)
        lp_budget = _override_int(values, a + "rollout.log_prob_max_token_len_per_gpu", budget)
        train_tokens, lp_tokens = max(budget * sp, sequence), max(lp_budget * sp, sequence)
    step = actor_step_terms(shape, path=path, shards=n, tokens=train_tokens,
                            checkpointing=checkpointing, sequence_parallel=sp,
                            offload_params=offload_params, offload_optimizer=offload_optim)
    old_lp = logprob_terms(shape, path=path, shards=n, tokens=lp_tokens, entropy=True,
                           sequence_parallel=sp)
    ref_lp = logprob_terms(shape, path=path, shards=n, tokens=lp_tokens, sequence_parallel=sp)
    tp = max(_override_int(values, a + "rollout.tensor_model_parallel_size",
                  spec.rollout_tensor_parallel_size), 1)
    utilization = _override_float(values, a + "rollout.gpu_memory_utilization",
                         spec.rollout_gpu_memory_utilization)
    kv = kv_check(shape, gpu, utilization=utilization, tp=tp,
                  sequences=spec.prompts_per_step * spec.generations_per_prompt,
                  replicas=max(rollout_gpus // max(tp, 1), 1), max_sequence_tokens=sequence)
    asleep: tuple[Term, ...] = (Term("vLLM asleep (weights and KV cache released)", 0, "framework"),
                                Term("vLLM process CUDA context", CUDA_CONTEXT_BYTES))
    rollout = _phase("rollout: vLLM + resident actor and reference", actor_resident, ref, context,
                     vllm_terms(kv))
    if spec.split:
        # The old log-prob pass stays in the plan although fully-async's bypass mode takes the
        # rollout's log-probs (fully_async_ppo_trainer.yaml lines 85-98): an upper bound.
        asleep, rollout = (), _phase("rollout pool: vLLM", vllm_terms(kv))
    tail = "" if spec.split else " + vLLM asleep"
    phases = (
        rollout,
        # The actor's pass: its root is already counted as resident; the reference's root is
        # left gathered by the last step's reference pass.
        _phase(f"actor log-prob pass (old log-probs + entropy) + reference{tail}",
               actor_resident, ref, old_lp[1:], context, asleep),
        # The reference's pass: it gathers its root (in ref_lp) and holds its logits.
        _phase(f"reference log-prob pass{tail}", actor_resident, (ref_weights,), ref_lp,
               context, asleep),
        _phase(f"actor forward+backward + reference{tail}", step["forward_backward"], ref,
               context, asleep),
        _phase(f"actor optimizer step + reference{tail}", step["optimizer_step"], ref,
               context, asleep),
    )
    return MemoryPlan(spec.model, gpu, "verl", phases, kv, path.notes())


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
    if "policy.logprob_chunk_size" in values:
        notes.append("policy.logprob_chunk_size: chunked log-probs are not modelled; the "
                     "unchunked estimate is shown")
    # Vocab-parallel log-probs under TP (DistributedLogprob on each GPU's vocabulary shard).
    path = LogProbPath("nemo-rl", spec.framework_version, vocab_parallel=tp > 1)
    if spec.framework_version != "0.5.0":
        # The log-prob path is v0.5.0's (jobs/plan/logprob_paths.py NEMO_RL_070); the model under
        # it is not: v0.7.0 pins Automodel 24b47e85, whose own Qwen2 class
        # (components/models/qwen2/model.py line 488 ModelClass) and parallelizer (1d42deb -> 24b47e8,
        # components/distributed/parallelizer.py lines 225-312) were not measured.
        notes.append(f"NeMo RL {spec.framework_version}: the activation and root-unit terms were "
                     "measured on NeMo RL 0.5.0's Automodel (1d42deb), not this release's")
    step = actor_step_terms(shape, path=path, shards=train_gpus, tokens=micro * sequence,
                            checkpointing=checkpointing, tp=tp, sequence_parallel=cp,
                            offload_params=cpu_offload, offload_optimizer=cpu_offload)
    p = shape.parameters / train_gpus
    resident = (Term("policy fp32 parameters", 0 if cpu_offload else 4 * p),
                Term("policy AdamW states", 0 if cpu_offload else 8 * p),
                Term("allocator base", ALLOCATOR_BASE_BYTES))
    lp = logprob_terms(shape, path=path, shards=train_gpus, tokens=lp_micro * sequence, tp=tp,
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


# Terms that grow with a micro batch's tokens.
_PER_TOKEN_WORDS = ("activations", "logits", "log-prob", "entropy", "recomputed", "intermediates")


def _key_to_change(plan: MemoryPlan, spec: GrpoSpec) -> str:
    labels = " ".join(t.label for t in plan.peak.terms if t.bytes >= 0.25 * plan.peak.total)
    if "vLLM" in labels:
        return "gke-grpo:job.rolloutGpuMemoryUtilization"
    if any(word in labels for word in _PER_TOKEN_WORDS):
        if spec.framework == "verl" and spec.dynamic_batch_size:
            return "gke-grpo:job.maxTokensPerGpu"      # every micro batch holds up to it
        return ("gke-grpo:job.logProbMicroBatchSizePerGpu" if "log-prob pass" in plan.peak.role
                else "gke-grpo:job.microBatchSizePerGpu")
    return "gke-grpo:gpu.nodes"


def memory_findings(spec: GrpoSpec, memory_check: str = "enforce") -> list[Finding]:
    """Preflight findings of the plan: a warning above 85 % of the GPU's memory, an error above
    100 % (a warning when gke-grpo:job.memoryCheck is 'warn'), each with the breakdown."""
    from jobs.plan.findings import Finding

    if memory_check not in MEMORY_CHECK_MODES:
        return [Finding("error", MEMORY_CHECK_KEY, f"is {memory_check!r}; one of "
                        + ", ".join(repr(m) for m in MEMORY_CHECK_MODES))]
    try:
        plan = plan_for_spec(spec)
    except UnmeasuredVersion as err:
        # The release is the stack's gke-grpo:job.release (components/run_spec.py spec_from_config).
        return [Finding("warning", "gke-grpo:job.release", f"GPU memory is not checked: {err}")]
    if plan is None:
        return [Finding("warning", "gke-grpo:job.model",
                        f"{spec.model} on {spec.gpu_type}: no shape in data/model-shapes.yaml or "
                        "no memory in data/gpu-memory.yaml; GPU memory is not checked")]
    findings = []
    peak, total = plan.peak, plan.gpu.total_bytes
    where = f"{peak.role} needs ~{_gib(peak.total)} per GPU, {plan.fraction:.0%} of {_gib(total)}"
    if plan.fraction > 1:
        level: Literal["error", "warning"] = "error" if memory_check == "enforce" else "warning"
        findings.append(Finding(level, _key_to_change(plan, spec),
                                f"will not fit: {where}; lower it (or enable activation "
                                "checkpointing, add tensor parallelism or GPUs); "
                                f"{MEMORY_CHECK_KEY}: warn runs it anyway\n" + format_plan(plan)))
    elif plan.fraction > WARN_FRACTION:
        findings.append(Finding("warning", _key_to_change(plan, spec),
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
