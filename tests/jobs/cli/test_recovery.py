"""Recoveries and the checkpoint advice in `gke-grpo status` and the report (jobs/cli/recovery.py), on
a run directory in the driver's format (tools/synthetic_run.py: a node loss at step 27, a
checkpoint every 10 steps of ~35 s, steps of ~70 s)."""

from __future__ import annotations

import io

import pytest

from jobs.cli import main as cli
from jobs.cli.recovery import checkpoint_advice, describe_recovery, describe_restarts, recoveries
from jobs.cli.report import CostBasis, build_report, collect_inputs
from tools.synthetic_run import write_synthetic_run


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return write_synthetic_run(tmp_path_factory.mktemp("runs") / "exp-12345678", "verl")


def test_each_recovery_is_seconds_from_the_node_loss_and_steps_redone(run):
    inputs = collect_inputs(run.path)
    [record] = recoveries(inputs.timeline)
    assert (record["steps_redone"], record["resumed_from_step"], record["first_new_step"]) == (7, 20, 21)
    assert 0 < record["decision_s"] < record["restart_s"] < record["first_step_s"]
    text = describe_recovery(record)
    assert text.startswith("restart 1: from the node loss (node marked dead) decision 3.5 s")
    assert "7 step(s) redone (resumed from step 20, first new step 21)" in text
    assert describe_restarts([{"reason": "node_lost", "exit_code": 1, "last_checkpoint_step": 20}]) == \
        "1 (last: node_lost, exit 1, resumed from checkpoint step 20)"


def test_the_period_uses_the_runs_own_checkpoint_cost_and_interruptions(run):
    inputs = collect_inputs(run.path)
    advice = inputs.advice
    assert advice is not None and advice.checkpoint_s == pytest.approx(35.0)
    assert advice.mtbi_basis.startswith("observed: 1 in ")          # the node loss, over trainer time
    assert advice.every_steps == 10 and advice.every_basis == "the gaps between the logged saves"
    assert advice.optimum_s == pytest.approx((2 * 35.0 * advice.mtbi_s) ** 0.5)
    assert "Young-Daly" in advice.describe() and "configured every 10 steps" in advice.describe()


def test_without_an_interruption_the_capacity_sources_prior_or_a_lower_bound():
    from jobs.cli.metrics import read_run_metrics
    from jobs.cli.timeline import timeline_from_rows

    quiet = timeline_from_rows([{"time": 0, "event": "trainer_start", "attempt": 1, "start": 0},
                                {"time": 7200, "event": "trainer_exit", "attempt": 1, "start": 0, "exit_code": 0}])
    metrics = read_run_metrics("/nonexistent")
    assert checkpoint_advice(quiet, metrics) is None                       # no save timed


def test_status_and_report_show_them(run, tmp_path):
    out, err = io.StringIO(), io.StringIO()
    assert cli.main(["status", "--run-dir", str(run.path)], out=out, err=err) == 0
    rows = out.getvalue()
    assert "recovery    restart 1: from the node loss" in rows
    assert "ckpt period Young-Daly" in rows
    inputs = collect_inputs(run.path, cost_basis=CostBasis("a3-ultragpu-8g", "spot", 2),
                            checkpoint_every_steps=10)
    page = build_report(inputs).html
    assert "<h2>Recovery and checkpoint cadence</h2>" in page
    assert "loss -&gt; first new step" in page and "configured every 10 steps" in page
