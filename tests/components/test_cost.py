"""The cost estimate: arithmetic, semantics per provisioning model, unknowns said as such."""

from __future__ import annotations

import pytest

from components.config import load_stack_config
from components.cost import describe, estimate_cost, load_prices, partial_grant_line
from tests.background import PREVIEW_TREE
from tests.conftest import DELETE, stack_config

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


# ---- flex-start for a gang: the worst case of a partial grant (docs/gpu-capacity.md) -----------

FLEX = {P + "gpu.provisioningModel": "flex-start", P + "gpu.reservation": DELETE}


def test_a_flex_start_gang_states_the_worst_case_of_a_partial_grant():
    estimate = _estimate("prod", {**FLEX, P + "job.gpuWaitSeconds": 3600})
    grant = estimate["flexStartPartialGrant"]
    # 4 nodes x 1 h x the flex-start rate (the on-demand rate bounds it: data/prices.yaml).
    assert grant == {"nodes": 4, "gpuWaitSeconds": 3600, "hourlyPerNode": 90.22,
                     "rateBasis": grant["rateBasis"], "upperBound": round(4 * 1 * 90.216, 2), "currency": "USD"}
    line = partial_grant_line(grant)
    assert "4 nodes x job.gpuWaitSeconds 3600 s x 90.22 USD per node-hour" in line and "= 360.86 USD" in line
    assert "queued provisioning, which grants them all at once, is not used" in line
    assert any(line in shown for shown in describe(estimate))


@pytest.mark.parametrize("changes", [
    {},                                                    # a reservation: no grant one by one
    {P + "gpu.provisioningModel": "spot", P + "gpu.reservation": DELETE},
    {**FLEX, P + "gpu.nodes": 1, P + "gpu.maxNodes": 1},   # one node: nothing assembles
])
def test_no_partial_grant_without_a_flex_start_gang(changes):
    assert "flexStartPartialGrant" not in _estimate("prod", changes)


def test_a_waterfall_with_flex_start_states_it_too():
    estimate = _estimate("prod", {P + "gpu.provisioningModel": DELETE, P + "gpu.reservation": DELETE,
                                  P + "gpu.capacity": [{"kind": "spot"}, {"kind": "flexStart"}]})
    assert estimate["flexStartPartialGrant"]["nodes"] == 4


def test_preflight_states_it(tmp_path, capsys):
    import yaml

    from tests.conftest import ROOT
    from tools import capacity_findings

    document = yaml.safe_load((ROOT / "Pulumi.prod.yaml").read_text())
    document["config"]["gke-grpo:gpu"].update(provisioningModel="flex-start")
    document["config"]["gke-grpo:gpu"].pop("reservation")
    path = tmp_path / "Pulumi.prod.yaml"
    path.write_text(yaml.safe_dump(document))
    assert capacity_findings.main(["prod", "--config-file", str(path)]) == 0
    [line] = __import__("json").loads(capsys.readouterr().out)
    assert line.startswith("flex-start grants a gang's 4 nodes one by one")


def test_a_split_layout_prices_each_pool_at_its_sources_rate():
    raw, secrets = stack_config("dev", {"gke-grpo:job.layout": {
        "kind": "split", "rollout": {"nodes": 1}, "trainer": {"nodes": 1, "capacity": "spot"},
        "triggerParameterSyncStep": 1}})
    estimate = estimate_cost(load_stack_config(raw, secrets, "dev"))
    pools = estimate["pools"]
    assert [(p["pool"], p["nodes"], p["source"]) for p in pools] == [("rollout", 1, "Spot"), ("trainer", 1, "Spot")]
    assert sum(p["hourly"] for p in pools) == pytest.approx(estimate["hourlyGpuCapacity"], abs=0.02)
    assert any(line.startswith("  trainer pool: 1 node(s) from Spot") for line in describe(estimate))
    colocated_raw, colocated_secrets = stack_config("dev", {})
    assert "pools" not in estimate_cost(load_stack_config(colocated_raw, colocated_secrets, "dev"))
