"""The run driver (jobs/head/driver.py) and its plan (jobs/contract/run_plan.py) without Ray: classification, restarts,
budget, records and the bad inputs. The GPU wait is a fake hook here; against a real Ray head
(the real jobs.wait_for_gpus, Ray job submission, KubeRay's submitter script):
tests/jobs/head/test_driver_ray.py."""

from __future__ import annotations

import dataclasses
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from jobs.contract.exit_codes import ExitCode
from jobs.contract.records import restarts_from_log
from jobs.contract.run_plan import RUN_COMMAND, SHELL_SAFE, Command, RunPlan, RunPlanError, load_plan, plan_from_dict
from jobs.head import driver as driver_mod
from jobs.head.checkpoints import last_checkpoint_step
from jobs.head.failures import Reason, TrainerOutput, backoff_seconds, classify
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
                   backoff_base_seconds=0.01, backoff_cap_seconds=0.02, gpu_poll_seconds=0.5)
    return dataclasses.replace(plan, **changes)


class FakeHooks:
    def __init__(self, gpu_codes=()):
        self.gpu_codes = list(gpu_codes)
        self.waits = 0
        self.gates = []
        self.pruned = []

    def wait_for_gpus(self, plan, timeout):
        self.waits += 1
        return self.gpu_codes.pop(0) if self.gpu_codes else 0

    def fabric_gate(self, plan_health, nodes, gpus_per_node, run_dir):
        self.gates.append((plan_health, nodes, gpus_per_node, run_dir))
        if plan_health.get("raise"):
            raise RuntimeError("cannot connect to Ray")
        return type("Gate", (), {"passed": plan_health.get("pass", True), "exit_code": 7,
                                 "message": "fabric check failed on node x"})()

    def prune_checkpoints(self, checkpoint_dir, keep):
        self.pruned.append((checkpoint_dir, keep))
        return []


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


# ---- classification ---------------------------------------------------------------------------

def _output(*lines):
    out = TrainerOutput()
    for line in lines:
        out.feed(line + "\n")
    return out


STEP = "(TaskRunner pid=9) step:4 - critic/score/mean:0.5 - response_length/mean:10.0"


@pytest.mark.parametrize("line", [
    "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.",
    "The actor died because its node has died. Node Id: 1a2b",
    "ray.exceptions.NodeDiedError: Task failed because the node it was running on is dead or unavailable.",
    "[rank3]:[E1201 ProcessGroupNCCL.cpp:629] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(...)",
    "torch.distributed.DistBackendError: NCCL error in: ..., remote process exited or there was a network error",
    "ray.exceptions.ActorUnavailableError: The actor 12 is unavailable: RpcError",
])
def test_lost_workers_after_a_step_are_retried(line):
    assert classify(1, _output(STEP, line), attempt_saw_step=False)[0] == Reason.LOST_WORKER


def test_an_actor_that_fails_in_its_own_init_is_not_a_lost_worker():
    out = _output(STEP, "ray.exceptions.ActorDiedError: The actor died because of an error raised in "
                  "its creation task, ray::WorkerDict.__init__() ValueError: bad config")
    assert classify(1, out, attempt_saw_step=True)[0] == Reason.TRAINER_FAILED


def test_failures_before_the_first_step_are_not_retried():
    lost = _output("ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.")
    reason, why = classify(1, lost, attempt_saw_step=False)
    assert reason == Reason.BEFORE_FIRST_STEP and "looked like a lost worker" in why
    # ... but once the attempt saw a step (an earlier start), the same loss is retried
    assert classify(1, lost, attempt_saw_step=True)[0] == Reason.LOST_WORKER


@pytest.mark.parametrize("code,line", [(2, "usage: main_ppo.py [-h]"),
                                       (1, "Could not override 'trainer.x'."),
                                       (1, "omegaconf.errors.ConfigKeyError: Key 'x' is not in struct")])
def test_usage_errors_are_not_retried(code, line):
    assert classify(code, _output(STEP, line), attempt_saw_step=True)[0] == Reason.USAGE_ERROR


def test_completion_deadline_and_stop_win():
    out = _output(STEP)
    assert classify(0, out, attempt_saw_step=True)[0] == Reason.COMPLETED
    assert classify(-9, out, attempt_saw_step=True, deadline_hit=True)[0] == Reason.DEADLINE
    assert classify(-15, out, attempt_saw_step=True, terminated=True)[0] == Reason.TERMINATED


