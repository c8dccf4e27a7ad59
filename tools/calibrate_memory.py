"""GPU benchmark (not a test): peak memory of one GRPO-style training step on one GPU, for the
memory planner (jobs/plan/gpu_memory.py, memory_model.py, logprob_paths.py). Writes
data/memory-calibration-<gpu>*.json (docs/memory-planner.md, "Recalibrating").

    python3 tools/calibrate_memory.py --out data/memory-calibration-h200.json   # on one H200
    python3 tools/calibrate_memory.py --smoke --out /tmp/smoke.json             # CPU, tiny model
    python3 tools/calibrate_memory.py --paths --verl-src D --flash-attn-ce F --nemo-rl-src D \
        --out data/memory-calibration-h200-paths.json     # each framework's own log-prob path
    python3 tools/calibrate_memory.py --paths --holdout --predict --out ...    # no GPU
    python3 tools/calibrate_memory.py --paths --verl-version 0.9.1 --verl-src D --flash-attn-ce F \
        --out data/memory-calibration-h200-paths-verl-0.9.1.json    # verl 0.9.1's FSDP engine

Needs torch and transformers (the H200 image has both; nothing here is installed or downloaded);
--paths also Triton and the frameworks' source files (the section "The frameworks' own log-prob
and loss paths" below). What one measurement of the first calibration is:
- a real Qwen2 architecture (transformers' Qwen2ForCausalLM) built from a Qwen2.5 config with
  random weights; where the full model would not fit one GPU, fewer layers (the planner scales
  per layer, so a layer-reduced model measures the same per-layer and fixed terms);
- fp32 parameters sharded with FSDP2 (world size 1: one process, one GPU) under a
  MixedPrecisionPolicy of bf16 compute and fp32 gradient reduction, wrapped as verl's
  apply_fsdp2 wraps (verl/utils/fsdp_utils.py: each decoder layer, the embeddings when they
  are not tied, then the root); torch AdamW (its default foreach implementation);
- micro batches of b sequences x 2048 tokens of random ids, SDPA attention (flash kernel), with
  and without HF gradient checkpointing (non-reentrant, as verl enables it);
- loss: per-token log-probabilities of the labels from fp32 log-softmax of the logits, times
  a random advantage (a policy-gradient loss without the clip, which needs no extra memory);
- each configuration runs after a warm-up step (so AdamW's states exist, as in every step but
  the first); phases measured separately with torch.cuda.max_memory_allocated /
  max_memory_reserved after reset_peak_memory_stats: forward+backward, optimizer step, and a
  no-grad forward (the log-prob pass of the actor and of the reference model).

Partial results are written after every configuration, so a run stopped at its time limit
still leaves data.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import gc
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Qwen2.5 config.json values (Hugging Face Qwen/Qwen2.5-*-Instruct, also data/model-shapes.yaml;
# tests/jobs/plan/test_gpu_memory.py checks the two agree). layers_run: the layer count measured.
MODELS = [
    {"model": "Qwen/Qwen2.5-0.5B-Instruct", "hidden_size": 896, "intermediate_size": 4864,
     "layers": 24, "attention_heads": 14, "kv_heads": 2, "vocab_size": 151936,
     "tie_word_embeddings": True, "layers_run": 24},
    {"model": "Qwen/Qwen2.5-1.5B-Instruct", "hidden_size": 1536, "intermediate_size": 8960,
     "layers": 28, "attention_heads": 12, "kv_heads": 2, "vocab_size": 151936,
     "tie_word_embeddings": True, "layers_run": 28},
    {"model": "Qwen/Qwen2.5-7B-Instruct", "hidden_size": 3584, "intermediate_size": 18944,
     "layers": 28, "attention_heads": 28, "kv_heads": 4, "vocab_size": 152064,
     "tie_word_embeddings": False, "layers_run": 4},
    {"model": "Qwen/Qwen2.5-7B-Instruct", "hidden_size": 3584, "intermediate_size": 18944,
     "layers": 28, "attention_heads": 28, "kv_heads": 4, "vocab_size": 152064,
     "tie_word_embeddings": False, "layers_run": 8},
    {"model": "Qwen/Qwen2.5-14B-Instruct", "hidden_size": 5120, "intermediate_size": 13824,
     "layers": 48, "attention_heads": 40, "kv_heads": 8, "vocab_size": 152064,
     "tie_word_embeddings": False, "layers_run": 4},
    {"model": "Qwen/Qwen2.5-32B-Instruct", "hidden_size": 5120, "intermediate_size": 27648,
     "layers": 64, "attention_heads": 40, "kv_heads": 8, "vocab_size": 152064,
     "tie_word_embeddings": False, "layers_run": 4},
    {"model": "Qwen/Qwen2.5-32B-Instruct", "hidden_size": 5120, "intermediate_size": 27648,
     "layers": 64, "attention_heads": 40, "kv_heads": 8, "vocab_size": 152064,
     "tie_word_embeddings": False, "layers_run": 8},
]
SEQUENCE = 2048
BATCHES = (1, 4, 8, 16)          # micro batches of 2048, 8192, 16384, 32768 tokens

# A second set, not used to fit the planner's constants: other widths (3B, 72B), another
# layer count (14B x 8) and 4096-token sequences. Its predictions were committed before it ran.
HOLDOUT_MODELS = [
    {"model": "Qwen/Qwen2.5-3B-Instruct", "hidden_size": 2048, "intermediate_size": 11008,
     "layers": 36, "attention_heads": 16, "kv_heads": 2, "vocab_size": 151936,
     "tie_word_embeddings": True, "layers_run": 36},
    {"model": "Qwen/Qwen2.5-14B-Instruct", "hidden_size": 5120, "intermediate_size": 13824,
     "layers": 48, "attention_heads": 40, "kv_heads": 8, "vocab_size": 152064,
     "tie_word_embeddings": False, "layers_run": 8},
    {"model": "Qwen/Qwen2.5-72B-Instruct", "hidden_size": 8192, "intermediate_size": 29568,
     "layers": 80, "attention_heads": 64, "kv_heads": 8, "vocab_size": 152064,
     "tie_word_embeddings": False, "layers_run": 2},
]
HOLDOUT_SEQUENCE = 4096
HOLDOUT_BATCHES = (1, 2, 4)      # 4096, 8192, 16384 tokens

SMOKE_MODELS = [
    {"model": "tiny-qwen2", "hidden_size": 64, "intermediate_size": 160, "layers": 2,
     "attention_heads": 4, "kv_heads": 2, "vocab_size": 512, "tie_word_embeddings": False,
     "layers_run": 2},
    {"model": "tiny-qwen2-tied", "hidden_size": 64, "intermediate_size": 160, "layers": 2,
     "attention_heads": 4, "kv_heads": 2, "vocab_size": 512, "tie_word_embeddings": True,
     "layers_run": 2},
]


def log(*args) -> None:
    print(f"[{time.strftime('%H:%M:%S')}]", *args, flush=True)


def environment(torch, transformers) -> dict:
    env = {"date_utc": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
           "python": platform.python_version(), "torch": torch.__version__,
           "transformers": transformers.__version__, "torch_cuda": torch.version.cuda,
           "hostname_kernel": platform.release()}
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        free, total = torch.cuda.mem_get_info()
        env.update(device=props.name, total_memory_bytes=props.total_memory,
                   mem_get_info_total_bytes=total, mem_get_info_free_bytes_at_start=free,
                   multiprocessors=props.multi_processor_count)
        try:
            smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                                  "--format=csv,noheader"], capture_output=True, text=True,
                                 timeout=30)
            env["nvidia_smi"] = smi.stdout.strip()
            env["driver"] = smi.stdout.strip().split(",")[1].strip() if smi.stdout else None
        except (OSError, subprocess.SubprocessError, IndexError) as err:
            env["nvidia_smi"] = f"unavailable: {err}"
    else:
        env["device"] = "cpu (smoke run: no memory figures)"
    return env


class Meter:
    """Peak allocated/reserved bytes of one phase (None on CPU)."""

    def __init__(self, torch, cuda: bool):
        self.torch, self.cuda = torch, cuda

    def start(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()
            self.torch.cuda.reset_peak_memory_stats()

    def allocated(self):
        return self.torch.cuda.memory_allocated() if self.cuda else None

    def stop(self) -> dict:
        if not self.cuda:
            return {"peak_allocated": None, "peak_reserved": None, "end_allocated": None}
        self.torch.cuda.synchronize()
        free, total = self.torch.cuda.mem_get_info()
        # device_used - end_reserved: what the CUDA context and libraries hold outside
        # PyTorch's caching allocator.
        return {"peak_allocated": self.torch.cuda.max_memory_allocated(),
                "peak_reserved": self.torch.cuda.max_memory_reserved(),
                "end_allocated": self.torch.cuda.memory_allocated(),
                "end_reserved": self.torch.cuda.memory_reserved(),
                "device_used": total - free}


def build(torch, spec: dict, device):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        vocab_size=spec["vocab_size"], hidden_size=spec["hidden_size"],
        intermediate_size=spec["intermediate_size"], num_hidden_layers=spec["layers_run"],
        num_attention_heads=spec["attention_heads"], num_key_value_heads=spec["kv_heads"],
        max_position_embeddings=32768, tie_word_embeddings=spec["tie_word_embeddings"],
        use_cache=False)
    config._attn_implementation = "sdpa"
    with torch.device(device):
        model = Qwen2ForCausalLM(config)        # fp32 parameters, random init
    model.train()
    mesh = init_device_mesh(device.type, (1,), mesh_dim_names=("fsdp",))
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    units = [m for m in model.modules()
             if type(m).__name__ == "Qwen2DecoderLayer"
             or (isinstance(m, torch.nn.Embedding) and not spec["tie_word_embeddings"])]
    for module in units:
        fully_shard(module, mesh=mesh, mp_policy=mp)
    fully_shard(model, mesh=mesh, mp_policy=mp)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6, betas=(0.9, 0.999),
                                  weight_decay=0.01)
    params = sum(p.numel() for p in model.parameters())
    return model, optimizer, params


def measure_reference(torch, meter, spec, device, batches, seq) -> list:
    """The reference model as verl builds it (bf16 parameters, FSDP2, no optimizer): a no-grad
    log-prob forward per micro batch. The first pass gathers the root unit, which FSDP2 keeps
    gathered after a forward; later passes start with it."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        vocab_size=spec["vocab_size"], hidden_size=spec["hidden_size"],
        intermediate_size=spec["intermediate_size"], num_hidden_layers=spec["layers_run"],
        num_attention_heads=spec["attention_heads"], num_key_value_heads=spec["kv_heads"],
        max_position_embeddings=32768, tie_word_embeddings=spec["tie_word_embeddings"],
        use_cache=False)
    config._attn_implementation = "sdpa"
    with torch.device(device):
        model = Qwen2ForCausalLM(config).to(torch.bfloat16)
    model.eval()
    mesh = init_device_mesh(device.type, (1,), mesh_dim_names=("fsdp",))
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for module in [m for m in model.modules() if type(m).__name__ == "Qwen2DecoderLayer"
                   or (isinstance(m, torch.nn.Embedding) and not spec["tie_word_embeddings"])]:
        fully_shard(module, mesh=mesh, mp_policy=mp)
    fully_shard(model, mesh=mesh, mp_policy=mp)
    rows = []
    for batch in batches:
        ids = torch.randint(0, spec["vocab_size"], (batch, seq), device=device)
        gc.collect()
        if meter.cuda:
            torch.cuda.empty_cache()
        row = {"batch": batch, "sequence": seq, "tokens": batch * seq,
               "start_allocated": meter.allocated()}
        try:
            meter.start()
            with torch.no_grad():
                logits = model(input_ids=ids, use_cache=False).logits
                logp = -torch.nn.functional.cross_entropy(
                    logits.float().view(-1, logits.shape[-1]),
                    torch.roll(ids, -1, dims=1).view(-1), reduction="none")
                del logits, logp
            row["reference_forward"] = meter.stop()
        except torch.cuda.OutOfMemoryError as err:
            row["out_of_memory"] = str(err).split("\n")[0][:300]
        rows.append(row)
        log(f"  reference tokens={batch * seq} "
            f"peak={row.get('reference_forward', {}).get('peak_allocated')}")
        if "out_of_memory" in row:
            break
    del model
    gc.collect()
    if meter.cuda:
        torch.cuda.empty_cache()
    return rows


