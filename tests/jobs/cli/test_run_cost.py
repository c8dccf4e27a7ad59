"""Cost so far and to finish (jobs/cli/run_cost.py): node-hours from the timeline times the dated
price table; the jobs-side loader reads the same data/prices.yaml as the preview's estimate."""

from __future__ import annotations

import pytest

from components.cost import estimate_cost
from jobs.cli.run_cost import run_cost
from jobs.cli.timeline import timeline_from_rows
from jobs.plan.prices import PRICES_FILE, hourly_rate, load_price_table, parse_price_table
from tests.conftest import stack_config
from tests.jobs.cli.test_goodput import END, EVENTS

TABLE = parse_price_table({"as_of": "2026-12-01", "currency": "USD", "region": "r", "machines": {
    "m": {"on_demand_per_hour": 20.0, "on_demand_source": "a", "spot_per_hour": 10.0, "spot_source": "b",
          "flex_start_per_hour": None, "flex_start_source": "c", "whole_machine": True}}})


def test_cost_so_far_and_to_finish_known_answers():
    rate = hourly_rate(TABLE.machines["m"], "spot")
    cost = run_cost(timeline_from_rows(EVENTS + END), nodes=2, rate=rate, currency="USD",
                    prices_as_of="2026-12-01", provisioning_model="spot", now=9999,
                    steps_done=4, steps_planned=10, step_seconds=50.0, goodput=0.25)
    # held from gpu_wait_end (1410) to the attempt's last event (1970): 560 s x 2 nodes
    assert cost.node_hours == pytest.approx(1120 / 3600)
    assert cost.so_far == pytest.approx(1120 / 3600 * 10)
    # 6 steps x 50 s = 300 s on 2 nodes at 10/h
    assert cost.steps_left == 6 and cost.hours_to_finish == pytest.approx(300 / 3600)
    assert cost.to_finish == pytest.approx(300 / 3600 * 2 * 10)
    assert cost.to_finish_at_goodput == pytest.approx(cost.to_finish / 0.25)
    assert not cost.committed and "node-hours" in cost.describe()


def test_live_attempt_counts_until_now():
    rate = hourly_rate(TABLE.machines["m"], "reservation")
    cost = run_cost(timeline_from_rows(EVENTS), nodes=1, rate=rate, currency="USD", prices_as_of="x",
                    provisioning_model="reservation", now=2410)
    assert cost.node_hours == pytest.approx(1000 / 3600)
    assert cost.committed and cost.rate.per_node_hour == 20.0 and "upper bound" in cost.rate.basis
    assert cost.to_finish is None


def test_flex_start_without_a_price_uses_the_on_demand_bound_and_unknown_stays_unknown():
    assert hourly_rate(TABLE.machines["m"], "flex-start").per_node_hour == 20.0
    no_price = parse_price_table({**TABLE.raw, "machines": {"m": {**TABLE.raw["machines"]["m"],
                                                                  "spot_per_hour": None}}})
    rate = hourly_rate(no_price.machines["m"], "spot")
    assert rate.per_node_hour is None and rate.basis.startswith("unknown")


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_same_rate_as_the_preview_estimate(stack):
    from components.config import load_stack_config

    config = load_stack_config(*stack_config(stack), stack)
    table = load_price_table(PRICES_FILE)
    rate = hourly_rate(table.machines[config.machine_type], config.gpu.provisioning_model)
    estimate = estimate_cost(config)
    assert estimate["hourlyPerNode"] == (None if rate.per_node_hour is None else round(rate.per_node_hour, 2))
    assert estimate["rateBasis"] == rate.basis and estimate["pricesAsOf"] == table.as_of
