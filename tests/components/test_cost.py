"""The cost estimate: arithmetic, semantics per provisioning model, unknowns said as such."""

from __future__ import annotations

import pytest

from components.config import load_stack_config
from components.cost import describe, estimate_cost, load_prices
from tests.background import PREVIEW_TREE
from tests.conftest import stack_config

P = "gke-grpo:"


def _estimate(stack, changes=None, prices=None):
    return estimate_cost(load_stack_config(*stack_config(stack, changes)), prices)


def test_every_price_has_a_source_and_the_table_a_date():
    prices = load_prices()
    assert prices["as_of"] == "2026-12-01"
    for machine in prices["machines"].values():
        for kind in ("on_demand", "spot", "flex_start"):
            assert machine[f"{kind}_source"], kind
    assert prices["storage"]["gcs_source"] and prices["storage"]["lustre_source"]


def test_spot_is_incremental_per_hour_times_duration(dev_preview):
    estimate = dev_preview.outputs["costEstimate"]
    assert estimate["provisioningModel"] == "spot"
    assert estimate["hourlyPerNode"] == 50.09 and estimate["hourlyGpuCapacity"] == 100.17
    assert estimate["runCostUpperBound"] == round(2 * 50.0856 * 168, 2)
    assert estimate["semantics"].startswith("incremental")
    assert "committedCostOverRunDeadline" not in estimate


def test_reservation_is_committed(prod_preview):
    estimate = prod_preview.outputs["costEstimate"]
    assert estimate["semantics"].startswith("committed")
    assert estimate["committedCostOverRunDeadline"] == round(4 * 90.216 * 168, 2)
    # Only the GPUs' part of an A4 is sourced: said, not hidden.
    assert estimate["rateBasis"].startswith("lower bound")
    assert estimate["storageMonthly"] is None and "unknown" in estimate["storageBasis"]


def test_flex_start_without_a_price_is_bounded_by_on_demand():
    estimate = _estimate("dev", {P + "gpu.provisioningModel": "flex-start"})
    assert estimate["hourlyPerNode"] == 83.49
    assert estimate["rateBasis"].startswith("upper bound")
    assert estimate["semantics"].startswith("incremental")


def test_unknown_price_is_unknown_not_zero():
    prices = load_prices()
    broken = {**prices, "machines": {**prices["machines"], "a3-ultragpu-8g": {
        **prices["machines"]["a3-ultragpu-8g"], "spot_per_hour": None}}}
    estimate = _estimate("dev", prices=broken)
    assert estimate["hourlyGpuCapacity"] is None and estimate["runCostUpperBound"] is None
    assert estimate["rateBasis"].startswith("unknown")
    assert any("unknown" in line for line in describe(estimate))


def test_lustre_tier_with_a_price():
    estimate = _estimate("prod", {P + "storage.lustre.throughputTier": 125,
                                  P + "storage.lustre.capacityGib": 72000})
    assert estimate["storageMonthly"] == round(72000 * 0.145, 2)


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_tree_preview_prints_the_estimate(stack):
    run = PREVIEW_TREE[stack].result()          # `python -m tools.preview STACK`, run once for the suite
    assert "Cost estimate:" in run.stdout and "per hour" in run.stdout
