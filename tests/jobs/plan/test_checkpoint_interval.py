"""The Young-Daly checkpoint period (jobs/plan/checkpoint_interval.py), its priors
(data/interruption-priors.yaml: every figure sourced or labelled an assumption) and preflight's
warning on the stacks' checkpoint cadence."""

from __future__ import annotations

import dataclasses
import math
import subprocess
import sys

import pytest
import yaml

from jobs.contract.spec import GrpoSpec
from jobs.plan.checkpoint_interval import (
    PRIORS_FILE,
    checkpoint_interval_findings,
    load_interruption_priors,
    prior_mtbi_seconds,
    waste_factor,
    young_daly_seconds,
)
from tests.conftest import ROOT


def test_young_daly_is_the_minimum_of_saves_plus_redone_work():
    cost, mtbi = 60.0, 6 * 3600.0
    optimum = young_daly_seconds(cost, mtbi)
    assert optimum == pytest.approx(math.sqrt(2 * 60 * 21600)) == pytest.approx(1610, abs=1)  # ~27 min
    overhead = lambda t: cost / t + t / (2 * mtbi)                                        
    assert all(overhead(optimum) <= overhead(optimum * k) for k in (0.3, 0.9, 1.1, 3.0))
    assert waste_factor(optimum * 3, optimum) == pytest.approx(overhead(optimum * 3) / overhead(optimum))
    assert young_daly_seconds(7200, 3600) == 3600          # a save longer than half the MTBI
    with pytest.raises(ValueError):
        young_daly_seconds(0, 10)


def test_every_prior_is_sourced_or_labelled_an_assumption():
    doc = yaml.safe_load(PRIORS_FILE.read_text())
    rows = [doc["hardware_failure"], *doc["preemption"].values(), doc["step_seconds"],
            *doc["checkpoint_write_gbps"].values(), doc["warn_waste_factor"]]
    for row in rows:
        assert row["kind"] in ("sourced", "assumption") and row["source"].strip(), row
    priors = load_interruption_priors()
    assert priors.node_mtbp_hours["spot"].kind == "assumption"
    assert priors.node_mtbf_hours.value == pytest.approx(2048 * 54 * 24 / 419, rel=0.01)


def test_interruptions_add_up_over_nodes_and_sources():
    priors = load_interruption_priors()
    reserved, basis = prior_mtbi_seconds(priors, "reservation", 4)
    assert reserved == pytest.approx(3600 * 6335 / 4, rel=0.01) and "4 node(s)" in basis
    spot, basis = prior_mtbi_seconds(priors, "spot", 2)
    assert spot == pytest.approx(3600 / (2 / 6335 + 2 / 24), rel=0.01) and "an assumption" in basis


def _spec(stack: str) -> GrpoSpec:
    out = subprocess.run([sys.executable, "-m", "tools.run_spec", stack], cwd=ROOT, capture_output=True,
                         text=True, check=True)
    return GrpoSpec.from_json(out.stdout)


def test_preflight_warns_when_the_cadence_is_far_from_the_period_of_the_capacity_source():
    prod = _spec("prod")
    # prod: a 32B model's ~393 GB every 10 steps on a reservation whose only interruptions are
    # hardware failures: saves cost far more than the work they protect
    [finding] = checkpoint_interval_findings(prod, "reservation")
    assert finding.level == "warning" and finding.key == "gke-grpo:job.checkpointEverySteps"
    assert "Young-Daly period" in finding.message and "an assumption" in finding.message
    assert "data/interruption-priors.yaml" in finding.message
    # dev: a 7B model on Spot: 10 steps is within a factor of the period, no warning
    assert checkpoint_interval_findings(_spec("dev"), "spot") == []
    # the same prod run on Spot checkpoints far too rarely at 1000 steps
    rare = dataclasses.replace(prod, checkpoint_every_steps=1000, total_steps=None, total_epochs=3)
    [finding] = checkpoint_interval_findings(rare, "spot")
    assert "about " in finding.message and "redone steps" in finding.message
