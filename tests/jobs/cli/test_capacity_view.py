"""Capacity that ends on schedule as `status` and the report show it (jobs/cli/capacity_view.py),
from the records the driver writes (jobs/head/capacity_end.py: trainer_start's capacity_end, the
capacity_save events, trainer_exit's capacity_ended), hostile values included."""

from __future__ import annotations

from jobs.cli.capacity_view import capacity_rows, start_capacity_text
from jobs.cli.report import collect_inputs, run_status_rows
from jobs.cli.timeline import timeline_from_rows
from tools.synthetic_run import write_synthetic_run

T = 1_800_000_000.0


def _ev(t, name, start, **extra):
    return {"time": t, "event": name, "attempt": 1, "start": start, **extra}


def _nemo_rl_stopped_then_finished():
    told = {"ends_at": T + 7200, "source": "flexStart", "node": "gke-gpu-flex-0", "told":
            {"checkpointing.checkpoint_must_save_by": "00:01:29:20"}}
    return timeline_from_rows([
        _ev(T, "trainer_start", 0, capacity_end=told),
        _ev(T + 7000, "capacity_save", 0, last_step_logged=41, stopped=True, save=1),
        _ev(T + 7001, "trainer_exit", 0, reason="capacity_ended", exit_code=0),
        _ev(T + 7300, "trainer_start", 1, capacity_end={**told, "ends_at": T + 90000, "node": "gke-gpu-flex-1"}),
    ])


def test_a_start_shows_its_end_and_its_save_before_it():
    timeline = _nemo_rl_stopped_then_finished()
    assert start_capacity_text(timeline, 1, 0) == (
        "ends 2027-01-15 10:00:00 UTC (flexStart, gke-gpu-flex-0); saved before it (after step 41), then stopped")
    assert start_capacity_text(timeline, 1, 1) == "ends 2027-01-16 09:00:00 UTC (flexStart, gke-gpu-flex-1)"
    [(key, text)] = capacity_rows(timeline)
    assert key == "capacity end" and text.startswith("attempt 1 start 1: ends 2027-01-16")
    assert text.endswith("1 save(s) before a capacity end in the run, 1 start(s) stopped for it and restarted")


def test_a_start_that_was_not_told_says_why_and_a_missed_end_is_said():
    timeline = timeline_from_rows([
        _ev(T, "trainer_start", 0, capacity_end={"ends_at": None, "told": False, "why": "no node of this start has a "
                                                 "scheduled end the driver knows"}),
        _ev(T + 10, "trainer_start", 1, capacity_end={"ends_at": T + 100, "source": "reservation:r1"}),
        _ev(T + 120, "trainer_exit", 1, reason="node_lost", exit_code=1),
    ])
    assert start_capacity_text(timeline, 1, 0) == ("trainer not told: no node of this start has a scheduled end "
                                                   "the driver knows")
    assert start_capacity_text(timeline, 1, 1).endswith("(reservation:r1); no save before it seen")


def test_no_scheduled_end_shows_nothing():
    timeline = timeline_from_rows([_ev(T, "trainer_start", 0, gpu_nodes=[])])
    assert start_capacity_text(timeline, 1, 0) == "-"
    assert capacity_rows(timeline) == []


def test_hostile_values_are_never_shown():
    timeline = timeline_from_rows([
        _ev(T, "trainer_start", 0, capacity_end={"ends_at": 1e308, "source": "x\n" * 50, "node": ["n"]}),
        _ev(T + 1, "capacity_save", 0, last_step_logged="41; rm -rf /", stopped="yes"),
        _ev(T + 2, "trainer_start", 1, capacity_end="soon"),
    ])
    assert start_capacity_text(timeline, 1, 0) == "saved before it"
    assert start_capacity_text(timeline, 1, 1) == "-"


def test_the_report_and_status_show_it(tmp_path):
    run = write_synthetic_run(tmp_path / "run", "verl", run_id="exp-0123abcd")   # start 1 on flex-start
    inputs = collect_inputs(run.path, now=run.end_time + 60)
    from tests.jobs.cli.test_report_sections import _page

    page, _html = _page(inputs)
    header, *rows = page.tables["attempts-table"]
    first, second = (dict(zip(header, row)) for row in rows)
    assert first["capacity end"] == "-"                                         # Spot
    assert second["capacity end"].startswith("ends ") and "(flexStart, gke-gpu-flexstart-2)" in second["capacity end"]
    status = dict(run_status_rows(inputs))
    assert status["capacity end"].startswith("attempt 1 start 1: ends ")
