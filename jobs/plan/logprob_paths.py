"""Each framework's log-prob and loss path, as each supported release runs it: what the logits of
one micro batch cost per GPU in a training step and in a no-grad log-prob pass
(docs/memory-planner.md, "Each framework's log-prob path").

    path = LogProbPath("verl", "0.7.1", remove_padding=..., ...)   # gpu_memory.py reads the options
    path.training_logits(shape, tokens, tp)                        # [(label, bytes, basis)]
    path.logprob_logits(shape, tokens, tp, entropy)

The figures are fits over tools/calibrate_memory.py --paths, which ran the frameworks' own code:
verl 0.7.1 and NeMo RL 0.5.0 on one H200 (data/memory-calibration-h200-paths.json: verl's
verl/utils/torch_functional.py with flash-attn 2.8.3's Triton cross entropy, its compiled and
chunked entropy, verl/utils/experimental/torch_functional.py, NeMo RL's
nemo_rl/distributed/model_utils.py). NeMo RL v0.7.0 runs v0.5.0's path (read side by side; the
functions compared are listed at NEMO_RL_070). verl 0.9.1's path changed (read at its package;
what changed is listed at VERL_091) was measured on one H100
(data/memory-calibration-h100-paths-verl-0.9.1.json); its compiled chunked entropy in the loss
did not fit within 10 % and is refused (UnmeasuredVersion). tests/jobs/plan/test_gpu_memory.py requires every
committed row within 10 %. Bytes are per token x vocabulary entry on one GPU (the vocabulary split
by TP where the framework splits it) unless a constant says otherwise.

Stdlib only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jobs.plan.model_shapes import ModelShape

# (label, bytes, basis) of one term; basis as jobs.plan.memory_model.Term's.
Piece = tuple[str, float, str]

class UnmeasuredVersion(ValueError):
    """A framework version whose log-prob path has no calibration here: the planner does not
    borrow another version's figures (gpu_memory.memory_findings says the memory is unchecked)."""


@dataclass(frozen=True)
class VerlConstants:
    """One verl release's log-prob path: bytes per token x vocabulary entry on one GPU unless a
    field says otherwise."""

    code: str                       # where the path is, at that release
    calibration: str                # the data file its figures were fitted on
    train: float                    # update_policy, packed row, no entropy in the loss
    train_entropy: float            # ... with the (compiled or checkpointed) entropy in the loss
    # ... with the compiled chunked entropy in the loss; None: measured, not fitted within 10 %
    # (LogProbPath refuses it as unmeasured)
    train_entropy_chunked: float | None
    train_temperature: float        # added when rollout.temperature is not 1.0
    logprob: float                  # compute_log_prob, packed row (compiled entropy or none)
    logprob_temperature: float      # added when rollout.temperature is not 1.0
    padded_train: float             # update_policy without padding removal, per token of the rows
    padded_response_only: bool      # the padded branch keeps only the response slice's logits
    response_copy: float            # padded rows: the copy logprobs_from_logits is given
    eager_entropy: float            # entropy_from_logits run eagerly
    fused_chunk: float              # use_fused_kernels: bytes x FUSED_CHUNK_TOKENS x vocabulary


@dataclass(frozen=True)
class NemoRlConstants:
    code: str
    calibration: str
    train: float                    # train: fp32 logits, log_softmax or DistributedLogprob
    logprob: float                  # get_logprobs, TP 1
    vocab_parallel_logprob: float   # get_logprobs under TP, per token x local vocabulary