def loss_of(torch, model, ids):
    logits = model(input_ids=ids, use_cache=False).logits           # bf16 (param dtype)
    labels = torch.roll(ids, -1, dims=1)
    logp = -torch.nn.functional.cross_entropy(
        logits.float().view(-1, logits.shape[-1]), labels.view(-1), reduction="none")
    del logits
    advantage = torch.randn_like(logp)
    return -(logp * advantage).mean()


def set_checkpointing(model, on: bool) -> None:
    if on:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    else:
        model.gradient_checkpointing_disable()


def measure_training_step(torch, meter, model, optimizer, spec, *, batch, seq, checkpointing, device) -> dict:
    set_checkpointing(model, checkpointing)
    row = {"batch": batch, "sequence": seq, "tokens": batch * seq,
           "gradient_checkpointing": checkpointing}
    optimizer.zero_grad(set_to_none=True)
    gc.collect()
    if meter.cuda:
        torch.cuda.empty_cache()
    ids = torch.randint(0, spec["vocab_size"], (batch, seq), device=device)
    row["start_allocated"] = meter.allocated()
    meter.start()
    loss = loss_of(torch, model, ids)
    loss.backward()
    del loss
    row["forward_backward"] = meter.stop()
    meter.start()
    optimizer.step()
    row["optimizer_step"] = meter.stop()
    optimizer.zero_grad(set_to_none=True)
    gc.collect()
    if meter.cuda:
        torch.cuda.empty_cache()
    row["logprob_start_allocated"] = meter.allocated()
    meter.start()
    with torch.no_grad():
        logits = model(input_ids=ids, use_cache=False).logits
        labels = torch.roll(ids, -1, dims=1)
        logp = -torch.nn.functional.cross_entropy(
            logits.float().view(-1, logits.shape[-1]), labels.view(-1), reduction="none")
        del logits, logp
    row["logprob_forward"] = meter.stop()
    return row


@dataclass
class Calibration:
    """One run: what every configuration shares, and the result it adds to (saved after each)."""

    torch: Any
    meter: Meter
    device: Any
    seq: int
    batches: tuple[int, ...]
    started: float
    budget_s: float
    out: Path
    result: dict

    def over_budget(self) -> bool:
        """Start no new configuration after the budget."""
        return time.monotonic() - self.started > self.budget_s

    def save(self) -> None:
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.out.write_text(json.dumps(self.result, indent=1) + "\n")

    def free_cached_memory(self) -> None:
        gc.collect()
        if self.meter.cuda:
            self.torch.cuda.empty_cache()

    def calibrate_model(self, spec: dict, *, with_reference: bool) -> None:
        """Build one model, measure its configurations, free it; then its reference model."""
        torch, meter = self.torch, self.meter
        self.free_cached_memory()
        base = meter.allocated()
        t0 = time.monotonic()
        try:
            model, optimizer, params = build(torch, spec, self.device)
        except torch.cuda.OutOfMemoryError as err:
            self.result["skipped"].append({**spec, "why": f"out of memory building: {err}"[:300]})
            self.save()
            return
        entry = {**spec, "parameters": params, "allocated_before_build": base,
                 "allocated_after_build": meter.allocated()}
        log(f"{spec['model']} layers={spec['layers_run']} params={params:,} "
            f"built in {time.monotonic() - t0:.1f}s")
        # Warm-up: AdamW creates its states at the first step; every later step has them.
        measure_training_step(torch, meter, model, optimizer, spec, batch=1, seq=self.seq, checkpointing=True,
                device=self.device)
        entry["allocated_after_warmup"] = meter.allocated()
        self.measure_rows(model, optimizer, spec, entry)
        del model, optimizer
        self.free_cached_memory()
        entry["allocated_after_free"] = meter.allocated()
        self.save()
        if with_reference:
            entry["reference_rows"] = measure_reference(torch, meter, spec, self.device, self.batches,
                                                        self.seq)
            entry["allocated_after_reference"] = meter.allocated()
            self.save()

    def measure_rows(self, model, optimizer, spec: dict, entry: dict) -> None:
        """Each micro batch with and without gradient checkpointing, smallest first, until one is
        out of memory or the budget is spent; the entry is saved after every row."""
        torch, seq = self.torch, self.seq
        rows = []
        for checkpointing in (True, False):
            for batch in self.batches:
                if self.over_budget():
                    rows.append({"batch": batch, "gradient_checkpointing": checkpointing,
                                 "skipped": "time budget"})
                    break
                try:
                    row = measure_training_step(torch, self.meter, model, optimizer, spec, batch=batch, seq=seq,
                                  checkpointing=checkpointing, device=self.device)
                except torch.cuda.OutOfMemoryError as err:
                    row = {"batch": batch, "sequence": seq, "tokens": batch * seq,
                           "gradient_checkpointing": checkpointing,
                           "out_of_memory": str(err).split("\n")[0][:300]}
                if "out_of_memory" in row:     # the error (and its frames' tensors) is gone now
                    optimizer.zero_grad(set_to_none=True)
                    self.free_cached_memory()
                rows.append(row)
                fb = row.get("forward_backward", {})
                log(f"  ckpt={checkpointing} tokens={batch * seq} "
                    f"fb_peak={fb.get('peak_allocated')} "
                    f"opt_peak={row.get('optimizer_step', {}).get('peak_allocated')} "
                    f"lp_peak={row.get('logprob_forward', {}).get('peak_allocated')} "
                    f"oom={'out_of_memory' in row}")
                entry["rows"] = rows
                self.result["measurements"] = [m for m in self.result["measurements"]
                                               if m is not entry] + [entry]
                self.save()
                if "out_of_memory" in row:
                    break                       # larger batches would not fit either


