"""The run driver's records under the run directory: events.jsonl and restarts.jsonl, appended one
flushed line per record (names and shapes: jobs/contract/records.py), and what an earlier driver
of the same attempt left there (``previous_drivers``).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jobs.contract.records import EVENTS_FILE, RESTARTS_FILE, TENSORBOARD_DIR, parse_start_dir


class Records:
    """events.jsonl and restarts.jsonl of a run: appended, one flushed line per record (the
    trainer's output thread records a step while the main thread records stages: one lock).

    ``listener``: told every record as it is written (a restart as event ``restart``) and every
    training step line (``note_step``, not written): the driver's metrics (jobs/head/run_metrics.py).
    Whatever the listener raises is dropped: the run's metrics never fail the run."""

    def __init__(self, run_dir: Path, attempt: int, clock: Callable[[], float] = time.time):
        self.run_dir = run_dir
        self.attempt = attempt
        self.clock = clock
        self._lock = threading.Lock()
        self.listener: Callable[[dict], None] | None = None

    def _tell(self, record: dict) -> None:
        listener = self.listener
        if listener is None:
            return
        with contextlib.suppress(Exception):    # a listener's bug must not stop a record or a step
            listener(record)

    def note_step(self, start: int, step: int | None) -> None:
        """A training step line the trainer's output showed (None: not a step line): told to the
        listener only (the record of a start's first step is ``first_step``)."""
        if step is not None:
            self._tell({"time": self.clock(), "event": "step", "attempt": self.attempt,
                        "start": start, "step": step})

    def _append(self, name: str, record: dict) -> None:
        with self._lock, open(self.run_dir / name, "a") as f:
            f.write(json.dumps(record, sort_keys=True) + "\n")
            f.flush()

    def event(self, event: str, start: int, *, at: float | None = None, **extra: Any) -> dict:
        record = {"time": self.clock() if at is None else at, "event": event,
                  "attempt": self.attempt, "start": start, **extra}
        self._append(EVENTS_FILE, record)
        self._tell(record)
        return record

    def restart(self, *, reason: str, exit_code: int | None, last_checkpoint_step: int | None,
                start: int, **extra: Any) -> dict:
        record = {"time": self.clock(), "reason": reason, "exit_code": exit_code,
                  "last_checkpoint_step": last_checkpoint_step, "attempt": self.attempt,
                  "start": start, **extra}
        self._append(RESTARTS_FILE, record)
        self._tell({**record, "event": "restart"})
        return record


def _jsonl(path: Path) -> list[dict]:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return []
    rows = []
    for line in lines:
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict):
            rows.append(row)
    return rows


def read_restarts(run_dir: str | Path) -> list[dict]:
    return _jsonl(Path(run_dir) / RESTARTS_FILE)


def read_events(run_dir: str | Path) -> list[dict]:
    """The objects of events.jsonl (lines that are not JSON objects skipped)."""
    return _jsonl(Path(run_dir) / EVENTS_FILE)


@dataclass
class PreviousDrivers:
    """What earlier drivers of this attempt left in the run directory: a driver resubmitted
    with the same submission id (KubeRay's submitter retried after a head restart, whose new
    GCS no longer knew the job) continues after them instead of overwriting them."""
    next_start: int = 0                    # the first start index no record or folder uses
    first_trainer_start: float | None = None   # epoch seconds: the attempt's time budget
    restarts: list[dict] = field(default_factory=list)
    unfinished_start: int | None = None    # a trainer start that has no trainer_exit
    unfinished_last_seen: float | None = None  # its last sign of life (a record or a file)
    drivers: int = 0
    saw_step: bool = False                 # a start of the attempt logged a training step
    unended: bool = False                  # the last earlier driver wrote no driver_end
    unended_start: int = 0                 # ... and the start index it was at
    last_seen: float | None = None         # its last record or TensorBoard write

    @property
    def found(self) -> bool:
        return self.drivers > 0


def _newest_mtime(directory: Path) -> float | None:
    newest = None
    try:
        for root, _dirs, files in os.walk(directory):
            for name in files:
                try:
                    mtime = (Path(root) / name).stat().st_mtime
                except OSError:
                    continue
                newest = mtime if newest is None else max(newest, mtime)
    except OSError:
        return None
    return newest


def previous_drivers(run_dir: str | Path, attempt: int) -> PreviousDrivers:
    """The state earlier drivers of ``attempt`` recorded (nothing found: an empty state)."""
    root = Path(run_dir)
    events = [e for e in _jsonl(root / EVENTS_FILE) if e.get("attempt") == attempt
              and isinstance(e.get("start"), int) and isinstance(e.get("time"), (int, float))]
    state = PreviousDrivers()
    starts = [e["start"] for e in events]
    try:
        folders = [parse_start_dir(p.name) for p in (root / TENSORBOARD_DIR).iterdir()]
    except OSError:
        folders = []
    starts += [s for a_s in folders if a_s is not None and a_s[0] == attempt for s in [a_s[1]]]
    state.drivers = sum(1 for e in events if e.get("event") == "driver_start")
    if starts:
        state.next_start = max(starts) + 1
    trainer_starts = [e for e in events if e.get("event") == "trainer_start"]
    if trainer_starts:
        state.first_trainer_start = min(e["time"] for e in trainer_starts)
        last = max(trainer_starts, key=lambda e: (e["time"], e["start"]))
        ended = any(e.get("event") == "trainer_exit" and e["start"] == last["start"] for e in events)
        if not ended:
            state.unfinished_start = last["start"]
            seen = [e["time"] for e in events if e["start"] == last["start"]]
            from jobs.contract.records import start_dir_name
            files = _newest_mtime(root / TENSORBOARD_DIR / start_dir_name(attempt, last["start"]))
            state.unfinished_last_seen = max([*seen, *([files] if files else [])])
    state.saw_step = any(e.get("event") == "first_step" for e in events)
    if state.drivers and events[-1].get("event") != "driver_end":
        last = max(events, key=lambda e: e["time"])
        state.unended, state.unended_start = True, last["start"]
        state.last_seen = max(last["time"], state.unfinished_last_seen or 0.0)
    state.restarts = [r for r in read_restarts(root) if r.get("attempt") == attempt]
    return state
