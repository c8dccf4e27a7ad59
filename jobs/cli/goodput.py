"""Goodput of a run: productive training time over wall-clock time since the first start, and
where the rest went.

    compute_goodput(timeline, metrics, now) -> Goodput

Wall clock runs from the run's first event (the first driver_start) to the last driver_end, or
to ``now`` while the run is live. It is split, without overlap, into:

- productive: the step time of every step whose result survived (verl ``timing_s/step``,
  NeMo RL ``timing/train/total_step_time``; jobs/cli/metrics.py), less the checkpoint saving and
  periodic validation the frameworks time inside the step; the step in flight of a live start
  counts as productive.
- gpu_wait: waiting for the run's GPUs (gpu_wait_start -> gpu_wait_end).
- data_prep: data and model preparation (prepare_start -> prepare_end).
- health_check: the fabric/storage gate (health_start -> health_end).
- restarts: lost work since the last checkpoint: in a start that exited with a non-zero code,
  the steps after its ``last_checkpoint_step`` (the next start redoes them) and the time from
  its last logged step to the exit (the step that never finished).
- checkpoint_save: checkpoint saving inside kept steps (verl ``timing_s/save_checkpoint``,
  NeMo RL ``timing/train/checkpointing``).
- validation: periodic validation inside kept steps (verl ``timing_s/testing``, NeMo RL
  ``timing/validation/total_validation_time``).
- trainer_startup: trainer time outside any logged step: process start, model load, resume,
  the validation at start (logged at step 0 without a step time).
- export_evaluate: the Hugging Face export and the GSM8K test-split evaluation after a completed
  trainer (export_start -> export_end, evaluate_start -> evaluate_end).
- other: the rest (the driver between stages, gaps between attempts).

A trainer start without step metrics (no TensorBoard files) cannot be split: its whole time is
counted productive and the result says so (an upper bound).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from jobs.cli.metrics import RunMetrics, StartMetrics
from jobs.cli.timeline import Interval, Timeline
from jobs.contract.records import MAX_STEP, plain_int

BUCKETS = ("gpu_wait", "data_prep", "health_check", "restarts", "checkpoint_save", "validation",
           "trainer_startup", "export_evaluate", "other")
BUCKET_LABELS = {
    "productive": "productive training",
    "gpu_wait": "waiting for GPUs",
    "data_prep": "data preparation",
    "health_check": "health check",
    "restarts": "restarts (lost work since the last checkpoint)",
    "checkpoint_save": "checkpoint saving",
    "validation": "validation",
    "trainer_startup": "trainer start-up",
    "export_evaluate": "export and test-split evaluation (after training)",
    "other": "other (driver, between attempts)",
}


@dataclass
class Goodput:
    wall_s: float
    productive_s: float
    badput_s: dict[str, float]
    live: bool
    upper_bound: bool = False          # some trainer time could not be split (no step metrics)
    notes: list[str] = field(default_factory=list)
    lost_steps: int = 0

    @property
    def goodput(self) -> float | None:
        return self.productive_s / self.wall_s if self.wall_s > 0 else None

    def share(self, bucket: str) -> float | None:
        if self.wall_s <= 0:
            return None
        value = self.productive_s if bucket == "productive" else self.badput_s[bucket]
        return value / self.wall_s

    def describe(self) -> str:
        """One line for `status`."""
        if self.goodput is None:
            return "no timeline yet"
        parts = [f"{self.goodput:.1%}{' (upper bound)' if self.upper_bound else ''} of "
                 f"{_duration_text(self.wall_s)} wall clock{' so far' if self.live else ''}"]
        top = sorted(((v, k) for k, v in self.badput_s.items() if v > 0), reverse=True)[:3]
        if top:
            parts.append("badput: " + ", ".join(f"{BUCKET_LABELS[k].split(' (')[0]} {v / self.wall_s:.1%}"
                                                for v, k in top))
        return "; ".join(parts)


def _duration_text(seconds: float) -> str:
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.2f} h"


def trainer_exit_code(interval: Interval) -> int | None:
    """The exit code a trainer start's end record gives (a plain int of a sane size), or None."""
    if interval.end_event is None:
        return None
    return plain_int(interval.end_event.extra.get("exit_code"), -(2**31), 2**31 - 1)


