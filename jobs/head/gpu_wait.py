"""Wait until the Ray cluster shows the run's GPUs as *available*, then exit 0.

    python3 -m jobs.head.gpu_wait --gpus N --timeout-seconds T [--poll-seconds P]
                                  [--gpus-per-node G]

The GPU wait of the run driver (jobs/head/driver.py, before every trainer start), run on the Ray
head inside the framework image: verl (and NeMo RL's placement groups) fail at once when the
cluster has fewer free GPUs than the trainer asks for, while GPU nodes on Spot or flex-start
capacity can take minutes to hours to join. This waits, bounded by T seconds, printing how many
GPUs it sees against how many it needs and the elapsed time.

Exit codes (jobs/contract/exit_codes.py):
  0  OK: the N GPUs are available
  2  USAGE: bad arguments
  3  GPU_WAIT_TIMEOUT: the message says which GPU nodes are missing or which GPUs are busy
  7  NO_RAY: could not connect to Ray (not run inside a Ray job / on the head?)

Standard library and ``ray`` only: this runs inside the framework image, which has neither
Pulumi nor this project's other dependencies.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from jobs.contract.exit_codes import ExitCode

# The jobs CLI looks for the timeout marker in a failed attempt's last log lines to report exit 3.
from jobs.contract.records import GPU_WAIT_LOG_PREFIX as PREFIX
from jobs.contract.records import GPU_WAIT_TIMEOUT_MARKER as TIMEOUT_MARKER


@dataclass(frozen=True)
class GpuNode:
    address: str
    gpus: float
    alive: bool


@dataclass(frozen=True)
class Snapshot:
    available: float          # free GPUs in the whole cluster
    total: float              # GPUs of alive nodes
    nodes: tuple[GpuNode, ...]  # nodes with GPUs (alive or not)

    @property
    def alive_gpu_nodes(self) -> int:
        return sum(1 for n in self.nodes if n.alive and n.gpus > 0)


def ray_snapshot() -> Snapshot:
    import ray

    nodes = tuple(
        GpuNode(address=str(n.get("NodeManagerAddress", "?")),
                gpus=float((n.get("Resources") or {}).get("GPU", 0.0)),
                alive=bool(n.get("Alive")))
        for n in ray.nodes() if (n.get("Resources") or {}).get("GPU", 0.0) > 0
    )
    available = float(ray.available_resources().get("GPU", 0.0))
    total = sum(n.gpus for n in nodes if n.alive)
    return Snapshot(available=available, total=total, nodes=nodes)


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def progress_line(snap: Snapshot, needed: int, elapsed: float, timeout: float,
                  gpus_per_node: int | None) -> str:
    line = f"{PREFIX} {_fmt(snap.available)}/{needed} GPUs available"
    if gpus_per_node:
        line += f" (GPU nodes {snap.alive_gpu_nodes}/{math.ceil(needed / gpus_per_node)})"
    else:
        line += f" ({_fmt(snap.total)} GPUs on {snap.alive_gpu_nodes} node(s))"
    return line + f", elapsed {elapsed:.0f}s of {timeout:.0f}s"


def timeout_message(snap: Snapshot, needed: int, timeout: float,
                    gpus_per_node: int | None) -> str:
    lines = [f"{TIMEOUT_MARKER}: {_fmt(snap.available)} of the {needed} GPUs this run needs are "
             f"available after {timeout:.0f}s."]
    alive = [n for n in snap.nodes if n.alive]
    dead = [n for n in snap.nodes if not n.alive]
    if snap.total < needed:
        missing_gpus = needed - snap.total
        if gpus_per_node:
            expected = math.ceil(needed / gpus_per_node)
            lines.append(f"  GPU nodes joined: {len(alive)} of {expected}; missing "
                         f"{math.ceil(missing_gpus / gpus_per_node)} node(s) "
                         f"({_fmt(missing_gpus)} GPUs).")
        else:
            lines.append(f"  GPUs in the cluster: {_fmt(snap.total)}; missing {_fmt(missing_gpus)}.")
        lines.append("  Spot or flex-start capacity not granted yet (or a reservation is full): "
                     "check the GPU node pool and the pending worker pods, e.g. "
                     "`kubectl get pods -n <namespace> -l ray.io/node-type=worker` and "
                     "`kubectl describe pod <pending pod>` (events: FailedScaleUp, "
                     "GCE_STOCKOUT, quota), then submit again: the next attempt resumes "
                     "from the run's checkpoints.")
    else:
        lines.append(f"  All {_fmt(snap.total)} GPUs have joined but only {_fmt(snap.available)} "
                     "are free: another job or leftover actors hold them. Check "
                     "`ray list jobs` / `ray list actors --filter state=ALIVE` on the head, "
                     "or `jobs list`, and stop what should not run.")
    for node in alive:
        lines.append(f"  node {node.address}: {_fmt(node.gpus)} GPUs, alive")
    for node in dead:
        lines.append(f"  node {node.address}: {_fmt(node.gpus)} GPUs, DEAD (preempted or removed)")
    return "\n".join(lines)


def wait_for_gpus(needed: int, timeout: float, poll: float = 10.0, *,
                  gpus_per_node: int | None = None,
                  snapshot: Callable[[], Snapshot] = ray_snapshot,
                  clock: Callable[[], float] = time.monotonic,
                  sleep: Callable[[float], None] = time.sleep,
                  out=None) -> int:
    """Poll ``snapshot`` until ``needed`` GPUs are available; return an exit code."""
    out = out or sys.stdout
    start = clock()
    last: str | None = None
    while True:
        snap = snapshot()
        elapsed = clock() - start
        line = progress_line(snap, needed, elapsed, timeout, gpus_per_node)
        # Print on change, and at least every minute so a long wait shows it is alive.
        if line.split(", elapsed")[0] != (last or "").split(", elapsed")[0] or \
                int(elapsed) // 60 != int(elapsed - poll) // 60:
            print(line, file=out, flush=True)
            last = line
        if snap.available >= needed:
            print(f"{PREFIX} ready: {_fmt(snap.available)} GPUs available after {elapsed:.0f}s",
                  file=out, flush=True)
            return int(ExitCode.OK)
        if elapsed >= timeout:
            print(timeout_message(snap, needed, timeout, gpus_per_node), file=out, flush=True)
            return int(ExitCode.GPU_WAIT_TIMEOUT)
        sleep(max(0.0, min(poll, timeout - elapsed)))


def _positive(kind):
    def parse(text: str):
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
        return value
    return parse


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m jobs.head.gpu_wait", description=__doc__.split("\n\n")[0])
    parser.add_argument("--gpus", type=_positive(int), required=True, help="GPUs the run needs")
    parser.add_argument("--timeout-seconds", type=_positive(float), required=True)
    parser.add_argument("--poll-seconds", type=_positive(float), default=10.0)
    parser.add_argument("--gpus-per-node", type=_positive(int), default=None,
                        help="GPUs of one GPU node, to report missing nodes")
    parser.add_argument("--address", default="auto", help="Ray address (default: auto)")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:          # argparse exits 2 on usage errors, 0 on --help
        return int(exc.code or 0)

    import ray

    try:
        ray.init(address=args.address, logging_level="WARNING", log_to_driver=False)
    except Exception as exc:  # ConnectionError, or RuntimeError when no cluster is found
        print(f"{PREFIX} cannot connect to Ray at {args.address!r}: {exc}", file=sys.stderr, flush=True)
        return int(ExitCode.NO_RAY)
    try:
        return wait_for_gpus(args.gpus, args.timeout_seconds, args.poll_seconds,
                             gpus_per_node=args.gpus_per_node)
    finally:
        ray.shutdown()


if __name__ == "__main__":
    sys.exit(main())
