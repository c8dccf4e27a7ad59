"""Wait until the Ray cluster shows the run's GPUs as *available*, then exit 0.

    python3 -m jobs.head.gpu_wait --gpus N --timeout-seconds T [--poll-seconds P]
                                  [--gpus-per-node G] [--placement-file FILE] [--check-gang]
                                  [--pool rollout:R --pool trainer:T]

The GPU wait of the run driver (jobs/head/driver.py, before every trainer start), run on the Ray
head inside the framework image: verl (and NeMo RL's placement groups) fail at once when the
cluster has fewer free GPUs than the trainer asks for, while GPU nodes on Spot or flex-start
capacity can take minutes to hours to join. This waits, bounded by T seconds, printing how many
GPUs it sees against how many it needs and the elapsed time. With --gpus-per-node the GPUs must
be free on N/G separate nodes (a node each, as the trainers place them), not merely in sum. With
--pool (a split layout, jobs/contract/layouts.py) each pool's nodes must be free among the nodes
that advertise the pool's custom resource: both pools up, not N nodes of either.

Once ready, it prints where the GPUs are (``[wait_for_gpus] NODES {...}``: each node's name and
capacity source from the labels its GPU worker passed to Ray, components/node_labels.py) and
writes the same to --placement-file, which the driver records with the trainer start.

With --check-gang (the driver's gang request is held, jobs/head/gpu_gang.py) it also reads the Ray
autoscaler's verdict on that request: when the autoscaler reports it infeasible (no worker
group can hold that many GPU nodes: more nodes than the group's maxReplicas, or nodes of another
shape), waiting is pointless and it exits GPU_GANG_INFEASIBLE at once.

Exit codes (jobs/contract/exit_codes.py):
  0  OK: the N GPUs are available
  2  USAGE: bad arguments
  3  GPU_WAIT_TIMEOUT: the message says which GPU nodes are missing or which GPUs are busy
  7  NO_RAY: could not connect to Ray (not run inside a Ray job / on the head?)
  17 GPU_GANG_INFEASIBLE: the autoscaler cannot ever provide the gang

Standard library and ``ray`` only: this runs inside the framework image, which has neither
Pulumi nor this project's other dependencies.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from jobs.contract.capacity import NODE_NAME_LABEL, NODES_MARKER, count_sources, describe_sources, source_of
from jobs.contract.capacity_end import node_created_at
from jobs.contract.exit_codes import ExitCode
from jobs.contract.layouts import POOL_RESOURCES, Pool, pool_argument
from jobs.contract.records import GPU_GANG_INFEASIBLE_MARKER as INFEASIBLE_MARKER

# The jobs CLI looks for the timeout marker in a failed attempt's last log lines to report exit 3.
from jobs.contract.records import GPU_WAIT_LOG_PREFIX as PREFIX
from jobs.contract.records import GPU_WAIT_TIMEOUT_MARKER as TIMEOUT_MARKER


@dataclass(frozen=True)
class GpuNode:
    address: str
    gpus: float
    alive: bool
    free: float | None = None          # free GPUs on this node (None: not known, all)
    node_id: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    pool: str | None = None            # the split layout's pool whose resource it advertises

    @property
    def free_gpus(self) -> float:
        return self.gpus if self.free is None else self.free

    def placement(self) -> dict[str, object]:
        """What the run records of this node: its names, its capacity source and when its
        Kubernetes Node was created (epoch seconds, None if not known): the driver works a
        flex-start node's end out from it (jobs/contract/capacity_end.py)."""
        return {"node_id": self.node_id, "address": self.address,
                "node_name": self.labels.get(NODE_NAME_LABEL, ""),
                "source": source_of(self.labels), "gpus": self.gpus,
                "created_at": node_created_at(self.labels),
                **({"pool": self.pool} if self.pool else {})}


@dataclass(frozen=True)
class Snapshot:
    available: float          # free GPUs in the whole cluster
    total: float              # GPUs of alive nodes
    nodes: tuple[GpuNode, ...]  # nodes with GPUs (alive or not)

    @property
    def alive_gpu_nodes(self) -> int:
        return sum(1 for n in self.nodes if n.alive and n.gpus > 0)

    def free_nodes(self, gpus_per_node: int, pool: str | None = None) -> list[GpuNode]:
        """Alive nodes with a whole node's GPUs free (of one pool, when given)."""
        return [n for n in self.nodes if n.alive and n.free_gpus >= gpus_per_node
                and (pool is None or n.pool == pool)]

    def pools_ready(self, gpus_per_node: int, pools: Sequence[Pool]) -> bool:
        return all(len(self.free_nodes(gpus_per_node, p.name)) >= p.nodes for p in pools)


