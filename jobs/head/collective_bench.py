"""The fabric gate's measurement on the GPUs of one host, launched by torchrun instead of Ray:

    python3 -m torch.distributed.run --standalone --nproc-per-node N \\
        -m jobs.head.collective_bench --sizes 1073741824,8589934592 --out DIR

Every rank times each collective and size with jobs/head/collective_timing.py (the code the
gate's Ray actors run), rank 0 aggregates the ranks' times as nccl-tests reports them
(jobs/head/fabric_verdict.py aggregate: algbw and busbw) and writes DIR/collective-bench.json
with the versions it ran on, and the NCCL INFO lines of its communicator (NCCL_DEBUG=INFO,
NCCL_DEBUG_SUBSYS=INIT,NET, one file per process) with what jobs/head/nccl_log.py reads from them.
For a host where Ray is not installed, or to measure NVLink alone (docs/health-gates.md).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from jobs.contract.exit_codes import ExitCode
from jobs.contract.health import COLLECTIVES
from jobs.head.collective_timing import time_collective
from jobs.head.fabric_verdict import aggregate
from jobs.head.nccl_log import nccl_nics

NCCL_LOG_NAME = "nccl.%h.%p.log"


def _sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"sizes in bytes separated by commas, got {text[:60]!r}") from None
    if not sizes or any(size < 1 for size in sizes):
        raise argparse.ArgumentTypeError("every size must be at least 1 byte")
    return sizes


def _collectives(text: str) -> tuple[str, ...]:
    names = tuple(text.split(","))
    if not names or any(name not in COLLECTIVES for name in names):
        raise argparse.ArgumentTypeError(f"each one of {', '.join(COLLECTIVES)}, got {text[:60]!r}")
    return names


def parse_arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python3 -m jobs.head.collective_bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=_sizes, default=(1 << 30, 1 << 31, 1 << 32, 1 << 33),
                        help="message sizes in bytes (all_gather: the gathered output), comma-separated")
    parser.add_argument("--collectives", type=_collectives, default=COLLECTIVES)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--backend", choices=("nccl", "gloo"), default=None,
                        help="default: nccl when CUDA is available, else gloo")
    parser.add_argument("--out", required=True, help="folder for collective-bench.json and the NCCL logs")
    return parser.parse_args(argv)


def _versions(backend: str) -> dict[str, Any]:
    import torch

    versions: dict[str, Any] = {"python": platform.python_version(), "torch": torch.__version__,
                                "host": socket.gethostname(), "kernel": platform.release()}
    if backend == "nccl":
        versions["nccl"] = ".".join(str(part) for part in torch.cuda.nccl.version())
        versions["cuda_runtime"] = torch.version.cuda
        versions["gpu"] = torch.cuda.get_device_name()
        try:
            versions["driver"] = subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True, text=True, timeout=30).stdout.split("\n")[0].strip()
        except (OSError, subprocess.SubprocessError):
            versions["driver"] = "unknown (nvidia-smi did not answer)"
    return versions


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = parse_arguments(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    import torch
    import torch.distributed as dist

    backend = args.backend or ("nccl" if torch.cuda.is_available() else "gloo")
    if backend == "nccl":
        # NCCL reads these when it creates the communicator: set before init_process_group.
        os.environ.setdefault("NCCL_DEBUG", "INFO")
        os.environ.setdefault("NCCL_DEBUG_SUBSYS", "INIT,NET")
        os.environ.setdefault("NCCL_DEBUG_FILE", str(out / NCCL_LOG_NAME))
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group(backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    rows = []
    for collective in args.collectives:
        for size in args.sizes:
            row = time_collective(collective, size, args.warmup, args.iterations, ranks=world, backend=backend)
            rows.append({"rank": rank, **row})
    gathered: list[Any] = [None] * world
    dist.all_gather_object(gathered, rows)
    dist.destroy_process_group()
    if rank != 0:
        return int(ExitCode.OK)
    reports = [row for rank_rows in gathered for row in rank_rows]
    logs = sorted(out.glob("nccl.*.log"))
    log_text = "".join(path.read_text(errors="replace") for path in logs)
    document = {
        "measured": time.strftime("%Y-%m-%d", time.gmtime()), "backend": backend, "world_size": world,
        "versions": _versions(backend), "warmup_iterations": args.warmup, "iterations": args.iterations,
        "measurements": [m.to_dict() for m in aggregate(reports)], "per_rank": reports,
        "nccl_network": nccl_nics(log_text),
        "nccl_log_lines": [line for line in log_text.splitlines() if " NCCL INFO " in line or " NCCL WARN " in line],
    }
    (out / "collective-bench.json").write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
    print(f"wrote {out / 'collective-bench.json'}: {len(document['measurements'])} measurements on "
          f"{world} rank(s), {backend}", flush=True)
    return int(ExitCode.OK if all(m["correct"] for m in document["measurements"]) else ExitCode.FAILED)


if __name__ == "__main__":
    sys.exit(main())
