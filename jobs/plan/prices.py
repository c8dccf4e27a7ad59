"""The dated GPU price table, data/prices.yaml: its one typed loader, and the rate of a node-hour
by provisioning model. Read by the cost estimate of a stack (components/cost.py) and by the jobs
CLI's cost of a run (jobs/cli/run_cost.py).

    load_price_table() -> PriceTable
    hourly_rate(machine, provisioning_model) -> Rate
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

PRICES_FILE = Path(__file__).resolve().parents[2] / "data" / "prices.yaml"


@dataclass(frozen=True)
class MachinePrice:
    machine_type: str
    on_demand_per_hour: float | None
    on_demand_source: str
    spot_per_hour: float | None
    spot_source: str
    flex_start_per_hour: float | None
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
    per_node_hour: float | None
    basis: str
    source: str


def _opt_float(value: Any) -> float | None:
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