def pool_of(resources: dict) -> str | None:
    """The pool whose custom resource a node advertises (components/ray_pods.py)."""
    return next((name for name, resource in POOL_RESOURCES.items() if resources.get(resource)), None)


def ray_snapshot() -> Snapshot:
    import ray
    from ray._private.state import available_resources_per_node

    free = {node_id: float(resources.get("GPU", 0.0))
            for node_id, resources in available_resources_per_node().items()}
    nodes = tuple(
        GpuNode(address=str(n.get("NodeManagerAddress", "?")),
                gpus=float((n.get("Resources") or {}).get("GPU", 0.0)),
                alive=bool(n.get("Alive")), free=free.get(str(n.get("NodeID")), 0.0),
                node_id=str(n.get("NodeID", "")), labels=dict(n.get("Labels") or {}),
                pool=pool_of(n.get("Resources") or {}))
        for n in ray.nodes() if (n.get("Resources") or {}).get("GPU", 0.0) > 0
    )
    available = float(ray.available_resources().get("GPU", 0.0))
    total = sum(n.gpus for n in nodes if n.alive)
    return Snapshot(available=available, total=total, nodes=nodes)


def gang_infeasible(gcs_client, gpus_per_node: int, nodes: int) -> bool:
    """Whether the Ray autoscaler (v2) reports the cluster's resource request of ``nodes`` x
    {GPU: gpus_per_node} infeasible (Ray 2.54 ray/autoscaler/v2/scheduler.py
    ``_enforce_resource_constraints``: it then launches none of it), read from the GCS's
    autoscaling state (ray/autoscaler/v2/sdk.py get_cluster_status)."""
    from ray.core.generated.autoscaler_pb2 import GetClusterStatusReply

    reply = GetClusterStatusReply()
    reply.ParseFromString(gcs_client.get_cluster_status(timeout_s=10))
    for constraint in reply.autoscaling_state.infeasible_cluster_resource_constraints:
        for by_count in constraint.resource_requests:
            bundle = dict(by_count.request.resources_bundle)
            # A split run's request has a bundle per pool, each of the pool's own count.
            pooled = any(resource in bundle for resource in POOL_RESOURCES.values())
            if (by_count.count == nodes or pooled) and bundle.get("GPU") == float(gpus_per_node):
                return True
    return False


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


def infeasible_message(needed: int, gpus_per_node: int, elapsed: float) -> str:
    nodes = math.ceil(needed / gpus_per_node)
    return (f"{INFEASIBLE_MARKER}: the Ray autoscaler reports it can never provide {nodes} GPU "
            f"nodes of {gpus_per_node} GPUs (checked after {elapsed:.0f}s): the GPU worker "
            "group holds fewer nodes (its maxReplicas is gke-grpo:gpu.nodes of the deployed "
            "stack) or nodes of another shape. Deploy the stack whose gpu.nodes this run needs "
            "(`pulumi up`), or submit the run the deployed stack describes; nothing was started.")


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
    elif gpus_per_node and snap.available >= needed:
        lines.append(f"  {_fmt(snap.available)} GPUs are free but not {gpus_per_node} on each of "
                     f"{math.ceil(needed / gpus_per_node)} nodes: another job or leftover actors "
                     "hold part of some nodes. Check `ray list actors --filter state=ALIVE`.")
    else:
        lines.append(f"  All {_fmt(snap.total)} GPUs have joined but only {_fmt(snap.available)} "
                     "are free: another job or leftover actors hold them. Check "
                     "`ray list jobs` / `ray list actors --filter state=ALIVE` on the head, "
                     "or `gke-grpo list`, and stop what should not run.")
    for node in alive:
        name = node.labels.get(NODE_NAME_LABEL)
        lines.append(f"  node {node.address}{f' ({name})' if name else ''}: {_fmt(node.gpus)} "
                     "GPUs, alive")
    for node in dead:
        lines.append(f"  node {node.address}: {_fmt(node.gpus)} GPUs, DEAD (preempted or removed)")
    return "\n".join(lines)


