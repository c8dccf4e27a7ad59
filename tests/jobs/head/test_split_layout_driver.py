"""The run driver for a split layout (gke-grpo:job.layout, docs/layouts.md): the gang request and
the GPU wait per pool, an exit 0 that is not a completed run (NeMo RL's asynchronous loop returns
normally after an error; verl's fully-async trainer ends normally after losing a rollout node), and
a trainer that waits forever after a node of its run died. The real gang request and placement on
a Ray head are in tests/tools/test_split_layout_ray.py."""

from __future__ import annotations

import dataclasses
import io
import time

from jobs.contract.exit_codes import ExitCode
from jobs.contract.layouts import NEMO_RL_ASYNC_COMPLETION_TEXT, Pool
from jobs.head import gpu_gang, node_loss_watch
from jobs.head.failures import Reason, TrainerOutput, classify
from jobs.head.gpu_wait import GpuNode, Snapshot, wait_for_gpus
from jobs.head.node_loss_watch import NodeLossWatch
from jobs.head.run_records import read_restarts
from tests.jobs.head.test_driver import FakeHooks, dead_node, drive, make_plan

POOLS = (Pool("rollout", 2), Pool("trainer", 1))


def test_the_gang_asks_for_each_pools_nodes_bound_to_its_resource():
    assert gpu_gang.gang_bundles(3, 8, POOLS) == [
        ({"GPU": 8.0, "gke_grpo_rollout_pool": 1.0}, 2), ({"GPU": 8.0, "gke_grpo_trainer_pool": 1.0}, 1)]
    assert gpu_gang.gang_bundles(3, 8) == [({"GPU": 8.0}, 3)]
    assert gpu_gang.gang_bundles(0, 0, POOLS) == []          # clear


def test_pools_that_do_not_add_up_are_a_usage_error(capsys):
    code = gpu_gang.main(["hold", "--nodes", "4", "--gpus-per-node", "8", "--pool", "rollout:2",
                          "--pool", "trainer:1"])
    assert code == 2 and "do not add up to --nodes 4" in capsys.readouterr().err
    assert gpu_gang.main(["hold", "--nodes", "1", "--gpus-per-node", "8", "--pool", "critic:1"]) == 2


def node(name: str, pool: str | None, free: float = 8.0) -> GpuNode:
    return GpuNode(address=name, gpus=8.0, alive=True, free=free, node_id=name, pool=pool)


def test_the_gpu_wait_needs_both_pools_not_enough_nodes_of_either():
    # Three free nodes, all of the rollout pool: enough GPUs, not the trainer's node.
    snaps = iter([
        Snapshot(available=24.0, total=24.0, nodes=(node("a", "rollout"), node("b", "rollout"),
                                                     node("c", "rollout"))),
        Snapshot(available=24.0, total=24.0, nodes=(node("a", "rollout"), node("b", "rollout"),
                                                     node("d", "trainer"))),
    ])
    clock = iter(range(100))
    out = io.StringIO()
    code = wait_for_gpus(24, 60, 1, gpus_per_node=8, pools=POOLS, snapshot=lambda: next(snaps),
                         clock=lambda: float(next(clock)), sleep=lambda s: None, out=out)
    assert code == ExitCode.OK
    assert "[rollout 3/2, trainer 0/1]" in out.getvalue() and "[rollout 2/2, trainer 1/1]" in out.getvalue()


def test_an_exit_0_with_a_lost_node_of_a_split_run_is_a_lost_node():
    lost = (dead_node(),)
    assert classify(0, TrainerOutput(), attempt_saw_step=True, dead_nodes=lost, split=True)[0] == Reason.NODE_LOST
    assert classify(0, TrainerOutput(), attempt_saw_step=True, dead_nodes=lost)[0] == Reason.COMPLETED


def test_an_exit_0_without_the_end_of_run_line_is_a_failure():
    output = TrainerOutput(expected_end=NEMO_RL_ASYNC_COMPLETION_TEXT)
    output.feed("❌ Error in async loop: boom")
    reason, evidence = classify(0, output, attempt_saw_step=True)
    assert reason == Reason.TRAINER_FAILED and "Error in async loop: boom" in evidence
    output.feed(NEMO_RL_ASYNC_COMPLETION_TEXT)
    assert classify(0, output, attempt_saw_step=True)[0] == Reason.COMPLETED


def split_plan(tmp_path, mode, **changes):
    return make_plan(tmp_path, mode, gpus=4, gpus_per_node=2, pools={"rollout": 1, "trainer": 1}, **changes)


def test_nemo_rls_swallowed_error_is_not_a_completed_run(tmp_path):
    plan = split_plan(tmp_path, "async-error-exit-0", completion_text=NEMO_RL_ASYNC_COMPLETION_TEXT)
    code, out, events, _ = drive(plan)
    assert code == ExitCode.FAILED, out
    [exit_event] = [e for e in events if e["event"] == "trainer_exit"]
    assert exit_event["reason"] == "trainer_failed" and "end-of-run line" in exit_event["evidence"]


