"""The run's timeline, read back from what the run driver records under /data/runs/<run-id>/
(events.jsonl and restarts.jsonl; their names and record shapes: jobs/contract/records.py).

    read_timeline(run_dir) -> Timeline(events, restarts, warnings)

The files are read through the one safe reader (jobs/contract/safe_files.py: regular files
inside the run directory, size-capped). They are appended and flushed line by line while the run
is live, and may sit on a FUSE mount that shows a half-written object: a last line without its
newline, or one that is not JSON yet, is skipped (and counted), never an error. So is a line
whose fields have the wrong type or an absurd value (a time of 1e308, a 5,000-digit attempt:
jobs/contract/records.py ``event_problem``), and a file that cannot be read at all (a FIFO, a
directory) is noted and the rest of the run still shown: a report of a run must not fail because
one record is odd.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jobs.cli.data_warnings import DataWarnings
from jobs.contract.records import (
    EVENTS_FILE,
    PAIRED_EVENTS,
    RESTARTS_FILE,
    Event,
    Restart,
    event_problem,
    parse_event,
    parse_restart,
    restart_problem,
)
from jobs.contract.safe_files import EVENTS, RESTARTS, FileKind, UnusableFile, json_lines, read_bytes


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


def read_jsonl(path: Path, kind: FileKind, warnings: DataWarnings,
               within: str | Path | None = None) -> list[dict[str, Any]]:
    """The JSON objects of a JSONL file; lines that are not one are counted in ``warnings``, a
    file that cannot be read is noted there. A missing file is an empty timeline."""
    try:
        data = read_bytes(path, kind, within=within if within is not None else path.parent)
    except UnusableFile as err:
        if not err.missing:
            warnings.note(f"{path.name} not read: it {err.reason}")
        return []
    rows: list[dict[str, Any]] = []
    for _number, row, problem in json_lines(data):
        if row is None:
            warnings.skip("line", path.name, problem or "unreadable")
        else:
            rows.append(row)
    return rows


@dataclass
class Timeline:
    events: list[Event]
    restarts: list[Restart]
    warnings: DataWarnings = field(default_factory=DataWarnings)

    @property
    def skipped_lines(self) -> int:
        return self.warnings.skipped

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
                       warnings: DataWarnings | None = None) -> Timeline:
    warnings = warnings if warnings is not None else DataWarnings()
    parsed_events, parsed_restarts = [], []
    for row in events:
        problem = event_problem(row)
        e = None if problem else parse_event(row)
        if e is None:
            warnings.skip("line", EVENTS_FILE, problem or "not an event")
        else:
            parsed_events.append(e)
    for row in restarts:
        problem = restart_problem(row)
        r = None if problem else parse_restart(row)
        if r is None:
            warnings.skip("line", RESTARTS_FILE, problem or "not a restart")
        else:
            parsed_restarts.append(r)
    # Appended in order by one writer; sorted anyway (stable) so a clock step never reorders pairs.
    parsed_events.sort(key=lambda e: e.time)
    parsed_restarts.sort(key=lambda r: r.time)
    return Timeline(parsed_events, parsed_restarts, warnings)


def read_timeline(run_directory: str | Path) -> Timeline:
    root = Path(run_directory)
    warnings = DataWarnings()
    events = read_jsonl(root / EVENTS_FILE, EVENTS, warnings, within=root)
    restarts = read_jsonl(root / RESTARTS_FILE, RESTARTS, warnings, within=root)
    return timeline_from_rows(events, restarts, warnings)
