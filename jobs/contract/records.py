"""The records a run leaves under /data/runs/<run-id>/ and the marker lines its programs print
into the Ray job's log: names, shapes and parsers, shared by the run driver that writes them and
the jobs CLI that reads them back (status, report, plot).

    events.jsonl     one JSON object per stage boundary: {"time", "event", "attempt", "start", ...};
                     among them one "recovery" per restart that reached its first new step
                     (RECOVERY_FIELDS)
    restarts.jsonl   one JSON object per restart of the trainer
    tensorboard/attempt-<a>-start-<s>/   the trainer's TensorBoard files, one folder per start

Records are appended and flushed line by line while the run is live, and may sit on a FUSE
mount that shows a half-written object, so the parsers return None for a record they cannot
read and never raise.
"""

from __future__ import annotations

import json
import math
import posixpath
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jobs.contract.layout import DATA_LAYOUT
from jobs.contract.safe_files import OversizedInteger

RUNS_ROOT = DATA_LAYOUT.runs
EVENTS_FILE = "events.jsonl"
RESTARTS_FILE = "restarts.jsonl"
TENSORBOARD_DIR = "tensorboard"
# The env var the driver sets per trainer start to <run dir>/tensorboard/attempt-<a>-start-<s>;
# the rendered framework commands refer to it (jobs/plan/render.py).
TENSORBOARD_ENV = "GKE_GRPO_TENSORBOARD_DIR"
_START_DIR = re.compile(r"^attempt-(\d+)-start-(\d+)$")

# Event names of events.jsonl that open and close a stage, paired into intervals by the CLI.
PAIRED_EVENTS = {
    "prepare": ("prepare_start", "prepare_end"),
    "gpu_wait": ("gpu_wait_start", "gpu_wait_end"),
    "health": ("health_start", "health_end"),
    "trainer": ("trainer_start", "trainer_exit"),
    "export": ("export_start", "export_end"),
    "evaluate": ("evaluate_start", "evaluate_end"),
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


def parse_start_dir(name: str) -> tuple[int, int] | None:
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
    exit_code: int | None
    last_checkpoint_step: int | None
    attempt: int
    start: int


# The "recovery" event of a restart, written when the restarted trainer logs its first step:
# seconds from the node loss (when the cluster marked the node dead, else the trainer's exit) to
# the driver's decision, to the trainer's restart and to its first new step, and the steps the
# restart computes again (the last step logged before the loss less the checkpoint resumed).
RECOVERY_FIELDS = ("loss_at", "loss_source", "decision_s", "restart_s", "first_step_s",
                   "backoff_s", "steps_redone", "resumed_from_step", "first_new_step")

# Marker lines in the Ray job's log, read back by the jobs CLI (status, list).
DRIVER_LOG_PREFIX = "[jobs.run]"
RESTART_MARKER = f"{DRIVER_LOG_PREFIX} RESTART "
RECOVERY_MARKER = f"{DRIVER_LOG_PREFIX} RECOVERY "
GPU_WAIT_LOG_PREFIX = "[wait_for_gpus]"
GPU_WAIT_TIMEOUT_MARKER = f"{GPU_WAIT_LOG_PREFIX} TIMEOUT"
GPU_GANG_INFEASIBLE_MARKER = f"{GPU_WAIT_LOG_PREFIX} INFEASIBLE"


# Record times are Unix seconds (time.time() on the head). Outside 1970..2100 a "time" is no
# moment a run had (1e308, a negative number): such a record is skipped, never plotted.
EARLIEST_TIME = 0.0
LATEST_TIME = 4_102_444_800.0            # 2100-01-01T00:00:00Z
# Attempts and trainer starts count from 0 or 1; a million of either is no real run.
MAX_COUNTER = 1_000_000
# Checkpoint steps, exit codes: plain integers of a sane size (a step is an int64 in both
# frameworks' TensorBoard files; an exit code is 0..255, or negative for a signal).
MAX_STEP = 10**12


def plain_int(value: Any, low: int = -(2**63), high: int = 2**63 - 1) -> int | None:
    """An int (not a bool) within [low, high], else None."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        return None
    return value


def time_problem(value: Any) -> str | None:
    """Why ``value`` is not a record time, or None."""
    if isinstance(value, OversizedInteger):
        return "time out of range"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "time missing or not a number"
    if isinstance(value, float) and not math.isfinite(value):
        return "time not finite"
    if not EARLIEST_TIME <= value <= LATEST_TIME:
        return "time out of range"
    return None


def _counter_problem(row: dict[str, Any]) -> str | None:
    for name in ("attempt", "start"):
        if plain_int(row.get(name), 0, MAX_COUNTER) is None:
            return f"{name} missing or not a whole number in 0..{MAX_COUNTER:,}"
    return None


def event_problem(row: dict[str, Any]) -> str | None:
    """Why an events.jsonl object is not an event (a short reason, the same for every line with
    that fault, so they can be counted), or None."""
    problem = time_problem(row.get("time"))
    if problem:
        return problem
    name = row.get("event")
    if not isinstance(name, str) or not name or len(name) > 200:
        return "event name missing or not text"
    return _counter_problem(row)


def restart_problem(row: dict[str, Any]) -> str | None:
    """Why a restarts.jsonl object is not a restart, or None."""
    return time_problem(row.get("time")) or _counter_problem(row)


def parse_event(row: dict[str, Any]) -> Event | None:
    if event_problem(row) is not None:
        return None
    extra = {k: v for k, v in row.items() if k not in ("time", "event", "attempt", "start")}
    return Event(float(row["time"]), row["event"], row["attempt"], row["start"], extra)


def parse_restart(row: dict[str, Any]) -> Restart | None:
    if restart_problem(row) is not None:
        return None
    reason = row.get("reason")
    return Restart(float(row["time"]), reason if isinstance(reason, str) else "unknown",
                   plain_int(row.get("exit_code"), -(2**31), 2**31 - 1),
                   plain_int(row.get("last_checkpoint_step"), 0, MAX_STEP), row["attempt"], row["start"])


def marked_records(text: str, marker: str) -> list[dict[str, Any]]:
    """The JSON records a driver printed after ``marker`` into its Ray job log."""
    found = []
    for line in text.splitlines():
        at = line.find(marker)
        if at < 0:
            continue
        try:
            record = json.loads(line[at + len(marker):])
        except ValueError:
            continue
        if isinstance(record, dict):
            found.append(record)
    return found


def restarts_from_log(text: str) -> list[dict[str, Any]]:
    """The RESTART records a driver printed into its Ray job log (what the CLI can read)."""
    return marked_records(text, RESTART_MARKER)


def recoveries_from_log(text: str) -> list[dict[str, Any]]:
    """The RECOVERY records (RECOVERY_FIELDS) a driver printed into its Ray job log."""
    return marked_records(text, RECOVERY_MARKER)
