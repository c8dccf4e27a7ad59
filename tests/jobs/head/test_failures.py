"""Why a trainer start ended (jobs/head/failures.py): Ray 2.54's own texts for a node that died, a
worker process that died, its memory monitor's kill, and PyTorch's NCCL watchdog, each quoted as
Ray printed it when observed live (see the patterns' sources); a node the cluster reports dead
turns a crash or a collective failure into a lost node. The same texts come from a real Ray head
in tests/jobs/head/test_recovery_ray.py."""

from __future__ import annotations

import pytest

from jobs.head.failures import DeadNode, Reason, TrainerOutput, classify

STEP = "(TaskRunner pid=9) step:4 - critic/score/mean:0.5 - response_length/mean:10.0"
NODE_DIED = ["ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.",
             "\tclass_name: A", "\tactor_id: 29343792b7abf54088d453ff01000000",
             "The actor died because its node has died. Node Id: 072804ea",
             "\tthe actor's node was terminated expectedly: received SIGTERM"]
NODE_GONE = ["The actor died because its node has died. Node Id: 562c289f",
             "\tthe actor's node was terminated unexpectedly: health check failed due to missing too "
             "many heartbeats"]
PREEMPTED = ["The actor died because its node has died. Node Id: 8bc4462a",
             "\tthe actor's node was preempted: spot preempted (test)"]
TASK_NODE_DIED = ["ray.exceptions.NodeDiedError: Task failed because the node it was running on is dead "
                  "or unavailable. Node IP: 10.0.0.3, node ID: 1a2b. This can happen if the node was "
                  "preempted, had a hardware failure, or its raylet crashed unexpectedly."]
# Ray 2.49.2's wording (its _raylet.so, the NeMo RL v0.5.0 image), without the exception's name.
TASK_NODE_DIED_2492 = ["Task failed due to the node (where this task was running) 1a2b was dead or "
                       "unavailable."]
WORKER_DIED = ["ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.",
               "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR "
               "Worker exit detail: Worker unexpectedly exits with a connection error code 2. End of "
               "file. Some common causes include: (1) the process was killed by the OOM killer due to "
               "high memory usage, (2) ray stop --force was called, or (3) the worker crashed "
               "unexpectedly due to SIGSEGV or another unexpected error."]
RAY_OOM = ["ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.",
           "Memory on the node (IP: 192.0.2.2, ID: 1cbf) where the lease was running was 7.07GB / "
           "23.54GB (0.300509), which exceeds the memory usage threshold of 0.3."]
# Ray 2.55.1's raylet (the verl-0.9.1 and nemo-rl-0.7.0 images): the format string read from the
# wheel's raylet binary, "%d worker(s) were killed due to the node running low on memory. %s, %s",
# filled in; no OutOfMemoryError line with it.
RAY_2551_OOM = ["(raylet) 1 worker(s) were killed due to the node running low on memory. Killing "
                "1 worker(s), kill details: lease 12 on 192.0.2.2, suggestions: reduce the batch"]
CUDA_OOM = ["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
            "total capacity of 139.81 GiB of which 1.02 GiB is free."]
WATCHDOG = ["[rank3]:[E1201 ProcessGroupNCCL.cpp:629] [Rank 3] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=1, OpType=BROADCAST, NumelIn=131072000, NumelOut=131072000, "
            "Timeout(ms)=600000) ran for 600081 milliseconds before timing out."]
UNAVAILABLE = ["ray.exceptions.ActorUnavailableError: The actor 12 is unavailable: RpcError: RPC error: "
               "failed to connect to all addresses. The task may or may not have been executed on the actor."]


def output(*lines: str) -> TrainerOutput:
    out = TrainerOutput()
    for line in lines:
        out.feed(line + "\n")
    return out


def dead() -> tuple[DeadNode, ...]:
    return (DeadNode("8bc4462a00ff", "10.0.0.3", "AUTOSCALER_DRAIN_PREEMPTED", "spot preempted", 1.0),)


