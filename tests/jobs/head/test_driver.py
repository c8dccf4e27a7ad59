"""The run driver (jobs/head/driver.py) and its plan (jobs/contract/run_plan.py) without Ray: classification, restarts,
budget, records and the bad inputs. The GPU wait is a fake hook here; against a real Ray head
(the real jobs.wait_for_gpus, Ray job submission, KubeRay's submitter script):
tests/jobs/head/test_driver_ray.py."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from jobs.contract.exit_codes import ExitCode
from jobs.contract.records import recoveries_from_log, restarts_from_log
from jobs.contract.run_plan import RUN_COMMAND, SHELL_SAFE, Command, RunPlan, RunPlanError, load_plan, plan_from_dict
from jobs.head import driver as driver_mod
from jobs.head import driver_main
from jobs.head.checkpoints import last_checkpoint_step
from jobs.head.failures import DeadNode, RestartPolicy
from jobs.head.run_records import read_restarts
from tests.conftest import ROOT

FAKE_TRAINER = str(Path(__file__).resolve().parents[1] / "fake_trainer.py")


def make_plan(tmp_path: Path, mode: str, **changes) -> RunPlan:
    checkpoints = tmp_path / "checkpoints" / "exp-12345678"
    plan = RunPlan(run_id="exp-12345678", attempt=1, framework="verl",
                   run_dir=str(tmp_path / "runs" / "exp-12345678"), checkpoint_dir=str(checkpoints),
                   prepare=None, gpus=2, gpus_per_node=2, gpu_wait_seconds=30,
                   trainer=Command(argv=(sys.executable, FAKE_TRAINER, mode, str(checkpoints))),
                   deadline_seconds=600, max_restarts=3, stop_grace_seconds=1,
                   backoff_base_seconds=0.01, backoff_cap_seconds=0.02, gpu_poll_seconds=0.5,
                   node_settle_seconds=0)
    return dataclasses.replace(plan, **changes)


class FakeHooks:
    """The driver's hooks without Ray: GPU wait codes, gate codes, and the dead nodes the cluster
    would report after each failed start (a list per query, or a function of the query's `since`
    that returns one; none by default)."""

    def __init__(self, gpu_codes=(), dead=(), gate_codes=()):
        self.gpu_codes = list(gpu_codes)
        self.gate_codes = list(gate_codes)
        self.dead = [d if callable(d) else list(d) for d in dead]
        self.waits = 0
        self.gates = []
        self.pruned = []
        self.queries = 0

    def wait_for_gpus(self, plan, timeout, run):
        self.waits += 1
        return self.gpu_codes.pop(0) if self.gpu_codes else 0

    def fabric_gate(self, plan, run_dir, reuse, run):
        self.gates.append((plan.health, reuse, run_dir))
        if plan.health.get("raise"):
            raise OSError("cannot write the gate's settings")
        code = self.gate_codes.pop(0) if self.gate_codes else (0 if plan.health.get("pass", True) else 6)
        doc = {"passed": code == 0, "started": time.time(), "message": "fabric check failed on node x"}
        (Path(run_dir) / "health.json").write_text(json.dumps(doc))
        return code

    def prune_checkpoints(self, checkpoint_dir, keep):
        self.pruned.append((checkpoint_dir, keep))
        return []

    def dead_nodes(self, since, run):
        self.queries += 1
        entry = self.dead.pop(0) if self.dead else []
        return (entry(since) if callable(entry) else entry), None


def dead_node(node_id="a1b2c3d4e5f6a7b8", reason="AUTOSCALER_DRAIN_PREEMPTED", message="spot preempted",
              at: float | None = None):
    return DeadNode(node_id, "10.0.0.7", reason, message, time.time() if at is None else at)


def drive(plan: RunPlan, hooks=None, attempt=1):
    Path(plan.run_dir).mkdir(parents=True, exist_ok=True)
    out = io.StringIO()
    hooks = hooks or FakeHooks()
    code = driver_mod.Driver(plan, attempt=attempt, hooks=hooks, out=out).run()
    events = [json.loads(line) for line in (Path(plan.run_dir) / "events.jsonl").read_text().splitlines()]
    return code, out.getvalue(), events, hooks


# ---- the command and the plan -----------------------------------------------------------------

def test_the_command_is_shell_safe_and_names_the_plan():
    assert SHELL_SAFE.fullmatch(RUN_COMMAND)
    for bad in ("a && b", "a; b", "a  b", "a 'b'", "a $B", "a|b", "a >b", " a", "a\nb"):
        assert not SHELL_SAFE.fullmatch(bad), bad


def test_plan_round_trips_through_json(tmp_path):
    plan = make_plan(tmp_path, "ok")
    assert plan_from_dict(json.loads(plan.to_json())) == plan


@pytest.mark.parametrize("content,reason", [
    (None, "does not exist"),
    ("{not json", "is not JSON"),
    ('{"version": 1}', "missing"),
    ('{"version": 99}', "this driver reads version 1"),
    ("[]", "not a JSON object"),
])
def test_bad_plan_files_give_one_line_reasons(tmp_path, content, reason):
    path = tmp_path / "plan.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(RunPlanError, match=reason) as info:
        load_plan(path)
    assert "\n" not in str(info.value)


def test_an_unreadable_plan_is_a_one_line_reason(tmp_path):
    (tmp_path / "plan.json").mkdir()          # a directory where the file should be
    with pytest.raises(RunPlanError, match="is unreadable"):
        load_plan(tmp_path / "plan.json")


def test_plan_with_a_bad_field_names_it(tmp_path):
    data = json.loads(make_plan(tmp_path, "ok").to_json())
    data["trainer"]["argv"] = []
    with pytest.raises(RunPlanError, match=r"trainer.argv must be a non-empty list"):
        plan_from_dict(data)
    data = json.loads(make_plan(tmp_path, "ok").to_json())
    data["surprise"] = 1
    with pytest.raises(RunPlanError, match="unknown plan keys: surprise"):
        plan_from_dict(data)


# ---- the driver -------------------------------------------------------------------------------

def test_last_checkpoint_step_reads_verl_and_nemo_layouts(tmp_path):
    assert last_checkpoint_step(tmp_path / "missing") is None
    (tmp_path / "v").mkdir()
    (tmp_path / "v" / "global_step_20").mkdir()
    assert last_checkpoint_step(tmp_path / "v") == 20
    (tmp_path / "v" / "latest_checkpointed_iteration.txt").write_text("30")
    assert last_checkpoint_step(tmp_path / "v") == 30
    for name in ("step_5", "step_15", "tmp_step_25"):
        (tmp_path / "n" / name).mkdir(parents=True)
    assert last_checkpoint_step(tmp_path / "n") == 15


def test_a_lost_node_restarts_once_and_resumes_from_the_checkpoint(tmp_path):
    plan = make_plan(tmp_path, "lost-once")
    code, out, events, hooks = drive(plan)
    assert code == ExitCode.OK, out
    assert "resumed from step 1" in out and "step:2 - " in out
    assert hooks.waits == 2                       # waited for capacity again before the restart
    [restart] = read_restarts(plan.run_dir)
    assert restart["reason"] == "node_lost" and restart["exit_code"] == 1 and restart["trained"]
    assert restart["last_checkpoint_step"] == 1 and (restart["attempt"], restart["start"]) == (1, 0)
    assert "because its node has died" in restart["evidence"]
    assert restarts_from_log(out) == [restart]    # the same record, in the job log for the CLI
    names = [e["event"] for e in events]
    assert names == ["driver_start", "gpu_wait_start", "gpu_wait_end", "trainer_start", "first_step",
                     "trainer_exit", "gpu_wait_start", "gpu_wait_end", "trainer_start", "first_step",
                     "recovery", "trainer_exit", "driver_end"]
    assert [e["start"] for e in events if e["event"] == "trainer_start"] == [0, 1]
    assert [e["reason"] for e in events if e["event"] == "trainer_exit"] == ["node_lost", "completed"]
    assert events[-1]["exit_code"] == 0
    assert f"tensorboard dir {plan.run_dir}/tensorboard/attempt-1-start-1" in out
    [recovery] = [e for e in events if e["event"] == "recovery"]
    assert (recovery["start"], recovery["resumed_from_step"], recovery["first_new_step"]) == (1, 1, 2)
    assert recovery["steps_redone"] == 0 and recovery["loss_source"] == "trainer exit"
    assert 0 <= recovery["decision_s"] <= recovery["restart_s"] <= recovery["first_step_s"]
    assert recoveries_from_log(out)[0]["first_step_s"] == recovery["first_step_s"]


def test_a_crash_loop_ends_after_two_starts_from_the_same_checkpoint(tmp_path):
    plan = make_plan(tmp_path, "lost-no-progress", max_restarts=20)
    code, out, _events, hooks = drive(plan)
    assert code == ExitCode.CRASH_LOOP == 21, out
    assert len(read_restarts(plan.run_dir)) == 1 and hooks.waits == 2
    assert "no newer complete checkpoint" in out.splitlines()[-1]


def test_restarts_go_on_while_the_checkpoint_advances_up_to_max_restarts(tmp_path):
    plan = make_plan(tmp_path, "always-lost", max_restarts=2)
    code, out, _, _ = drive(plan)
    assert code == ExitCode.RESTARTS_EXHAUSTED
    assert [r["last_checkpoint_step"] for r in read_restarts(plan.run_dir)] == [1, 2]
    assert "after 2 restarts (gke-grpo:job.maxRestarts = 2)" in out


def test_a_node_lost_before_the_first_step_is_retried_twice_then_ends(tmp_path):
    plan = make_plan(tmp_path, "lost-early")
    code, out, events, hooks = drive(plan)
    assert code == ExitCode.CRASH_LOOP, out
    assert [r["trained"] for r in read_restarts(plan.run_dir)] == [False, False]
    # every restart is in the record, those that never reached a step too
    assert [(e["restart"], e["first_step_s"]) for e in events if e["event"] == "recovery"] == [(1, None), (2, None)]
    assert hooks.waits == 3 and "before the first training step 3 times" in out.splitlines()[-1]
    plan = make_plan(tmp_path / "b", "lost-early-once")
    code, out, _, hooks = drive(plan)
    assert code == ExitCode.OK and hooks.waits == 2, out


def test_the_backoff_resets_when_the_checkpoint_advances():
    policy = RestartPolicy(max_restarts=10, early_retries=2)
    assert policy.decide(trained=False, checkpoint=None) == (None, "restart")
    assert policy.decide(trained=False, checkpoint=None) == (None, "restart")
    assert policy.since_progress == 2                   # two early retries: the backoff grows
    assert policy.decide(trained=True, checkpoint=10)[0] is None
    assert policy.since_progress == 1                   # progress: back to the first delay
    assert policy.decide(trained=True, checkpoint=20)[0] is None and policy.since_progress == 1
    assert policy.decide(trained=True, checkpoint=20)[0] == ExitCode.CRASH_LOOP
    resumed = RestartPolicy.resumed(10, 2, [{"trained": True, "last_checkpoint_step": 20}])
    assert resumed.decide(trained=True, checkpoint=20)[0] == ExitCode.CRASH_LOOP


@pytest.mark.parametrize("mode,code,reason", [
    ("fail-early", ExitCode.BEFORE_FIRST_STEP, "before_first_step"),
    ("usage", ExitCode.USAGE, "usage_error"),
    ("worker-died", ExitCode.WORKER_CRASHED, "worker_crashed"),
    ("oom", ExitCode.OUT_OF_MEMORY, "out_of_memory"),
    ("hang", ExitCode.COLLECTIVE_TIMEOUT, "collective_timeout"),
])
def test_what_would_fail_again_is_not_restarted(tmp_path, mode, code, reason):
    plan = make_plan(tmp_path, mode)
    result, out, events, hooks = drive(plan)
    assert result == code, out
    assert read_restarts(plan.run_dir) == [] and hooks.waits == 1
    assert [e["reason"] for e in events if e["event"] == "trainer_exit"] == [reason]
    assert "not restarted" in out.splitlines()[-1]
    assert hooks.queries == (0 if mode == "usage" else 1)   # the cluster was asked, read-only


@pytest.mark.parametrize("mode", ["worker-died", "hang"])
def test_a_crash_or_a_hang_is_a_lost_node_when_the_cluster_lost_one(tmp_path, mode):
    plan = make_plan(tmp_path, mode, max_restarts=1)
    # Each node died during the start the driver asks about (at its `since`), however late on a
    # loaded machine that start began: a time taken here could fall before the second start.
    hooks = FakeHooks(dead=[lambda since: [dead_node(at=since)], lambda since: [dead_node("b" * 16, at=since)]])
    code, out, events, hooks = drive(plan, hooks)
    assert code == ExitCode.RESTARTS_EXHAUSTED, out            # restarted once, then the budget
    [restart] = read_restarts(plan.run_dir)
    assert restart["lost_nodes"] == ["a1b2c3d4e5f6a7b8"]
    assert "AUTOSCALER_DRAIN_PREEMPTED: spot preempted" in restart["evidence"]
    assert restart["loss_at"] <= events[[e["event"] for e in events].index("trainer_exit")]["time"] + 1


def test_a_failure_that_could_be_a_leaving_node_asks_the_cluster_until_it_settles(tmp_path):
    plan = make_plan(tmp_path, "worker-died", node_settle_seconds=30)
    naps = []
    hooks = FakeHooks(dead=[[], [], [dead_node()]])
    Path(plan.run_dir).mkdir(parents=True)
    driver = driver_mod.Driver(plan, attempt=1, hooks=hooks, out=io.StringIO(), sleep=naps.append)
    driver.policy.max_restarts = 0
    assert driver.run() == ExitCode.RESTARTS_EXHAUSTED      # the third answer named the node
    assert hooks.queries == 3 and naps[:2] == [5.0, 5.0]


def test_the_budget_stops_an_overrunning_trainer(tmp_path):
    """A trainer that ignores SIGTERM is SIGKILLed after the grace period. It ignores SIGTERM from
    its first instruction (a disposition set to ignore survives exec), so the outcome does not
    depend on how fast Python starts: with a second suite beside this one, the 6 s budget once
    ran out before the fake trainer had installed its own handler (2026-12-06)."""
    plan = make_plan(tmp_path, "overrun", deadline_seconds=6, stop_grace_seconds=0.5)
    ignoring = ("sh", "-c", "trap '' TERM; exec \"$0\" \"$@\"", *plan.trainer.argv)
    plan = dataclasses.replace(plan, trainer=dataclasses.replace(plan.trainer, argv=ignoring))
    code, out, events, _ = drive(plan)
    assert code == ExitCode.DEADLINE
    names = [e["event"] for e in events]
    assert names[-3:] == ["trainer_exit", "deadline", "driver_end"]
    [ended] = [e for e in events if e["event"] == "trainer_exit"]
    assert ended["exit_code"] == -signal.SIGKILL          # the grace period, then SIGKILL
    assert "time budget" in out.splitlines()[-1]


def test_gpu_wait_timeout_ends_the_attempt_with_exit_3(tmp_path):
    code, _out, events, _ = drive(make_plan(tmp_path, "ok"), FakeHooks(gpu_codes=[3]))
    assert code == ExitCode.GPU_WAIT_TIMEOUT
    assert "trainer_start" not in [e["event"] for e in events]


def test_prepare_runs_before_the_gpu_wait(tmp_path):
    marker = tmp_path / "prepared"
    plan = make_plan(tmp_path, "ok", prepare=Command(argv=(sys.executable, "-c", f"open({str(marker)!r}, 'w')")))
    code, _, events, _ = drive(plan)
    assert code == 0 and marker.exists()
    names = [e["event"] for e in events]
    assert names.index("prepare_end") < names.index("gpu_wait_start") < names.index("trainer_start")


def test_failed_prepare_never_waits_for_gpus(tmp_path):
    plan = make_plan(tmp_path, "ok", prepare=Command(argv=(sys.executable, "-c", "raise SystemExit(4)")))
    code, _out, _, hooks = drive(plan)
    assert code == ExitCode.PREPARE_FAILED and hooks.waits == 0


def test_hooks_are_called_only_when_the_plan_says_so(tmp_path):
    _, _, events, hooks = drive(make_plan(tmp_path / "a", "ok"))
    assert hooks.gates == [] and hooks.pruned == []
    plan = make_plan(tmp_path / "b", "ok", health={"pass": True}, prune_checkpoints_keep=2)
    _, _, events, hooks = drive(plan)
    assert hooks.gates == [({"pass": True}, False, Path(plan.run_dir))]
    assert hooks.pruned == [(Path(plan.checkpoint_dir), 2)]
    assert {"health_start", "health_end", "checkpoint_prune"} <= {e["event"] for e in events}
    code, out, _, _ = drive(make_plan(tmp_path / "c", "ok", health={"pass": False}))
    assert code == ExitCode.HEALTH_GATE_FAILED and "fabric check failed" in out
    code, out, _, _ = drive(make_plan(tmp_path / "d", "ok", health={"raise": True}))
    assert code == ExitCode.HEALTH_GATE_FAILED == 6
    assert "health gate could not run (exit 6): OSError: cannot write" in out.splitlines()[-1]


def test_the_gate_measures_the_first_start_and_a_restart_only_on_other_nodes(tmp_path):
    plan = make_plan(tmp_path, "lost-once", health={"pass": True})
    code, out, events, hooks = drive(plan)
    assert code == ExitCode.OK, out
    # first start: a full gate; the restart: the gate keeps a passing result of the same nodes
    assert [reuse for _, reuse, _ in hooks.gates] == [False, True]
    assert [e["reuse_on_same_nodes"] for e in events if e["event"] == "health_start"] == [False, True]


def test_attempt_comes_from_the_submission_id(tmp_path):
    plan = make_plan(tmp_path, "ok")
    assert driver_main.attempt_of(plan, None) == 1
    assert driver_main.attempt_of(plan, "exp-12345678-attempt-4") == 4
    assert driver_main.attempt_of(plan, "other-run-attempt-1") is None
    env = {"RAY_JOB_CONFIG_JSON_ENV_VAR": json.dumps(
        {"runtime_env": {}, "metadata": {"job_submission_id": "exp-12345678-attempt-2"}})}
    assert driver_main.submission_id_from_env(env) == "exp-12345678-attempt-2"


# ---- bad input, end to end (python3 -m jobs.run, as the head runs it) ----------------------------

def run_driver(plan_path, *extra, env=None):
    proc = subprocess.run([sys.executable, "-m", "jobs.run", "--plan", str(plan_path), *extra],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    return proc.returncode, proc.stdout + proc.stderr


def _write(tmp_path, plan):
    path = tmp_path / "plan.json"
    path.write_text(plan.to_json())
    return path


def _checkpointed(plan):
    root = Path(plan.checkpoint_dir)
    (root / "global_step_10" / "actor").mkdir(parents=True)
    (root / "global_step_10" / "actor" / "model.pt").write_text("weights")
    (root / "latest_checkpointed_iteration.txt").write_text("10")
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def _still_there(plan, before):
    root = Path(plan.checkpoint_dir)
    assert sorted(str(p.relative_to(root)) for p in root.rglob("*")) == before


def _one_clean_line(output, code_name):
    assert "Traceback" not in output
    [last] = [line for line in output.splitlines() if line.startswith("[jobs.run] FAILED")]
    assert f"{code_name})" in last
    return last


def test_missing_plan_file(tmp_path):
    code, output = run_driver(tmp_path / "nope.json")
    assert code == ExitCode.USAGE == 2
    assert "does not exist" in _one_clean_line(output, "USAGE")


def test_unreadable_plan_file(tmp_path):
    (tmp_path / "plan.json").mkdir()
    code, output = run_driver(tmp_path / "plan.json")
    assert code == ExitCode.USAGE and "is unreadable" in _one_clean_line(output, "USAGE")


def test_plan_of_another_run(tmp_path):
    path = _write(tmp_path, make_plan(tmp_path, "ok"))
    env = {**_env(), "RAY_JOB_CONFIG_JSON_ENV_VAR": json.dumps(
        {"metadata": {"job_submission_id": "someone-else-attempt-1"}})}
    code, output = run_driver(path, "--plan-wait-seconds", "0.1", env=env)
    assert code == ExitCode.USAGE
    assert "is for run exp-12345678, but this Ray job is someone-else-attempt-1" in _one_clean_line(output, "USAGE")


def _env():
    import os
    return {k: v for k, v in os.environ.items() if k != "RAY_JOB_CONFIG_JSON_ENV_VAR"}


def test_trainer_command_that_does_not_exist(tmp_path):
    plan = make_plan(tmp_path, "ok", trainer=Command(argv=("no-such-trainer-binary", "--x")))
    before = _checkpointed(plan)
    code, output = run_driver(_write(tmp_path, plan), env=_env())
    assert code == ExitCode.TRAINER_NOT_FOUND == 14
    assert "'no-such-trainer-binary' is not on the PATH" in _one_clean_line(output, "TRAINER_NOT_FOUND")
    _still_there(plan, before)


def test_trainer_working_directory_that_does_not_exist(tmp_path):
    plan = make_plan(tmp_path, "ok")
    plan = dataclasses.replace(plan, trainer=dataclasses.replace(plan.trainer, cwd="/opt/nowhere-x"))
    code, output = run_driver(_write(tmp_path, plan), env=_env())
    assert code == ExitCode.TRAINER_NOT_FOUND
    assert "/opt/nowhere-x does not exist" in _one_clean_line(output, "TRAINER_NOT_FOUND")


def test_checkpoint_directory_that_is_not_writable(tmp_path):
    blocker = tmp_path / "checkpoints" / "a-file"
    blocker.parent.mkdir()
    blocker.write_text("not a directory")
    plan = make_plan(tmp_path, "ok", checkpoint_dir=str(blocker / "checkpoints"))
    code, output = run_driver(_write(tmp_path, plan), env=_env())
    assert code == ExitCode.NOT_WRITABLE == 16
    assert "is not writable" in _one_clean_line(output, "NOT_WRITABLE")
    assert blocker.read_text() == "not a directory"


def test_a_failing_trainer_deletes_no_checkpoint(tmp_path):
    plan = make_plan(tmp_path, "fail-early")
    before = _checkpointed(plan)
    code, output, _, _ = drive(plan)
    assert code == ExitCode.BEFORE_FIRST_STEP
    _one_clean_line(output, "BEFORE_FIRST_STEP")
    _still_there(plan, before)


def test_verl_checkpoints_are_pruned_before_the_start_by_jobs_checkpoints(tmp_path):
    class PruneForReal(FakeHooks):
        prune_checkpoints = driver_mod.DefaultHooks.prune_checkpoints

    plan = make_plan(tmp_path, "ok", prune_checkpoints_keep=1)
    root = Path(plan.checkpoint_dir)
    for n in (1, 2, 3):      # earlier starts' leftovers that verl's own rotation forgot
        (root / f"global_step_{n}" / "actor").mkdir(parents=True)
    (root / "latest_checkpointed_iteration.txt").write_text("3")
    code, out, events, _ = drive(plan, PruneForReal())
    assert code == ExitCode.OK, out
    [prune] = [e for e in events if e["event"] == "checkpoint_prune"]
    assert prune["removed"] == [str(root / "global_step_1"), str(root / "global_step_2")]
    assert "resumed from step 3" in out and (root / "global_step_3").is_dir()


# ---- stops, in every stage ----------------------------------------------------------------------

SLEEPER = (sys.executable, "-c", "import time; time.sleep(60)")


class SlowHooks(FakeHooks):
    """The GPU wait or the gate as a real child that would run for a minute."""

    def __init__(self, slow: str):
        super().__init__()
        self.slow = slow

    def wait_for_gpus(self, plan, timeout, run):
        self.waits += 1
        return run(list(SLEEPER))[0] if self.slow == "gpu wait" else 0

    def fabric_gate(self, plan, run_dir, reuse, run):
        return run(list(SLEEPER))[0] if self.slow == "gate" else 0


@pytest.mark.parametrize("stage,changes,reason_stage", [
    ("prepare", {"prepare": Command(argv=SLEEPER)}, "data and model staging"),
    ("gpu wait", {}, "the GPU wait"),
    ("gate", {"health": {"pass": True}}, "the health gate"),
    ("trainer", {"trainer": None}, None),
    ("backoff", {"backoff_base_seconds": 60.0, "backoff_cap_seconds": 60.0}, "the backoff before a restart"),
])
def test_a_stop_is_recorded_in_every_stage(tmp_path, stage, changes, reason_stage):
    mode = "lost-once" if stage == "backoff" else "overrun"
    plan = make_plan(tmp_path, mode, **{k: v for k, v in changes.items() if v is not None})
    Path(plan.run_dir).mkdir(parents=True)
    out = io.StringIO()
    driver = driver_mod.Driver(plan, attempt=1, hooks=SlowHooks(stage), out=out)
    result = {}
    thread = threading.Thread(target=lambda: result.setdefault("code", driver.run()))
    started = time.monotonic()
    thread.start()
    events_file = Path(plan.run_dir) / "events.jsonl"
    marker = {"prepare": "prepare_start", "gpu wait": "gpu_wait_start", "gate": "health_start",
              "trainer": "first_step", "backoff": "trainer_exit"}[stage]
    while marker not in (events_file.read_text() if events_file.exists() else ""):
        assert time.monotonic() - started < 30, out.getvalue()
        time.sleep(0.05)
    time.sleep(0.3)
    driver.stop_requested.set()                  # what the SIGTERM handler does
    thread.join(timeout=20)
    assert result.get("code") == ExitCode.TERMINATED == 143, out.getvalue()
    events = [json.loads(line) for line in events_file.read_text().splitlines()]
    exits = [e for e in events if e["event"] == "trainer_exit"]
    assert exits[-1]["reason"] == "terminated" and events[-1]["event"] == "driver_end"
    assert events[-1]["exit_code"] == 143
    if reason_stage:
        assert exits[-1]["stage"] == reason_stage and f"during {reason_stage}" in events[-1]["message"]
    assert time.monotonic() - started < 25         # nothing waited out its minute


def test_children_die_with_the_driver(tmp_path):
    """A child in its own session is out of the process group Ray's supervisor kills: it must
    die with the driver (PR_SET_PDEATHSIG), or a trainer would outlive its driver."""
    pidfile = tmp_path / "child.pid"
    child_code = tmp_path / "child.py"
    child_code.write_text(f"import os, time\nopen({str(pidfile)!r}, 'w').write(str(os.getpid()))\n"
                          "time.sleep(60)\n")
    script = ("import sys, time\n"
              "from jobs.head.children import spawn\n"
              f"spawn([sys.executable, {str(child_code)!r}])\n"
              "time.sleep(60)\n")
    driver = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT)
    deadline = time.monotonic() + 20
    while not pidfile.exists() or not pidfile.read_text():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    child = int(pidfile.read_text())
    driver.kill()
    driver.wait()
    deadline = time.monotonic() + 10
    while _alive(child):
        assert time.monotonic() < deadline, "the child outlived its driver"
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return not f.read().rsplit(") ", 1)[1].startswith(("Z", "X"))
    except OSError:
        return False


# ---- a driver resubmitted with the same submission id ----------------------------------------

def test_a_resubmitted_driver_continues_after_the_one_that_was_killed(tmp_path):
    plan = make_plan(tmp_path, "ok")
    run_dir = Path(plan.run_dir)
    run_dir.mkdir(parents=True)
    # what a driver killed with its head left: start 0 trained and was never recorded as ended
    records = driver_mod.Records(run_dir, 1)
    t0 = time.time() - 100
    records.event("driver_start", 0, at=t0, pid=1)
    records.event("trainer_start", 0, at=t0 + 10)
    records.event("first_step", 0, at=t0 + 20, step=1)
    board = run_dir / "tensorboard" / "attempt-1-start-0"
    board.mkdir(parents=True)
    (board / "events.out.tfevents.1").write_text("x")
    os.utime(board / "events.out.tfevents.1", (t0 + 30, t0 + 30))   # its last metrics
    (run_dir / "tensorboard" / "attempt-1-start-1").mkdir()   # a folder no record names
    before = (board / "events.out.tfevents.1").read_bytes()
    code, out, events, _ = drive(plan)
    assert code == ExitCode.OK, out
    assert "continuing after 1 earlier driver(s) of this attempt at start 2" in out
    assert [e["start"] for e in events if e["event"] == "trainer_start"] == [0, 2]
    lost = [e for e in events if e.get("reason") == "driver_lost"]
    assert len(lost) == 1 and lost[0]["start"] == 0 and lost[0]["estimated"] is True
    assert lost[0]["time"] == pytest.approx(t0 + 30)          # its last sign of life, not now
    assert [e["event"] for e in events].count("driver_lost") == 1
    assert (board / "events.out.tfevents.1").read_bytes() == before
    assert f"tensorboard dir {plan.run_dir}/tensorboard/attempt-1-start-2" in out


def test_backoff_is_exponential_and_capped():
    from jobs.head.failures import backoff_seconds

    assert [backoff_seconds(n, 30, 600) for n in (1, 2, 3, 5, 6, 20)] == [30, 60, 120, 480, 600, 600]
