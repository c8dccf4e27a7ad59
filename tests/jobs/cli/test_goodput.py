"""Goodput on a synthetic timeline with answers worked out by hand (jobs/cli/goodput.py), with real
TensorBoard event files for the step times (written as torch's SummaryWriter writes them)."""

from __future__ import annotations

import pytest

from jobs.cli.goodput import BUCKETS, compute_goodput
from jobs.cli.metrics import read_run_metrics
from jobs.cli.timeline import timeline_from_rows
from jobs.contract.records import tensorboard_dir
from tools.synthetic_run import write_scalar_events

T = "timing_s/step"          # verl v0.7.1 compute_timing_metrics: timing_s/{name}, marked_timer("step")
CKPT = "timing_s/save_checkpoint"
VAL = "timing_s/testing"
REWARD = "critic/score/mean"


def ev(t, name, start=0, **extra):
    return {"time": float(t), "event": name, "attempt": 1, "start": start, **extra}


EVENTS = [
    ev(1000, "driver_start"),
    ev(1010, "prepare_start"), ev(1110, "prepare_end"),                     # 100 s data prep
    ev(1110, "gpu_wait_start"), ev(1410, "gpu_wait_end"),                   # 300 s GPU wait
    ev(1410, "health_start"), ev(1440, "health_end", passed=True),          # 30 s health gate
    ev(1450, "trainer_start"),
    ev(1680, "trainer_exit", exit_code=1, reason="worker_lost", last_checkpoint_step=2),
    ev(1690, "gpu_wait_start", 1), ev(1790, "gpu_wait_end", 1),             # 100 s GPU wait
    ev(1800, "trainer_start", 1),
]
END = [ev(1960, "trainer_exit", 1, exit_code=0, reason="succeeded", last_checkpoint_step=4),
       ev(1970, "driver_end", 1, exit_code=0)]


@pytest.fixture
def run(tmp_path):
    # start 0: steps 1-3 of 50 s (ending at 1550, 1600, 1650); step 2 saved a checkpoint (10 s).
    write_scalar_events(tensorboard_dir(tmp_path, 1, 0), [
        (T, 1, 50.0, 1550.0), (REWARD, 1, 0.2, 1550.0),
        (T, 2, 50.0, 1600.0), (CKPT, 2, 10.0, 1600.0), (REWARD, 2, 0.3, 1600.0),
        (T, 3, 50.0, 1650.0), (REWARD, 3, 0.35, 1650.0)])
    # start 1 resumes from step 2: step 3 again (validation 20 s inside), step 4 (checkpoint 10 s).
    write_scalar_events(tensorboard_dir(tmp_path, 1, 1), [
        (T, 3, 50.0, 1900.0), (VAL, 3, 20.0, 1900.0), (REWARD, 3, 0.4, 1900.0),
        (T, 4, 50.0, 1950.0), (CKPT, 4, 10.0, 1950.0), (REWARD, 4, 0.5, 1950.0)])
    return tmp_path


def test_known_answers_of_a_run_with_one_restart(run):
    g = compute_goodput(timeline_from_rows(EVENTS + END), read_run_metrics(run), now=5000)
    assert g.wall_s == 970 and not g.live
    # kept steps 1, 2 (less its 10 s save), 3 and 4 of start 1 (less 20 s validation, 10 s save)
    # and start 1's 10 s after its last step: 50 + 40 + 30 + 40 + 10
    assert g.productive_s == pytest.approx(170)
    assert g.badput_s == pytest.approx({
        "gpu_wait": 400, "data_prep": 100, "health_check": 30,
        "restarts": 80,            # step 3 of start 0 (50 s, after checkpoint 2) + 30 s to the crash
        "checkpoint_save": 20, "validation": 20,
        "trainer_startup": 100,    # 1450 -> first step's start (50 s); 1800 -> 1850 (50 s)
        "export_evaluate": 0,      # no export or evaluation records in this run
        "other": 50})              # five 10 s gaps between the driver's stages
    assert g.goodput == pytest.approx(170 / 970)
    assert g.lost_steps == 1 and not g.upper_bound and g.notes == []
    assert g.productive_s + sum(g.badput_s.values()) == pytest.approx(g.wall_s)
    assert "17.5%" in g.describe() and "waiting for GPUs 41.2%" in g.describe()


def test_live_run_counts_the_step_in_flight(run):
    g = compute_goodput(timeline_from_rows(EVENTS), read_run_metrics(run), now=2000)
    assert g.live and g.wall_s == 1000
    assert g.productive_s == pytest.approx(50 + 40 + 30 + 40 + 50)     # 1950 -> now in flight
    assert g.badput_s["other"] == pytest.approx(40)
    assert g.badput_s["trainer_startup"] == pytest.approx(100)


def test_without_a_checkpoint_a_restart_loses_every_step(run):
    events = [dict(e) for e in EVENTS + END]
    events[8]["last_checkpoint_step"] = None
    g = compute_goodput(timeline_from_rows(events), read_run_metrics(run), now=5000)
    assert g.badput_s["restarts"] == pytest.approx(150 + 30) and g.lost_steps == 3
    assert g.badput_s["checkpoint_save"] == pytest.approx(10)          # only start 1's save kept


def test_trainer_time_without_step_metrics_is_an_upper_bound(tmp_path):
    g = compute_goodput(timeline_from_rows(EVENTS + END), read_run_metrics(tmp_path), now=5000)
    assert g.upper_bound
    assert g.productive_s == pytest.approx(230 + 160)
    assert len(g.notes) == 2 and "no step metrics" in g.notes[0]
    assert set(g.badput_s) == set(BUCKETS)


def test_empty_timeline():
    g = compute_goodput(timeline_from_rows([]), None, now=1)
    assert g.goodput is None and g.describe() == "no timeline yet"
