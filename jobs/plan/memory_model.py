"""The calibrated per-GPU memory of one FSDP training step and of a no-grad log-prob pass, for
any of the frameworks' log-prob paths (jobs/plan/logprob_paths.py); docs/memory-planner.md.

    actor_step_terms(shape, path=..., shards=..., tokens=..., checkpointing=...)
        -> {"forward_backward": terms, "optimizer_step": terms}
    logprob_terms(shape, path=..., shards=..., tokens=..., entropy=...) -> terms
    calibration_estimate / reference_estimate / path_estimate   # one calibration row (one GPU)

Calibrated on one H200: tools/calibrate_memory.py -> data/memory-calibration-h200*.json (the
first calibration: model states, activations, optimizer step) and data/memory-calibration-
h200-paths*.json (each framework's own log-prob path); tests/jobs/plan/test_gpu_memory.py
requires every committed row within 10 %. The split over several GPUs (FSDP shards, tensor and
sequence parallelism) is arithmetic on these one-GPU measurements.

Stdlib only.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

from jobs.plan.logprob_paths import NEMO_RL, STAND_IN, LogProbPath

if TYPE_CHECKING:
    from jobs.plan.model_shapes import ModelShape

GIB = 2**30

# ---- calibrated on one H200 (data/memory-calibration-h200.json, 2026-12-01) ---------------------
# fp32 parameters + AdamW exp_avg + exp_avg_sq, resident between steps (12.30-12.69 bytes/param
# measured at step start = 12 + the root unit left gathered, below).
STATE_BYTES_PER_PARAM = 12
# fp32 gradients, present from backward to optimizer step.
GRAD_BYTES_PER_PARAM = 4
# torch AdamW's default foreach step allocates one fp32 temporary per parameter
# (_foreach_sqrt of exp_avg_sq): the optimizer step peaked at 20.01-20.17 bytes/param.
FOREACH_TEMP_BYTES_PER_PARAM = 4
# Activations kept per token per layer, in bytes per hidden unit / intermediate unit:
# with HF gradient checkpointing (verl: each layer's bf16 input; fit 1.82 x hidden) and without
# (fit 22.10 x hidden + 7.67 x intermediate; counting the tensors HF's Qwen2 layer saves gives
# about 20 x hidden + 8 x intermediate).
CHECKPOINTED_BYTES_PER_HIDDEN = 1.82
FULL_BYTES_PER_HIDDEN = 22.10
FULL_BYTES_PER_INTERMEDIATE = 7.67
# NeMo RL's activation checkpointing (Automodel 1d42deb, components/distributed/parallelizer.py:
# checkpoint_wrapper around each layer's self_attn, mlp and both norms, not the whole layer)
# keeps the inputs of four submodules and the residual sums between them: fit 10.3 x hidden
# (data/memory-calibration-h200-paths.json, 7B and 32B).
NEMO_RL_CHECKPOINTED_BYTES_PER_HIDDEN = 10.3
# The root FSDP unit stays gathered in bf16 after a no-grad forward (FSDP2 does not reshard the
# root after forward) and the last unit's bf16 gradient is live at the end of backward: 2 bytes
# x its parameters each (measured within 1 %).
ROOT_BYTES_PER_PARAM = 2
# Allocations outside the model (NCCL, RNG, buffers): 70-156 MB measured.
ALLOCATOR_BASE_BYTES = 128 * 2**20

# ---- calibrated on one H200 (data/memory-calibration-h200-paths.json, 2026-12-01) ---------------
# Late in a checkpointed backward, when the logits are small (verl's fused kernels, padded rows of
# a wide model): one layer recomputed in full, the fp32 gradients of every unit but the root and
# a per-token remainder of the layer's backward (fit 18.7 x hidden) are live at once.
MID_BACKWARD_BYTES_PER_HIDDEN = 18.7
# A no-grad forward's largest transient inside the model: a decoder layer's MLP intermediates
# (fit 7.5 x intermediate per token) while it and the next layer are gathered in bf16.
NOGRAD_BYTES_PER_INTERMEDIATE = 7.5
# verl's untied embedding is its own FSDP unit: gathered in bf16 at the start of each forward
# (2 x its bf16 size at one GPU: the all-gather's input and output; measured 2.16-3.05 GB).

BF16 = 2


@dataclass(frozen=True)
class Term:
    label: str
    bytes: float
    basis: str = "calibrated"        # calibrated (H200 fit) | arithmetic | framework | estimate


def layer_parameters(shape: ModelShape) -> int:
    h, kv = shape.hidden_size, shape.kv_heads * shape.head_dim
    return 2 * h * h + h + 2 * (h * kv + kv) + 3 * h * shape.intermediate_size + 2 * h


def full_layer_bytes_per_token(shape: ModelShape, tp: int = 1) -> float:
    """One decoder layer's saved activations without checkpointing, per token."""
    return FULL_BYTES_PER_HIDDEN * shape.hidden_size + FULL_BYTES_PER_INTERMEDIATE * shape.intermediate_size / tp


