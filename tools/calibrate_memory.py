"""GPU benchmark (not a test): peak memory of one GRPO-style training step on one GPU, for the
memory planner (jobs/plan/gpu_memory.py). Writes data/memory-calibration-<gpu>.json.

    python3 tools/calibrate_memory.py --out data/memory-calibration-h200.json   # on one H200
    python3 tools/calibrate_memory.py --smoke --out /tmp/smoke.json             # CPU, tiny model

Needs torch and transformers (the H200 image has both; nothing here is installed or downloaded).
What one measurement is:
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


def arguments(argv) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--smoke", action="store_true", help="tiny models on the CPU")
    parser.add_argument("--holdout", action="store_true",
                        help="the held-out set (HOLDOUT_MODELS, 4096-token sequences)")
    parser.add_argument("--budget-s", type=float, default=480.0,
                        help="start no new configuration after this many seconds")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = arguments(argv)
    started = time.monotonic()

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
    result["wall_s"] = round(time.monotonic() - started, 1)
    run.save()
    dist.destroy_process_group()
    os.unlink(store)
    log(f"done in {result['wall_s']}s -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
