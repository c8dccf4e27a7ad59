"""Each framework's log-prob and loss path, as the framework runs it at its pinned tag: what the
logits of one micro batch cost per GPU in a training step and in a no-grad log-prob pass
(docs/memory-planner.md, "Each framework's log-prob path").

    path = LogProbPath("verl", remove_padding=..., ...)   # gpu_memory.py reads the options
    path.training_logits(shape, tokens, tp)               # [(label, bytes, basis)]
    path.logprob_logits(shape, tokens, tp, entropy)

The figures are fits over tools/calibrate_memory.py --paths on one H200
(data/memory-calibration-h200-paths.json), which ran the frameworks' own code: verl 0.7.1's
verl/utils/torch_functional.py with flash-attn 2.8.3's Triton cross entropy, its compiled and
chunked entropy, verl/utils/experimental/torch_functional.py (fused kernels), and NeMo RL 0.5.0's
nemo_rl/distributed/model_utils.py; tests/jobs/plan/test_gpu_memory.py requires every committed
row within 10 %. Bytes are per token x vocabulary entry on one GPU (the vocabulary split by TP
where the framework splits it) unless a constant says otherwise.

Stdlib only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jobs.plan.model_shapes import ModelShape

# (label, bytes, basis) of one term; basis as jobs.plan.memory_model.Term's.
Piece = tuple[str, float, str]

# ---- verl 0.7.1 (verl/workers/actor/dp_actor.py DataParallelPPOActor._forward_micro_batch) -----
# The actor's logits stay bf16 (the HF model's lm_head under autocast); logits_rmpad.div_(temperature)
# scales them in place; logprobs_from_logits (verl/utils/torch_functional.py) takes the log-probs
# with flash-attn's Triton cross_entropy_loss (flash_attn/ops/triton/cross_entropy.py, 2.8.3 in
# the verl image), in-place backward unless the entropy is computed. update_policy, packed rows
# (use_remove_padding): its backward holds the bf16 logits its kernel overwrites with their
# gradient, the gradient of the in-place division and the LM head's matmul inputs: fit 8.25
# (8.04-8.43 measured), with or without the entropy in the loss (compiled, checkpointed or
# chunked: within 1 % of each other).
VERL_TRAIN_LOGIT_BYTES = 8.25
# update_policy on padded rows (no padding removal): the response slice's gradient is scattered
# into a zero tensor of the full rows before the division's gradient: fit 4.2 per token of the
# full rows, the same for 512 and 1,536 response tokens of 2,048.
VERL_PADDED_TRAIN_LOGIT_BYTES = 4.2
# compute_log_prob (no grad): the bf16 logits of every token (2.03-2.05 measured), also with the
# actor's entropy through torch.compile(entropy_from_logits, dynamic=True), which Inductor fuses
# into reductions (no extra tensor the size of the logits), chunked or not.
VERL_LOGPROB_LOGIT_BYTES = 2.0
# Padded rows: logprobs_from_logits reshapes the (rows, response, vocab) slice into a copy
# (2 bytes per response token x vocab, measured 1.97-1.99).
VERL_RESPONSE_COPY_BYTES = 2.0
# Eager entropy_from_logits under verl's autocast (use_torch_compile: false, and always on
# padded rows, where dp_actor.py calls it uncompiled): softmax in fp32, its product with the
# logits in fp32 and the logsumexp: fit 12.0 per token x vocab it covers (11.97-11.99 measured).
VERL_EAGER_ENTROPY_BYTES = 12.0
# entropy_from_logits_with_chunking, eager: 12 bytes x one 2,048-row chunk x vocab (the fp32
# chunk, its softmax and product; 3.71 GB measured at 152,064); compiled: nothing extra.
VERL_ENTROPY_CHUNK_ROWS = 2048
# use_fused_kernels (impl_backend torch, verl/utils/experimental/torch_functional.py
# FusedLinearForPPO): logits exist one 512-token chunk at a time (bf16 logits, their fp32 copy,
# softmax, log-softmax, product): fit 15.5 bytes x 512 x vocab, whatever the micro batch.
FUSED_CHUNK_TOKENS = 512
FUSED_CHUNK_BYTES = 15.5

# ---- NVIDIA NeMo RL 0.5.0 (DTensor policy v2) --------------------------------------------------
# dtensor_policy_worker_v2.py builds FSDP2 with MixedPrecisionPolicy(output_dtype=torch.float32):
# the logits come out fp32; _apply_temperature_scaling divides them in place. Training:
# ClippedPGLossFn (nemo_rl/algorithms/loss_functions.py) casts to float32 and takes log_softmax of
# logits[:, :-1] and gathers (TP 1), or get_logprobs_from_vocab_parallel_logits ->
# DistributedLogprob (nemo_rl/distributed/model_utils.py) on the local vocabulary shard (TP > 1):
# both peak in backward at fit 12.2 (11.95-12.40 measured; the same within 0.1 %).
NEMO_RL_TRAIN_LOGIT_BYTES = 12.4
# get_logprobs (no grad), TP 1: fp32 logits + their fp32 log_softmax: fit 8.2 (8.13-8.49).
NEMO_RL_LOGPROB_LOGIT_BYTES = 8.3
# get_logprobs under TP (vocab-parallel, inference_only): fp32 logits, the max-shifted copy, its
# exp and the log-probs: fit 12.2 (12.13-12.49) per token x local vocabulary.
NEMO_RL_VOCAB_PARALLEL_LOGPROB_LOGIT_BYTES = 12.3

# ---- the first calibration's loss (F.cross_entropy of the fp32-cast bf16 logits) -----------------
# Kept for the rows of data/memory-calibration-h200*.json: close to NeMo RL's TP-1 path.
STAND_IN_TRAIN_LOGIT_BYTES = 12.22
STAND_IN_LOGPROB_LOGIT_BYTES = 10.0

VERL = "verl"
NEMO_RL = "nemo-rl"
STAND_IN = "stand-in"


@dataclass(frozen=True)
class LogProbPath:
    """Which code takes the log-probs (and the loss) from the logits, with its options."""

    framework: str                      # verl | nemo-rl | stand-in
    remove_padding: bool = True         # verl model.use_remove_padding: one packed row
    response_fraction: float = 1.0      # padded verl rows: logits kept for the response
    entropy_in_loss: bool = False       # verl actor.entropy_coeff != 0 or actor.calculate_entropy
    torch_compile: bool = True          # verl actor.use_torch_compile
    chunking: bool = False              # verl actor.entropy_from_logits_with_chunking
    # verl actor.entropy_checkpointing: read, and measured to change no peak (the compiled
    # entropy keeps nothing the size of the logits for backward either way).
    entropy_checkpointing: bool = False
    fused: bool = False                 # verl model.use_fused_kernels
    fused_backend: str = "torch"        # verl model.fused_kernel_options.impl_backend
    vocab_parallel: bool = False        # NeMo RL under TP > 1

    def root_parameters(self, shape: ModelShape) -> int:
        """Parameters of the root FSDP unit's big matrices, left gathered between passes: verl's
        apply_fsdp2 wraps an untied embedding on its own (the root keeps the LM head); NeMo RL's
        Automodel wraps only the decoder layers, so the embedding stays in the root too."""
        matrices = 2 if self.framework == NEMO_RL and not shape.tie_word_embeddings else 1
        return matrices * shape.vocab_size * shape.hidden_size

    def notes(self) -> tuple[str, ...]:
        if self.fused and self.fused_backend != "torch":
            return (f"use_fused_kernels with impl_backend {self.fused_backend}: not measured; the "
                    "torch backend's figures are shown",)
        return ()

    def training_logits(self, shape: ModelShape, tokens: float, tp: int) -> list[Piece]:
        """The logits' share of a training micro batch's forward+backward peak."""
        vocab = shape.vocab_size / tp
        where = f"{int(tokens):,} tokens x {int(vocab):,}"
        if self.framework == STAND_IN:
            return [(f"logits + log-softmax, {where}", tokens * vocab * STAND_IN_TRAIN_LOGIT_BYTES,
                     "calibrated")]
        if self.framework == NEMO_RL:
            kind = "DistributedLogprob" if self.vocab_parallel else "log_softmax"
            return [(f"logits + log-softmax (fp32 logits, {kind}), {where}",
                     tokens * vocab * NEMO_RL_TRAIN_LOGIT_BYTES, "calibrated")]
        if self.fused:
            return [(f"fused log-probs (one {FUSED_CHUNK_TOKENS}-token chunk of logits), {where}",
                     FUSED_CHUNK_TOKENS * vocab * FUSED_CHUNK_BYTES, "calibrated")]
        if not self.remove_padding:
            pieces = [(f"logits + log-softmax (bf16 padded rows, flash-attn cross entropy), {where}",
                       tokens * vocab * VERL_PADDED_TRAIN_LOGIT_BYTES, "calibrated")]
            if self.entropy_in_loss:
                response = tokens * self.response_fraction
                pieces.append((f"eager entropy of the response logits, {int(response):,} tokens",
                               response * vocab * VERL_EAGER_ENTROPY_BYTES, "estimate"))
            return pieces
        pieces = [(f"logits + log-softmax (bf16, flash-attn cross entropy), {where}",
                   tokens * vocab * VERL_TRAIN_LOGIT_BYTES, "calibrated")]
        if self.entropy_in_loss and not self.torch_compile:
            eager = (VERL_ENTROPY_CHUNK_ROWS * vocab if self.chunking else tokens * vocab)
            pieces.append(("eager entropy (use_torch_compile: false)",
                           eager * VERL_EAGER_ENTROPY_BYTES, "estimate"))
        return pieces

    def logprob_logits(self, shape: ModelShape, tokens: float, tp: int, entropy: bool) -> list[Piece]:
        """The logits' share of a no-grad log-prob pass (entropy: verl's old-log-prob pass)."""
        vocab = shape.vocab_size / tp
        where = f"{int(tokens):,} tokens x {int(vocab):,}"
        if self.framework == STAND_IN:
            return [(f"log-prob logits, {where}", tokens * vocab * STAND_IN_LOGPROB_LOGIT_BYTES,
                     "calibrated")]
        if self.framework == NEMO_RL:
            per = (NEMO_RL_VOCAB_PARALLEL_LOGPROB_LOGIT_BYTES if self.vocab_parallel
                   else NEMO_RL_LOGPROB_LOGIT_BYTES)
            kind = "DistributedLogprob" if self.vocab_parallel else "log_softmax"
            return [(f"log-prob logits (fp32, {kind}), {where}", tokens * vocab * per,
                     "calibrated")]
        if self.fused:
            return [(f"fused log-probs (one {FUSED_CHUNK_TOKENS}-token chunk of logits), {where}",
                     FUSED_CHUNK_TOKENS * vocab * FUSED_CHUNK_BYTES, "calibrated")]
        what = "with entropy" if entropy else "no entropy"
        pieces = [(f"log-prob logits (bf16, flash-attn cross entropy, {what}), {where}",
                   tokens * vocab * VERL_LOGPROB_LOGIT_BYTES, "calibrated")]
        if not self.remove_padding:
            response = tokens * self.response_fraction
            per = VERL_EAGER_ENTROPY_BYTES if entropy else VERL_RESPONSE_COPY_BYTES
            pieces.append((("eager entropy" if entropy else "copy") + " of the response logits, "
                           f"{int(response):,} tokens", response * vocab * per, "calibrated"))
        elif entropy and not self.torch_compile:
            eager = VERL_ENTROPY_CHUNK_ROWS * vocab if self.chunking else tokens * vocab
            pieces.append(("eager entropy" + (" (one 2,048-row chunk)" if self.chunking else ""),
                           eager * VERL_EAGER_ENTROPY_BYTES, "calibrated"))
        return pieces