# ---- verl 0.7.1 (verl/workers/actor/dp_actor.py DataParallelPPOActor._forward_micro_batch) -----
# The actor's logits stay bf16 (the HF model's lm_head under autocast); logits_rmpad.div_(temperature)
# scales them in place, whatever the temperature; logprobs_from_logits (verl/utils/torch_functional.py
# line 72) takes the log-probs with flash-attn's Triton cross_entropy_loss
# (flash_attn/ops/triton/cross_entropy.py, 2.8.3 in the verl image), in-place backward unless the
# entropy is computed. Fitted on data/memory-calibration-h200-paths.json (one H200, 2026-12-01).
VERL_071 = VerlConstants(
    code="verl 0.7.1 verl/workers/actor/dp_actor.py _forward_micro_batch",
    calibration="data/memory-calibration-h200-paths.json",
    # update_policy, packed rows (use_remove_padding): its backward holds the bf16 logits its kernel
    # overwrites with their gradient, the gradient of the in-place division and the LM head's
    # matmul inputs: fit 8.25 (8.04-8.43 measured), with or without the entropy in the loss
    # (compiled, checkpointed or chunked: within 1 % of each other).
    train=8.25, train_entropy=8.25, train_entropy_chunked=8.25, train_temperature=0.0,
    # compute_log_prob (no grad): the bf16 logits of every token (2.03-2.05 measured), also with the
    # actor's entropy through torch.compile(entropy_from_logits, dynamic=True), which Inductor fuses
    # into reductions (no extra tensor the size of the logits), chunked or not.
    logprob=2.0, logprob_temperature=0.0,
    # update_policy on padded rows: the response slice's gradient is scattered into a zero tensor
    # of the full rows before the division's gradient: fit 4.2 per token of the full rows, the
    # same for 512 and 1,536 response tokens of 2,048. logprobs_from_logits reshapes the (rows,
    # response, vocab) slice into a copy (2 bytes per response token, 1.97-1.99 measured).
    padded_train=4.2, padded_response_only=True, response_copy=2.0,
    # Eager entropy_from_logits under verl's autocast (use_torch_compile: false, and always on
    # padded rows): softmax in fp32, its product with the logits in fp32 and the logsumexp: fit
    # 12.0 per token x vocab it covers (11.97-11.99 measured).
    eager_entropy=12.0,
    # use_fused_kernels (impl_backend torch, verl/utils/experimental/torch_functional.py
    # FusedLinearForPPO): logits exist one 512-token chunk at a time (bf16 logits, their fp32 copy,
    # softmax, log-softmax, product): fit 15.5 bytes x 512 x vocab, whatever the micro batch.
    fused_chunk=15.5)
# entropy_from_logits_with_chunking, eager: 12 bytes x one 2,048-row chunk x vocab (the fp32
# chunk, its softmax and product; 3.71 GB measured at 152,064); compiled: nothing extra.
# 2,048: its chunk_size default at both releases (0.9.1 passes
# actor.entropy_from_logits_chunk_size, default 2048 in trainer/config/actor/dp_actor.yaml line 40).
VERL_ENTROPY_CHUNK_ROWS = 2048
FUSED_CHUNK_TOKENS = 512

# ---- verl 0.9.1 (verl/workers/engine/fsdp/transformer_impl.py FSDPEngineWithLMHead) --------------
# dp_actor.py is gone; prepare_model_outputs (line 1332) changed the path three ways:
# - temperature: _scale_logits_by_temperature (line 98) does nothing at a host-scalar 1.0 (the
#   trainer passes rollout.temperature, a float, default 1.0: verl/trainer/ppo/v1/trainer_base.py
#   lines 1652-1656 and 1827; prepare_model_inputs line 1161) and divides OUT of place otherwise,
#   where 0.7.1 divided in place whatever the value (dp_actor.py logits_rmpad.div_);
# - padded rows (no padding removal, lines 1475-1522): the log-probs and the eager entropy of every
#   token of the rows, through a concatenated copy of the valid tokens' logits, not 0.7.1's
#   response slice (logits[:, -R-1:-1]);
# - fused kernels: each chunk's log-probs through flash-attn's cross entropy instead of an fp32
#   log_softmax (verl/utils/experimental/torch_functional.py lines 27-32 and 49-51).
# Unchanged: logprobs_from_logits (torch_functional.py line 73; VERL_DISABLE_FLASH_ATTN_CE default
# off), inplace_backward = not calculate_entropy (lines 1424-1432), entropy_from_logits and
# entropy_from_logits_with_chunking (lines 231 and 248), the compiled entropy (FSDPEngine.__init__,
# lines 178-187). Fitted on data/memory-calibration-h100-paths-verl-0.9.1.json (one H100 80GB,
# 2026-12-06; 150 rows measured, 3 out of memory). "measured" below: the implied bytes per token x
# vocab of the rows where the logits make the peak (elsewhere the planner's other terms do).
VERL_091 = VerlConstants(
    code="verl 0.9.1 verl/workers/engine/fsdp/transformer_impl.py prepare_model_outputs",
    calibration="data/memory-calibration-h100-paths-verl-0.9.1.json",
    # update_policy, packed rows, temperature 1.0 (no division, so no division gradient): fit 2.25
    # (2.18-2.45 measured without checkpointing on 0.5B; every row within 10 % for 1.75-2.55).
    # With the compiled (or checkpointed) entropy in the loss the cross entropy's backward is not
    # in place (lines 1424-1432): fit 6.1 (4.79-5.18 implied at 0.5B; 5.3-6.85 keep every row
    # within 10 %). With the compiled chunked entropy in the loss: 2.6-9.3 implied, no constant
    # keeps every row within 10 % (best 8.4, worst +14.7 %): refused as unmeasured (None).
    train=2.25, train_entropy=6.1, train_entropy_chunked=None,
    # rollout.temperature != 1.0: logits / temperature out of place (line 98), in training fit 1.8
    # more (1.25-2.4 keep every row within 10 %), in the log-prob pass fit 2.1 more (1.65-2.75).
    train_temperature=1.8, logprob_temperature=2.1,
    # compute_log_prob (no grad), compiled entropy or none: the bf16 logits, 2.0 (1.58-1.74 implied
    # at 0.5B; every row within 4 %).
    logprob=2.0,
    # Padded rows: update_policy fit 6.1 per token of the rows (5.15 implied at 0.5B, 5.25-6.85
    # within 10 %); compute_log_prob keeps every token and copies the valid tokens' logits: 2.0
    # (1.7 implied at 0.5B, lines 1475-1522); its entropy is the eager one over every token.
    padded_train=6.1, padded_response_only=False, response_copy=2.0,
    # Eager entropy_from_logits (use_torch_compile: false, and padded rows): fit 12.6
    # (13.57-13.73 implied at 0.5B, 8.9-12.8 at 7B and 32B; 10.65-13.75 keep every row in 10 %).
    eager_entropy=12.6,
    # use_fused_kernels (impl_backend torch): the fused chunk never made a row's peak here (any
    # value 0-16 keeps every row within 10 %): 0.7.1's 15.5 kept, an upper figure, not a fit.
    fused_chunk=15.5)

