"""The fabric gate's measuring parts: ``CollectiveProbe``, one Ray actor per GPU that joins a
torch.distributed group and times collectives the way nccl-tests does, and ``storage_probe``,
which writes and reads back a checkpoint-sized set of files on /data.

Standard library at import; ``ray`` and ``torch`` are imported where they are used (the GPU
workers have both). The gate ships this module to the workers by value (they have no copy of
this repository), so everything it uses from jobs/ must be shipped with it (fabric_gate.py).
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from jobs.contract.health import StoragePlan
from jobs.head.collective_timing import barrier, run_collective, time_collective
from jobs.head.nccl_log import nccl_nics


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return s.getsockname()[1]


class CollectiveProbe:
    """One GPU's part of the gate: a Ray actor (wrapped with ``ray.remote`` by the gate)."""

    def __init__(self, rank: int, world_size: int, node_index: int, local_rank: int, backend: str):
        self.rank, self.world_size = rank, world_size
        self.node_index, self.local_rank = node_index, local_rank
        self.backend = backend
        self.groups: dict[tuple[int, ...], Any] = {}

    # -- identity and rendezvous --
    def describe(self) -> dict:
        import ray

        context = ray.get_runtime_context()
        return {"rank": self.rank, "node_index": self.node_index, "local_rank": self.local_rank,
                "node_id": context.get_node_id(), "ip": ray.util.get_node_ip_address(),
                "hostname": socket.gethostname(),
                # The Kubernetes node, from the worker pod's downward API (components/gpu_health.py).
                "k8s_node": os.environ.get("GKE_GRPO_NODE_NAME", ""),
                "gpu_ids": [str(g) for g in ray.get_gpu_ids()],
                "jobs_importable": _jobs_importable(),
                # Shipped by value, the probe's module was never imported on this worker, whether
                # or not a jobs package could be found there.
                "probe_module_imported": "jobs.head.fabric_probe" in sys.modules}

    def free_port(self) -> int:
        return _free_port()

    def init_group(self, master_addr: str, master_port: int, timeout_s: float) -> dict:
        import datetime

        begin = time.monotonic()
        import torch
        import torch.distributed as dist

        imported = time.monotonic() - begin
        if self.backend == "nccl":
            torch.cuda.set_device(0)       # Ray's CUDA_VISIBLE_DEVICES leaves this actor one GPU
        start = time.monotonic()
        dist.init_process_group(self.backend, init_method=f"tcp://{master_addr}:{master_port}",
                                rank=self.rank, world_size=self.world_size,
                                timeout=datetime.timedelta(seconds=timeout_s))
        self._barrier()
        return {"rank": self.rank, "master_addr": master_addr, "master_port": master_port,
                "world_size": dist.get_world_size(), "backend": dist.get_backend(),
                "seconds": time.monotonic() - start, "torch_import_seconds": imported}

    # -- measurements (jobs/head/collective_timing.py: the same code under torchrun) --
    def _barrier(self, group: Any = None) -> None:
        barrier(self.backend, group)

    def run_collective(self, collective: str, output: Any, tensor: Any, group: Any) -> None:
        """One collective call; a test's probe overrides it to slow one node's link."""
        run_collective(collective, output, tensor, group)

    def measure(self, collective: str, size_bytes: int, warmup: int, iterations: int,
                group: Any = None, ranks: int | None = None) -> dict:
        result = time_collective(collective, size_bytes, warmup, iterations,
                                 ranks=ranks or self.world_size, backend=self.backend, group=group,
                                 run=self.run_collective)
        return {"rank": self.rank, "node_index": self.node_index, **result}

    def world_tests(self, collectives: Sequence[str], sizes: Sequence[int], warmup: int,
                    iterations: int) -> list[dict]:
        return [self.measure(c, s, warmup, iterations) for c in collectives for s in sizes]

    def subgroup_tests(self, rounds: Sequence[Sequence[Sequence[int]]], collective: str,
                       size_bytes: int, warmup: int, iterations: int) -> list[dict]:
        """Localisation: every rank creates every subgroup (torch requires all ranks to call
        new_group, in the same order); in each round the disjoint groups run at once."""
        import torch.distributed as dist

        results = []
        for groups in rounds:
            for ranks in groups:
                key = tuple(ranks)
                if key not in self.groups:
                    self.groups[key] = dist.new_group(list(key))
            for ranks in groups:
                if self.rank in ranks:
                    result = self.measure(collective, size_bytes, warmup, iterations,
                                          group=self.groups[tuple(ranks)], ranks=len(ranks))
                    result["group"] = list(ranks)
                    results.append(result)
            self._barrier()
        return results

    def nccl_log(self) -> dict[str, Any]:
        """The NICs and NET warnings of this process's NCCL INFO log, if NCCL wrote one."""
        path = os.environ.get("NCCL_DEBUG_FILE", "")
        if not path:
            return {"nets": [], "nics": [], "warnings": []}
        path = path.replace("%h", socket.gethostname()).replace("%p", str(os.getpid()))
        try:
            return nccl_nics(Path(path).read_text(errors="replace"))
        except OSError:
            return {"nets": [], "nics": [], "warnings": []}

    def storage_probe(self, plan: dict) -> dict:
        return storage_probe(StoragePlan(**plan))

    def shutdown(self) -> None:
        import torch.distributed as dist
        if dist.is_initialized():
            dist.destroy_process_group()