# ------------------------------------------------------------------------------------------------
# The frameworks' own log-prob and loss paths (--paths)
# ------------------------------------------------------------------------------------------------
# Each path runs the framework's code at its pinned tag, loaded from its source files (not a
# stand-in): verl 0.7.1 (verl/utils/torch_functional.py, verl/utils/experimental/torch_functional.py,
# verl/models/transformers/dense_common.py, with verl/utils/device.py they import), flash-attn
# 2.8.3's Triton cross entropy (flash_attn/ops/triton/cross_entropy.py: the version verl v0.7.1's
# docker/Dockerfile.stable.vllm installs, which verl's logprobs_from_logits picks up) and NeMo RL
# v0.5.0 (nemo_rl/distributed/model_utils.py). Their packages' __init__ files import Ray,
# tensordict, wandb and more, none of which the measured functions use: the packages are
# registered empty and only these files are executed. The model forward around them is copied
# from the framework, with the file and lines it follows.

# The dev stack's model and the prod stack's first (each layer-reduced), then a tied embedding.
PATH_MODELS = [MODELS[2], MODELS[5], MODELS[0]]           # 7B x 4, 32B x 4, 0.5B (24 layers)
PATH_TOKENS = (4096, 12288, 24000)                        # tokens in one micro batch on one GPU
HOLDOUT_PATH_MODELS = HOLDOUT_MODELS                      # 3B (36 layers), 14B x 8, 72B x 2
HOLDOUT_PATH_TOKENS = (8192, 20480)
SMOKE_PATH_TOKENS = (64, 128)
PADDED_SEQUENCE = 2048          # rows x 2048 when verl runs without padding removal, and NeMo RL
RESPONSE_LENGTHS = (512, 1536)  # verl without padding removal keeps the last R positions' logits
HOLDOUT_RESPONSE_LENGTHS = (1024,)
WARMUP_TOKENS = 512             # each path runs once at this size first: compiles stay unmeasured
TEMPERATURE = 1.0               # verl rollout.temperature and NeMo RL generation.temperature default
ENTROPY_COEFF = 0.001           # any non-zero actor.entropy_coeff puts the entropy in verl's loss


@dataclass(frozen=True)
class PathVariant:
    """One framework path: which code runs and with which of its options."""

    name: str
    framework: str                  # verl | nemo-rl
    phase: str                      # forward_backward | logprob_forward
    remove_padding: bool = True     # verl actor_rollout_ref.model.use_remove_padding
    calculate_entropy: bool = False
    entropy_coeff: float = 0.0      # verl actor.entropy_coeff (update_policy)
    entropy_checkpointing: bool = False
    chunking: bool = False          # verl actor.entropy_from_logits_with_chunking
    torch_compile: bool = True      # verl actor.use_torch_compile
    fused: bool = False             # verl model.use_fused_kernels (impl_backend torch, its default)
    vocab_parallel: bool = False    # NeMo RL under TP: DistributedLogprob on the local vocab shard
    temperature: float = TEMPERATURE  # verl rollout.temperature (0.9.1 scales out of place unless 1.0)

    def options(self) -> dict:
        return {k: v for k, v in dataclasses.asdict(self).items()
                if k not in ("name", "framework", "phase")}


VERL_PATHS = (
    # update_policy: calculate_entropy = calculate_entropy or entropy_coeff != 0 (dp_actor.py)
    PathVariant("verl.update_policy", "verl", "forward_backward"),
    PathVariant("verl.update_policy.entropy", "verl", "forward_backward", calculate_entropy=True,
                entropy_coeff=ENTROPY_COEFF),
    PathVariant("verl.update_policy.entropy.checkpointing", "verl", "forward_backward",
                calculate_entropy=True, entropy_coeff=ENTROPY_COEFF, entropy_checkpointing=True),
    PathVariant("verl.update_policy.entropy.chunking", "verl", "forward_backward",
                calculate_entropy=True, entropy_coeff=ENTROPY_COEFF, chunking=True),
    PathVariant("verl.update_policy.fused", "verl", "forward_backward", fused=True),
    # compute_log_prob: the actor's old log-probs with entropy (fsdp_workers.py:
    # calculate_entropy = not is_lora), the reference's without
    PathVariant("verl.compute_log_prob.entropy", "verl", "logprob_forward", calculate_entropy=True),
    PathVariant("verl.compute_log_prob.entropy.eager", "verl", "logprob_forward",
                calculate_entropy=True, torch_compile=False),
    PathVariant("verl.compute_log_prob.entropy.chunking", "verl", "logprob_forward",
                calculate_entropy=True, chunking=True),
    PathVariant("verl.compute_log_prob.entropy.chunking.eager", "verl", "logprob_forward",
                calculate_entropy=True, chunking=True, torch_compile=False),
    PathVariant("verl.compute_log_prob", "verl", "logprob_forward"),
    PathVariant("verl.compute_log_prob.fused", "verl", "logprob_forward", calculate_entropy=True,
                fused=True),
)
VERL_PADDED_PATHS = (
    PathVariant("verl.update_policy.padded", "verl", "forward_backward", remove_padding=False),
    PathVariant("verl.compute_log_prob.entropy.padded", "verl", "logprob_forward",
                remove_padding=False, calculate_entropy=True),
    PathVariant("verl.compute_log_prob.padded", "verl", "logprob_forward", remove_padding=False),
)
NEMO_RL_PATHS = (
    PathVariant("nemo_rl.train", "nemo-rl", "forward_backward"),
    PathVariant("nemo_rl.train.vocab_parallel", "nemo-rl", "forward_backward", vocab_parallel=True),
    PathVariant("nemo_rl.get_logprobs", "nemo-rl", "logprob_forward"),
    PathVariant("nemo_rl.get_logprobs.vocab_parallel", "nemo-rl", "logprob_forward",
                vocab_parallel=True),
)
# Also measured without gradient checkpointing (the rest run with it, as both stacks do).
WITHOUT_CHECKPOINTING = ("verl.update_policy", "nemo_rl.train", "nemo_rl.train.vocab_parallel")
# verl 0.9.1 (verl/workers/engine/fsdp/transformer_impl.py FSDPEngineWithLMHead): the same paths,
# plus a temperature other than 1.0, which 0.9.1 divides out of place (_scale_logits_by_temperature,
# line 98) where 0.7.1 divided in place whatever its value; its padded branch has no response
# length (prepare_model_outputs takes the log-probs of every token, lines 1475-1522).
SAMPLING_TEMPERATURE = 0.7          # any value but 1.0 takes 0.9.1's division
VERL_091_PATHS = (
    *VERL_PATHS,
    PathVariant("verl.update_policy.temperature", "verl", "forward_backward",
                temperature=SAMPLING_TEMPERATURE),
    PathVariant("verl.compute_log_prob.entropy.temperature", "verl", "logprob_forward",
                calculate_entropy=True, temperature=SAMPLING_TEMPERATURE),
)
VERL_VERSIONS = ("0.7.1", "0.9.1")