# ---- NVIDIA NeMo RL 0.5.0 (DTensor policy v2) --------------------------------------------------
# dtensor_policy_worker_v2.py builds FSDP2 with MixedPrecisionPolicy(output_dtype=torch.float32)
# (line 378): the logits come out fp32; _apply_temperature_scaling (line 542) divides them in place.
# Training: ClippedPGLossFn (nemo_rl/algorithms/loss_functions.py lines 240-271) casts to float32
# and takes log_softmax of logits[:, :-1] and gathers (TP 1), or
# get_logprobs_from_vocab_parallel_logits -> DistributedLogprob (nemo_rl/distributed/model_utils.py
# lines 59-142) on the local vocabulary shard (TP > 1): both peak in backward at fit 12.4
# (11.95-12.40 measured; the same within 0.1 %). get_logprobs (no grad), TP 1: fp32 logits + their
# fp32 log_softmax: fit 8.3 (8.13-8.49). Under TP (vocab-parallel, inference_only): fp32 logits, the
# max-shifted copy, its exp and the log-probs: fit 12.3 (12.13-12.49) per token x local vocabulary.
NEMO_RL_050 = NemoRlConstants(
    code="NeMo RL v0.5.0 dtensor_policy_worker_v2.py, loss_functions.py ClippedPGLossFn, "
         "distributed/model_utils.py",
    calibration="data/memory-calibration-h200-paths.json",
    train=12.4, logprob=8.3, vocab_parallel_logprob=12.3)
