"""What a run has cost so far and what finishing it will cost: node-hours the run actually held
(from its timeline) times the dated price table data/prices.yaml (jobs/plan/prices.py).

    run_cost(timeline, goodput, rate, nodes, now, steps_done, steps_planned, step_seconds) -> RunCost

Node-hours used: GPU nodes x the time each attempt held them, from gpu_wait_end (all the run's
GPUs ready) to the attempt's end (its last event, or now while live), each node at the rate of
its own capacity source: every trainer start records how many of its nodes came from which
source (trainer_start ``capacity_sources``, from the nodes' labels), and that start's nodes are
priced so until the next start's GPUs are ready. Starts recorded without sources (older drivers)
count ``nodes`` nodes of the stack's first source. After a run, its GPU workers idle out (the
Ray autoscaler's idle timeout, then GKE removes the node): that tail is the cluster's, not the
run's, and is not counted; nor is the part of a GPU wait during which some nodes already ran. So
this is what the run used, a lower bound of what the capacity cost meanwhile. On a reservation
the capacity is committed (paid whether used or not): the figure is the committed capacity the
run occupied, not an extra charge.

Cost to finish: the planned steps left times the median step time of the latest steps, at the
same rate; ``at_goodput`` divides that time by the run's goodput so far (waits, restarts and
saves recurring at the rate seen).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from jobs.cli.timeline import Timeline
from jobs.contract.capacity import describe_source, source_kind
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
    # node-hours and rate per capacity source, when the run recorded where its nodes came from
    by_source: dict[str, float] = field(default_factory=dict)
    rates: dict[str, Rate] = field(default_factory=dict)

    def describe(self) -> str:
        def money(v: float | None) -> str:
            return "unknown" if v is None else f"{v:,.2f} {self.currency}"
        if len(self.by_source) > 1:
            parts = ", ".join(f"{hours:.2f} {describe_source(source)} x "
                              f"{money(self.rates[source].per_node_hour)}"
                              for source, hours in sorted(self.by_source.items()))
            text = f"{money(self.so_far)} so far ({self.node_hours:.2f} node-hours: {parts})"
        else:
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


def held_node_seconds_by_source(timeline: Timeline, now: float, nodes: int,
                                default_source: str) -> dict[str, float]:
    """Node-seconds the run's attempts held, per capacity source (see the module docstring)."""
    totals: dict[str, float] = {}
    for attempt, _first, last in timeline.attempt_spans(now):
        events = [e for e in timeline.events if e.attempt == attempt]
        readies = [e for e in events if e.event == "gpu_wait_end"] or \
                  [e for e in events if e.event == "trainer_start"]
        sources_of_start = {e.start: e.extra.get("capacity_sources") for e in events
                            if e.event == "trainer_start"}
        readies.sort(key=lambda e: e.time)
        for i, ready in enumerate(readies):
            end = readies[i + 1].time if i + 1 < len(readies) else last
            seconds = max(end - ready.time, 0.0)
            counts = sources_of_start.get(ready.start)
            if not isinstance(counts, dict) or not counts or not all(
                    isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in counts.values()):
                counts = {default_source: nodes}
            for source, count in counts.items():
                totals[str(source)] = totals.get(str(source), 0.0) + count * seconds
    return totals


def median_step_seconds(step_times: Sequence[float], last: int = 20) -> float | None:
    recent = [t for t in step_times if t and t > 0][-last:]
    return statistics.median(recent) if recent else None


def run_cost(timeline: Timeline, *, nodes: int, rate: Rate, currency: str, prices_as_of: str,
             provisioning_model: str, now: float, steps_done: int | None = None,
             steps_planned: int | None = None, step_seconds: float | None = None,
             goodput: float | None = None,
             rate_of: Callable[[str], Rate] | None = None) -> RunCost:
    """``rate``: the stack's first source's rate; ``rate_of``: the rate of a recorded capacity
    source ("spot", "reservation:<name>", "flexStart", "unknown"), or None to price every node
    at ``rate``."""
    default_source = f"default:{provisioning_model}"
    by_source_seconds = held_node_seconds_by_source(timeline, now, nodes, default_source)
    rates = {source: rate if source == default_source or rate_of is None else rate_of(source)
             for source in by_source_seconds}
    by_source = {source: seconds / 3600 for source, seconds in by_source_seconds.items()}
    node_hours = sum(by_source.values())
    per_hour = rate.per_node_hour
    so_far: float | None = None
    if all(rates[s].per_node_hour is not None for s in by_source):
        so_far = sum(hours * (rates[s].per_node_hour or 0.0) for s, hours in by_source.items())
    committed = all(source_kind(s) == "reservation" or
                    (s == default_source and provisioning_model == "reservation") for s in by_source) \
        if by_source else provisioning_model == "reservation"
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
                   at_goodput, steps_left, committed, by_source, rates)