def _sha256(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def _empty_package(name: str, path: Path | None = None):
    import types

    module = types.ModuleType(name)
    module.__path__ = [str(path)] if path else []
    sys.modules[name] = module
    return module


def _load_file_as(name: str, path: Path):
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _load_functions(path: Path, names: tuple[str, ...], namespace: dict) -> dict:
    """The named top-level functions of a source file, compiled from that file alone (its
    imports are not run): verl 0.9.1's transformer_impl.py imports its whole engine stack, of
    which the measured branch needs two small functions."""
    import ast

    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    picked = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name in names]
    if {node.name for node in picked} != set(names):
        raise RuntimeError(f"{path}: expected functions {names}")
    exec(compile(ast.Module(body=picked, type_ignores=[]), str(path), "exec"), namespace)
    return {name: namespace[name] for name in names}


@dataclass
class FrameworkCode:
    """verl's, flash-attn's and NeMo RL's modules as imported from their source files."""

    verl_functional: Any            # verl.utils.torch_functional
    verl_dense_common: Any          # verl.models.transformers.dense_common
    nemo_model_utils: Any           # nemo_rl.distributed.model_utils (None: not loaded)
    sources: dict
    verl_version: str = "0.7.1"
    # verl 0.9.1 transformer_impl.py: _is_scalar_unit_temperature, _scale_logits_by_temperature
    verl_engine: dict = dataclasses.field(default_factory=dict)

    @classmethod
    def load(cls, verl_src: Path, flash_attn_ce: Path, nemo_rl_src: Path | None,
             verl_version: str = "0.7.1") -> FrameworkCode:
        import importlib

        # transformers probes for flash_attn when its modeling code is first imported: that
        # happens before the stand-in packages below exist, and they go again after verl's
        # import (transformers must keep seeing no flash_attn package: the models use SDPA).
        importlib.import_module("transformers.models.qwen2.modeling_qwen2")
        stand_ins = ["flash_attn", "flash_attn.ops", "flash_attn.ops.triton",
                     "flash_attn.ops.triton.cross_entropy"]
        # flash-attn: verl/utils/torch_functional.py imports
        # flash_attn.ops.triton.cross_entropy.cross_entropy_loss when it can.
        for name in stand_ins[:3]:
            _empty_package(name)
        _load_file_as("flash_attn.ops.triton.cross_entropy", flash_attn_ce)
        if importlib.util.find_spec("tensordict") is None:
            # torch_functional.py imports TensorDict for annotations and functions not run here.
            stub = _empty_package("tensordict")
            stub.TensorDict = type("TensorDict", (), {})
            stand_ins.append("tensordict")
        for name in ("verl", "verl.utils", "verl.utils.experimental", "verl.models",
                     "verl.models.transformers"):
            _empty_package(name, verl_src.joinpath(*name.split(".")))
        functional = importlib.import_module("verl.utils.torch_functional")
        if not functional.FLAH_ATTN_CROSS_ENTROPY_LOSS_AVAILABLE:
            raise RuntimeError("verl did not pick up flash-attn's cross entropy")
        if verl_version == "0.9.1":
            # 0.9.1's fused kernels take their log-probs with flash-attn's cross entropy when
            # they can import it (verl/utils/experimental/torch_functional.py lines 27-32).
            experimental = importlib.import_module("verl.utils.experimental.torch_functional")
            if not experimental._FLASH_ATTN_CROSS_ENTROPY_AVAILABLE:
                raise RuntimeError("verl's fused kernels did not pick up flash-attn's cross entropy")
        for name in stand_ins:
            sys.modules.pop(name, None)
        dense_common = importlib.import_module("verl.models.transformers.dense_common")
        importlib.import_module("verl.utils.experimental.torch_functional")
        files = {
            "verl/utils/torch_functional.py": verl_src / "verl/utils/torch_functional.py",
            "verl/utils/device.py": verl_src / "verl/utils/device.py",
            "verl/utils/experimental/torch_functional.py":
                verl_src / "verl/utils/experimental/torch_functional.py",
            "verl/models/transformers/dense_common.py":
                verl_src / "verl/models/transformers/dense_common.py",
            "flash_attn/ops/triton/cross_entropy.py": flash_attn_ce,
        }
        engine: dict = {}
        if verl_version == "0.9.1":
            impl = verl_src / "verl/workers/engine/fsdp/transformer_impl.py"
            engine = _load_functions(impl, ("_is_scalar_unit_temperature",
                                            "_scale_logits_by_temperature"), {"torch": sys.modules["torch"]})
            files["verl/workers/engine/fsdp/transformer_impl.py"] = impl
            files["verl/plugin/platform/platform_manager.py"] = \
                verl_src / "verl/plugin/platform/platform_manager.py"
        model_utils = None
        if nemo_rl_src is not None:
            for name in ("nemo_rl", "nemo_rl.distributed"):
                _empty_package(name, nemo_rl_src.joinpath(*name.split(".")))
            model_utils = importlib.import_module("nemo_rl.distributed.model_utils")
            files["nemo_rl/distributed/model_utils.py"] = nemo_rl_src / "nemo_rl/distributed/model_utils.py"
        sources = {key: {"sha256": _sha256(path)} for key, path in files.items()}
        return cls(functional, dense_common, model_utils, sources, verl_version, engine)


def build_nemo_rl(torch, spec: dict, device, checkpointing: bool):
    """The policy as NeMo RL v0.5.0's DTensorPolicyWorkerV2 builds it at TP 1: fp32 master
    weights; MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32, output_dtype=fp32)
    (dtensor_policy_worker_v2.py); then Automodel's DefaultParallelizationStrategy (Automodel
    1d42deb, NeMo RL's submodule: components/distributed/parallelizer.py): checkpoint_wrapper
    around each layer's mlp, self_attn and both norms when activation checkpointing is on;
    fully_shard on each decoder layer (the last one not resharded after forward), then the root
    with reshard_after_forward=False. The embedding and LM head stay in the root unit."""
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        vocab_size=spec["vocab_size"], hidden_size=spec["hidden_size"],
        intermediate_size=spec["intermediate_size"], num_hidden_layers=spec["layers_run"],
        num_attention_heads=spec["attention_heads"], num_key_value_heads=spec["kv_heads"],
        max_position_embeddings=32768, tie_word_embeddings=spec["tie_word_embeddings"],
        use_cache=False)
    config._attn_implementation = "sdpa"
    with torch.device(device):
        model = Qwen2ForCausalLM(config)
    model.train()
    layers = model.model.layers
    if checkpointing:
        for layer in layers:
            layer.mlp = checkpoint_wrapper(layer.mlp)
            layer.self_attn = checkpoint_wrapper(layer.self_attn)
            layer.input_layernorm = checkpoint_wrapper(layer.input_layernorm)
            layer.post_attention_layernorm = checkpoint_wrapper(layer.post_attention_layernorm)
    mesh = init_device_mesh(device.type, (1,), mesh_dim_names=("dp",))
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32,
                              output_dtype=torch.float32)
    for layer_id, layer in enumerate(layers):
        fully_shard(layer, mesh=mesh, mp_policy=mp, reshard_after_forward=layer_id < len(layers) - 1)
    fully_shard(model, mesh=mesh, mp_policy=mp, reshard_after_forward=False)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6, betas=(0.9, 0.999), weight_decay=0.01)
    return model, optimizer, sum(p.numel() for p in model.parameters())


