"""tools/synthetic_run.py writes a run directory the readers accept (the docs' screenshot run)."""

from __future__ import annotations

import time

from jobs.cli.goodput import compute_goodput
from jobs.cli.metrics import read_run_metrics
from jobs.cli.timeline import read_timeline
from tools import synthetic_run


def test_live_run_ends_a_minute_ago(tmp_path):
    assert synthetic_run.main([str(tmp_path / "run"), "--live", "--steps", "40"]) == 0
    tl, m = read_timeline(tmp_path / "run"), read_run_metrics(tmp_path / "run")
    assert not tl.ended and len(tl.restarts) == 1 and m.framework == "verl"
    last = max(r.wall_time for r in m.merged())
    assert 59 <= time.time() - last < 3600     # placed a minute before the moment it was written
    assert compute_goodput(tl, m, time.time()).live


def test_nemo_rl_run(tmp_path):
    run = synthetic_run.write_synthetic_run(tmp_path / "n", "nemo-rl", total_steps=30)
    m = read_run_metrics(run.path)
    assert m.framework == "nemo-rl" and m.latest().step == 30
    assert read_timeline(run.path).ended


def test_without_tensorboard_it_names_make_cli(tmp_path, monkeypatch, capsys):
    import sys

    import pytest

    from tools.synthetic_run import main

    monkeypatch.setitem(sys.modules, "tensorboard", None)
    with pytest.raises(SystemExit) as exit_:
        main([str(tmp_path / "run")])
    assert exit_.value.code == 2
    [line] = capsys.readouterr().err.splitlines()
    assert "needs the TensorBoard event-file reader" in line and "`make cli`" in line
    assert not (tmp_path / "run").exists()


def test_a_stack_s_run_uses_the_stack_s_capacity_and_has_its_evaluation(tmp_path):
    import json

    from jobs.cli.eval_results import read_eval_results
    from jobs.contract.records import EVENTS_FILE

    # dev's only capacity source is Spot: both starts of its run are on Spot.
    assert synthetic_run.main([str(tmp_path / "run"), "--stack", "dev", "--steps", "30"]) == 0
    events = [json.loads(line) for line in (tmp_path / "run" / EVENTS_FILE).read_text().splitlines()]
    starts = [e["capacity_sources"] for e in events if e["event"] == "trainer_start"]
    assert starts == [{"spot": 2}, {"spot": 2}]
    # A finished run has its held-out evaluation: the report's headline is not a bare "-".
    labels = [doc["label"] for doc in read_eval_results(tmp_path / "run")]
    assert labels == ["base", "step-30"]
    # Without a stack the run shows a waterfall: Spot, then flex-start after the lost node.
    run = synthetic_run.write_synthetic_run(tmp_path / "w", total_steps=30, finished=False)
    events = [json.loads(line) for line in (run.path / EVENTS_FILE).read_text().splitlines()]
    assert [e["capacity_sources"] for e in events if e["event"] == "trainer_start"] == [{"spot": 2}, {"flexStart": 2}]
    assert read_eval_results(run.path) == []
