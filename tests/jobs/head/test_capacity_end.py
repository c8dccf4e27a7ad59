"""What the run driver tells each trainer start of its capacity's end, and what it records
(jobs/head/capacity_end.py, used by jobs/head/driver.py): the variables each framework reads
(verl v0.7.1's expiration timestamp, NeMo RL v0.5.0's checkpoint_must_save_by: read by the
frameworks' own code in tests/jobs/plan/test_capacity_end.py and tests/jobs/contract/
test_capacity_end.py), the saves seen in the trainer's output as capacity_save events, and NeMo
RL's stop for its capacity restarted after the end, never taken for a finished run. The trainer is
tests/jobs/fake_trainer.py, printing what each framework prints."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from jobs.contract.capacity_end import (
    CAPACITY_ENDED_REASON,
    CAPACITY_SAVE_EVENT,
    FLEX_START_BOOT_ALLOWANCE_SECONDS,
    NEMO_RL_SAVE_BY_ENV,
    SETUP_ALLOWANCE_SECONDS,
    VERL_EXPIRATION_ENV,
)
from jobs.contract.exit_codes import ExitCode
from jobs.head import capacity_end as head
from jobs.head.failures import TrainerOutput
from jobs.head.run_records import Records
from tests.jobs.head.test_driver import FakeHooks, drive, make_plan

RUN_SECONDS = 86400.0
MARGIN = 40.0


def ends(flex=RUN_SECONDS, reservations=()):
    return {"margin_seconds": MARGIN, "margin_basis": "the planner's checkpoint time: test",
            "flex_start_max_run_seconds": flex, "reservation_ends": list(reservations)}


def flex_node(name: str, ends_in: float, now: float) -> dict:
    """A flex-start node whose end (creation + run duration - boot allowance) is ``ends_in``
    seconds after ``now``."""
    created = now + ends_in - RUN_SECONDS + FLEX_START_BOOT_ALLOWANCE_SECONDS
    return {"node_id": name, "node_name": name, "address": "10.0.0.1", "source": "flexStart",
            "gpus": 2.0, "created_at": created}


def placement(*nodes) -> dict:
    return {"gpu_nodes": list(nodes), "capacity_sources": {}}


class PlacedHooks(FakeHooks):
    """FakeHooks whose GPU wait found these placements, one per start (the last one repeats)."""

    def __init__(self, placements, **kwargs):
        super().__init__(**kwargs)
        self.placements = list(placements)

    def gpu_placement(self, plan):
        return self.placements.pop(0) if len(self.placements) > 1 else self.placements[0]


def _events(events, name):
    return [e for e in events if e["event"] == name]


def _told(out: str) -> list[dict]:
    return [json.loads(line.split("capacity told: ", 1)[1]) for line in out.splitlines()
            if line.startswith("capacity told: ")]


# ---- what one start is told ---------------------------------------------------------------------

def test_verl_is_told_the_first_nodes_end_in_whole_seconds(tmp_path):
    now = 1_800_000_000.0
    plan = make_plan(tmp_path, "ok", capacity_end=ends())
    told = head.tell(plan, placement(flex_node("a", 7200.7, now), flex_node("b", 3600.7, now)), tmp_path, now)
    assert told.env == {VERL_EXPIRATION_ENV: str(int(now + 3600))}          # b's, rounded down
    record = told.record["capacity_end"]
    assert record["node"] == "b" and record["source"] == "flexStart"
    assert record["told"] == {VERL_EXPIRATION_ENV: str(int(now + 3600)), "trainer.esi_redundant_time": 40}
    assert "ends in 3601 s" in told.line


def test_nemo_rl_is_told_a_duration_that_leaves_out_the_margin_and_the_setup(tmp_path):
    now = 1_800_000_000.0
    plan = make_plan(tmp_path, "ok", framework="nemo-rl", capacity_end=ends())
    Path(plan.run_dir).mkdir(parents=True)
    told = head.tell(plan, placement(flex_node("a", 86000, now)), plan.run_dir, now)
    # Before any start reached a step: the stated assumption for the setup.
    left = 86000 - MARGIN - SETUP_ALLOWANCE_SECONDS
    assert told.env == {NEMO_RL_SAVE_BY_ENV: "00:23:22:40"} and left == 23 * 3600 + 22 * 60 + 40
    assert told.record["capacity_end"]["setup_allowance_seconds"] == SETUP_ALLOWANCE_SECONDS
    # Once a start of the run reached its first step, the latest such setup is used instead: one
    # slow start (here 9,000 s) must not make every later start stop hours early.
    records = Records(Path(plan.run_dir), 1)
    records.event("trainer_start", 0, at=now - 20000)
    records.event("first_step", 0, at=now - 20000 + 9000)
    records.event("trainer_start", 1, at=now - 5000)
    records.event("first_step", 1, at=now - 5000 + 420)
    assert head.setup_seconds_seen(plan.run_dir) == 420
    records.event("trainer_start", 2, at=now - 900_000)       # a damaged record: no setup
    records.event("first_step", 2, at=now)
    assert head.setup_seconds_seen(plan.run_dir) == 420
    told = head.tell(plan, placement(flex_node("a", 86000, now)), plan.run_dir, now)
    assert told.env == {NEMO_RL_SAVE_BY_ENV: "00:23:45:40"}                  # 86000 - 40 - 420 s
    assert "the latest start of this run" in told.record["capacity_end"]["setup_basis"]


def test_a_reservation_ends_when_the_stack_says(tmp_path):
    now = 1_800_000_000.0
    plan = make_plan(tmp_path, "ok", capacity_end=ends(flex=None, reservations=[{"name": "r1", "ends_at": now + 600}]))
    node = {"node_name": "r", "source": "reservation:r1", "created_at": None}
    told = head.tell(plan, placement(node), tmp_path, now)
    assert told.env == {VERL_EXPIRATION_ENV: str(int(now + 600))}
    assert "reservation r1" in told.record["capacity_end"]["basis"]


def test_nothing_is_told_without_a_known_end(tmp_path):
    now = 1_800_000_000.0
    assert head.tell(make_plan(tmp_path, "ok"), placement(flex_node("a", 60, now)), tmp_path, now) == head.Told()
    plan = make_plan(tmp_path, "ok", capacity_end=ends())
    spot = {"node_name": "s", "source": "spot", "created_at": None}
    told = head.tell(plan, placement(spot), tmp_path, now)
    assert told.env == {} and told.record["capacity_end"]["told"] is False and told.line is None
    unknown = {"node_name": "u", "source": "unknown", "created_at": None}
    told = head.tell(plan, placement(spot, unknown), tmp_path, now)
    assert told.env == {} and told.record["capacity_end"]["unknown_nodes"] == ["u"]
    assert "without a creation time" in told.line
    told = head.tell(plan, {}, tmp_path, now)                   # no placement recorded
    assert told.env == {} and "recorded no nodes" in told.line
    # A damaged placement record (NaN, infinity, an absurd time): that node's end is unknown, and
    # the start goes on.
    for damaged in (float("nan"), float("inf"), 1e300, -1.0):
        bad = {**flex_node("a", 3600, now), "created_at": damaged}
        told = head.tell(plan, placement(bad), tmp_path, now)
        assert told.env == {} and told.record["capacity_end"]["unknown_nodes"] == ["a"], damaged
    # An end that has passed while the node is still up: the estimate was early; nothing is told.
    told = head.tell(plan, placement(flex_node("a", -5, now)), tmp_path, now)
    assert told.env == {} and told.ends_at is None and "estimate is early" in told.record["capacity_end"]["why"]


def test_after_a_stop_for_the_capacity_the_driver_waits_for_the_end_and_the_nodes_to_go(tmp_path):
    told = head.Told(ends_at=1000.0, latest_end=1000.0)
    assert head.restart_delay(told, 990.0, 30.0) == 40.0
    assert head.restart_delay(told, 1010.0, 30.0) == 30.0
    assert head.restart_delay(head.Told(), 990.0, 30.0) == 30.0
    # A flex-start end is estimated early by up to the boot allowance: the driver waits for the
    # latest the node can really end, or the next GPU wait takes the leaving node again (the gang
    # request still holds it).
    now = 1_800_000_000.0
    plan = make_plan(tmp_path, "ok", framework="nemo-rl", capacity_end=ends())
    Path(plan.run_dir).mkdir(parents=True)
    told = head.tell(plan, placement(flex_node("a", 4000, now)), plan.run_dir, now)
    assert told.ends_at == pytest.approx(now + 4000)
    assert head.restart_delay(told, now + 4000, 30.0) == pytest.approx(FLEX_START_BOOT_ALLOWANCE_SECONDS + 30)
    reserved = make_plan(tmp_path, "ok", framework="nemo-rl",
                         capacity_end=ends(flex=None, reservations=[{"name": "r1", "ends_at": now + 4000}]))
    told = head.tell(reserved, placement({"node_name": "r", "source": "reservation:r1"}), plan.run_dir, now)
    assert head.restart_delay(told, now + 4000, 30.0) == 30.0          # a reservation's end is exact


def test_each_save_for_the_capacity_is_an_event(tmp_path):
    records = Records(tmp_path, 2)
    said = []
    watch = head.SaveWatch(records, 3, head.Told(ends_at=1234.0), said.append)
    output = TrainerOutput()
    for line in ("step:7 - a:1", "(TaskRunner pid=9) Force saving checkpoint: ESI instance expiration approaching.",
                 "step:8 - a:1", "(TaskRunner pid=9) Force saving checkpoint: ESI instance expiration approaching.",
                 "nothing here"):
        output.feed(line + "\n")
        watch.line(output.tail[-1], output)
    rows = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert [(r["event"], r["start"], r["attempt"], r["last_step_logged"], r["save"], r["stopped"]) for r in rows] == [
        (CAPACITY_SAVE_EVENT, 3, 2, 7, 1, False), (CAPACITY_SAVE_EVENT, 3, 2, 8, 2, False)]
    assert rows[0]["capacity_ends_at"] == 1234.0
    assert said == ["capacity ends soon: the trainer saved (and trains on) after step 7",
                    "capacity ends soon: the trainer saved (and trains on) after step 8"]


# ---- the driver ---------------------------------------------------------------------------------

def test_verl_gets_the_end_saves_and_is_restarted_when_its_node_goes(tmp_path):
    now = time.time()
    hooks = PlacedHooks([placement(flex_node("old", 3600, now)), placement(flex_node("new", 80000, now))],
                        dead=[[]])
    plan = make_plan(tmp_path, "verl-capacity-end", capacity_end=ends())
    code, out, events, _ = drive(plan, hooks)
    assert code == ExitCode.OK, out
    first, second = _told(out)
    assert first[VERL_EXPIRATION_ENV] == str(int(now + 3600)) and first[NEMO_RL_SAVE_BY_ENV] is None
    assert second[VERL_EXPIRATION_ENV] == str(int(now + 80000))
    [save] = _events(events, CAPACITY_SAVE_EVENT)
    assert save["start"] == 0 and save["stopped"] is False
    starts = _events(events, "trainer_start")
    assert starts[0]["capacity_end"]["node"] == "old" and starts[1]["capacity_end"]["node"] == "new"
    assert [e["reason"] for e in _events(events, "trainer_exit")] == ["node_lost", "completed"]


def test_nemo_rls_stop_for_its_capacity_is_restarted_after_the_end_not_taken_for_the_end_of_the_run(tmp_path):
    now = time.time()
    old = {"node_name": "old", "source": "reservation:r1", "created_at": None}
    hooks = PlacedHooks([placement(old), placement(flex_node("new", 80000, now))])
    plan = make_plan(tmp_path, "nemo-rl-capacity-end", framework="nemo-rl", node_settle_seconds=1.5,
                     capacity_end=ends(reservations=[{"name": "r1", "ends_at": now + 2.0}]))
    code, out, events, _ = drive(plan, hooks)
    assert code == ExitCode.OK, out
    first, second = _told(out)
    assert first[NEMO_RL_SAVE_BY_ENV] == "00:00:00:00"         # it ends sooner than setup + margin
    assert second[NEMO_RL_SAVE_BY_ENV] is not None and second[VERL_EXPIRATION_ENV] is None
    exits = _events(events, "trainer_exit")
    assert [e["reason"] for e in exits] == [CAPACITY_ENDED_REASON, "completed"]
    assert exits[0]["exit_code"] == 0 and exits[0]["last_checkpoint_step"] == 1
    [save] = _events(events, CAPACITY_SAVE_EVENT)
    assert save["stopped"] is True and save["last_step_logged"] == 1
    # Restarted once the old node's end had passed, not after a backoff: the next GPU wait
    # looks for the new nodes.
    [restart] = [json.loads(line) for line in (Path(plan.run_dir) / "restarts.jsonl").read_text().splitlines()]
    # (the end plus node_settle_seconds, never the plan's 0.01-0.02 s backoff, however late the
    # trainer stopped)
    assert restart["reason"] == CAPACITY_ENDED_REASON and restart["backoff_s"] >= 1.5
    old_end = _events(events, "trainer_start")[0]["capacity_end"]["ends_at"]
    assert _events(events, "trainer_start")[1]["time"] >= old_end
    assert hooks.waits == 2
    assert "as its capacity ends" in out
    [end] = _events(events, "driver_end")
    assert end["exit_code"] == 0


def test_nemo_rls_stop_on_the_last_step_is_the_end_of_the_run(tmp_path):
    """NeMo RL checks its save-by time before its step bound (nemo_rl/algorithms/grpo.py at
    v0.5.0, grpo_train): told to stop on what is also its last step, it prints the timeout line,
    not the step bound's, and exits 0 with the final checkpoint written."""
    now = time.time()
    hooks = PlacedHooks([placement(flex_node("a", 2.0, now))])
    plan = make_plan(tmp_path, "nemo-rl-capacity-end", framework="nemo-rl", capacity_end=ends(), total_steps=1)
    code, out, events, _ = drive(plan, hooks)
    assert code == ExitCode.OK, out
    [exit_] = _events(events, "trainer_exit")
    assert exit_["reason"] == "completed" and "its checkpoint is the last step (1)" in exit_["evidence"]
    assert hooks.waits == 1 and not (Path(plan.run_dir) / "restarts.jsonl").exists()


@pytest.mark.parametrize("mode,framework", [("verl-capacity-end", "verl"), ("nemo-rl-capacity-end", "nemo-rl")])
def test_a_plan_without_a_capacity_end_tells_nothing(tmp_path, mode, framework):
    now = time.time()
    hooks = PlacedHooks([placement(flex_node("a", 3600, now))], dead=[[]])
    code, out, events, _ = drive(make_plan(tmp_path, mode, framework=framework), hooks)
    assert code == ExitCode.OK, out
    assert all(v is None for told in _told(out) for v in told.values())
    assert all("capacity_end" not in e for e in _events(events, "trainer_start"))
    assert _events(events, CAPACITY_SAVE_EVENT) == []
    # verl loses its node and is restarted; NeMo RL, told nothing, trains to the end in one start.
    assert [e["reason"] for e in _events(events, "trainer_exit")] == (
        ["node_lost", "completed"] if framework == "verl" else ["completed"])
