"""What a run has cost so far and what finishing it will cost: node-hours the run actually held
(from its timeline) times the dated price table data/prices.yaml (jobs/plan/prices.py).

    run_cost(timeline, goodput, rate, nodes, now, steps_done, steps_planned, step_seconds) -> RunCost

Node-hours used: GPU nodes x the time each attempt held them, from gpu_wait_end (all the run's
GPUs ready) to the attempt's end (its last event, or now while live). The RayCluster keeps its
GPU workers between attempts (fixed replicas): that idle time is the cluster's, not the run's,
and is not counted; nor is the part of a GPU wait during which some nodes already ran. So this
is what the run used, a lower bound of what the capacity cost meanwhile. On a reservation the
capacity is committed (paid whether used or not): the figure is the committed capacity the run
occupied, not an extra charge.

Cost to finish: the planned steps left times the median step time of the latest steps, at the
same rate; ``at_goodput`` divides that time by the run's goodput so far (waits, restarts and
saves recurring at the rate seen).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from jobs.cli.timeline import Timeline
from jobs.plan.prices import Rate


@dataclass
class RunCost:
    nodes: int
    node_hours: float
    rate: Rate
    currency: str
    prices_as_of: str
    so_far: float | None
    hours_to_finish: float | None            # at the current step pace
    to_finish: float | None
    to_finish_at_goodput: float | None
    steps_left: int | None
    committed: bool                             # reservation: capacity paid regardless

    def describe(self) -> str:
        def money(v: float | None) -> str:
            return "unknown" if v is None else f"{v:,.2f} {self.currency}"
        text = (f"{money(self.so_far)} so far ({self.node_hours:.2f} node-hours x "
                f"{money(self.rate.per_node_hour)}/node-hour, {self.rate.basis})")
        if self.to_finish is not None:
            text += (f"; to finish {money(self.to_finish)} ({self.steps_left} steps at the current pace"
                     + (f", {money(self.to_finish_at_goodput)} at the goodput so far" if
                        self.to_finish_at_goodput is not None else "") + ")")
        return text


def held_node_seconds(timeline: Timeline, now: float) -> float:
    """Seconds (per node) the run's attempts held the GPU nodes: gpu_wait_end -> attempt end.
    An attempt with no gpu_wait_end record counts from its first trainer_start."""
    total = 0.0
    for attempt, _first, last in timeline.attempt_spans(now):
        events = [e for e in timeline.events if e.attempt == attempt]
        ready = [e.time for e in events if e.event == "gpu_wait_end"] or \
                [e.time for e in events if e.event == "trainer_start"]
        if ready:
            total += max(last - min(ready), 0.0)
    return total


def median_step_seconds(step_times: Sequence[float], last: int = 20) -> float | None:
    recent = [t for t in step_times if t and t > 0][-last:]
    return statistics.median(recent) if recent else None


def run_cost(timeline: Timeline, *, nodes: int, rate: Rate, currency: str, prices_as_of: str,
             provisioning_model: str, now: float, steps_done: int | None = None,
             steps_planned: int | None = None, step_seconds: float | None = None,
             goodput: float | None = None) -> RunCost:
    node_hours = nodes * held_node_seconds(timeline, now) / 3600
    per_hour = rate.per_node_hour
    so_far = None if per_hour is None else node_hours * per_hour
    steps_left = hours = to_finish = at_goodput = None
    if steps_planned is not None and steps_done is not None:
        steps_left = max(steps_planned - steps_done, 0)
        if step_seconds is not None:
            hours = steps_left * step_seconds / 3600
            if per_hour is not None:
                to_finish = hours * nodes * per_hour
                if goodput:
                    at_goodput = to_finish / goodput
    return RunCost(nodes, node_hours, rate, currency, prices_as_of, so_far, hours, to_finish,
                   at_goodput, steps_left, provisioning_model == "reservation")