def test_its_end_of_run_line_completes_it(tmp_path):
    plan = split_plan(tmp_path, "async-end", completion_text=NEMO_RL_ASYNC_COMPLETION_TEXT)
    assert drive(plan)[0] == ExitCode.OK


def test_a_split_trainer_that_ends_normally_after_a_lost_node_is_restarted(tmp_path):
    # The cluster reports a node dead during the first start, nothing during the second.
    hooks = FakeHooks(dead=[[dead_node()], []])
    plan = split_plan(tmp_path, "split-lost-then-exit-0")
    code, out, events, hooks = drive(plan, hooks)
    assert code == ExitCode.OK, out
    assert [e["reason"] for e in events if e["event"] == "trainer_exit"] == ["node_lost", "completed"]
    [restart] = read_restarts(plan.run_dir)
    assert "exited 0 but a node of the run was lost" in restart["evidence"]


def test_a_split_trainer_that_waits_forever_after_a_lost_node_is_stopped_and_restarted(tmp_path, monkeypatch):
    monkeypatch.setattr(node_loss_watch, "EVERY_SECONDS", 0.5)
    monkeypatch.setattr(node_loss_watch, "GRACE_SECONDS", 2.0)
    started = time.time()
    # Asked while the first start hangs, and after it was stopped: a node died after it began;
    # the restart's queries: none.
    hooks = FakeHooks(dead=[[dead_node(at=started + 1)]] * 2)
    plan = split_plan(tmp_path, "hang-after-loss-once", deadline_seconds=300)
    code, out, events, hooks = drive(plan, hooks)
    assert code == ExitCode.OK, out
    assert "no training step for 2s since a node of the run was lost" in out
    assert [e["reason"] for e in events if e["event"] == "trainer_exit"] == ["node_lost", "completed"]


def test_the_watch_forgets_a_loss_the_trainer_trains_through():
    now = [0.0]
    watch = NodeLossWatch(lambda since: [dead_node(at=since + 1)], 0.0, every=1, grace=10,
                          clock=lambda: now[0])
    now[0] = 1.0
    assert not watch.stalled(steps=3) and watch.lost_at is not None
    now[0] = 5.0
    assert not watch.stalled(steps=4) and watch.lost_at is None       # a new step: it goes on
    now[0] = 6.0
    watch.stalled(steps=4)
    now[0] = 17.0
    assert watch.stalled(steps=4) and "no training step for 10s" in watch.reason


def test_a_colocated_plan_has_no_watch_and_no_pools(tmp_path):
    plan = make_plan(tmp_path, "ok")
    assert plan.pool_list == () and "pools" not in plan.to_json()
    assert dataclasses.replace(plan, pools={"rollout": 1, "trainer": 1}).pool_list == (
        Pool("rollout", 1), Pool("trainer", 1))


def test_the_bound_follows_a_trainer_that_logs_seldom():
    now = [0.0]
    watch = NodeLossWatch(lambda since: [dead_node(at=since + 1)], 0.0, every=1, grace=10,
                          clock=lambda: now[0])
    watch.stalled(steps=1)
    now[0] = 30.0
    watch.stalled(steps=2)           # 30 s between two step lines: the bound is 60 s
    now[0] = 31.0
    watch.stalled(steps=2)           # the loss is seen
    now[0] = 80.0
    assert not watch.stalled(steps=2)
    now[0] = 92.0
    assert watch.stalled(steps=2) and "no training step for 60s" in watch.reason


def test_a_lost_trainer_node_restarts_a_split_run_from_its_checkpoint(tmp_path):
    # The trainer's own actor dies with its node: Ray's node-death text, a non-zero exit.
    plan = split_plan(tmp_path, "lost-once")
    code, out, events, hooks = drive(plan)
    assert code == ExitCode.OK, out
    assert [e["reason"] for e in events if e["event"] == "trainer_exit"] == ["node_lost", "completed"]
    assert hooks.waits == 2 and "resumed from step 1" in out


def test_an_exit_0_whose_checkpoint_is_the_last_step_is_the_runs_end(tmp_path):
    # A split run that reached its last step and lost a node on the way out, or NeMo RL resumed
    # from its last checkpoint (it prints no end line then): the checkpoint decides, not a restart.
    hooks = FakeHooks(dead=[[dead_node()]])
    plan = split_plan(tmp_path, "split-lost-then-exit-0", total_steps=1,
                      completion_text=NEMO_RL_ASYNC_COMPLETION_TEXT)
    code, out, events, hooks = drive(plan, hooks)
    assert code == ExitCode.OK, out
    [exit_event] = [e for e in events if e["event"] == "trainer_exit"]
    assert exit_event["reason"] == "completed" and exit_event["last_checkpoint_step"] == 1
