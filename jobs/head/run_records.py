"""The run driver's records under the run directory: events.jsonl and restarts.jsonl, appended one
flushed line per record (names and shapes: jobs/contract/records.py).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jobs.contract.records import EVENTS_FILE, RESTARTS_FILE


class Records:
    """events.jsonl and restarts.jsonl of a run: appended, one flushed line per record."""

    def __init__(self, run_dir: Path, attempt: int, clock: Callable[[], float] = time.time):
        self.run_dir = run_dir
        self.attempt = attempt
        self.clock = clock

    def _append(self, name: str, record: dict) -> None:
        with open(self.run_dir / name, "a") as f:
            f.write(json.dumps(record, sort_keys=True) + "\n")
            f.flush()

    def event(self, event: str, start: int, **extra: Any) -> None:
        self._append(EVENTS_FILE, {"time": self.clock(), "event": event, "attempt": self.attempt,
                                   "start": start, **extra})

    def restart(self, *, reason: str, exit_code: int, last_checkpoint_step: int | None,
                start: int) -> dict:
        record = {"time": self.clock(), "reason": reason, "exit_code": exit_code,
                  "last_checkpoint_step": last_checkpoint_step, "attempt": self.attempt,
                  "start": start}
        self._append(RESTARTS_FILE, record)
        return record


def read_restarts(run_dir: str | Path) -> list[dict]:
    try:
        lines = (Path(run_dir) / RESTARTS_FILE).read_text().splitlines()
    except OSError:
        return []
    return [json.loads(line) for line in lines if line.strip()]
