"""The GPU rows of `gke-grpo status` and the report: the run's GPU workers now (up, requested,
releasing) and where each trainer start's GPUs came from.

    gpu_worker_rows(nodes, log, live, capacity) -> [("GPU workers", "2 up of 2 requested"), ...]
    start_sources_rows(timeline) -> [("GPU sources", "start 1: 2 x Spot (node-a, node-b)")]

What they read:
- the cluster's alive GPU nodes and their labels, from the Ray dashboard's state API
  (``GET /api/v0/nodes?detail=1``: Ray 2.54 dashboard/modules/state/state_head.py; each node's
  ``state``, ``resources_total`` and ``labels``; the labels carry the node's capacity source,
  components/node_labels.py; a split layout's node has its pool's custom resource in
  ``resources_total``, jobs/contract/layouts.py POOL_RESOURCES);
- whether the attempt holds its gang request: the HELD and RELEASED lines the gang holder prints
  into the job's log (jobs/head/gpu_gang.py). The dashboard has no view of the request itself:
  under the v2 autoscaler its ``/api/cluster_status`` is empty (observed with Ray 2.54);
- the stack output ``gpuCapacity``: the idle timeout after which a released worker goes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jobs.contract.capacity import (
    NODE_NAME_LABEL,
    NODES_MARKER,
    count_sources,
    describe_sources,
    gang_held,
    last_marker,
    source_of,
)
from jobs.contract.layouts import POOL_RESOURCES


def gpu_nodes(state_nodes: Any) -> list[dict[str, Any]]:
    """Alive GPU nodes from a ``/api/v0/nodes`` answer: {node_id, node_name, source, labels}."""
    rows = state_nodes
    for key in ("data", "result", "result"):    # {"data": {"result": {"result": [...]}}}
        if isinstance(rows, dict):
            rows = rows.get(key, rows)
    found = []
    for node in rows if isinstance(rows, list) else []:
        if not isinstance(node, dict) or node.get("state") != "ALIVE":
            continue
        total = node.get("resources_total") or {}
        if not isinstance(total, dict) or not float(total.get("GPU", 0) or 0) > 0:
            continue
        raw_labels = node.get("labels")
        labels: dict[str, str] = {str(k): str(v) for k, v in raw_labels.items()} \
            if isinstance(raw_labels, dict) else {}
        row = {"node_id": str(node.get("node_id", "")),
               "node_name": str(labels.get(NODE_NAME_LABEL) or node.get("node_ip", "?")),
               "source": source_of(labels), "labels": labels}
        # A split layout's node advertises its pool's custom resource (jobs/contract/layouts.py).
        pool = next((name for name, resource in POOL_RESOURCES.items() if total.get(resource)), None)
        found.append({**row, "pool": pool} if pool else row)
    return found


def gpu_worker_rows(nodes: list[dict[str, Any]], log: str, live: bool,
                    capacity: Mapping[str, Any] | None = None) -> list[tuple[str, str]]:
    """`GPU workers: N up / requested / releasing / 0` and the sources of the nodes up."""
    up = len(nodes)
    held = gang_held(log)
    idle = (capacity or {}).get("idleTimeoutSeconds")
    if held is not None and live:
        requested = int(held.get("nodes", 0))
        pending = max(requested - up, 0)
        text = f"{up} up of {requested} requested" + (f", {pending} pending" if pending else "")
    elif held is not None:
        text = (f"{up} up; WARNING: a GPU request for {held.get('nodes')} nodes stands with no live "
                "run (the ended attempt's driver and its holder were killed before releasing it): "
                "the nodes stay, billed, until the next run asks; `gke-grpo release-gpus` "
                "clears it")
    elif up:
        text = (f"{up} releasing (no run holds them: each goes after "
                f"{f'{idle} s' if idle is not None else 'the idle timeout'} idle, then GKE "
                "removes its node)")
    else:
        text = "0"
    rows = [("GPU workers", text)]
    if nodes:
        rows.append(("GPU nodes", f"{describe_sources(count_sources(nodes))} ("
                     + ", ".join(sorted(n["node_name"] for n in nodes)) + ")"))
    placed = last_marker(log, NODES_MARKER)
    if placed and isinstance(placed.get("gpu_nodes"), list):
        rows.append(("GPUs from", placement_text(placed)))
    return rows


def placement_text(placement: Mapping[str, Any]) -> str:
    nodes = [n for n in placement.get("gpu_nodes") or [] if isinstance(n, dict)]
    counts = placement.get("capacity_sources")
    if not isinstance(counts, dict):
        counts = count_sources(nodes)
    names = ", ".join(str(n.get("node_name") or n.get("address") or "?") for n in nodes)
    return describe_sources({str(k): int(v) for k, v in counts.items() if isinstance(v, int)}) + \
        (f" ({names})" if names else "")


def start_sources_rows(timeline) -> list[tuple[str, str]]:
    """Where each trainer start's GPUs came from (trainer_start records), latest last."""
    parts = []
    for event in timeline.events:
        if event.event != "trainer_start" or "gpu_nodes" not in event.extra:
            continue
        parts.append(f"attempt {event.attempt} start {event.start}: {placement_text(event.extra)}")
    return [("GPUs from", "; ".join(parts[-3:]))] if parts else []