def path_builds(verl_version: str = "0.7.1") -> list[tuple[str, bool, tuple[PathVariant, ...]]]:
    """(wrapping, checkpointing, paths) in the order they run on each model. verl 0.9.1 runs
    verl's builds alone: NeMo RL's path is the same at v0.5.0 and v0.7.0 (docs/memory-planner.md)."""
    if verl_version == "0.9.1":
        verl = VERL_091_PATHS + VERL_PADDED_PATHS
        return [("verl", True, verl),
                ("verl", False, tuple(v for v in verl if v.name in WITHOUT_CHECKPOINTING))]
    verl = VERL_PATHS + VERL_PADDED_PATHS
    return [("verl", True, verl),
            ("nemo-rl", True, NEMO_RL_PATHS),
            ("verl", False, tuple(v for v in verl if v.name in WITHOUT_CHECKPOINTING)),
            ("nemo-rl", False, tuple(v for v in NEMO_RL_PATHS if v.name in WITHOUT_CHECKPOINTING))]


def responses_for(variant: PathVariant, lengths: tuple[int, ...],
                  verl_version: str = "0.7.1") -> tuple[int | None, ...]:
    """The response lengths a path runs with: only verl 0.7.1's padded rows keep a response
    slice (dp_actor.py: logits[:, -response_length - 1 : -1]); 0.9.1's keep every token."""
    padded = variant.framework == "verl" and not variant.remove_padding
    return lengths if padded and verl_version == "0.7.1" else (None,)


def planner_path(framework: str, options: dict, response_length: int | None, sequence: int,
                 version: str):
    """The planner's LogProbPath (jobs/plan/logprob_paths.py) for a measured path of `framework`
    at `version`, and whether its log-prob pass computes the entropy. Rows without a temperature
    option ran at TEMPERATURE (their file's "temperature")."""
    from jobs.plan.logprob_paths import LogProbPath

    if framework == "nemo-rl":
        return LogProbPath("nemo-rl", version, vocab_parallel=options["vocab_parallel"]), False
    fraction = response_length / sequence if response_length else 1.0
    path = LogProbPath("verl", version, remove_padding=options["remove_padding"],
                       response_fraction=fraction, entropy_in_loss=options["entropy_coeff"] != 0,
                       torch_compile=options["torch_compile"], chunking=options["chunking"],
                       entropy_checkpointing=options["entropy_checkpointing"], fused=options["fused"],
                       temperature=options.get("temperature", TEMPERATURE))
    return path, options["calculate_entropy"]