def _checkpoint_step(interval: Interval, timeline: Timeline) -> int | None:
    if interval.end_event is not None:
        step = plain_int(interval.end_event.extra.get("last_checkpoint_step"), 0, MAX_STEP)
        if step is not None:
            return step
    for r in timeline.restarts:
        if (r.attempt, r.start) == (interval.attempt, interval.start):
            return r.last_checkpoint_step
    return None


def _split_start(interval: Interval, start: StartMetrics, timeline: Timeline, end: float,
                 acc: dict[str, float]) -> tuple[float, int]:
    """Adds one trainer start's time to the buckets; returns (productive seconds, lost steps)."""
    duration = interval.duration(end)
    steps = [s for s in start.training_steps if s.get("step_time") is not None]
    # A start that exited non-zero, or whose driver died with the head (its steps since the
    # last checkpoint are redone by the next driver's start).
    lost_with_driver = interval.end_event is not None and interval.end_event.extra.get("reason") == "driver_lost"
    failed = interval.end is not None and (trainer_exit_code(interval) not in (0, None) or lost_with_driver)
    checkpoint = _checkpoint_step(interval, timeline) if failed else None
    productive = 0.0
    in_steps = 0.0
    lost_steps = 0
    for s in steps:
        step_time = s.get("step_time") or 0.0
        in_steps += step_time
        if failed and (checkpoint is None or s.step > checkpoint):
            acc["restarts"] += step_time
            lost_steps += 1
            continue
        ckpt = min(s.get("checkpoint_time") or 0.0, step_time)
        val = min(s.get("validation_time") or 0.0, step_time - ckpt)
        acc["checkpoint_save"] += ckpt
        acc["validation"] += val
        productive += step_time - ckpt - val
    tail = 0.0
    if steps:
        tail = max((interval.end if interval.end is not None else end) - max(s.wall_time for s in steps), 0.0)
        tail = min(tail, max(duration - in_steps, 0.0))
        if failed:
            acc["restarts"] += tail
        else:
            productive += tail            # the step in flight (live), or the trainer's shutdown
    acc["trainer_startup"] += max(duration - in_steps - tail, 0.0)
    return productive, lost_steps


def compute_goodput(timeline: Timeline, metrics: RunMetrics | None, now: float) -> Goodput:
    if timeline.empty:
        return Goodput(0.0, 0.0, {b: 0.0 for b in BUCKETS}, live=False, notes=["no events.jsonl records"])
    begin = timeline.first_time or now
    end = timeline.end_time(now)
    wall = max(end - begin, 0.0)
    acc = {b: 0.0 for b in BUCKETS}
    notes: list[str] = []
    for kind, bucket in (("gpu_wait", "gpu_wait"), ("prepare", "data_prep"), ("health", "health_check"),
                         ("export", "export_evaluate"), ("evaluate", "export_evaluate")):
        acc[bucket] += sum(i.duration(end) for i in timeline.intervals(kind))
    by_start = {(s.attempt, s.start): s for s in (metrics.starts if metrics else [])}
    productive = 0.0
    lost_steps = 0
    upper_bound = False
    for interval in timeline.trainer_starts():
        start = by_start.get((interval.attempt, interval.start))
        if start is None or not start.training_steps:
            productive += interval.duration(end)
            upper_bound = True
            notes.append(f"attempt {interval.attempt} start {interval.start}: no step metrics, its "
                         f"{_duration_text(interval.duration(end))} of trainer time counted as productive")
            continue
        p, lost = _split_start(interval, start, timeline, end, acc)
        productive += p
        lost_steps += lost
    accounted = productive + sum(acc.values())
    if accounted > wall + 1e-6:
        notes.append(f"intervals add up to {accounted - wall:.0f} s more than the wall clock "
                     "(overlapping records or clock skew between pods)")
    acc["other"] = max(wall - accounted, 0.0)
    return Goodput(wall, productive, acc, live=not timeline.ended, upper_bound=upper_bound,
                   notes=notes, lost_steps=lost_steps)
