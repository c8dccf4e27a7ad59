"""The run driver's timeline files (events.jsonl / restarts.jsonl, jobs/contract/records.py)
read by jobs/cli/timeline.py: partial and odd lines are skipped, never fatal."""

from __future__ import annotations

import json

import pytest

from jobs.cli.timeline import read_timeline, timeline_from_rows
from jobs.contract.records import EVENTS_FILE, RESTARTS_FILE, parse_start_dir, run_dir, tensorboard_dir


def write(path, rows, tail=""):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + tail)


def ev(t, name, start=0, attempt=1, **extra):
    return {"time": t, "event": name, "attempt": attempt, "start": start, **extra}


def test_partial_last_line_and_bad_rows_are_skipped(tmp_path):
    write(tmp_path / EVENTS_FILE, [ev(10.0, "driver_start"), ev(11, "prepare_start"),
                                   {"time": "soon", "event": "prepare_end", "attempt": 1, "start": 0},
                                   ["not", "an", "object"]],
          tail='{"time": 20.5, "event": "prepare_e')          # the driver is writing this line
    write(tmp_path / RESTARTS_FILE, [{"time": 30, "reason": "worker_lost", "exit_code": 1,
                                      "last_checkpoint_step": 20, "attempt": 1, "start": 0}])
    tl = read_timeline(tmp_path)
    assert [e.event for e in tl.events] == ["driver_start", "prepare_start"]
    assert tl.skipped_lines == 3
    assert tl.restarts[0].last_checkpoint_step == 20 and tl.restarts[0].reason == "worker_lost"
    assert not tl.ended
    # the open prepare interval runs until now
    (prep,) = tl.intervals("prepare")
    assert prep.end is None and prep.duration(now=41.0) == 30.0


def test_missing_files_are_an_empty_timeline(tmp_path):
    tl = read_timeline(tmp_path)
    assert tl.empty and tl.first_time is None and tl.restarts == []


def test_intervals_pair_per_attempt_and_start():
    tl = timeline_from_rows([
        ev(0, "driver_start"), ev(1, "gpu_wait_start"), ev(5, "gpu_wait_end"),
        ev(6, "trainer_start"), ev(20, "trainer_exit", exit_code=1, reason="worker_lost", last_checkpoint_step=None),
        ev(21, "gpu_wait_start", start=1), ev(30, "gpu_wait_end", start=1),
        ev(31, "trainer_start", start=1), ev(50, "trainer_exit", start=1, exit_code=0),
        ev(51, "driver_end", start=1, exit_code=0)])
    waits = tl.intervals("gpu_wait")
    assert [(w.start, w.begin, w.end) for w in waits] == [(0, 1, 5), (1, 21, 30)]
    starts = tl.trainer_starts()
    assert [(s.start, s.end_event.extra["exit_code"]) for s in starts] == [(0, 1), (1, 0)]
    assert tl.ended and tl.end_time(now=999) == 51


def test_a_driver_that_ended_closes_its_open_intervals():
    tl = timeline_from_rows([ev(0, "driver_start"), ev(1, "gpu_wait_start"), ev(9, "deadline"),
                             ev(10, "driver_end", exit_code=3)])
    (wait,) = tl.intervals("gpu_wait")
    assert wait.end == 9


def test_tensorboard_folder_per_attempt_and_start():
    assert tensorboard_dir(run_dir("exp-1a2b3c4d"), 2, 1) == "/data/runs/exp-1a2b3c4d/tensorboard/attempt-2-start-1"
    assert parse_start_dir("attempt-2-start-1") == (2, 1)
    assert parse_start_dir("exp_001") is None
    with pytest.raises(ValueError, match="run id"):
        run_dir("../etc")
