"""The run's timeline, read back from what the run driver records under /data/runs/<run-id>/
(events.jsonl and restarts.jsonl; their names and record shapes: jobs/contract/records.py).

    read_timeline(run_dir) -> Timeline(events, restarts, skipped_lines)

The files are appended and flushed line by line while the run is live, and may sit on a FUSE
mount that shows a half-written object: a last line without its newline, or one that is not
JSON yet, is skipped (and counted), never an error. So is a line whose fields have the wrong
type: a report of a run must not fail because one record is odd.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jobs.contract.records import EVENTS_FILE, PAIRED_EVENTS, RESTARTS_FILE, Event, Restart, parse_event, parse_restart


@dataclass(frozen=True)
class Interval:
    kind: str                     # a PAIRED_EVENTS key
    attempt: int
    start: int
    begin: float
    end: float | None          # None: still open (live, or the driver died inside it)
    end_event: Event | None = None

    def duration(self, now: float) -> float:
        return max((self.end if self.end is not None else now) - self.begin, 0.0)


def read_jsonl(path: Path) -> tuple[list[dict[str, Any]], int]:
    """(objects, skipped line count). A missing file is an empty timeline."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return [], 0
    rows: list[dict[str, Any]] = []
    skipped = 0
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            skipped += 1
            continue
        if isinstance(row, dict):
            rows.append(row)
        else:
            skipped += 1
    return rows, skipped


@dataclass
class Timeline:
    events: list[Event]
    restarts: list[Restart]
    skipped_lines: int = 0

    @property
    def empty(self) -> bool:
        return not self.events

    @property
    def first_time(self) -> float | None:
        return self.events[0].time if self.events else None

    @property
    def last_time(self) -> float | None:
        return self.events[-1].time if self.events else None

    @property
    def attempts(self) -> list[int]:
        return sorted({e.attempt for e in self.events})

    @property
    def ended(self) -> bool:
        """The latest attempt's driver wrote driver_end (nothing of the run is live)."""
        if not self.events:
            return False
        latest = max(e.attempt for e in self.events)
        return any(e.event == "driver_end" and e.attempt == latest for e in self.events)

    def end_time(self, now: float) -> float:
        """Where the run's wall clock stops: the last driver_end when the run ended, else now."""
        if self.ended:
            return self.last_time or now
        return max(now, self.last_time or now)

    def intervals(self, kind: str) -> list[Interval]:
        """Begin/end pairs of one kind, per (attempt, start). An unmatched begin stays open
        unless a later event of the same attempt closes it implicitly (the driver moved on)."""
        begin_name, end_name = PAIRED_EVENTS[kind]
        out: list[Interval] = []
        open_: dict[tuple[int, int], Event] = {}
        for e in self.events:
            if e.event == begin_name:
                if e.key in open_:                 # a begin without its end: closed by the next begin
                    out.append(Interval(kind, *open_[e.key].key, open_[e.key].time, e.time))
                open_[e.key] = e
            elif e.event == end_name and e.key in open_:
                b = open_.pop(e.key)
                out.append(Interval(kind, b.attempt, b.start, b.time, e.time, e))
        for b in open_.values():
            later = [e.time for e in self.events if e.attempt == b.attempt and e.time > b.time
                     and e.event in ("driver_end", "deadline", "driver_lost")]
            out.append(Interval(kind, b.attempt, b.start, b.time, min(later) if later else None))
        return sorted(out, key=lambda i: (i.begin, i.attempt, i.start))

    def trainer_starts(self) -> list[Interval]:
        return self.intervals("trainer")

    def attempt_spans(self, now: float) -> list[tuple[int, float, float]]:
        """(attempt, first event, last event or now when live) per attempt."""
        spans = []
        for attempt in self.attempts:
            times = [e.time for e in self.events if e.attempt == attempt]
            done = any(e.event == "driver_end" and e.attempt == attempt for e in self.events)
            spans.append((attempt, min(times), max(times) if done or attempt != self.attempts[-1]
                          else max(now, *times)))
        return spans


def timeline_from_rows(events: Iterable[dict[str, Any]], restarts: Iterable[dict[str, Any]] = (),
                       skipped: int = 0) -> Timeline:
    parsed_events, parsed_restarts = [], []
    for row in events:
        e = parse_event(row)
        if e is None:
            skipped += 1
        else:
            parsed_events.append(e)
    for row in restarts:
        r = parse_restart(row)
        if r is None:
            skipped += 1
        else:
            parsed_restarts.append(r)
    # Appended in order by one writer; sorted anyway (stable) so a clock step never reorders pairs.
    parsed_events.sort(key=lambda e: e.time)
    parsed_restarts.sort(key=lambda r: r.time)
    return Timeline(parsed_events, parsed_restarts, skipped)


def read_timeline(run_directory: str | Path) -> Timeline:
    root = Path(run_directory)
    events, skipped_e = read_jsonl(root / EVENTS_FILE)
    restarts, skipped_r = read_jsonl(root / RESTARTS_FILE)
    return timeline_from_rows(events, restarts, skipped_e + skipped_r)
