"""Where a run's GPUs came from, and the gang request's marker lines: shared by the head (which
records them) and the jobs CLI (which reads them back).

Each GPU worker passes its Kubernetes node's capacity labels to Ray as node labels (components/
node_labels.py), so a Ray node's labels say its capacity source:

    source_of({"cloud.google.com/gke-spot": "true", ...})            -> "spot"
    source_of({"cloud.google.com/reservation-name": "r1", ...})      -> "reservation:r1"
    source_of({"cloud.google.com/gke-flex-start": "true", ...})      -> "flexStart"
    source_of({"gke-grpo/node-labels": "unreadable"})                -> "unknown"

Marker lines in the Ray job's log (printed by jobs/head/gpu_gang.py and jobs/head/gpu_wait.py):

    [gpu_gang] HELD {"nodes": 4, "gpus_per_node": 8}
    [gpu_gang] RELEASED {"reason": "..."}
    [wait_for_gpus] NODES {"nodes": [...], "sources": {"spot": 4}}

Standard library only.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from typing import Any

SPOT_LABEL = "cloud.google.com/gke-spot"
RESERVATION_LABEL = "cloud.google.com/reservation-name"
FLEX_START_LABEL = "cloud.google.com/gke-flex-start"
# Not in Google's documentation (GKE's cluster autoscaler sets it: spot, flex-start, standard,
# preemptible); read only when the documented labels are absent.
PROVISIONING_LABEL = "cloud.google.com/gke-provisioning"
NODE_POOL_LABEL = "cloud.google.com/gke-nodepool"
NODE_NAME_LABEL = "gke-grpo/node-name"
# The epoch second the node's Kubernetes Node object was created (its metadata.creationTimestamp):
# when a flex-start node's run duration began, near enough (jobs/contract/capacity_end.py).
NODE_CREATED_LABEL = "gke-grpo/node-created"
UNREADABLE_LABEL = "gke-grpo/node-labels"

SPOT, FLEX_START, UNKNOWN = "spot", "flexStart", "unknown"
RESERVATION_PREFIX = "reservation:"

GANG_PREFIX = "[gpu_gang]"
GANG_HELD_MARKER = f"{GANG_PREFIX} HELD "
GANG_RELEASED_MARKER = f"{GANG_PREFIX} RELEASED "
NODES_MARKER = "[wait_for_gpus] NODES "
# The file gpu_wait writes once the gang is there, read by the driver for trainer_start.
PLACEMENT_FILE = "gpu-placement.json"


def source_of(labels: Mapping[str, str]) -> str:
    """The capacity source of a node from its labels (reservation first: a reserved node is not
    Spot)."""
    reservation = labels.get(RESERVATION_LABEL)
    if reservation:
        return RESERVATION_PREFIX + reservation
    provisioning = labels.get(PROVISIONING_LABEL, "")
    if labels.get(FLEX_START_LABEL) == "true" or provisioning == "flex-start":
        return FLEX_START
    if labels.get(SPOT_LABEL) == "true" or provisioning == "spot":
        return SPOT
    return UNKNOWN


def source_kind(source: str) -> str:
    """reservation | flexStart | spot | unknown: what a source is priced as."""
    return "reservation" if source.startswith(RESERVATION_PREFIX) else source


def provisioning_model_of(source: str, default: str) -> str:
    """The price-table model of a source (jobs/plan/prices.py hourly_rate): a reservation is
    priced as reserved capacity, flexStart as flex-start; an unknown source as ``default``."""
    kind = source_kind(source)
    return {"reservation": "reservation", FLEX_START: "flex-start", SPOT: "spot"}.get(kind, default)


def describe_source(source: str) -> str:
    if source.startswith(RESERVATION_PREFIX):
        return f"reservation {source[len(RESERVATION_PREFIX):]}"
    return {SPOT: "Spot", FLEX_START: "flex-start"}.get(source, "unknown source")


def count_sources(nodes: list[dict[str, Any]]) -> dict[str, int]:
    """{source: nodes} of placement records (each with a "source")."""
    return dict(sorted(Counter(str(n.get("source", UNKNOWN)) for n in nodes).items()))


def describe_sources(counts: Mapping[str, int]) -> str:
    """`2 x Spot, 2 x reservation r1`."""
    if not counts:
        return "none"
    return ", ".join(f"{n} x {describe_source(s)}" for s, n in sorted(counts.items()))


def last_marker(text: str, marker: str) -> dict[str, Any] | None:
    """The JSON object of the last ``marker`` line in a log, None when there is none."""
    found = None
    for line in text.splitlines():
        at = line.find(marker)
        if at < 0:
            continue
        try:
            value = json.loads(line[at + len(marker):])
        except ValueError:
            continue
        if isinstance(value, dict):
            found = value
    return found


def gang_held(text: str) -> dict[str, Any] | None:
    """The gang request a log shows held now: its last HELD marker when no RELEASED follows."""
    held_at = text.rfind(GANG_HELD_MARKER)
    if held_at < 0 or text.rfind(GANG_RELEASED_MARKER) > held_at:
        return None
    return last_marker(text[held_at:], GANG_HELD_MARKER)
