"""A run's recoveries and its checkpoint cadence, as `gke-grpo status` and the report show them.

    describe_restarts(restart_records)            # "1 (last: node_lost, exit 1, ...)"
    describe_recovery(recovery_record)            # seconds from the node loss; steps redone
    recoveries(timeline)                          # the driver's "recovery" events
    checkpoint_advice(timeline, metrics, ...)     # Young-Daly beside the configured cadence

The recovery of a restart (jobs/contract/records.py RECOVERY_FIELDS, written by the run driver
when the restarted trainer logs its first step): seconds from the node loss (when the cluster
marked the node dead, else when the trainer exited) to the driver's decision, to the trainer's
restart and to its first new step, and the steps computed again.

The checkpoint advice (jobs/plan/checkpoint_interval.py): the cost of a checkpoint is the
median save time the framework logged (verl ``timing_s/save_checkpoint``, NeMo RL
``timing/train/checkpointing``); the mean time between interruptions is the trainer's running
time over the interruptions it saw (node losses, and drivers lost with their head), else the
stack's prior for its capacity source (data/interruption-priors.yaml, each figure labelled sourced
or an assumption), else at least the time trained without one.
"""

from __future__ import annotations

import itertools
import statistics
from collections import Counter
from dataclasses import dataclass
from typing import Any

from jobs.cli.metrics import RunMetrics
from jobs.cli.timeline import Timeline
from jobs.plan.checkpoint_interval import (
    load_interruption_priors,
    period_text,
    prior_mtbi_seconds,
    waste_factor,
    young_daly_seconds,
)

INTERRUPTIONS = ("node_lost", "driver_lost")


def describe_restarts(records: list[dict[str, Any]]) -> str:
    """`1 (last: node_lost, exit 1, resumed from checkpoint step 40)` from RESTART records."""
    if not records:
        return "0"
    last = records[-1]
    step = last.get("last_checkpoint_step")
    return (f"{len(records)} (last: {last.get('reason')}, exit {last.get('exit_code')}, "
            f"resumed from checkpoint step {step if step is not None else 'none'})")


def seconds_text(value: Any) -> str:
    return f"{value:.1f} s" if isinstance(value, (int, float)) else "-"


def describe_recovery(record: dict[str, Any]) -> str:
    """One restart's recovery in a line."""
    redone = record.get("steps_redone")
    source = record.get("loss_source") if record.get("loss_source") in ("node marked dead", "capacity end") \
        else "trainer exit"
    return (f"restart {record.get('restart', '?')}: from the node loss ({source}) decision "
            f"{seconds_text(record.get('decision_s'))}, trainer restarted {seconds_text(record.get('restart_s'))}, "
            f"first new step {seconds_text(record.get('first_step_s'))} (backoff {seconds_text(record.get('backoff_s'))}); "
            f"{'?' if redone is None else redone} step(s) redone (resumed from step "
            f"{record.get('resumed_from_step')}, first new step {record.get('first_new_step')})")


def recoveries(timeline: Timeline) -> list[dict[str, Any]]:
    return [{"attempt": e.attempt, "start": e.start, "time": e.time, **e.extra}
            for e in timeline.events if e.event == "recovery"]


def recovery_rows(records: list[dict[str, Any]], limit: int = 3) -> list[tuple[str, str]]:
    """`status` rows: the last ``limit`` recoveries."""
    return [("recovery", describe_recovery(r)) for r in records[-limit:]]


@dataclass(frozen=True)
class CheckpointAdvice:
    checkpoint_s: float
    checkpoint_basis: str
    mtbi_s: float
    mtbi_basis: str
    at_least: bool                  # no interruption and no prior: M is at least the time trained
    step_s: float | None
    every_steps: int | None
    every_basis: str

    @property
    def optimum_s(self) -> float:
        return young_daly_seconds(self.checkpoint_s, self.mtbi_s)

    @property
    def configured_s(self) -> float | None:
        return None if self.every_steps is None or self.step_s is None else self.every_steps * self.step_s

    @property
    def optimum_steps(self) -> int | None:
        return None if not self.step_s else max(1, round(self.optimum_s / self.step_s))

    def describe(self) -> str:
        optimum = f"{'at least ' if self.at_least else ''}{period_text(self.optimum_s)}"
        if self.optimum_steps is not None:
            optimum += f" (~{self.optimum_steps} steps)"
        text = (f"Young-Daly {optimum} = sqrt(2 x checkpoint {self.checkpoint_s:.0f} s x mean time "
                f"between interruptions {'>= ' if self.at_least else ''}{self.mtbi_s / 3600:.2f} h)")
        configured = self.configured_s
        if configured is not None:
            text += (f"; configured every {self.every_steps} steps = {period_text(configured)}"
                     f" ({waste_factor(configured, self.optimum_s):.1f}x the least expected loss)")
        return text

    def sources(self) -> str:
        return f"checkpoint: {self.checkpoint_basis}; interruptions: {self.mtbi_basis}; cadence: {self.every_basis}"


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def checkpoint_advice(timeline: Timeline, metrics: RunMetrics, *, every_steps: int | None = None,
                      capacity_source: str | None = None, nodes: int | None = None,
                      now: float | None = None) -> CheckpointAdvice | None:
    """The Young-Daly period of this run beside its configured cadence; None before a
    checkpoint was timed."""
    training = [r for r in metrics.merged() if r.is_training]
    saves = [(r.step, r.get("checkpoint_time") or 0.0) for r in training if (r.get("checkpoint_time") or 0) > 0]
    cost = _median([seconds for _, seconds in saves])
    if cost is None:
        return None
    step_s = _median([r.get("step_time") or 0.0 for r in training[-20:] if r.get("step_time")])
    every_basis = "gke-grpo:job.checkpointEverySteps"
    if every_steps is None and len(saves) >= 2:
        gaps = Counter(b - a for (a, _), (b, _) in itertools.pairwise(saves) if b > a)
        if gaps:
            every_steps, every_basis = gaps.most_common(1)[0][0], "the gaps between the logged saves"
    end = timeline.end_time(now) if now is not None else None
    trained = sum(i.duration(end if end is not None else (i.end or i.begin)) for i in timeline.trainer_starts())
    lost = [e for e in timeline.events if e.event == "trainer_exit" and e.extra.get("reason") in INTERRUPTIONS]
    basis = f"median of {len(saves)} logged save(s)"
    if lost and trained > 0:
        return CheckpointAdvice(cost, basis, trained / len(lost),
                                f"observed: {len(lost)} in {trained / 3600:.2f} h of training", False,
                                step_s, every_steps, every_basis)
    if capacity_source and nodes:
        prior, prior_basis = prior_mtbi_seconds(load_interruption_priors(), capacity_source, nodes)
        if prior is not None:
            return CheckpointAdvice(cost, basis, prior, f"prior (none observed yet): {prior_basis}", False,
                                    step_s, every_steps, every_basis)
    if trained <= 0:
        return None
    return CheckpointAdvice(cost, basis, trained, f"none observed in {trained / 3600:.2f} h of training "
                            "(give --stack for the capacity source's prior)", True,
                            step_s, every_steps, every_basis)
