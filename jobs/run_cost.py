"""What a run has cost so far and what finishing it will cost: node-hours the run actually held
(from its timeline) times the dated price table data/prices.yaml.

    load_price_table() -> PriceTable                     # the one typed loader on the jobs side
    hourly_rate(machine, provisioning_model) -> Rate     # also used by components/cost.py
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

from jobs.timeline import Timeline

PRICES_FILE = Path(__file__).resolve().parent.parent / "data" / "prices.yaml"


@dataclass(frozen=True)
class MachinePrice:
    machine_type: str
    on_demand_per_hour: Optional[float]
    on_demand_source: str
    spot_per_hour: Optional[float]
    spot_source: str
    flex_start_per_hour: Optional[float]
    flex_start_source: str
    whole_machine: bool


@dataclass(frozen=True)
class PriceTable:
    as_of: str
    currency: str
    region: str
    machines: dict[str, MachinePrice]
    raw: dict[str, Any]


@dataclass(frozen=True)
class Rate:
    per_node_hour: Optional[float]
    basis: str
    source: str


def _opt_float(value: Any) -> Optional[float]:
    return None if value is None else float(value)


def parse_price_table(raw: dict[str, Any]) -> PriceTable:
    machines = {}
    for name, m in (raw.get("machines") or {}).items():
        machines[name] = MachinePrice(
            name, _opt_float(m.get("on_demand_per_hour")), str(m.get("on_demand_source", "")),
            _opt_float(m.get("spot_per_hour")), str(m.get("spot_source", "")),
            _opt_float(m.get("flex_start_per_hour")), str(m.get("flex_start_source", "")),
            bool(m.get("whole_machine", False)))
    return PriceTable(str(raw["as_of"]), str(raw["currency"]), str(raw["region"]), machines, raw)


def load_price_table(path: Path = PRICES_FILE) -> PriceTable:
    import yaml

    return parse_price_table(yaml.safe_load(path.read_text()))


def hourly_rate(machine: MachinePrice, provisioning_model: str) -> Rate:
    """The rate per node-hour of a provisioning model, and what kind of figure it is."""
    on_demand = machine.on_demand_per_hour
    if provisioning_model == "spot":
        rate, source, basis = machine.spot_per_hour, machine.spot_source, "list price"
    elif provisioning_model == "flex-start":
        rate, source, basis = machine.flex_start_per_hour, machine.flex_start_source, "list price"
        if rate is None and on_demand is not None:
            rate, basis = on_demand, "upper bound: the on-demand rate (flex-start is billed at a discount)"
    else:
        rate, source = on_demand, machine.on_demand_source
        basis = "upper bound: the on-demand rate (reservation discounts not sourced)"
    if not machine.whole_machine and rate is not None:
        basis = "lower bound: the GPUs only (the host vCPU and memory price was not found)"
    if rate is None:
        basis = "unknown: no sourced price"
    return Rate(rate, basis, source)


@dataclass
class RunCost:
    nodes: int
    node_hours: float
    rate: Rate
    currency: str
    prices_as_of: str
    so_far: Optional[float]
    hours_to_finish: Optional[float]            # at the current step pace
    to_finish: Optional[float]
    to_finish_at_goodput: Optional[float]
    steps_left: Optional[int]
    committed: bool                             # reservation: capacity paid regardless

    def describe(self) -> str:
        def money(v: Optional[float]) -> str:
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


def median_step_seconds(step_times: Sequence[float], last: int = 20) -> Optional[float]:
    recent = [t for t in step_times if t and t > 0][-last:]
    return statistics.median(recent) if recent else None


def run_cost(timeline: Timeline, *, nodes: int, rate: Rate, currency: str, prices_as_of: str,
             provisioning_model: str, now: float, steps_done: Optional[int] = None,
             steps_planned: Optional[int] = None, step_seconds: Optional[float] = None,
             goodput: Optional[float] = None) -> RunCost:
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
