"""Capacity that ends on schedule, as `gke-grpo status` and the report show it: when each trainer
start's capacity ended (or ends), what the trainer was told, and its saves before that end.

    start_capacity_text(timeline, attempt, start) -> "ends 2026-12-08 10:00:00 UTC (flexStart, node-a); saved before it (after step 41)"
    capacity_rows(timeline) -> [("capacity end", "...")]       # status: the latest start

What they read (jobs/contract/capacity_end.py; written by jobs/head/capacity_end.py): trainer_start's
``capacity_end`` (``ends_at``, ``source``, ``node``, ``told``, ``why``), the ``capacity_save`` events
(``last_step_logged``, ``stopped``) and trainer_exit's ``reason`` ``capacity_ended``. Records may
be hostile (a shared volume anyone in the cluster can write): every value is checked for its kind
and size before it is shown.
"""

from __future__ import annotations

import math
from typing import Any

from jobs.cli.report_html import utc_text
from jobs.contract.capacity_end import CAPACITY_ENDED_REASON, CAPACITY_SAVE_EVENT
from jobs.contract.records import EARLIEST_TIME, LATEST_TIME, MAX_STEP, plain_int


def _time(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value) if EARLIEST_TIME < value <= LATEST_TIME else None


def _short(value: Any, limit: int = 80) -> str | None:
    return value[:limit] if isinstance(value, str) and value.isprintable() else None


def _start_events(timeline, name: str, attempt: int, start: int) -> list:
    return [e for e in timeline.events if e.event == name and e.key == (attempt, start)]


def start_capacity_text(timeline, attempt: int, start: int) -> str:
    """One start's capacity end, what the trainer was told and its saves; "-" when the run's
    capacity has no scheduled end."""
    began = _start_events(timeline, "trainer_start", attempt, start)
    told = began[-1].extra.get("capacity_end") if began else None
    saves = _start_events(timeline, CAPACITY_SAVE_EVENT, attempt, start)
    if not isinstance(told, dict) and not saves:
        return "-"
    told = told if isinstance(told, dict) else {}
    ends_at = _time(told.get("ends_at"))
    parts = []
    if ends_at is not None:
        where = ", ".join(t for t in (_short(told.get("source")), _short(told.get("node"))) if t)
        parts.append(f"ends {utc_text(ends_at)}" + (f" ({where})" if where else ""))
    if told.get("told") is False:
        parts.append("trainer not told: " + (_short(told.get("why"), 200) or "no end known"))
    if saves:
        steps = [plain_int(e.extra.get("last_step_logged"), 0, MAX_STEP) for e in saves]
        last = steps[-1]
        stopped = any(e.extra.get("stopped") is True for e in saves)
        parts.append(f"saved before it{f' {len(saves)} times' if len(saves) > 1 else ''}"
                     + (f" (after step {last})" if last is not None else "")
                     + (", then stopped" if stopped else ""))
    elif ends_at is not None and told.get("told") is not False:
        exits = _start_events(timeline, "trainer_exit", attempt, start)
        if exits and exits[-1].time >= ends_at - 1:
            parts.append("no save before it seen")
    return "; ".join(parts) or "-"


def capacity_rows(timeline) -> list[tuple[str, str]]:
    """`status`: the latest trainer start's capacity end, and how many starts ended for it."""
    starts = [e for e in timeline.events if e.event == "trainer_start"]
    if not starts:
        return []
    latest = starts[-1]
    text = start_capacity_text(timeline, latest.attempt, latest.start)
    saves = [e for e in timeline.events if e.event == CAPACITY_SAVE_EVENT]
    if text == "-" and not saves:
        return []
    stops = sum(1 for e in timeline.events if e.event == "trainer_exit"
                and e.extra.get("reason") == CAPACITY_ENDED_REASON)
    text = f"attempt {latest.attempt} start {latest.start}: {text}"
    if saves:
        text += f"; {len(saves)} save(s) before a capacity end in the run" + (
            f", {stops} start(s) stopped for it and restarted" if stops else "")
    return [("capacity end", text)]