def predict_paths(args) -> dict:
    """The planner's predictions for every row a --paths run would measure (no GPU, no torch):
    written and committed before the held-out run, as its check."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from jobs.plan.memory_model import path_estimate, replace_shape
    from jobs.plan.model_shapes import shape_for

    models = HOLDOUT_PATH_MODELS if args.holdout else PATH_MODELS
    tokens_list = HOLDOUT_PATH_TOKENS if args.holdout else PATH_TOKENS
    lengths = HOLDOUT_RESPONSE_LENGTHS if args.holdout else RESPONSE_LENGTHS
    versions = framework_versions(args.verl_version)
    predictions = []
    for spec in models:
        shape = replace_shape(shape_for(spec["model"]), spec["layers_run"])
        for wrapping, checkpointing, variants in path_builds(args.verl_version):
            for tokens in tokens_list:
                for variant in variants:
                    for response_length in responses_for(variant, lengths, args.verl_version):
                        rows, sequence = batch_shape(variant, tokens)
                        path, entropy = planner_path(variant.framework, variant.options(),
                                                     response_length, sequence,
                                                     versions[variant.framework])
                        estimate = path_estimate(shape, path, phase=variant.phase,
                                                 tokens=rows * sequence, checkpointing=checkpointing,
                                                 entropy=entropy)
                        predictions.append({
                            "model": spec["model"], "layers_run": spec["layers_run"],
                            "wrapping": wrapping, "gradient_checkpointing": checkpointing,
                            "path": variant.name, "phase": variant.phase, "tokens": rows * sequence,
                            "response_length": response_length,
                            "predicted_peak_allocated": round(estimate),
                            "predicted_gib": round(estimate / 2**30, 2)})
    return {"what": "the planner's predicted peak allocated bytes (jobs/plan/memory_model.py "
                    "path_estimate) of every row of a tools/calibrate_memory.py --paths"
                    + (" --holdout" if args.holdout else "") + " run, written before it ran",
            "framework_versions": versions,
            "date_utc": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "command": " ".join(["python3", *sys.argv]), "predictions": predictions}


def framework_versions(verl_version: str) -> dict[str, str]:
    """The framework versions a --paths run measures: verl's chosen one, and with verl 0.7.1 also
    NeMo RL 0.5.0 (the --nemo-rl-src tree it was written for)."""
    return {"verl": verl_version} if verl_version != "0.7.1" else {"verl": "0.7.1", "nemo-rl": "0.5.0"}


def batch_shape(variant: PathVariant, tokens: int) -> tuple[int, int]:
    """(rows, sequence) of a micro batch of about `tokens`: verl with padding removal packs one
    row (dp_actor.py: input_ids_rmpad (1, total_nnz)); padded verl and NeMo RL take rows of
    PADDED_SEQUENCE."""
    if variant.framework == "verl" and variant.remove_padding:
        return 1, tokens
    sequence = min(PADDED_SEQUENCE, tokens)
    return max(tokens // sequence, 1), sequence


@dataclass
class PathBatch:
    """One micro batch as the framework hands it to the model."""

    input_ids: Any                  # (rows, sequence)
    position_ids: Any
    attention_mask: Any             # None: verl's packed row (flash-attn varlen); else all ones
    response_length: int | None     # verl without padding removal: logits kept for the response

    @classmethod
    def make(cls, torch, variant: PathVariant, tokens: int, vocab: int, device,
             response_length: int | None) -> PathBatch:
        rows, sequence = batch_shape(variant, tokens)
        ids = torch.randint(0, vocab, (rows, sequence), device=device)
        position_ids = torch.arange(sequence, device=device).repeat(rows, 1)
        mask = None if variant.framework == "verl" and variant.remove_padding else \
            torch.ones((rows, sequence), dtype=torch.bool, device=device)
        return cls(ids, position_ids, mask, response_length)


@dataclass
class PathRunner:
    """Runs one framework path on one model: the framework's code, then the loss's backward."""

    torch: Any
    code: FrameworkCode
    device: Any
    group: Any                      # the tensor-parallel group for DistributedLogprob (size 1)
    compiled: dict                  # verl compiles its entropy functions once per actor

    def entropy_function(self, variant: PathVariant):
        """dp_actor.py __init__: entropy_from_logits_with_chunking if configured, else
        entropy_from_logits, through torch.compile(..., dynamic=True) when use_torch_compile."""
        functional = self.code.verl_functional
        function = (functional.entropy_from_logits_with_chunking if variant.chunking
                    else functional.entropy_from_logits)
        if not variant.torch_compile:
            return function
        key = function.__name__
        if key not in self.compiled:
            self.compiled[key] = self.torch.compile(function, dynamic=True)
        return self.compiled[key]

    def verl_forward_micro_batch(self, model, batch: PathBatch, variant: PathVariant,
                                 calculate_entropy: bool):
        """verl/workers/actor/dp_actor.py (v0.7.1) DataParallelPPOActor._forward_micro_batch,
        the branches a Qwen2 actor on one GPU takes (no Ulysses, no multimodal inputs): with
        padding removal the packed row, logits_rmpad.div_(temperature), logprobs_from_logits
        with inplace_backward = not calculate_entropy, the entropy through the (compiled)
        entropy function, checkpointed when entropy_checkpointing; without padding removal the
        response slice, logprobs_from_logits's default inplace_backward and eager
        entropy_from_logits; with use_fused_kernels the patched forward's log_probs/entropy."""
        torch, functional = self.torch, self.code.verl_functional
        entropy = None
        with torch.autocast(device_type=self.device.type, dtype=torch.bfloat16):
            extra_args = {"temperature": TEMPERATURE, "return_dict": True} if variant.fused else {}
            if variant.remove_padding:
                input_ids_rmpad_rolled = torch.roll(batch.input_ids, shifts=-1, dims=1).squeeze(0)
                output = model(input_ids=batch.input_ids, attention_mask=None,
                               position_ids=batch.position_ids, use_cache=False, **extra_args)
                if variant.fused:
                    log_probs = output.log_probs.squeeze(0)
                    entropy = output.entropy.squeeze(0)
                else:
                    logits_rmpad = output.logits.squeeze(0)
                    logits_rmpad.div_(TEMPERATURE)
                    log_probs = functional.logprobs_from_logits(
                        logits=logits_rmpad, labels=input_ids_rmpad_rolled,
                        inplace_backward=not calculate_entropy)
                    if calculate_entropy:
                        compute = self.entropy_function(variant)
                        entropy = (compute(logits_rmpad) if not variant.entropy_checkpointing
                                   else torch.utils.checkpoint.checkpoint(compute, logits_rmpad))
            else:
                response_length = batch.response_length
                responses = batch.input_ids[:, -response_length:]
                output = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                               position_ids=batch.position_ids, use_cache=False)
                logits = output.logits
                logits.div_(TEMPERATURE)
                logits = logits[:, -response_length - 1 : -1, :]
                log_probs = functional.logprobs_from_logits(logits, responses)
                if calculate_entropy:
                    entropy = (functional.entropy_from_logits(logits)
                               if not variant.entropy_checkpointing
                               else torch.utils.checkpoint.checkpoint(
                                   functional.entropy_from_logits, logits))
        return log_probs, entropy

    def verl091_forward_micro_batch(self, model, batch: PathBatch, variant: PathVariant,
                                    calculate_entropy: bool):
        """verl 0.9.1 verl/workers/engine/fsdp/transformer_impl.py FSDPEngineWithLMHead, the
        branches a Qwen2 actor on one GPU takes (no Ulysses, no static padding, no distillation):
        forward_step (line 1546) runs the model and prepare_model_outputs under autocast;
        prepare_model_inputs (line 1151) turns the micro batch's host-scalar temperature into a
        per-row float32 tensor and notes whether it is 1.0 (_is_scalar_unit_temperature: the
        trainer passes rollout.temperature, a float, verl/trainer/ppo/v1/trainer_base.py lines
        1652-1656 and 1827); prepare_model_outputs (line 1332): with padding removal the packed
        row, _scale_logits_by_temperature (a no-op at 1.0, else logits / temperature out of place),
        the (compiled) entropy, checkpointed when entropy_checkpointing, and logprobs_from_logits
        with inplace_backward = not calculate_entropy (lines 1358-1432); without padding removal
        the whole padded rows scaled, eager entropy_from_logits over every position, the valid
        tokens narrowed and concatenated, logprobs_from_logits with its default in-place backward
        (lines 1475-1522); with use_fused_kernels the patched forward's log_probs/entropy, its
        labels passed as shift_labels (lines 1315-1326, 1362-1366)."""
        torch, functional = self.torch, self.code.verl_functional
        is_unit = self.code.verl_engine["_is_scalar_unit_temperature"]
        scale = self.code.verl_engine["_scale_logits_by_temperature"]
        rows, sequence = batch.input_ids.shape
        temperature_item = variant.temperature
        temperature_is_one = is_unit(temperature_item)
        temperature = torch.tensor([temperature_item] * rows, device=self.device).to(torch.float32)
        entropy = None
        with torch.autocast(device_type=self.device.type, dtype=torch.bfloat16):
            if variant.remove_padding:
                # expand_as_nested(temperature, input_ids).values(): one value per packed token
                temperature_rmpad = temperature.repeat_interleave(sequence)
                input_ids_rmpad_rolled = torch.roll(batch.input_ids, shifts=-1, dims=1).squeeze(0)
                extra_args = ({"temperature": temperature_item, "return_dict": True,
                               "shift_labels": input_ids_rmpad_rolled.unsqueeze(0)}
                              if variant.fused else {})
                output = model(input_ids=batch.input_ids, attention_mask=None,
                               position_ids=batch.position_ids, use_cache=False, **extra_args)
                if variant.fused:
                    log_probs = output.log_probs.squeeze(0)
                    entropy = output.entropy.squeeze(0) if calculate_entropy else None
                    return log_probs, entropy
                logits_rmpad = output.logits.squeeze(0)
                logits_rmpad = scale(logits_rmpad, temperature_rmpad.unsqueeze(-1),
                                     is_unit_temperature=temperature_is_one)
                if calculate_entropy:
                    compute = self.entropy_function(variant)
                    if not variant.entropy_checkpointing:
                        entropy = (compute(logits_rmpad, chunk_size=2048) if variant.chunking
                                   else compute(logits_rmpad))
                    else:
                        entropy = torch.utils.checkpoint.checkpoint(compute, logits_rmpad)
                log_probs = functional.logprobs_from_logits(
                    logits=logits_rmpad, labels=input_ids_rmpad_rolled,
                    inplace_backward=not calculate_entropy)
                return log_probs, entropy
            input_ids_rmpad_rolled = torch.roll(batch.input_ids.reshape(-1), shifts=-1, dims=0)
            output = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask.to(torch.int32),
                           position_ids=batch.position_ids, use_cache=False)
            logits = output.logits
            logits = scale(logits, temperature.unsqueeze(-1).unsqueeze(-1),
                           is_unit_temperature=temperature_is_one)
            if calculate_entropy:
                entropy = (functional.entropy_from_logits(logits) if not variant.entropy_checkpointing
                           else torch.utils.checkpoint.checkpoint(functional.entropy_from_logits, logits))
            seq_lengths = torch.full((rows,), sequence, device=self.device, dtype=torch.int64)
            starts = torch.zeros_like(seq_lengths)
            logits = torch.nested.narrow(logits, 1, starts, seq_lengths, layout=torch.jagged)
            logits_rmpad = torch.cat([t for t in logits.unbind()])
            log_probs = functional.logprobs_from_logits(logits=logits_rmpad, labels=input_ids_rmpad_rolled)
            if entropy is not None:
                entropy = torch.nested.narrow(entropy, 1, starts, seq_lengths, layout=torch.jagged)
                entropy = torch.cat([t for t in entropy.unbind()])
        return log_probs, entropy

    def nemo_rl_logits(self, model, batch: PathBatch):
        """dtensor_policy_worker_v2.py (v0.5.0) train/get_logprobs: the model under autocast,
        outputs.logits (fp32: the FSDP output_dtype), _apply_temperature_scaling (div_)."""
        torch = self.torch
        with torch.autocast(device_type=self.device.type, dtype=torch.bfloat16):
            outputs = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                            position_ids=batch.position_ids, use_cache=False)
        logits = outputs.logits
        del outputs
        logits.div_(TEMPERATURE)
        return logits

    def nemo_rl_token_logprobs(self, logits, input_ids, variant: PathVariant, train: bool):
        """The log-probs of the next tokens as NeMo RL v0.5.0 takes them. Training:
        ClippedPGLossFn.__call__ (algorithms/loss_functions.py): next_token_logits.to(float32),
        then, vocab-parallel (a DTensor under TP), get_logprobs_from_vocab_parallel_logits ->
        dtensor_from_parallel_logits_to_logprobs (DistributedLogprob) on the local shard, else
        log_softmax of logits[:, :-1] and gather. get_logprobs (dtensor_policy_worker_v2.py):
        the same function under TP (inference_only), else logits.to(float32), log_softmax,
        [:, :-1], gather."""
        torch = self.torch
        if variant.vocab_parallel:
            next_token_logits = logits.to(torch.float32) if train else logits
            vocab = next_token_logits.shape[-1]
            return self.code.nemo_model_utils.dtensor_from_parallel_logits_to_logprobs(
                next_token_logits, input_ids, 0, vocab, self.group,
                inference_only=not torch.is_grad_enabled())
        if train:
            next_token_logits = logits.to(torch.float32)
            next_token_logprobs = torch.nn.functional.log_softmax(next_token_logits[:, :-1], dim=-1)
            next_tokens = input_ids[:, 1:]
            return next_token_logprobs.gather(dim=-1, index=next_tokens.unsqueeze(-1)).squeeze(-1)
        logits = logits.to(torch.float32)
        log_probs = torch.nn.functional.log_softmax(logits, dim=-1)
        next_tokens = input_ids[:, 1:]
        log_probs = log_probs[:, :-1]
        token_logprobs = log_probs.gather(dim=-1, index=next_tokens.unsqueeze(-1)).squeeze(-1)
        del log_probs
        return token_logprobs

    def policy_loss(self, log_probs, entropy, entropy_coeff: float):
        """A GRPO step's loss on the per-token log-probs (clipped ratio, low-variance KL to the
        reference, the entropy bonus when its coefficient is not zero): token-sized tensors,
        next to nothing beside the logits."""
        torch = self.torch
        log_probs = log_probs.float()
        old = log_probs.detach() + 0.01 * torch.randn_like(log_probs)
        ref = log_probs.detach() + 0.01 * torch.randn_like(log_probs)
        advantages = torch.randn_like(log_probs)
        ratio = torch.exp(log_probs - old)
        pg = torch.maximum(-advantages * ratio, -advantages * torch.clamp(ratio, 0.8, 1.2)).mean()
        kl = ref - log_probs
        loss = pg + 0.001 * (torch.exp(kl) - kl - 1).mean()
        if entropy is not None and entropy_coeff != 0:
            loss = loss - entropy_coeff * entropy.float().mean()
        return loss

    def run(self, model, batch: PathBatch, variant: PathVariant) -> None:
        torch = self.torch
        train = variant.phase == "forward_backward"
        with contextlib.ExitStack() as stack:
            if not train:
                stack.enter_context(torch.no_grad())
            if variant.framework == "verl":
                calculate_entropy = (variant.calculate_entropy or variant.entropy_coeff != 0)
                forward = (self.verl091_forward_micro_batch if self.code.verl_version == "0.9.1"
                           else self.verl_forward_micro_batch)
                with self.fused_forward(variant.fused):
                    log_probs, entropy = forward(model, batch, variant, calculate_entropy)
                if train:
                    loss = self.policy_loss(log_probs, entropy, variant.entropy_coeff)
                    del log_probs, entropy
                    loss.backward()
                return
            logits = self.nemo_rl_logits(model, batch)
            token_logprobs = self.nemo_rl_token_logprobs(logits, batch.input_ids, variant, train)
            del logits                      # the worker deletes its logits before backward
            if train:
                loss = self.policy_loss(token_logprobs, None, 0.0)
                del token_logprobs
                loss.backward()

    @contextlib.contextmanager
    def fused_forward(self, fused: bool):
        """use_fused_kernels: verl patches the model class's forward with
        dense_common.forward_with_torch_backend (monkey_patch.py patch_forward_with_backends,
        fused_kernel_options.impl_backend: torch by default, hf_model.yaml)."""
        from transformers import Qwen2ForCausalLM

        if not fused:
            yield
            return
        original = Qwen2ForCausalLM.forward
        Qwen2ForCausalLM.forward = self.code.verl_dense_common.forward_with_torch_backend
        try:
            yield
        finally:
            Qwen2ForCausalLM.forward = original


