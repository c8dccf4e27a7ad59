"""Capacity that ends on schedule: when a run's GPU nodes go, and what each trainer is told so that
it saves a checkpoint before. Shared by the plan builder (jobs/plan/capacity_end.py writes the
plan's ``capacity_end``), the run driver (jobs/head/capacity_end.py tells every trainer start) and
the jobs CLI (status and report read the records back).

Where capacity ends
- flex-start: a node lives at most maxRunDurationSeconds (``gke-grpo:gpu.maxRunDurationSeconds`` or
  a flexStart source's; GKE's default, 7 days, when unset). Compute Engine counts it from the VM
  entering RUNNING (its ``terminationTimestamp`` "is automatically defined by Compute Engine
  whenever a VM has a time limit and enters the RUNNING state": "Limit the run time of a VM",
  cloud.google.com/compute/docs/instances/limit-vm-runtime). What the head can see is the
  Kubernetes Node's ``creationTimestamp``, which the GPU worker's init container passes to Ray as
  the node label ``gke-grpo/node-created`` (components/node_labels.py): it already reads its Node
  object, and nothing else on the head knows when a node began (a Ray node joins minutes later,
  after the image pull). The Node is created when the kubelet registers, after the VM's boot, so
  that time is late by the boot: FLEX_START_BOOT_ALLOWANCE_SECONDS is taken off, so that the end is
  not estimated later than it is (for a boot of up to that long).
- a reservation: at the end time the user gives (``gke-grpo:gpu.reservation.endTime`` or a
  reservation source's ``endTime``), for the nodes whose ``reservation-name`` label names it.
- Spot: no scheduled end (a preemption is not scheduled); nothing is set.
A gang ends with its first node: one node gone stops the trainer.

What the trainer is told, per trainer start, through its environment
- verl v0.7.1: ``MLP_CURRENT_CAPACITY_BLOCK_EXPIRATION_TIMESTAMP`` = the end, epoch seconds, read
  in the TaskRunner actor by ``should_save_ckpt_esi`` (verl/utils/checkpoint/checkpoint_manager.py):
  after each step's actor update the trainer saves when 0 < end - now <= 60 + its longest step so
  far + ``trainer.esi_redundant_time`` (the margin below), prints VERL_FORCED_SAVE_TEXT and keeps
  training (verl/trainer/ppo/ray_trainer.py ``fit``, only with ``trainer.save_freq`` > 0, always
  set here). The driver sets the variable in the trainer's environment; the rendered
  ``+ray_kwargs.ray_init.runtime_env`` hands it on to the actor (jobs/plan/render.py).
- NeMo RL v0.5.0: ``checkpointing.checkpoint_must_save_by`` = ``DD:HH:MM:SS``, a duration from the
  start of ``grpo_train`` (nemo_rl/utils/timer.py ``TimeoutChecker`` with fit_last_save_time=True:
  it saves after the step at which the time spent plus the mean step reaches it), then prints
  NEMO_RL_TIMEOUT_TEXT and returns (nemo_rl/algorithms/grpo.py ``grpo_train``): the trainer exits
  0 with the run not finished. The driver sets NEMO_RL_SAVE_BY_ENV, which the rendered override
  reads. ``grpo_train`` begins after the setup (workers, model load, vLLM), which a duration fixed
  at the start cannot see: the duration leaves out the longest "trainer start to first step" of
  the run's earlier starts, and SETUP_ALLOWANCE_SECONDS before any.

The margin is the planner's checkpoint time (jobs/plan/checkpoint_interval.py
``prior_checkpoint_seconds``): the save must be written before the end.

Standard library only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from jobs.contract.capacity import FLEX_START, NODE_CREATED_LABEL, RESERVATION_PREFIX, UNKNOWN
from jobs.contract.records import EARLIEST_TIME, LATEST_TIME

# verl v0.7.1 verl/utils/checkpoint/checkpoint_manager.py should_save_ckpt_esi ("vemlp").
VERL_EXPIRATION_ENV = "MLP_CURRENT_CAPACITY_BLOCK_EXPIRATION_TIMESTAMP"
# The variable the driver sets for NeMo RL, read by the rendered checkpoint_must_save_by override.
NEMO_RL_SAVE_BY_ENV = "GKE_GRPO_CHECKPOINT_MUST_SAVE_BY"
# What each trainer prints when it saves because its capacity ends (verl v0.7.1
# verl/trainer/ppo/ray_trainer.py fit; NeMo RL v0.5.0 nemo_rl/algorithms/grpo.py grpo_train).
VERL_FORCED_SAVE_TEXT = "Force saving checkpoint: ESI instance expiration approaching."
NEMO_RL_TIMEOUT_TEXT = "Timeout has been reached, stopping training early"

# events.jsonl: the trainer saved because its capacity ends (verl: the forced save's line; NeMo RL:
# its early stop after the save). trainer_start carries ``capacity_end`` (StartEnd.record).
CAPACITY_SAVE_EVENT = "capacity_save"
# trainer_exit's reason when NeMo RL stopped early for its capacity's end (jobs/head/failures.py).
CAPACITY_ENDED_REASON = "capacity_ended"

# GKE's flex-start limit and default: "up to seven days" (GKE "About flex-start",
# docs.cloud.google.com/kubernetes-engine/docs/concepts/dws).
FLEX_START_DEFAULT_MAX_RUN_SECONDS = 7 * 24 * 3600
# A VM's boot up to its kubelet's registration, taken off a flex-start node's end (above). An
# assumption of this project, not a published figure: GKE nodes usually register within about two
# minutes; five leaves room.
FLEX_START_BOOT_ALLOWANCE_SECONDS = 300.0
# NeMo RL: the setup before grpo_train on a run's first start, before one was seen. An assumption
# of this project (a 32B model's load and vLLM start-up on 4 nodes takes minutes, not hours).
SETUP_ALLOWANCE_SECONDS = 1800.0
# A "trainer start to first step" longer than this in events.jsonl is no setup (a clock step, a
# damaged record): left out, so that it cannot make every later start stop at once.
LONGEST_SETUP_SECONDS = 86400.0


def node_created_at(labels: Mapping[str, str]) -> float | None:
    """The epoch second a GPU node's Kubernetes Node was created (its ``gke-grpo/node-created``
    Ray label), None when the label is missing or not a plausible time."""
    value = labels.get(NODE_CREATED_LABEL, "")
    # isascii: str.isdigit() is also true of '²', which float() refuses.
    if not (isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 12):
        return None
    return plausible_time(float(value))


def plausible_time(value: Any) -> float | None:
    """An epoch second from a record (a placement file on the shared volume may be damaged:
    NaN, infinity, 1e300), None when it is not a number between 1970 and 2100."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value) if EARLIEST_TIME < value <= LATEST_TIME else None