@pytest.mark.parametrize("lines", [NODE_DIED, NODE_GONE, PREEMPTED, TASK_NODE_DIED, TASK_NODE_DIED_2492],
                         ids=["pod-deleted", "node-vanished", "preempted", "task-node-died",
                              "task-node-died-ray-2.49.2"])
def test_ray_node_death_texts_are_a_lost_node(lines):
    reason, evidence = classify(1, output(STEP, *lines), attempt_saw_step=True)
    assert reason == Reason.NODE_LOST and evidence.strip() in "\n".join(lines)
    # before the first step too: a Spot node can go during model load
    assert classify(1, output(*lines), attempt_saw_step=False)[0] == Reason.NODE_LOST


@pytest.mark.parametrize("lines,reason", [
    (WORKER_DIED, Reason.WORKER_CRASHED),
    (["ray.exceptions.WorkerCrashedError: The worker died unexpectedly while executing this task. "
      "Check python-core-worker-*.log files for more information."], Reason.WORKER_CRASHED),
    (UNAVAILABLE, Reason.WORKER_CRASHED),
    (RAY_OOM, Reason.OUT_OF_MEMORY),
    (RAY_2551_OOM, Reason.OUT_OF_MEMORY),
    (CUDA_OOM, Reason.OUT_OF_MEMORY),
    (WATCHDOG, Reason.COLLECTIVE_TIMEOUT),
    (["torch.distributed.DistBackendError: NCCL error in: ..., remote process exited or there was a "
      "network error"], Reason.COLLECTIVE_TIMEOUT),
], ids=["segfault-or-kill", "task-worker", "unavailable", "ray-oom", "ray-2.55.1-oom", "cuda-oom", "watchdog",
      "dist-backend"])
def test_a_crash_an_oom_or_a_hang_is_not_a_lost_node(lines, reason):
    got, evidence = classify(1, output(STEP, *lines), attempt_saw_step=True)
    assert got == reason, evidence
    assert got != Reason.NODE_LOST


@pytest.mark.parametrize("lines", [WORKER_DIED, WATCHDOG, UNAVAILABLE])
def test_a_crash_or_a_collective_failure_is_a_lost_node_when_a_node_left(lines):
    reason, evidence = classify(1, output(STEP, *lines), attempt_saw_step=True, dead_nodes=dead())
    assert reason == Reason.NODE_LOST
    assert "AUTOSCALER_DRAIN_PREEMPTED: spot preempted" in evidence and "trainer: " in evidence


def test_an_actor_that_fails_in_its_own_init_is_not_a_lost_node():
    out = output(STEP, "ray.exceptions.ActorDiedError: The actor died because of an error raised in "
                 "its creation task, ray::WorkerDict.__init__() ValueError: bad config")
    assert classify(1, out, attempt_saw_step=True)[0] == Reason.TRAINER_FAILED


def test_an_unexplained_failure_before_the_first_step_is_not_retried():
    reason, why = classify(1, output("RuntimeError: CUDA error: no kernel image"), attempt_saw_step=False)
    assert reason == Reason.BEFORE_FIRST_STEP and "first training step" in why
    assert classify(1, output("RuntimeError: x"), attempt_saw_step=True)[0] == Reason.TRAINER_FAILED


@pytest.mark.parametrize("code,line", [(2, "usage: main_ppo.py [-h]"),
                                       (1, "Could not override 'trainer.x'."),
                                       (1, "omegaconf.errors.ConfigKeyError: Key 'x' is not in struct")])
def test_usage_errors_are_not_retried_even_with_a_dead_node(code, line):
    assert classify(code, output(STEP, line), attempt_saw_step=True, dead_nodes=dead())[0] == Reason.USAGE_ERROR


def test_completion_deadline_and_stop_win():
    out = output(STEP, *NODE_DIED)
    assert classify(0, out, attempt_saw_step=True)[0] == Reason.COMPLETED
    assert classify(-9, out, attempt_saw_step=True, deadline_hit=True)[0] == Reason.DEADLINE
    assert classify(-15, out, attempt_saw_step=True, terminated=True)[0] == Reason.TERMINATED