def _jobs_importable() -> bool:
    import importlib.util
    try:
        return importlib.util.find_spec("jobs.head.fabric_gate") is not None
    except (ImportError, ValueError):
        return False


# ---- storage probe ----------------------------------------------------------------------------

def storage_probe(plan: StoragePlan) -> dict:
    """Write ``plan.size_bytes`` in ``plan.streams`` files at once (one thread each: file I/O
    releases the GIL), fsync them, drop them from the page cache, read them back and check
    the first block; GB/s of 10^9 bytes. The files are removed whatever happens."""
    directory = Path(plan.directory)
    directory.mkdir(parents=True, exist_ok=True)
    streams = max(1, plan.streams)
    per_stream = max(plan.block_bytes, plan.size_bytes // streams)
    block = os.urandom(plan.block_bytes)        # incompressible, as model weights are
    tag = f"{socket.gethostname()}-{os.getpid()}"
    paths = [directory / f"probe-{tag}-{i}.bin" for i in range(streams)]
    errors: list[str] = []

    def write(path: Path) -> None:
        try:
            with open(path, "wb", buffering=0) as f:
                left = per_stream
                while left > 0:
                    n = min(left, len(block))
                    f.write(block[:n])
                    left -= n
                f.flush()
                os.fsync(f.fileno())
                _drop_cache(f.fileno())
        except OSError as exc:
            errors.append(f"write {path.name}: {exc.strerror or exc}")

    def read(path: Path) -> None:
        try:
            buffer = bytearray(plan.block_bytes)
            with open(path, "rb", buffering=0) as f:
                first = f.readinto(buffer)
                if bytes(buffer[:first]) != block[:first]:
                    errors.append(f"read {path.name}: data read back differs from data written")
                while f.readinto(buffer):
                    pass
        except OSError as exc:
            errors.append(f"read {path.name}: {exc.strerror or exc}")

    try:
        write_seconds = _parallel(write, paths)
        read_seconds = _parallel(read, paths) if not errors else float("nan")
    finally:
        for path in paths:
            with contextlib.suppress(OSError):
                path.unlink()
    total = per_stream * streams
    result = {"directory": str(directory), "bytes": total, "streams": streams, "kind": plan.kind,
              "host": socket.gethostname(), "errors": errors,
              "write_seconds": write_seconds, "read_seconds": read_seconds,
              "write_gbps": total / 1e9 / write_seconds if not errors else None,
              "read_gbps": total / 1e9 / read_seconds if not errors else None}
    return result


def _drop_cache(fd: int) -> None:
    if hasattr(os, "posix_fadvise"):
        with contextlib.suppress(OSError):
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)


def _parallel(work: Callable[[Path], None], paths: Sequence[Path]) -> float:
    threads = [threading.Thread(target=work, args=(p,), daemon=True) for p in paths]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - start
