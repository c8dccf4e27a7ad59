"""Which Ray nodes the cluster reports DEAD, and why: read-only, as one JSON line.

    python3 -m jobs.head.node_deaths [--since EPOCH_SECONDS] [--address auto]

The run driver runs this as a child after a trainer start failed (jobs/head/failures.py): a node
that died since the start began is the evidence that capacity was lost and the start is worth
restarting. A child, not the driver itself: ``ray.init`` replaces the calling process's SIGTERM
handler with ``sys.exit(signum)`` (Ray 2.54 ray/_private/worker.py ``init``), and the driver's
own handler must survive to record a stop.

What Ray 2.54 gives (read from the 2.54.0 wheel and observed, 2026-12-01):
- ``ray.nodes()`` (ray/_private/state.py, straight from the GCS): per node ``Alive``,
  ``NodeID``, ``NodeManagerAddress``, ``DeathReason`` (the int of common.proto
  NodeDeathInfo.Reason: 1 EXPECTED_TERMINATION, e.g. "received SIGTERM" when a pod is deleted;
  2 UNEXPECTED_TERMINATION, e.g. "health check failed due to missing too many heartbeats"; 3
  AUTOSCALER_DRAIN_PREEMPTED; 4 AUTOSCALER_DRAIN_IDLE) and ``DeathReasonMessage``; no time.
- ``ray.util.state.list_nodes(detail=True)`` (the dashboard's state API): ``end_time_ms``, when
  the GCS marked the node dead (ray/util/state/common.py NodeState: "could be delayed up to 30
  seconds" for an unexpected death).

Output: ``{"dead": [{"node_id", "address", "reason", "message", "died_at"}], "error": null}``;
``died_at`` is epoch seconds or null when the state API did not answer. Nodes that died before
``--since`` are left out (those with no known time are kept: the driver decides). Exit codes:
0 answered, 7 NO_RAY (no cluster to ask; the JSON says why).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from jobs.contract.exit_codes import ExitCode

# common.proto NodeDeathInfo.Reason (Ray 2.54.0, generated ray/core/generated/common_pb2.py).
DEATH_REASONS = {0: "UNSPECIFIED", 1: "EXPECTED_TERMINATION", 2: "UNEXPECTED_TERMINATION",
                 3: "AUTOSCALER_DRAIN_PREEMPTED", 4: "AUTOSCALER_DRAIN_IDLE"}


def dead_nodes(nodes: list[dict[str, Any]], end_times: dict[str, float],
               since: float | None) -> list[dict[str, Any]]:
    """The dead nodes of ``ray.nodes()``, with their death time when known, newest first.
    Nodes drained for being idle (AUTOSCALER_DRAIN_IDLE) are left out: nothing ran there."""
    found = []
    for node in nodes:
        if node.get("Alive") or node.get("alive"):
            continue
        node_id = str(node.get("NodeID", ""))
        code = node.get("DeathReason")
        reason = DEATH_REASONS.get(code, str(code)) if isinstance(code, int) else str(code)
        if reason == "AUTOSCALER_DRAIN_IDLE":
            continue
        died_at = end_times.get(node_id)
        if since is not None and died_at is not None and died_at < since:
            continue
        found.append({"node_id": node_id, "address": str(node.get("NodeManagerAddress", "?")),
                      "reason": reason, "message": str(node.get("DeathReasonMessage") or ""),
                      "died_at": died_at})
    return sorted(found, key=lambda n: -(n["died_at"] or 0))


def _end_times() -> dict[str, float]:
    from ray.util.state import list_nodes

    times = {}
    for node in list_nodes(detail=True, filters=[("state", "=", "DEAD")], raise_on_missing_output=False):
        end = getattr(node, "end_time_ms", None)
        if end:
            times[node.node_id] = end / 1000.0
    return times


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m jobs.head.node_deaths",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--since", type=float, default=None, help="epoch seconds")
    parser.add_argument("--address", default="auto", help="Ray address (default: auto)")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    import ray

    try:
        ray.init(address=args.address, logging_level="ERROR", log_to_driver=False)
    except Exception as exc:
        print(json.dumps({"dead": [], "error": f"cannot connect to Ray: {exc}"[:500]}), flush=True)
        return int(ExitCode.NO_RAY)
    try:
        nodes = ray.nodes()
        error = None
        try:
            end_times = _end_times()
        except Exception as exc:   # no dashboard: the deaths without their times
            end_times, error = {}, f"state API: {type(exc).__name__}: {exc}"[:500]
        print(json.dumps({"dead": dead_nodes(nodes, end_times, args.since), "error": error}),
              flush=True)
    finally:
        ray.shutdown()
    return int(ExitCode.OK)


if __name__ == "__main__":
    sys.exit(main())