def test_steps_are_counted_from_both_frameworks_lines():
    out = output("===== Step 3/100 =====", STEP)
    assert (out.steps, out.first_step, out.last_step) == (2, 3, 4)


def test_the_node_query_reads_ray_nodes_death_fields():
    """jobs/head/node_deaths.py on the shape of ray.nodes() in Ray 2.54.0 (observed: DeathReason is
    common.proto's NodeDeathInfo.Reason as an int, DeathReasonMessage its text)."""
    from jobs.head.node_deaths import dead_nodes

    nodes = [{"Alive": True, "NodeID": "head", "DeathReason": 0},
             {"Alive": False, "NodeID": "old", "NodeManagerAddress": "10.0.0.2", "DeathReason": 2,
              "DeathReasonMessage": "health check failed due to missing too many heartbeats"},
             {"Alive": False, "NodeID": "new", "NodeManagerAddress": "10.0.0.3", "DeathReason": 3,
              "DeathReasonMessage": "spot preempted"},
             {"Alive": False, "NodeID": "idle", "DeathReason": 4, "DeathReasonMessage": "idle"},
             {"Alive": False, "NodeID": "unknown-time", "DeathReason": 1,
              "DeathReasonMessage": "received SIGTERM"}]
    found = dead_nodes(nodes, {"old": 100.0, "new": 200.0, "idle": 200.0}, since=150.0)
    assert [(n["node_id"], n["reason"], n["died_at"]) for n in found] == [
        ("new", "AUTOSCALER_DRAIN_PREEMPTED", 200.0), ("unknown-time", "EXPECTED_TERMINATION", None)]


# The saves before a capacity's end (jobs/contract/capacity_end.py). verl v0.7.1 prints this from its
# TaskRunner actor (verl/trainer/ppo/ray_trainer.py fit), forwarded by Ray with the actor's prefix;
# NeMo RL v0.5.0 prints the other in its driver process after its save, then grpo_train returns
# (nemo_rl/algorithms/grpo.py), and run_grpo_math.py exits 0.
VERL_FORCED_SAVE = "\x1b[36m(TaskRunner pid=9)\x1b[0m Force saving checkpoint: ESI instance expiration approaching."
NEMO_RL_STEP = "========================= Step 41/500 ========================="
NEMO_RL_TIMEOUT = "Timeout has been reached, stopping training early"


def test_nemo_rls_stop_for_its_capacity_is_not_a_finished_run():
    seen = output(NEMO_RL_STEP, NEMO_RL_TIMEOUT)
    assert seen.capacity_stop == NEMO_RL_TIMEOUT and seen.last_step == 41
    reason, evidence = classify(0, seen, attempt_saw_step=True)
    assert reason == Reason.CAPACITY_ENDED and NEMO_RL_TIMEOUT in evidence
    # Without the line, an exit 0 is a finished run; with a failing exit, not a capacity stop.
    assert classify(0, output(NEMO_RL_STEP), attempt_saw_step=True)[0] == Reason.COMPLETED
    assert classify(1, seen, attempt_saw_step=True)[0] == Reason.TRAINER_FAILED
    # A stop requested meanwhile is still a stop.
    assert classify(0, seen, attempt_saw_step=True, terminated=True)[0] == Reason.TERMINATED


def test_verls_forced_save_is_seen_and_changes_no_verdict():
    seen = output(STEP, VERL_FORCED_SAVE)
    assert seen.forced_save == "(TaskRunner pid=9) Force saving checkpoint: ESI instance expiration approaching."
    assert classify(0, seen, attempt_saw_step=True)[0] == Reason.COMPLETED
    # verl trains on after its save; the node's end then shows as a lost node, and is restarted.
    assert classify(1, output(STEP, VERL_FORCED_SAVE, *NODE_GONE), attempt_saw_step=True)[0] == Reason.NODE_LOST