# NeMo RL v0.7.0 (81aa43dd) moved the code, not the path: read side by side with v0.5.0 (6c708930),
#   FSDP output_dtype=torch.float32: v0.5.0 dtensor_policy_worker_v2.py line 378 -> v0.7.0
#     nemo_rl/models/automodel/setup.py line 487;
#   temperature, in place: v0.5.0 _apply_temperature_scaling (lines 542-545, div_) -> v0.7.0
#     automodel/train.py apply_temperature_scaling (lines 174-188, div_ unless 1.0);
#   training log-probs: v0.5.0 ClippedPGLossFn (loss_functions.py lines 240-271: .to(float32), then
#     vocab-parallel get_logprobs_from_vocab_parallel_logits or log_softmax of [:, :-1] and gather)
#     -> v0.7.0 LossPostProcessor (train.py lines 549-647) -> prepare_loss_input
#     (algorithms/loss/utils.py line 37) -> get_next_token_logprobs_from_logits (model_utils.py
#     lines 1558-1643): the same casts and calls; its top-k/top-p filter (apply_top_k_top_p,
#     algorithms/logits_sampling_utils.py line 254) returns the logits untouched unless
#     generation.top_k / top_p are set;
#   get_logprobs: v0.5.0 worker lines 1110-1200 -> v0.7.0 LogprobsPostProcessor (train.py lines
#     650-838): under TP the same get_logprobs_from_vocab_parallel_logits, at TP 1
#     _compute_local_logprobs: .to(float32), log_softmax, [:, :-1], gather;
#   DistributedLogprob (v0.5.0 model_utils.py lines 59-142 -> v0.7.0 lines 120-203: identical),
#     _compute_distributed_log_softmax (v0.5.0 lines 22-57 -> v0.7.0 lines 33-81: the same
#     max-shift, exp, sum and subtraction, now a no_grad wrapper of the differentiable variant),
#     dtensor_from_parallel_logits_to_logprobs (v0.5.0 lines 384-468 -> v0.7.0 lines 833-940: a
#     top-k/top-p branch added, taken only when they are set) and
#     get_logprobs_from_vocab_parallel_logits (v0.5.0 lines 778-827 -> v0.7.0 lines 1505-1556: a
#     sampling_params argument passed through).
# So v0.7.0 shares v0.5.0's constants (the same object).
NEMO_RL_070 = NEMO_RL_050

# ---- the first calibration's loss (F.cross_entropy of the fp32-cast bf16 logits) -----------------
# Kept for the rows of data/memory-calibration-h200*.json: close to NeMo RL's TP-1 path.
STAND_IN_TRAIN_LOGIT_BYTES = 12.22
STAND_IN_LOGPROB_LOGIT_BYTES = 10.0

VERL = "verl"
NEMO_RL = "nemo-rl"
STAND_IN = "stand-in"
# The releases whose paths were read and measured; any other version is refused (UnmeasuredVersion).
VERL_RELEASES = {"0.7.1": VERL_071, "0.9.1": VERL_091}
NEMO_RL_RELEASES = {"0.5.0": NEMO_RL_050, "0.7.0": NEMO_RL_070}