@dataclass
class PathCalibration:
    """The --paths run: per model, per framework wrapping, per path and micro-batch size."""

    torch: Any
    meter: Meter
    runner: PathRunner
    device: Any
    tokens: tuple[int, ...]
    response_lengths: tuple[int, ...]
    started: float
    budget_s: float
    out: Path
    result: dict

    def over_budget(self) -> bool:
        return time.monotonic() - self.started > self.budget_s

    def save(self) -> None:
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.out.write_text(json.dumps(self.result, indent=1) + "\n")

    def free(self) -> None:
        gc.collect()
        if self.meter.cuda:
            self.torch.cuda.empty_cache()

    def calibrate_model(self, spec: dict) -> None:
        for wrapping, checkpointing, variants in path_builds(self.runner.code.verl_version):
            if self.over_budget():
                self.result["skipped"].append({"model": spec["model"], "layers_run": spec["layers_run"],
                                               "wrapping": wrapping, "gradient_checkpointing": checkpointing,
                                               "why": "time budget"})
                self.save()
                continue
            self.calibrate_build(spec, wrapping, checkpointing, variants)

    def calibrate_build(self, spec: dict, wrapping: str, checkpointing: bool,
                        variants: tuple[PathVariant, ...]) -> None:
        torch, meter = self.torch, self.meter
        self.free()
        base = meter.allocated()
        t0 = time.monotonic()
        # NeMo RL turns cuDNN attention off when it checkpoints activations (recomputation may
        # not pick it again: dtensor_policy_worker_v2.py); verl's runs keep torch's default.
        if self.meter.cuda:
            torch.backends.cuda.enable_cudnn_sdp(not (wrapping == "nemo-rl" and checkpointing))
        try:
            if wrapping == "verl":
                model, optimizer, params = build(torch, spec, self.device)
                set_checkpointing(model, checkpointing)
            else:
                model, optimizer, params = build_nemo_rl(torch, spec, self.device, checkpointing)
        except torch.cuda.OutOfMemoryError as err:
            self.result["skipped"].append({**spec, "wrapping": wrapping, "why": f"out of memory building: {err}"[:300]})
            self.save()
            return
        # Each build is one actor: verl compiles its entropy functions once per actor (dp_actor.py
        # __init__ at 0.7.1, FSDPEngine.__init__ at 0.9.1, transformer_impl.py lines 178-187), so
        # the compiled code starts afresh rather than carrying other models' recompilations
        # towards dynamo's recompile limit (past it, dynamo runs the function eagerly).
        self.runner.compiled.clear()
        torch._dynamo.reset()
        entry = {**spec, "wrapping": wrapping, "gradient_checkpointing": checkpointing,
                 "parameters": params, "allocated_before_build": base,
                 "allocated_after_build": meter.allocated(), "rows": [], "errors": []}
        self.result["measurements"].append(entry)
        log(f"{spec['model']} x{spec['layers_run']} {wrapping} ckpt={checkpointing} params={params:,} "
            f"built in {time.monotonic() - t0:.1f}s")
        # AdamW's states exist from the first step on: one step first, as in every later step.
        self.step(model, optimizer, spec, variants[0])
        entry["allocated_after_warmup"] = meter.allocated()
        for variant in variants:             # compiles and Triton builds happen here, unmeasured
            self.warm_up(model, optimizer, spec, variant, entry)
        too_large: set[str] = set()
        for tokens in self.tokens:
            for variant in variants:
                for response_length in self.responses(variant):
                    key = f"{variant.name}/{response_length}"
                    if key in too_large or self.over_budget():
                        continue
                    row = self.measure(model, optimizer, spec, variant, tokens=tokens,
                                       response_length=response_length, checkpointing=checkpointing)
                    entry["rows"].append(row)
                    if "out_of_memory" in row:
                        too_large.add(key)
                    self.save()
        del model, optimizer
        self.free()
        entry["allocated_after_free"] = meter.allocated()
        self.save()

    def responses(self, variant: PathVariant) -> tuple[int | None, ...]:
        return responses_for(variant, self.response_lengths, self.runner.code.verl_version)

    def step(self, model, optimizer, spec: dict, variant: PathVariant) -> None:
        """One training step of `variant` (a training path), optimizer step included."""
        batch = PathBatch.make(self.torch, variant, WARMUP_TOKENS, spec["vocab_size"], self.device, None)
        self.runner.run(model, batch, variant)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    def warm_up(self, model, optimizer, spec: dict, variant: PathVariant, entry: dict) -> None:
        """One unmeasured pass of `variant` at the smallest size: torch.compile and the Triton
        kernels build here, not inside a measured peak."""
        response = self.responses(variant)[0]
        tokens = min(self.tokens) if not self.meter.cuda else \
            WARMUP_TOKENS if response is None else PADDED_SEQUENCE
        try:
            batch = PathBatch.make(self.torch, variant, tokens, spec["vocab_size"], self.device,
                                   response and min(response, tokens // 2))
            self.runner.run(model, batch, variant)
        except Exception as err:                # recorded; its rows say whether it fails again
            entry["errors"].append({"path": variant.name,
                                    "warm_up": f"{type(err).__name__}: {err}"[:600]})
            log(f"  warm-up {variant.name} failed: {type(err).__name__}: {err}"[:300])
        optimizer.zero_grad(set_to_none=True)

    def measure(self, model, optimizer, spec: dict, variant: PathVariant, *, tokens: int,
                response_length: int | None, checkpointing: bool) -> dict:
        torch, meter = self.torch, self.meter
        optimizer.zero_grad(set_to_none=True)
        self.free()
        batch = PathBatch.make(torch, variant, tokens, spec["vocab_size"], self.device, response_length)
        rows, sequence = batch.input_ids.shape
        row = {"path": variant.name, "framework": variant.framework, "phase": variant.phase,
               "options": variant.options(), "tokens": rows * sequence, "batch": rows,
               "sequence": sequence, "response_length": response_length,
               "gradient_checkpointing": checkpointing, "start_allocated": meter.allocated()}
        t0 = time.monotonic()
        try:
            meter.start()
            self.runner.run(model, batch, variant)
            row[variant.phase] = meter.stop()
        except torch.cuda.OutOfMemoryError as err:
            row["out_of_memory"] = str(err).split("\n")[0][:300]
        except Exception as err:
            row["error"] = f"{type(err).__name__}: {err}"[:600]
        row["seconds"] = round(time.monotonic() - t0, 2)
        del batch
        optimizer.zero_grad(set_to_none=True)
        self.free()
        peak = row.get(variant.phase, {}).get("peak_allocated")
        log(f"  {variant.name} tokens={row['tokens']} resp={response_length} ckpt={checkpointing} "
            f"peak={peak} {row.get('out_of_memory') or row.get('error') or ''}"[:300])
        return row


def calibrate_paths(args, torch, transformers, cuda: bool, device, started: float) -> dict:
    import torch.distributed as dist

    nemo_rl_src = args.nemo_rl_src if args.verl_version == "0.7.1" else None
    code = FrameworkCode.load(args.verl_src, args.flash_attn_ce, nemo_rl_src, args.verl_version)
    if not cuda:
        # The smoke run (no figures) checks the plumbing on the CPU, where flash-attn's Triton
        # kernels cannot run (Triton's interpreter has no bf16): torch's cross entropy stands in.
        def cpu_cross_entropy(logits, labels, inplace_backward=False):
            losses = torch.nn.functional.cross_entropy(logits.float(), labels, reduction="none")
            return losses, torch.zeros_like(losses)

        code.verl_functional.cross_entropy_loss = cpu_cross_entropy
    import triton

    models = SMOKE_MODELS if args.smoke else HOLDOUT_PATH_MODELS if args.holdout else PATH_MODELS
    tokens = SMOKE_PATH_TOKENS if args.smoke else HOLDOUT_PATH_TOKENS if args.holdout else PATH_TOKENS
    responses = ((16, 48) if args.smoke else HOLDOUT_RESPONSE_LENGTHS if args.holdout
                 else RESPONSE_LENGTHS)
    env = environment(torch, transformers)
    env.update(triton=triton.__version__, framework_sources=code.sources)
    versions = framework_versions(args.verl_version)
    which = (f"verl {versions['verl']} with flash-attn 2.8.3's Triton cross entropy"
             + (f"; NeMo RL {versions['nemo-rl']}" if "nemo-rl" in versions else ""))
    result = {
        "what": f"peak GPU memory of the frameworks' own log-prob and loss paths ({which}) on "
                "FSDP2-wrapped Qwen2 models (world size 1, fp32 master weights, bf16 compute, AdamW "
                "states present): forward+backward of a GRPO loss or a no-grad log-prob forward; "
                "tools/calibrate_memory.py --paths",
        "framework_versions": versions,
        "environment": env,
        "padded_sequence_length": PADDED_SEQUENCE, "attention": "sdpa", "temperature": TEMPERATURE,
        "measurements": [], "skipped": [],
    }
    result["command"] = " ".join(["python3", *sys.argv])
    log("environment", json.dumps(env))
    runner = PathRunner(torch=torch, code=code, device=device, group=dist.group.WORLD, compiled={})
    run = PathCalibration(torch=torch, meter=Meter(torch, cuda), runner=runner, device=device,
                          tokens=tokens, response_lengths=responses, started=started,
                          budget_s=args.budget_s, out=args.out, result=result)
    run.save()
    for spec in models:
        run.calibrate_model(spec)
    rows = [row for entry in result["measurements"] for row in entry["rows"]]
    log(f"{len(rows)} rows: {sum(1 for r in rows if r['phase'] in r)} "
        f"measured, {sum(1 for r in rows if 'out_of_memory' in r)} out of memory, "
        f"{sum(1 for r in rows if 'error' in r)} failed; skipped {len(result['skipped'])}")
    return result


def calibrate_stand_in(args, torch, transformers, cuda: bool, device, started: float) -> dict:
    """The first calibration: one loss (fp32 log-softmax of the bf16 logits) on every model."""
    models = SMOKE_MODELS if args.smoke else HOLDOUT_MODELS if args.holdout else MODELS
    batches = (1, 2) if args.smoke else HOLDOUT_BATCHES if args.holdout else BATCHES
    seq = 16 if args.smoke else HOLDOUT_SEQUENCE if args.holdout else SEQUENCE
    result = {
        "what": "peak GPU memory of one training step (FSDP2 world size 1, fp32 master "
                "weights, bf16 compute, fp32 gradient reduction, torch AdamW), forward+backward "
                "and optimizer step measured separately, plus a no-grad log-prob forward; "
                "tools/calibrate_memory.py",
        "environment": environment(torch, transformers),
        "sequence_length": seq, "attention": "sdpa", "measurements": [], "skipped": [],
    }
    log("environment", json.dumps(result["environment"]))
    run = Calibration(torch=torch, meter=Meter(torch, cuda), device=device, seq=seq, batches=batches,
                      started=started, budget_s=args.budget_s, out=args.out, result=result)

    run.save()
    for spec in models:
        if run.over_budget():
            result["skipped"].append({"model": spec["model"], "layers_run": spec["layers_run"],
                                      "why": "time budget"})
            run.save()
            continue
        run.calibrate_model(spec, with_reference=args.holdout or args.smoke)
    return result


def arguments(argv) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--smoke", action="store_true", help="tiny models on the CPU")
    parser.add_argument("--holdout", action="store_true",
                        help="the held-out set (HOLDOUT_MODELS, 4096-token sequences)")
    parser.add_argument("--paths", action="store_true",
                        help="the frameworks' own log-prob and loss paths (needs the three sources)")
    parser.add_argument("--verl-src", type=Path,
                        help="a directory holding the verl version's verl/ (its wheel, unpacked)")
    parser.add_argument("--verl-version", choices=VERL_VERSIONS, default="0.7.1",
                        help="whose log-prob path runs: 0.7.1 (dp_actor.py, with NeMo RL 0.5.0) "
                             "or 0.9.1 (the FSDP engine; verl's builds alone)")
    parser.add_argument("--flash-attn-ce", type=Path,
                        help="flash-attn 2.8.3's flash_attn/ops/triton/cross_entropy.py")
    parser.add_argument("--nemo-rl-src", type=Path,
                        help="a directory holding NeMo RL v0.5.0's nemo_rl/ (its git tag)")
    parser.add_argument("--predict", action="store_true",
                        help="with --paths: the planner's predictions of its rows (no GPU)")
    parser.add_argument("--budget-s", type=float, default=480.0,
                        help="start no new configuration after this many seconds")
    args = parser.parse_args(argv)
    nemo_rl = args.nemo_rl_src or args.verl_version != "0.7.1"
    if args.paths and not args.predict and not (args.verl_src and args.flash_attn_ce and nemo_rl):
        parser.error("--paths needs --verl-src, --flash-attn-ce and (with verl 0.7.1) --nemo-rl-src")
    return args


def main(argv=None) -> int:
    args = arguments(argv)
    started = time.monotonic()
    if args.predict:
        args.out.write_text(json.dumps(predict_paths(args), indent=1) + "\n")
        log(f"predictions -> {args.out}")
        return 0

    import torch
    import torch.distributed as dist
    import transformers

    cuda = torch.cuda.is_available() and not args.smoke
    device = torch.device("cuda", 0) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(0)
    with tempfile.NamedTemporaryFile(prefix="calib-store-", delete=False) as store_file:
        store = store_file.name
    # A file store: one process, nothing listens on a port.
    dist.init_process_group("nccl" if cuda else "gloo", init_method=f"file://{store}",
                            rank=0, world_size=1)
    if args.paths:
        result = calibrate_paths(args, torch, transformers, cuda, device, started)
    else:
        result = calibrate_stand_in(args, torch, transformers, cuda, device, started)
    result["wall_s"] = round(time.monotonic() - started, 1)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    dist.destroy_process_group()
    os.unlink(store)
    log(f"done in {result['wall_s']}s -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