def wait_for_gpus(needed: int, timeout: float, poll: float = 10.0, *,
                  gpus_per_node: int | None = None, pools: Sequence[Pool] = (),
                  snapshot: Callable[[], Snapshot] = ray_snapshot,
                  clock: Callable[[], float] = time.monotonic,
                  sleep: Callable[[float], None] = time.sleep,
                  out=None, infeasible: Callable[[], bool] | None = None,
                  on_ready: Callable[[Snapshot], object] | None = None) -> int:
    """Poll ``snapshot`` until ``needed`` GPUs are available (on ``needed / gpus_per_node``
    separate nodes when ``gpus_per_node`` is given); return an exit code. ``infeasible``: the
    autoscaler's verdict on the gang request, believed when it says so on two polls in a row
    (the first may predate the request)."""
    out = out or sys.stdout
    start = clock()
    last: str | None = None
    infeasible_seen = 0
    while True:
        snap = snapshot()
        elapsed = clock() - start
        line = progress_line(snap, needed, elapsed, timeout, gpus_per_node)
        if pools and gpus_per_node:
            by_pool = ", ".join(f"{p.name} {len(snap.free_nodes(gpus_per_node, p.name))}/{p.nodes}"
                                for p in pools)
            line = line.replace(", elapsed", f" [{by_pool}], elapsed", 1)
        # Print on change, and at least every minute so a long wait shows it is alive.
        if line.split(", elapsed")[0] != (last or "").split(", elapsed")[0] or \
                int(elapsed) // 60 != int(elapsed - poll) // 60:
            print(line, file=out, flush=True)
            last = line
        enough_nodes = gpus_per_node is None or \
            len(snap.free_nodes(gpus_per_node)) >= math.ceil(needed / gpus_per_node)
        if pools and gpus_per_node:
            enough_nodes = enough_nodes and snap.pools_ready(gpus_per_node, pools)
        if snap.available >= needed and enough_nodes:
            print(f"{PREFIX} ready: {_fmt(snap.available)} GPUs available after {elapsed:.0f}s",
                  file=out, flush=True)
            if on_ready is not None:
                on_ready(snap)
            return int(ExitCode.OK)
        if infeasible is not None and gpus_per_node:
            infeasible_seen = infeasible_seen + 1 if infeasible() else 0
            if infeasible_seen >= 2:
                print(infeasible_message(needed, gpus_per_node, elapsed), file=out, flush=True)
                return int(ExitCode.GPU_GANG_INFEASIBLE)
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
    parser.add_argument("--placement-file", default=None,
                        help="where to write the nodes and capacity sources once ready")
    parser.add_argument("--pool", type=pool_argument, action="append", default=[],
                        help="a split layout's pool, NAME:NODES: its nodes must be free among the "
                             "nodes of that pool")
    parser.add_argument("--check-gang", action="store_true",
                        help="fail at once when the autoscaler reports the gang infeasible")
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
    infeasible = None
    if args.check_gang and args.gpus_per_node:
        from ray._raylet import GcsClient  # type: ignore[attr-defined]

        gcs = GcsClient(ray.get_runtime_context().gcs_address)
        nodes = math.ceil(args.gpus / args.gpus_per_node)

        def infeasible() -> bool:
            try:
                return gang_infeasible(gcs, args.gpus_per_node, nodes)
            except Exception:     # no autoscaler state (v1, no autoscaler): no verdict
                return False

    try:
        return wait_for_gpus(args.gpus, args.timeout_seconds, args.poll_seconds,
                             gpus_per_node=args.gpus_per_node, pools=args.pool,
                             infeasible=infeasible,
                             on_ready=lambda snap: report_placement(
                                 snap, args.gpus, args.gpus_per_node, args.placement_file,
                                 pools=args.pool))
    finally:
        ray.shutdown()


def report_placement(snap: Snapshot, needed: int, gpus_per_node: int | None,
                     placement_file: str | None, out=None,
                     pools: Sequence[Pool] = ()) -> dict[str, object]:
    """The gang's nodes and their capacity sources (and pools): printed as a NODES marker line
    (the jobs CLI reads it from the job log) and written to ``placement_file`` for the driver."""
    out = out or sys.stdout
    if pools and gpus_per_node:
        picked = [node for p in pools for node in sorted(
            snap.free_nodes(gpus_per_node, p.name), key=lambda n: n.node_id)[:p.nodes]]
    else:
        chosen = snap.free_nodes(gpus_per_node) if gpus_per_node else [n for n in snap.nodes if n.alive]
        count = math.ceil(needed / gpus_per_node) if gpus_per_node else len(chosen)
        picked = sorted(chosen, key=lambda n: n.free_gpus, reverse=True)[:count]
    nodes = [n.placement() for n in picked]
    record: dict[str, object] = {"gpu_nodes": nodes, "capacity_sources": count_sources(nodes)}
    print(f"{PREFIX} GPUs from {describe_sources(count_sources(nodes))}", file=out, flush=True)
    print(NODES_MARKER + json.dumps(record, sort_keys=True), file=out, flush=True)
    if placement_file:
        Path(placement_file).write_text(json.dumps(record, sort_keys=True) + "\n")
    return record


if __name__ == "__main__":
    sys.exit(main())
