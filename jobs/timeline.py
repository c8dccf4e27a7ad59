"""The run's timeline as the run driver records it: /data/runs/<run-id>/events.jsonl and
restarts.jsonl (format fixed in the branches' interface notes; the driver is jobs/run.py).

    read_timeline(run_dir) -> Timeline(events, restarts, skipped_lines)

Standard library only: read on the laptop by status/report and importable on the Ray head.

The files are appended and flushed line by line while the run is live, and may sit on a FUSE
mount that shows a half-written object: a last line without its newline, or one that is not
JSON yet, is skipped (and counted), never an error. So is a line whose fields have the wrong
type: a report of a run must not fail because one record is odd.
"""

from __future__ import annotations

import json
import math
import posixpath
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional

from jobs.layout import MOUNT_PATH

# /data/runs/<run-id>/: the run driver's directory (the interface notes; the lead may move the
# root into jobs/layout.py when the driver branch adds it there).
RUNS_DIR = "runs"
RUNS_ROOT = posixpath.join(MOUNT_PATH, RUNS_DIR)
EVENTS_FILE = "events.jsonl"
RESTARTS_FILE = "restarts.jsonl"
TENSORBOARD_DIR = "tensorboard"
# The env var the driver sets per trainer start to <run dir>/tensorboard/attempt-<a>-start-<s>;
# the rendered framework commands refer to it (jobs/render.py).
TENSORBOARD_ENV = "GKE_GRPO_TENSORBOARD_DIR"
_START_DIR = re.compile(r"^attempt-(\d+)-start-(\d+)$")

# Event names of events.jsonl (interface notes), paired into intervals below.
PAIRED_EVENTS = {
    "prepare": ("prepare_start", "prepare_end"),
    "gpu_wait": ("gpu_wait_start", "gpu_wait_end"),
    "health": ("health_start", "health_end"),
    "trainer": ("trainer_start", "trainer_exit"),
}


def run_dir(run_id: str, root: str | Path = RUNS_ROOT) -> Path:
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", run_id or ""):
        raise ValueError(f"run id {run_id!r}: expected letters, digits, '.', '_' and '-'")
    return Path(root) / run_id


def start_dir_name(attempt: int, start: int) -> str:
    """``tensorboard/attempt-<attempt>-start-<start>`` under the run directory: one folder per
    trainer start, so a restart never writes into (or truncates) an earlier start's files."""
    return f"attempt-{attempt}-start-{start}"


def tensorboard_dir(run_directory: str | Path, attempt: int, start: int) -> str:
    return posixpath.join(str(run_directory), TENSORBOARD_DIR, start_dir_name(attempt, start))


def parse_start_dir(name: str) -> Optional[tuple[int, int]]:
    """(attempt, start) of an ``attempt-A-start-S`` folder name; None for any other name."""
    m = _START_DIR.match(name)
    return (int(m.group(1)), int(m.group(2))) if m else None


@dataclass(frozen=True)
class Event:
    time: float
    event: str
    attempt: int
    start: int
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> tuple[int, int]:
        return (self.attempt, self.start)


@dataclass(frozen=True)
class Restart:
    time: float
    reason: str
    exit_code: Optional[int]
    last_checkpoint_step: Optional[int]
    attempt: int
    start: int


@dataclass(frozen=True)
class Interval:
    kind: str                     # a PAIRED_EVENTS key
    attempt: int
    start: int
    begin: float
    end: Optional[float]          # None: still open (live, or the driver died inside it)
    end_event: Optional[Event] = None

    def duration(self, now: float) -> float:
        return max((self.end if self.end is not None else now) - self.begin, 0.0)


def _number(value: Any) -> Optional[float]:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _int(value: Any) -> Optional[int]:
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


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


def parse_event(row: dict[str, Any]) -> Optional[Event]:
    time, name = _number(row.get("time")), row.get("event")
    attempt, start = _int(row.get("attempt")), _int(row.get("start"))
    if time is None or not isinstance(name, str) or attempt is None or start is None:
        return None
    extra = {k: v for k, v in row.items() if k not in ("time", "event", "attempt", "start")}
    return Event(time, name, attempt, start, extra)


def parse_restart(row: dict[str, Any]) -> Optional[Restart]:
    time, attempt, start = _number(row.get("time")), _int(row.get("attempt")), _int(row.get("start"))
    if time is None or attempt is None or start is None:
        return None
    reason = row.get("reason")
    return Restart(time, reason if isinstance(reason, str) else "unknown", _int(row.get("exit_code")),
                   _int(row.get("last_checkpoint_step")), attempt, start)


@dataclass
class Timeline:
    events: list[Event]
    restarts: list[Restart]
    skipped_lines: int = 0

    @property
    def empty(self) -> bool:
        return not self.events

    @property
    def first_time(self) -> Optional[float]:
        return self.events[0].time if self.events else None

    @property
    def last_time(self) -> Optional[float]:
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
        for key, b in open_.items():
            later = [e.time for e in self.events if e.attempt == b.attempt and e.time > b.time
                     and e.event in ("driver_end", "deadline")]
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
                          else max(now, max(times))))
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