def test_backoff_is_exponential_and_capped():
    assert [backoff_seconds(n, 30, 600) for n in (1, 2, 3, 5, 6, 20)] == [30, 60, 120, 480, 600, 600]


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


# ---- the driver -------------------------------------------------------------------------------

def test_lost_worker_restarts_once_and_resumes_from_the_checkpoint(tmp_path):
    plan = make_plan(tmp_path, "lost-once")
    code, out, events, hooks = drive(plan)
    assert code == ExitCode.OK, out
    assert "resumed from step 1" in out and "step:2 - " in out
    assert hooks.waits == 2                       # waited for capacity again before the restart
    [restart] = read_restarts(plan.run_dir)
    assert restart["reason"] == "lost_worker" and restart["exit_code"] == 1
    assert restart["last_checkpoint_step"] == 1 and (restart["attempt"], restart["start"]) == (1, 0)
    assert restarts_from_log(out) == [restart]    # the same record, in the job log for the CLI
    names = [e["event"] for e in events]
    assert names == ["driver_start", "gpu_wait_start", "gpu_wait_end", "trainer_start", "trainer_exit",
                     "gpu_wait_start", "gpu_wait_end", "trainer_start", "trainer_exit", "driver_end"]
    assert [e["start"] for e in events if e["event"] == "trainer_start"] == [0, 1]
    assert [e["reason"] for e in events if e["event"] == "trainer_exit"] == ["lost_worker", "completed"]
    assert events[-1]["exit_code"] == 0
    assert f"tensorboard dir {plan.run_dir}/tensorboard/attempt-1-start-1" in out


def test_restarts_stop_at_max_restarts(tmp_path):
    plan = make_plan(tmp_path, "always-lost", max_restarts=2)
    code, out, _, _ = drive(plan)
    assert code == ExitCode.RESTARTS_EXHAUSTED
    assert len(read_restarts(plan.run_dir)) == 2
    assert "after 2 restarts (gke-grpo:job.maxRestarts = 2)" in out


@pytest.mark.parametrize("mode,code", [("fail-early", ExitCode.BEFORE_FIRST_STEP),
                                       ("lost-early", ExitCode.BEFORE_FIRST_STEP),
                                       ("usage", ExitCode.USAGE)])
def test_what_would_fail_again_is_not_restarted(tmp_path, mode, code):
    plan = make_plan(tmp_path, mode)
    result, out, _events, hooks = drive(plan)
    assert result == code, out
    assert read_restarts(plan.run_dir) == [] and hooks.waits == 1
    assert "not retried" in out.splitlines()[-1]


def test_the_budget_stops_an_overrunning_trainer(tmp_path):
    plan = make_plan(tmp_path, "overrun", deadline_seconds=1.5, stop_grace_seconds=0.5)
    code, out, events, _ = drive(plan)
    assert code == ExitCode.DEADLINE
    assert "SIGTERM ignored" in out                  # the grace period, then SIGKILL
    assert [e["event"] for e in events][-3:] == ["trainer_exit", "deadline", "driver_end"]
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
    assert hooks.gates == [({"pass": True}, 1, 2, Path(plan.run_dir))]
    assert hooks.pruned == [(Path(plan.checkpoint_dir), 2)]
    assert {"health_start", "health_end", "checkpoint_prune"} <= {e["event"] for e in events}
    code, out, _, _ = drive(make_plan(tmp_path / "c", "ok", health={"pass": False}))
    assert code == ExitCode.HEALTH_GATE_FAILED and "fabric check failed" in out
    code, out, _, _ = drive(make_plan(tmp_path / "d", "ok", health={"raise": True}))
    assert code == ExitCode.HEALTH_GATE_FAILED == 6
    assert "health gate could not run: RuntimeError: cannot connect to Ray" in out.splitlines()[-1]


def test_attempt_comes_from_the_submission_id(tmp_path):
    plan = make_plan(tmp_path, "ok")
    assert driver_mod.attempt_of(plan, None) == 1
    assert driver_mod.attempt_of(plan, "exp-12345678-attempt-4") == 4
    assert driver_mod.attempt_of(plan, "other-run-attempt-1") is None
    env = {"RAY_JOB_CONFIG_JSON_ENV_VAR": json.dumps(
        {"runtime_env": {}, "metadata": {"job_submission_id": "exp-12345678-attempt-2"}})}
    assert driver_mod.submission_id_from_env(env) == "exp-12345678-attempt-2"


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
    assert code == ExitCode.TRAINER_NOT_FOUND == 15
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