def activation_bytes_per_token(shape: ModelShape, checkpointing: bool, tp: int = 1,
                               framework: str = STAND_IN) -> float:
    """Saved activations of all layers for one token. Tensor parallelism splits the
    intermediate width; the hidden-width tensors are kept whole (no sequence parallelism)."""
    if not checkpointing:
        return shape.layers * full_layer_bytes_per_token(shape, tp)
    per_hidden = (NEMO_RL_CHECKPOINTED_BYTES_PER_HIDDEN if framework == NEMO_RL
                  else CHECKPOINTED_BYTES_PER_HIDDEN)
    return shape.layers * per_hidden * shape.hidden_size


def _terms(pieces: list[tuple[str, float, str]]) -> tuple[Term, ...]:
    return tuple(Term(label, size, basis) for label, size, basis in pieces)


def actor_step_terms(shape: ModelShape, *, path: LogProbPath, shards: int, tokens: float,
                     checkpointing: bool, tp: int = 1, sequence_parallel: int = 1,
                     offload_params: bool = False,
                     offload_optimizer: bool = False) -> dict[str, tuple[Term, ...]]:
    """Per-GPU terms of one FSDP training step: 'forward_backward' and 'optimizer_step'.
    shards: GPUs over which every parameter is split (FSDP x TP); tokens: one micro batch.
    The forward+backward peak is the highest of: early in backward (activations + the path's
    logits), late in a checkpointed backward (one layer recomputed, the gradients so far) and
    the end of backward (all fp32 gradients + the root's bf16 gradient)."""
    p = shape.parameters / shards
    root_params = path.root_parameters(shape)
    root = ROOT_BYTES_PER_PARAM * root_params / tp
    per_gpu = tokens / sequence_parallel
    base = [Term(f"fp32 parameters (1/{shards} each)", 0 if offload_params else 4 * p),
            Term("AdamW exp_avg + exp_avg_sq (fp32)", 0 if offload_optimizer else (STATE_BYTES_PER_PARAM - 4) * p),
            Term("allocator base (NCCL, buffers)", ALLOCATOR_BASE_BYTES)]
    if shards > 1:
        base.append(Term("FSDP gather/reduce buffers (2 layers in flight)",
                         FSDP_BUFFER_BYTES_PER_LAYER_PARAM * layer_parameters(shape) / tp, "estimate"))
    ckpt = "with" if checkpointing else "without"
    activations = Term(f"activations, {int(per_gpu):,} tokens {ckpt} checkpointing",
                       per_gpu * activation_bytes_per_token(shape, checkpointing, tp, path.framework))
    early = (activations, *_terms(path.training_logits(shape, per_gpu, tp)))
    grads = GRAD_BYTES_PER_PARAM * p
    one_layer = Term(f"one layer recomputed in backward, {int(per_gpu):,} tokens",
                     per_gpu * full_layer_bytes_per_token(shape, tp))
    mid = ((activations,) if checkpointing else ()) + (
        one_layer,
        Term("fp32 gradients of the units done", GRAD_BYTES_PER_PARAM * (shape.parameters - root_params) / shards),
        Term("layer backward remainder", per_gpu * MID_BACKWARD_BYTES_PER_HIDDEN * shape.hidden_size))
    late = (Term("fp32 gradients (end of backward)", grads), Term("last unit's bf16 gradient", root))
    backward = max((early, mid, late), key=lambda group: sum(t.bytes for t in group))
    optimizer = (Term("fp32 gradients", grads),
                 Term("AdamW foreach temporary (fp32)", FOREACH_TEMP_BYTES_PER_PARAM * p))
    if offload_optimizer:
        optimizer = (Term("fp32 gradients", grads), Term("optimizer step on CPU", 0, "framework"))
    return {
        "forward_backward": (*base, Term("root unit gathered in bf16 (LM head / embedding)", root),
                             *backward),
        "optimizer_step": tuple(base) + optimizer,
    }