@dataclass(frozen=True)
class NodeEnd:
    node: str            # the Kubernetes node name (or the Ray address)
    source: str          # the capacity source (jobs/contract/capacity.py source_of)
    ends_at: float       # epoch seconds
    basis: str           # how it was worked out, in words


def _reservation_end(name: str, ends: Mapping[str, Any]) -> float | None:
    found = [float(r["ends_at"]) for r in ends.get("reservation_ends") or ()
             if isinstance(r, Mapping) and r.get("name") == name]
    return min(found) if found else None     # one name in two projects: the earlier end


def node_end(node: Mapping[str, Any], ends: Mapping[str, Any]) -> NodeEnd | None:
    """When one GPU node's capacity ends (a placement record of jobs/head/gpu_wait.py, with
    ``source`` and ``created_at``), under the plan's ``capacity_end``; None when it has no
    scheduled end or it cannot be known."""
    name = str(node.get("node_name") or node.get("address") or "?")
    source = str(node.get("source") or UNKNOWN)
    if source.startswith(RESERVATION_PREFIX):
        reservation = source[len(RESERVATION_PREFIX):]
        at = _reservation_end(reservation, ends)
        if at is None:
            return None
        return NodeEnd(name, source, at, f"reservation {reservation} ends (its configured endTime)")
    if source == FLEX_START:
        run = ends.get("flex_start_max_run_seconds")
        created = plausible_time(node.get("created_at"))
        if run is None or created is None:
            return None
        at = float(created) + float(run) - FLEX_START_BOOT_ALLOWANCE_SECONDS
        return NodeEnd(name, source, at, f"flex-start node created at {created:.0f} + "
                       f"maxRunDurationSeconds {float(run):.0f} - {FLEX_START_BOOT_ALLOWANCE_SECONDS:.0f} s "
                       "boot allowance")
    return None


@dataclass(frozen=True)
class GangEnd:
    first: NodeEnd | None           # the node whose capacity ends first
    unknown: tuple[str, ...]        # nodes of a source with an end this could not work out

    @property
    def ends_at(self) -> float | None:
        return None if self.first is None else self.first.ends_at


def gang_end(nodes: Iterable[Mapping[str, Any]], ends: Mapping[str, Any]) -> GangEnd:
    """The gang's end: its first node's. A flex-start node without a creation time (labels
    unreadable) or a node of an unknown source, while the plan has a source with a scheduled end,
    is listed as unknown: its end may come first, unseen."""
    found: list[NodeEnd] = []
    unknown: list[str] = []
    flex = ends.get("flex_start_max_run_seconds") is not None
    for node in nodes:
        end = node_end(node, ends)
        source = str(node.get("source") or UNKNOWN)
        if end is not None:
            found.append(end)
        elif (flex and source == FLEX_START) or source == UNKNOWN:
            unknown.append(str(node.get("node_name") or node.get("address") or "?"))
    first = min(found, key=lambda e: e.ends_at) if found else None
    return GangEnd(first, tuple(unknown))


def save_by_duration(seconds: float) -> str:
    """NeMo RL's ``DD:HH:MM:SS`` (nemo_rl/utils/timer.py convert_to_seconds at v0.5.0) of a
    duration, rounded down (a second late is a save too late), never negative."""
    total = max(0, math.floor(seconds))
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{days:02d}:{hours:02d}:{minutes:02d}:{secs:02d}"