@dataclass(frozen=True)
class LogProbPath:
    """Which code takes the log-probs (and the loss) from the logits, with its options. `version`
    picks the release's path (VERL_RELEASES, NEMO_RL_RELEASES); a version without one raises
    UnmeasuredVersion rather than borrow another release's figures."""

    framework: str                      # verl | nemo-rl | stand-in
    version: str = ""                   # GrpoSpec.framework_version (stand-in: none)
    remove_padding: bool = True         # verl model.use_remove_padding: one packed row
    response_fraction: float = 1.0      # padded verl 0.7.1 rows: logits kept for the response
    entropy_in_loss: bool = False       # verl actor.entropy_coeff != 0 or actor.calculate_entropy
    torch_compile: bool = True          # verl actor.use_torch_compile
    chunking: bool = False              # verl actor.entropy_from_logits_with_chunking
    # verl actor.entropy_checkpointing: read, and measured to change no peak (the compiled
    # entropy keeps nothing the size of the logits for backward either way).
    entropy_checkpointing: bool = False
    fused: bool = False                 # verl model.use_fused_kernels
    fused_backend: str = "torch"        # verl model.fused_kernel_options.impl_backend
    vocab_parallel: bool = False        # NeMo RL under TP > 1
    temperature: float = 1.0            # verl actor_rollout_ref.rollout.temperature

    def __post_init__(self) -> None:
        tables: dict[str, dict[str, object]] = {VERL: dict(VERL_RELEASES), NEMO_RL: dict(NEMO_RL_RELEASES)}
        table = tables.get(self.framework, {})
        if self.framework != STAND_IN and self.version not in table:
            raise UnmeasuredVersion(
                f"{self.framework} {self.version or '(no version)'}: no log-prob path read and "
                f"measured for this release (measured: {', '.join(sorted(table)) or 'none'}; "
                "docs/memory-planner.md, \"Each framework's log-prob path\")")
        if (self.framework == VERL and self.entropy_in_loss and self.chunking and self.torch_compile
                and not self.fused and self.remove_padding and self.verl.train_entropy_chunked is None):
            raise UnmeasuredVersion(
                f"verl {self.version}: the compiled chunked entropy in the loss "
                "(entropy_from_logits_with_chunking with entropy_coeff != 0) was measured but not "
                "fitted within 10 % (docs/memory-planner.md, \"verl 0.9.1\")")

    @property
    def verl(self) -> VerlConstants:
        return VERL_RELEASES[self.version]

    @property
    def nemo_rl(self) -> NemoRlConstants:
        return NEMO_RL_RELEASES[self.version]

    @property
    def scaled(self) -> bool:
        """verl 0.9.1 divides out of place unless the temperature is 1.0 (0.7.1: in place)."""
        return self.temperature != 1.0

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
                     tokens * vocab * self.nemo_rl.train, "calibrated")]
        c = self.verl
        if self.fused:
            return [(f"fused log-probs (one {FUSED_CHUNK_TOKENS}-token chunk of logits), {where}",
                     FUSED_CHUNK_TOKENS * vocab * c.fused_chunk, "calibrated")]
        if not self.remove_padding:
            pieces = [(f"logits + log-softmax (bf16 padded rows, flash-attn cross entropy), {where}",
                       tokens * vocab * c.padded_train, "calibrated")]
            if self.entropy_in_loss:
                covered = tokens * self.response_fraction if c.padded_response_only else tokens
                pieces.append((f"eager entropy of the {'response ' if c.padded_response_only else ''}"
                               f"logits, {int(covered):,} tokens",
                               covered * vocab * c.eager_entropy, "estimate"))
            return pieces
        per = c.train
        if self.entropy_in_loss and self.torch_compile:
            chunked = c.train_entropy_chunked
            per = chunked if self.chunking and chunked is not None else c.train_entropy
        pieces = [(f"logits + log-softmax (bf16, flash-attn cross entropy), {where}",
                   tokens * vocab * per, "calibrated")]
        if self.entropy_in_loss and not self.torch_compile:
            eager = (VERL_ENTROPY_CHUNK_ROWS * vocab if self.chunking else tokens * vocab)
            pieces.append(("eager entropy (use_torch_compile: false)",
                           eager * c.eager_entropy, "estimate"))
        if self.scaled and c.train_temperature:
            pieces.append((f"logits / temperature (out of place), {where}",
                           tokens * vocab * c.train_temperature, "calibrated"))
        return pieces

    def logprob_logits(self, shape: ModelShape, tokens: float, tp: int, entropy: bool) -> list[Piece]:
        """The logits' share of a no-grad log-prob pass (entropy: verl's old-log-prob pass)."""
        vocab = shape.vocab_size / tp
        where = f"{int(tokens):,} tokens x {int(vocab):,}"
        if self.framework == STAND_IN:
            return [(f"log-prob logits, {where}", tokens * vocab * STAND_IN_LOGPROB_LOGIT_BYTES,
                     "calibrated")]
        if self.framework == NEMO_RL:
            n = self.nemo_rl
            per = n.vocab_parallel_logprob if self.vocab_parallel else n.logprob
            kind = "DistributedLogprob" if self.vocab_parallel else "log_softmax"
            return [(f"log-prob logits (fp32, {kind}), {where}", tokens * vocab * per,
                     "calibrated")]
        c = self.verl
        if self.fused:
            return [(f"fused log-probs (one {FUSED_CHUNK_TOKENS}-token chunk of logits), {where}",
                     FUSED_CHUNK_TOKENS * vocab * c.fused_chunk, "calibrated")]
        what = "with entropy" if entropy else "no entropy"
        pieces = [(f"log-prob logits (bf16, flash-attn cross entropy, {what}), {where}",
                   tokens * vocab * c.logprob, "calibrated")]
        if not self.remove_padding:
            covered = tokens * self.response_fraction if c.padded_response_only else tokens
            per = c.eager_entropy if entropy else c.response_copy
            label = "eager entropy" if entropy else "copy"
            pieces.append((f"{label} of the {'response ' if c.padded_response_only else ''}logits, "
                           f"{int(covered):,} tokens", covered * vocab * per, "calibrated"))
        elif entropy and not self.torch_compile:
            eager = VERL_ENTROPY_CHUNK_ROWS * vocab if self.chunking else tokens * vocab
            pieces.append(("eager entropy" + (" (one 2,048-row chunk)" if self.chunking else ""),
                           eager * c.eager_entropy, "calibrated"))
        if self.scaled and c.logprob_temperature:
            pieces.append((f"logits / temperature (out of place), {where}",
                           tokens * vocab * c.logprob_temperature, "calibrated"))
        return pieces
