"""One collective timed the way nccl-tests times it (src/common.cu: barrier, start the clock,
``iterations`` calls, wait for the device, time per iteration), on whatever launches the ranks:
the fabric gate's Ray actors (jobs/head/fabric_probe.py CollectiveProbe) and a plain torchrun
(jobs/head/collective_bench.py) call this same function, so a figure measured on a GPU host
without Ray is a figure of the gate's own code.

torch is imported where it is used: this module ships to the GPU workers by value with the probe.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from jobs.contract.health import effective_size, element_count

CollectiveCall = Callable[[str, Any, Any, Any], None]


def run_collective(collective: str, output: Any, tensor: Any, group: Any) -> None:
    """One collective call; the unit the timing loop repeats."""
    import torch.distributed as dist

    if collective == "all_reduce":
        dist.all_reduce(tensor, group=group)
    else:
        dist.all_gather_into_tensor(output, tensor, group=group)


def compute_device(backend: str) -> Any:
    """The tensors' device: the one GPU CUDA_VISIBLE_DEVICES leaves this process (Ray gives each
    probe actor one; torchrun's launcher sets the current device per local rank), else the CPU."""
    import torch

    return torch.device("cuda", torch.cuda.current_device()) if backend == "nccl" else torch.device("cpu")


def synchronize(backend: str) -> None:
    if backend == "nccl":
        import torch

        torch.cuda.synchronize()


def barrier(backend: str, group: Any = None) -> None:
    import torch
    import torch.distributed as dist

    if backend == "nccl":
        dist.barrier(group=group, device_ids=[torch.cuda.current_device()])
    else:
        dist.barrier(group=group)


def time_collective(collective: str, size_bytes: int, warmup: int, iterations: int, *, ranks: int,
                    backend: str, group: Any = None, run: CollectiveCall = run_collective) -> dict[str, Any]:
    """Seconds per call of ``collective`` over ``size_bytes`` (all_gather: the gathered output) on
    ``ranks`` ranks, the bytes actually moved, and a check of the data."""
    import torch

    count = element_count(collective, size_bytes, ranks)
    device = compute_device(backend)
    tensor = torch.ones(count, dtype=torch.float32, device=device)
    output = (torch.empty(count * ranks, dtype=torch.float32, device=device)
              if collective == "all_gather" else None)
    for _ in range(warmup):
        run(collective, output, tensor, group)
    synchronize(backend)
    barrier(backend, group)
    start = time.perf_counter()
    for _ in range(iterations):
        run(collective, output, tensor, group)
    synchronize(backend)
    seconds = (time.perf_counter() - start) / iterations
    # A check of the data: one all_reduce of ones sums to the rank count (warmups included,
    # the values grow as ranks**calls; only all_gather keeps ones).
    correct = bool(output.eq(1).all().item()) if output is not None else True
    del tensor, output
    return {"collective": collective, "size_bytes": effective_size(collective, size_bytes, ranks),
            "ranks": ranks, "seconds": seconds, "correct": correct}
