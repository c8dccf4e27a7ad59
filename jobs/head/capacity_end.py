"""What the run driver tells each trainer start about the end of its capacity, and what it records
of the trainer's save before it. Where capacity ends, what each framework reads and why:
jobs/contract/capacity_end.py.

    told = tell(plan, placement, run_dir, now)     # before the start: told.env, told.record
    watch = SaveWatch(records, start, told, say)   # each trainer output line: watch.line(text, output)

The gang's nodes come from the GPU wait's placement (jobs/head/gpu_wait.py: each node's capacity
source and its Kubernetes Node's creation time, from the labels its GPU worker passed to Ray).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jobs.contract.capacity import FLEX_START
from jobs.contract.capacity_end import (
    CAPACITY_SAVE_EVENT,
    FLEX_START_BOOT_ALLOWANCE_SECONDS,
    LONGEST_SETUP_SECONDS,
    NEMO_RL_SAVE_BY_ENV,
    SETUP_ALLOWANCE_SECONDS,
    VERL_EXPIRATION_ENV,
    gang_end,
    save_by_duration,
)
from jobs.contract.run_plan import RunPlan
from jobs.head.failures import CAPACITY_STOP_PATTERNS, FORCED_SAVE_PATTERNS, TrainerOutput
from jobs.head.run_records import Records, read_events


@dataclass(frozen=True)
class Told:
    """What one trainer start was told: ``env`` for its environment, ``record`` for its
    trainer_start event ({} when the plan has no capacity end), ``line`` for the driver's log.
    ``ends_at`` is the estimated end the trainer was told of; ``latest_end`` the latest the
    capacity can really end (a flex-start estimate is early by up to the boot allowance)."""
    ends_at: float | None = None
    latest_end: float | None = None
    env: dict[str, str] = field(default_factory=dict)
    record: dict[str, Any] = field(default_factory=dict)
    line: str | None = None


def setup_seconds_seen(run_dir: str | Path) -> float | None:
    """The time from a trainer start to its first step line at the run's latest start that
    reached one (events.jsonl, every attempt): NeMo RL's setup before grpo_train, plus its initial
    validation, which grpo_train's timeout checker also counts (so the allowance errs early, at
    the cost of idle time, never late). The latest, not the longest: one slow start (a long image
    pull, a hang that recovered) would otherwise make every later start stop hours early."""
    starts: dict[tuple, float] = {}
    seen: list[tuple[float, float]] = []       # (start time, setup seconds)
    for row in read_events(run_dir):
        key = (row.get("attempt"), row.get("start"))
        at = row.get("time")
        if not isinstance(at, (int, float)) or isinstance(at, bool):
            continue
        if row.get("event") == "trainer_start":
            starts[key] = float(at)
        elif row.get("event") == "first_step" and key in starts:
            seen.append((starts[key], float(at) - starts[key]))
    usable = [(began, setup) for began, setup in seen if 0 <= setup <= LONGEST_SETUP_SECONDS]
    return max(usable)[1] if usable else None


def tell(plan: RunPlan, placement: Mapping[str, Any], run_dir: str | Path, now: float) -> Told:
    """What to tell the trainer start about to run on ``placement``'s nodes (at epoch ``now``)."""
    ends = plan.capacity_end
    if ends is None:
        return Told()
    nodes = [n for n in placement.get("gpu_nodes") or [] if isinstance(n, Mapping)]
    gang = gang_end(nodes, ends)
    margin = float(ends["margin_seconds"])
    record: dict[str, Any] = {"margin_seconds": margin, "margin_basis": ends["margin_basis"]}
    if gang.unknown:
        record["unknown_nodes"] = list(gang.unknown)
    first = gang.first
    if first is None:
        if not nodes:
            why = "the GPU wait recorded no nodes for this start (its placement file is missing or unreadable)"
        else:
            why = "no node of this start has a scheduled end the driver knows" + (
                f" ({len(gang.unknown)} flex-start or unknown node(s) without a creation time: their "
                "end is not known)" if gang.unknown else "")
        record.update(ends_at=None, told=False, why=why)
        return Told(record={"capacity_end": record},
                    line=f"capacity: {why}" if gang.unknown or not nodes else None)
    record.update(ends_at=round(first.ends_at, 3), node=first.node, source=first.source,
                  basis=first.basis)
    left = first.ends_at - now
    if left <= 0:
        record.update(told=False, why="its estimated end has passed and the node is still up: the "
                      "estimate is early, so the trainer is not told (it runs until the node goes)")
        return Told(record={"capacity_end": record}, line=f"capacity: node {first.node}: {record['why']}")
    if plan.framework == "verl":
        # Whole seconds, rounded down: never later than the end.
        env = {VERL_EXPIRATION_ENV: str(math.floor(first.ends_at))}
        record["told"] = {**env, "trainer.esi_redundant_time": math.ceil(margin)}
        what = (f"verl saves once its end is within 60 s + its longest step + {math.ceil(margin)} s "
                "(the margin)")
    else:
        seen = setup_seconds_seen(run_dir)
        setup = SETUP_ALLOWANCE_SECONDS if seen is None else seen
        save_by = save_by_duration(left - margin - setup)
        env = {NEMO_RL_SAVE_BY_ENV: save_by}
        record["told"] = {"checkpointing.checkpoint_must_save_by": save_by}
        record["setup_allowance_seconds"] = round(setup, 3)
        record["setup_basis"] = ("an assumption (no earlier start of this run reached a step)"
                                 if seen is None else "the latest start of this run: trainer start to first step")
        what = (f"NeMo RL saves and stops {save_by} (DD:HH:MM:SS) after its setup, allowing "
                f"{setup:.0f} s for the setup and {margin:.0f} s (the margin) for the save")
    latest = first.ends_at + (FLEX_START_BOOT_ALLOWANCE_SECONDS if first.source == FLEX_START else 0.0)
    return Told(ends_at=first.ends_at, latest_end=latest, env=env, record={"capacity_end": record},
                line=f"capacity of node {first.node} ({first.source}) ends in {left:.0f} s: {what}")


def restart_delay(told: Told, now: float, settle_seconds: float) -> float:
    """How long to wait after NeMo RL stopped for its capacity's end before the next GPU wait:
    until the latest moment the capacity can end has passed and Ray has marked the node dead, so
    that the wait finds new nodes, not the leaving ones (the gang request still holds those, and a
    flex-start estimate is early by design)."""
    if told.latest_end is None:
        return settle_seconds
    return max(0.0, told.latest_end - now) + settle_seconds


class SaveWatch:
    """The trainer's saves before its capacity's end, seen in its output: each recorded as a
    ``capacity_save`` event and said in the driver's log (called from the output thread)."""

    def __init__(self, records: Records, start: int, told: Told, say: Callable[[str], None]):
        self.records = records
        self.start = start
        self.told = told
        self.say = say
        self.saves = 0

    def line(self, text: str, output: TrainerOutput) -> None:
        stopped = any(p.search(text) for p in CAPACITY_STOP_PATTERNS)
        if not stopped and not any(p.search(text) for p in FORCED_SAVE_PATTERNS):
            return
        self.saves += 1
        self.records.event(CAPACITY_SAVE_EVENT, self.start, last_step_logged=output.last_step,
                           capacity_ends_at=self.told.ends_at, stopped=stopped, save=self.saves,
                           text=text.strip()[-300:])
        self.say("capacity ends soon: the trainer saved" + (" and stopped" if stopped else " (and trains on)")
                 + (f" after step {output.last_step}" if output.last_step is not None else ""))