# FSDP over N > 1 GPUs: two gathered bf16 units in flight (prefetch) plus one unit's bf16
# gradient and its fp32 reduce-scatter input: (2 x 2 + 2 + 4) bytes x the largest decoder layer.
# Not measured here (one GPU: no sharding).
FSDP_BUFFER_BYTES_PER_LAYER_PARAM = 10


def logprob_terms(shape: ModelShape, *, path: LogProbPath, shards: int, tokens: float,
                  entropy: bool = False, tp: int = 1, sequence_parallel: int = 1) -> tuple[Term, ...]:
    """The transient of a no-grad log-prob forward (actor or reference) on top of what the
    model keeps resident: its root gathered, then the highest of the path's logits, a decoder
    layer's MLP intermediates and (verl, untied) the embedding unit gathered."""
    per_gpu = tokens / sequence_parallel
    root = Term("root unit gathered in bf16", ROOT_BYTES_PER_PARAM * path.root_parameters(shape) / tp)
    logits = _terms(path.logprob_logits(shape, per_gpu, tp, entropy))
    inside = (Term(f"a layer's MLP intermediates, {int(per_gpu):,} tokens",
                   per_gpu * NOGRAD_BYTES_PER_INTERMEDIATE * shape.intermediate_size / tp
                   + 2 * BF16 * layer_parameters(shape) / tp),)
    candidates = [logits, inside]
    if path.framework != NEMO_RL and not shape.tie_word_embeddings:
        embedding = shape.vocab_size * shape.hidden_size / tp
        candidates.append((Term("embedding unit gathered in bf16",
                                BF16 * embedding * (1 + 1 / max(shards // tp, 1))),))
    return (root, *max(candidates, key=lambda group: sum(t.bytes for t in group)))


def calibration_estimate(shape: ModelShape, tokens: int, checkpointing: bool,
                         path: LogProbPath | None = None) -> dict[str, float]:
    """What the planner predicts for one calibration row (one GPU, no sharding): the peak
    allocated bytes of each measured phase (the first calibration's loss unless `path`)."""
    path = path or LogProbPath(STAND_IN)
    step = actor_step_terms(shape, path=path, shards=1, tokens=tokens, checkpointing=checkpointing)
    resident = STATE_BYTES_PER_PARAM * shape.parameters + ALLOCATOR_BASE_BYTES
    return {
        "forward_backward": sum(t.bytes for t in step["forward_backward"]),
        "optimizer_step": sum(t.bytes for t in step["optimizer_step"]),
        "logprob_forward": resident + sum(t.bytes for t in logprob_terms(shape, path=path, shards=1,
                                                                          tokens=tokens)),
    }


def reference_estimate(shape: ModelShape, tokens: int) -> float:
    """Peak allocated bytes of a bf16 reference model (one GPU) during a no-grad log-prob
    forward: its bf16 parameters, the root unit gathered, the logits."""
    return (BF16 * shape.parameters + ALLOCATOR_BASE_BYTES
            + sum(t.bytes for t in logprob_terms(shape, path=LogProbPath(STAND_IN), shards=1,
                                                 tokens=tokens)))


def path_estimate(shape: ModelShape, path: LogProbPath, *, phase: str, tokens: int,
                  checkpointing: bool, entropy: bool) -> float:
    """The planner's peak for one row of data/memory-calibration-h200-paths*.json (one GPU):
    phase 'forward_backward' (a training micro batch) or 'logprob_forward' (no grad)."""
    if phase == "forward_backward":
        step = actor_step_terms(shape, path=path, shards=1, tokens=tokens, checkpointing=checkpointing)
        return sum(t.bytes for t in step["forward_backward"])
    resident = STATE_BYTES_PER_PARAM * shape.parameters + ALLOCATOR_BASE_BYTES
    return resident + sum(t.bytes for t in logprob_terms(shape, path=path, shards=1, tokens=tokens,
                                                         entropy=entropy))


def replace_shape(shape: ModelShape, layers: int) -> ModelShape:
    """`shape` with fewer layers (the calibration's layer-reduced models), parameters recounted."""
    from jobs.plan.model_shapes import parameter_count

    params = parameter_count(layers=layers, hidden_size=shape.hidden_size,
                             attention_heads=shape.attention_heads, kv_heads=shape.kv_heads,
                             intermediate_size=shape.intermediate_size,
                             vocab_size=shape.vocab_size,
                             tie_word_embeddings=shape.tie_word_embeddings)
    return dataclasses.replace(shape, layers=layers, parameters=params)
