"""The run driver: one process per attempt, on the (non-Spot) Ray head, that runs the whole run.

    python3 -m jobs.run --plan /opt/gke-grpo/run/plan.json

Stages, in order (the plan: jobs/contract/run_plan.py):
  1. prepare   stage the dataset and the model on /data (CPU, on the head; idempotent), BEFORE
               the GPU wait, so the GPUs never idle while a model downloads;
  2. GPU wait  the whole gang of GPU nodes is asked of the Ray autoscaler and held until the
               driver ends, whatever the reason (jobs/head/gpu_gang.py); then wait until the
               run's GPUs are available on separate nodes (bounded by the plan's
               gpu_wait_seconds; jobs/head/gpu_wait.py); each trainer start records the nodes
               and their capacity sources;
  3. [health]  the fabric/storage gate, when the plan has one (jobs/head/fabric_gate.py);
  4. [prune]   verl checkpoint pruning, when the plan asks (jobs/head/checkpoints.py);
  5. trainer   the framework's command as a child process (no shell), resuming from the run's
               checkpoint directory;
  6. after     once the trainer completed: the Hugging Face export and the GSM8K test-split
               evaluation, when the plan has them (jobs/head/export.py, jobs/head/evaluate.py),
               on the GPUs the run still holds; a failure there is recorded, not fatal;
  7. restarts  after a lost worker (node preempted or repaired, NCCL/collective timeout, actor
               died: jobs/head/failures.py) the driver waits for the GPUs again and restarts the
               trainer, up to the plan's max_restarts with capped exponential backoff. It does not
               restart what would fail again: a usage/config error, a failure before the
               attempt's first training step, an exhausted budget, or an unclassified crash.

The time budget (plan.deadline_seconds = gke-grpo:job.activeDeadlineSeconds) counts from the
first trainer start: at the deadline the trainer gets SIGTERM, then SIGKILL after
stop_grace_seconds, and the driver exits with DEADLINE.

Records, under the plan's run_dir (/data/runs/<run-id>/): events.jsonl (one JSON object per
stage boundary) and restarts.jsonl (one per restart), jobs/contract/records.py. Each restart is
also printed as one ``[jobs.run] RESTART {json}`` line: the jobs CLI reads it back from the Ray
job's log (``jobs status`` / ``list``).

Exit codes: jobs/contract/exit_codes.py (the Ray job FAILS with the driver's exit code).

Nothing here deletes a checkpoint but verl's pruning of old ``global_step_*`` directories the
plan asks for; the only other file the driver removes is its own write probe. Standard library
only (plus the ``ray`` CLI/SDK the child stages use): this runs in the framework image, without
Pulumi, GPUs or this repository's components/ and tools/.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TextIO

from jobs.contract.capacity import PLACEMENT_FILE
from jobs.contract.exit_codes import ExitCode
from jobs.contract.health import GateResult
from jobs.contract.records import DRIVER_LOG_PREFIX, RESTART_MARKER, TENSORBOARD_ENV, tensorboard_dir
from jobs.contract.run_plan import PLAN_PATH, Command, RunPlan, RunPlanError, load_plan
from jobs.head.checkpoints import check_writable, last_checkpoint_step
from jobs.head.failures import REASON_EXIT, Reason, TrainerOutput, backoff_seconds, classify
from jobs.head.run_records import Records

PREFIX = DRIVER_LOG_PREFIX
# Ray 2.54 gives a job's entrypoint its JobConfig, with the submission id in the metadata
# (ray/dashboard/modules/job/job_supervisor.py `_get_driver_env_vars`: RAY_JOB_CONFIG_JSON_ENV_VAR
# = {"runtime_env", "metadata": {"job_submission_id": ..., ...}}).
RAY_JOB_CONFIG_ENV = "RAY_JOB_CONFIG_JSON_ENV_VAR"
# How long a driver whose plan names another run waits for the mounted ConfigMap to catch up
# (the kubelet refreshes ConfigMap volumes within about a minute after `pulumi up`).
PLAN_REFRESH_SECONDS = 180.0


# ---- hooks ------------------------------------------------------------------------------------

class Hooks(Protocol):
    """What the driver calls outside itself; tests inject fakes, the defaults are below."""

    def wait_for_gpus(self, plan: RunPlan, timeout: float) -> int: ...

    def fabric_gate(self, plan_health: dict, nodes: int, gpus_per_node: int,
                    run_dir: Path) -> GateResult: ...

    def prune_checkpoints(self, checkpoint_dir: Path, keep: int) -> list[Path]: ...


class DefaultHooks:
    def hold_gpus(self, plan: RunPlan):
        """Ask for the whole gang and hold it (a child process; jobs/head/gpu_gang.py); the
        returned holder's release() clears the request."""
        from jobs.head.gpu_gang import GangHolder
        return GangHolder.start(math.ceil(plan.gpus / plan.gpus_per_node), plan.gpus_per_node)

    def wait_for_gpus(self, plan: RunPlan, timeout: float) -> int:
        argv = [sys.executable, "-m", "jobs.head.gpu_wait", "--gpus", str(plan.gpus),
                "--gpus-per-node", str(plan.gpus_per_node),
                "--timeout-seconds", str(max(timeout, 1.0)),
                "--poll-seconds", str(plan.gpu_poll_seconds), "--check-gang",
                "--placement-file", str(Path(plan.run_dir) / PLACEMENT_FILE)]
        return subprocess.run(argv).returncode

    def gpu_placement(self, plan: RunPlan) -> dict:
        """The nodes and capacity sources the last GPU wait found ({} if unknown)."""
        try:
            return json.loads((Path(plan.run_dir) / PLACEMENT_FILE).read_text())
        except (OSError, ValueError):
            return {}

    def fabric_gate(self, plan_health, nodes, gpus_per_node, run_dir):
        from jobs.head.fabric_gate import fabric_gate
        return fabric_gate(plan_health, nodes, gpus_per_node, run_dir)

    def prune_checkpoints(self, checkpoint_dir, keep):
        from jobs.head.checkpoints import prune_verl_checkpoints
        return prune_verl_checkpoints(checkpoint_dir, keep)


# ---- the trainer --------------------------------------------------------------------------------

@dataclass
class TrainerRun:
    exit_code: int
    output: TrainerOutput
    deadline_hit: bool = False
    terminated: bool = False


class Driver:
    def __init__(self, plan: RunPlan, *, attempt: int, hooks: Hooks | None = None,
                 out: TextIO | None = None, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep):
        self.plan = plan
        self.attempt = attempt
        self.hooks = hooks or DefaultHooks()
        self.out = out or sys.stdout
        self.clock = clock
        self.sleep = sleep
        self.run_dir = Path(plan.run_dir)
        self.records = Records(self.run_dir, attempt)
        self.start = 0
        self.first_trainer_start: float | None = None
        self.attempt_saw_step = False
        self.stop_requested = threading.Event()
        self._not_found = ""
        self._gang = None      # the held GPU gang request (jobs/head/gpu_gang.py GangHolder)

    def say(self, text: str) -> None:
        print(f"{PREFIX} {text}", file=self.out, flush=True)

    # -- budget ------------------------------------------------------------------------------
    def deadline_at(self) -> float | None:
        if self.plan.deadline_seconds is None or self.first_trainer_start is None:
            return None
        return self.first_trainer_start + self.plan.deadline_seconds

    def remaining(self) -> float:
        at = self.deadline_at()
        return math.inf if at is None else at - self.clock()

    def release_gpus(self) -> dict:
        """Clear the gang request (idempotent): the GPU workers idle out after the run. What
        driver_end records of it ({} when no gang was held)."""
        gang, self._gang = self._gang, None
        return {} if gang is None else {"gpu_release_exit_code": gang.release()}

    def end(self, code: ExitCode, message: str) -> int:
        released = self.release_gpus()
        self.say(f"{'done' if code == ExitCode.OK else 'FAILED'} (exit {int(code)} "
                 f"{code.name}): {message}")
        self.records.event("driver_end", self.start, exit_code=int(code), message=message,
                           **released)
        return int(code)

    # -- stages ------------------------------------------------------------------------------
    def run(self) -> int:
        plan = self.plan
        self.records.event("driver_start", 0, run_id=plan.run_id, pid=os.getpid())
        self.say(f"run {plan.run_id}, attempt {self.attempt}: plan has {plan.gpus} GPUs, "
                 f"max {plan.max_restarts} restarts, budget "
                 f"{'none' if plan.deadline_seconds is None else f'{plan.deadline_seconds:.0f}s'}")
        ended = self._checks_and_staging()
        if ended is not None:
            return ended

        restarts = 0
        while True:
            if self.stop_requested.is_set():
                return self.end(ExitCode.TERMINATED, "stopped (SIGTERM) before the trainer started")
            ended = self._gpus_and_gates()   # the driver's exit code once it ended, else None
            if ended is not None:
                return ended
            result = self._run_trainer()
            if result is None:
                return self.end(ExitCode.TRAINER_NOT_FOUND, self._not_found)
            reason, evidence = classify(result.exit_code, result.output,
                                        attempt_saw_step=self.attempt_saw_step,
                                        deadline_hit=result.deadline_hit,
                                        terminated=result.terminated)
            self.attempt_saw_step |= result.output.steps > 0
            step = last_checkpoint_step(plan.checkpoint_dir)
            self.records.event("trainer_exit", self.start, exit_code=result.exit_code,
                               reason=reason.value, last_checkpoint_step=step)
            if reason == Reason.DEADLINE:
                self.records.event("deadline", self.start, deadline_seconds=plan.deadline_seconds)
                return self.end(ExitCode.DEADLINE, (
                    f"the run's time budget (gke-grpo:job.activeDeadlineSeconds = "
                    f"{plan.deadline_seconds:.0f}s from the first trainer start) is spent: trainer "
                    f"stopped; last checkpointed step {step if step is not None else 'none'}"))
            if reason == Reason.COMPLETED:
                evidence += self._after_training()
            if reason != Reason.LOST_WORKER:
                return self.end(REASON_EXIT[reason], f"{reason.value}: {evidence}" + (
                    "; not retried (it would fail again)"
                    if reason in (Reason.USAGE_ERROR, Reason.BEFORE_FIRST_STEP, Reason.TRAINER_FAILED)
                    else ""))
            if restarts >= plan.max_restarts:
                return self.end(ExitCode.RESTARTS_EXHAUSTED, (
                    f"lost workers again after {restarts} restarts (gke-grpo:job.maxRestarts = "
                    f"{plan.max_restarts}): {evidence}"))
            restarts += 1
            record = self.records.restart(reason=reason.value, exit_code=result.exit_code,
                                          last_checkpoint_step=step, start=self.start)
            print(RESTART_MARKER + json.dumps(record, sort_keys=True), file=self.out, flush=True)
            delay = backoff_seconds(restarts, plan.backoff_base_seconds, plan.backoff_cap_seconds)
            self.say(f"restart {restarts}/{plan.max_restarts} after a lost worker ({evidence}); "
                     f"resuming from step {step if step is not None else 'none'} in {delay:.0f}s")
            if delay >= self.remaining():
                self.records.event("deadline", self.start, deadline_seconds=plan.deadline_seconds)
                return self.end(ExitCode.DEADLINE, "the run's time budget ends before the "
                                "next restart could start")
            self.sleep(delay)
            self.start += 1

    def _checks_and_staging(self) -> int | None:
        """What runs once per attempt, before the first GPU wait; the driver's exit code once it
        ended, else None."""
        plan = self.plan
        problem = check_writable(plan.checkpoint_dir)
        if problem:
            return self.end(ExitCode.NOT_WRITABLE, f"checkpoint directory {problem}")
        # Before any staging or GPU wait: a trainer that cannot start would only fail later.
        problem = self._trainer_missing()
        if problem:
            return self.end(ExitCode.TRAINER_NOT_FOUND, problem)

        if plan.prepare is not None:
            self.records.event("prepare_start", 0)
            code = self._run_stage(plan.prepare)
            self.records.event("prepare_end", 0, exit_code=code)
            if code != 0:
                return self.end(ExitCode.PREPARE_FAILED,
                                f"data/model staging exited {code} (see its lines above)")
        return None

    def _gpus_and_gates(self) -> int | None:
        plan = self.plan
        timeout = min(plan.gpu_wait_seconds, self.remaining())
        hold = getattr(self.hooks, "hold_gpus", None)
        if self._gang is None and hold is not None:
            try:
                self._gang = hold(plan)
            except OSError as exc:    # the holder could not start: wait for what is there
                self.say(f"cannot ask the autoscaler for the GPU gang: {exc.strerror or exc}")
            else:
                self.records.event("gpu_request", self.start, gpus=plan.gpus,
                                   gpus_per_node=plan.gpus_per_node)
        self.records.event("gpu_wait_start", self.start, gpus=plan.gpus)
        code = self.hooks.wait_for_gpus(plan, timeout)
        self.records.event("gpu_wait_end", self.start, exit_code=code)
        if code != 0:
            if code == ExitCode.GPU_GANG_INFEASIBLE:
                return self.end(ExitCode.GPU_GANG_INFEASIBLE, "the Ray autoscaler can never "
                                f"provide the run's {plan.gpus} GPUs ({plan.gpus_per_node} per "
                                "node): see the GPU wait's lines above")
            if self.remaining() <= 0:
                return self.end(ExitCode.DEADLINE, "the run's time budget ran out while "
                                "waiting for the GPUs")
            return self.end(ExitCode.GPU_WAIT_TIMEOUT if code == ExitCode.GPU_WAIT_TIMEOUT else ExitCode.FAILED,
                            f"the GPU wait exited {code}: the {plan.gpus} GPUs did not become "
                            f"available within {timeout:.0f}s")
        if plan.health is not None:
            self.records.event("health_start", self.start)
            try:
                gate = self.hooks.fabric_gate(plan.health, plan.gpus // max(plan.gpus_per_node, 1),
                                              plan.gpus_per_node, self.run_dir)
            except Exception as exc:
                self.records.event("health_end", self.start, passed=False)
                return self.end(ExitCode.HEALTH_GATE_FAILED,
                                f"health gate could not run: {type(exc).__name__}: {exc}")
            self.records.event("health_end", self.start, passed=bool(gate.passed))
            if not gate.passed:
                return self.end(ExitCode.HEALTH_GATE_FAILED, f"health gate: {gate.message}")
        if plan.prune_checkpoints_keep is not None and plan.framework == "verl":
            removed = self.hooks.prune_checkpoints(Path(plan.checkpoint_dir), plan.prune_checkpoints_keep)
            self.records.event("checkpoint_prune", self.start, removed=[str(p) for p in removed])
        return None

    def _after_training(self) -> str:
        """The plan's export and evaluation after a completed trainer, while the run still holds
        its GPUs (child processes: the driver itself never connects to Ray). Their failure does
        not fail the trained run: it is recorded and said, and `jobs export` redoes it."""
        said = []
        for name, command in (("export", self.plan.export), ("evaluate", self.plan.evaluate)):
            if command is None:
                continue
            if self.stop_requested.is_set():
                said.append(f"{name} not run (stopped)")
                continue
            self.records.event(f"{name}_start", self.start)
            code = self._run_stage(command)
            self.records.event(f"{name}_end", self.start, exit_code=code)
            said.append(f"{name} {'done' if code == 0 else f'FAILED (exit {code})'}")
        return f"; {', '.join(said)}" if said else ""

    def _run_stage(self, command: Command) -> int:
        try:
            return subprocess.run(list(command.argv), cwd=command.cwd,
                                  env={**os.environ, **command.env}).returncode
        except OSError as exc:
            self.say(f"cannot start {command.argv[0]}: {exc.strerror or exc}")
            return 127

    def _trainer_missing(self) -> str | None:
        trainer = self.plan.trainer
        if trainer.cwd is not None and not Path(trainer.cwd).is_dir():
            return f"the trainer's working directory {trainer.cwd} does not exist"
        program = trainer.argv[0]
        path = {**os.environ, **trainer.env}.get("PATH")
        if "/" in program:
            found = Path(trainer.cwd or ".", program)
            if not (found.is_file() and os.access(found, os.X_OK)):
                return f"the trainer command {program!r} does not exist or is not executable"
        elif shutil.which(program, path=path) is None:
            return f"the trainer command {program!r} is not on the PATH"
        return None

    def _trainer_env(self) -> dict[str, str]:
        tensorboard = tensorboard_dir(self.run_dir, self.attempt, self.start)
        return {**os.environ, **self.plan.trainer.env, TENSORBOARD_ENV: tensorboard}

    def _run_trainer(self) -> TrainerRun | None:
        trainer = self.plan.trainer
        if trainer.cwd is not None and not Path(trainer.cwd).is_dir():
            self._not_found = f"the trainer's working directory {trainer.cwd} does not exist"
            return None
        if self.first_trainer_start is None:
            self.first_trainer_start = self.clock()
        placement = getattr(self.hooks, "gpu_placement", None)
        self.records.event("trainer_start", self.start, argv0=trainer.argv[0],
                           **(placement(self.plan) if placement is not None else {}))
        try:
            proc = subprocess.Popen(list(trainer.argv), cwd=trainer.cwd, env=self._trainer_env(),
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    text=True, errors="replace", bufsize=1,
                                    start_new_session=True)
        except OSError as exc:
            self._not_found = f"the trainer command {trainer.argv[0]!r} cannot be started: " \
                              f"{exc.strerror or exc}"
            self.records.event("trainer_exit", self.start, exit_code=127,
                               reason="trainer_not_found", last_checkpoint_step=None)
            return None
        output = TrainerOutput()
        stdout = proc.stdout
        if stdout is None:    # impossible: stdout=PIPE
            raise RuntimeError("the trainer's stdout is not a pipe")

        def pump():
            for line in stdout:
                self.out.write(line)
                self.out.flush()
                output.feed(line)

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        deadline_hit = terminated = False
        while True:
            try:
                proc.wait(timeout=0.2)
                break
            except subprocess.TimeoutExpired:
                pass
            if self.stop_requested.is_set():
                terminated = True
                self._stop(proc, grace=2.0)
                break
            if self.remaining() <= 0:
                deadline_hit = True
                self.say(f"the time budget ({self.plan.deadline_seconds:.0f}s) is spent: stopping "
                         f"the trainer (SIGTERM, SIGKILL after {self.plan.stop_grace_seconds:.0f}s)")
                self._stop(proc, grace=self.plan.stop_grace_seconds)
                break
        reader.join(timeout=5)
        # `ray job stop` signals the driver AND every descendant at once (Ray 2.54
        # dashboard/modules/job/job_supervisor.py: [job_process] + children(recursive=True)), so
        # the trainer often exits from that same SIGTERM before the loop above sees the request:
        # its exit is then the stop, not a failure of the trainer.
        terminated = terminated or self.stop_requested.is_set()
        return TrainerRun(exit_code=proc.returncode, output=output,
                          deadline_hit=deadline_hit, terminated=terminated)

    @staticmethod
    def _stop(proc: subprocess.Popen, grace: float) -> None:
        """SIGTERM the trainer's process group, SIGKILL it after ``grace`` seconds."""
        def signal_group(sig):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)
        signal_group(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=grace)
        signal_group(signal.SIGKILL)   # whatever of the group is left
        proc.wait()


# ---- entry point ------------------------------------------------------------------------------

def submission_id_from_env(environ=os.environ) -> str | None:
    try:
        config = json.loads(environ.get(RAY_JOB_CONFIG_ENV, "") or "{}")
    except ValueError:
        return None
    return (config.get("metadata") or {}).get("job_submission_id") or None


def attempt_of(plan: RunPlan, submission_id: str | None) -> int | None:
    """The attempt number of this Ray job if its submission id belongs to the plan's run
    (``<run_id>-attempt-<n>``, jobs.contract.spec.GrpoSpec.submission_id), the plan's own attempt when
    there is no submission id (run by hand), None when the id names another run."""
    if not submission_id:
        return plan.attempt
    match = re.fullmatch(re.escape(plan.run_id) + r"-attempt-(\d+)", submission_id)
    return int(match.group(1)) if match else None


def load_matching_plan(path: str, submission_id: str | None, wait_seconds: float,
                       sleep: Callable[[float], None] = time.sleep,
                       clock: Callable[[], float] = time.monotonic) -> tuple[RunPlan, int]:
    """The plan and this job's attempt number; waits (bounded) for a mounted plan that still
    names the previous run; RunPlanError otherwise."""
    started = clock()
    while True:
        plan = load_plan(path)
        attempt = attempt_of(plan, submission_id)
        if attempt is not None:
            return plan, attempt
        if clock() - started >= wait_seconds:
            raise RunPlanError(
                f"plan file {path} is for run {plan.run_id}, but this Ray job is {submission_id}: "
                "the head's plan comes from the last `pulumi up`; deploy the config you submitted "
                "(or submit with the deployed stack's config)")
        sleep(5.0)


def main(argv: Sequence[str] | None = None, *, hooks: Hooks | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m jobs.run", description=__doc__.split("\n\n")[0])
    parser.add_argument("--plan", default=PLAN_PATH, help=f"the run plan (default {PLAN_PATH})")
    parser.add_argument("--plan-wait-seconds", type=float, default=PLAN_REFRESH_SECONDS,
                        help=argparse.SUPPRESS)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        plan, attempt = load_matching_plan(args.plan, submission_id_from_env(), args.plan_wait_seconds)
    except RunPlanError as exc:
        print(f"{PREFIX} FAILED (exit {int(ExitCode.USAGE)} USAGE): {exc}", flush=True)
        return int(ExitCode.USAGE)
    problem = check_writable(plan.run_dir)
    if problem:
        print(f"{PREFIX} FAILED (exit {int(ExitCode.NOT_WRITABLE)} NOT_WRITABLE): run "
              f"directory {problem}", flush=True)
        return int(ExitCode.NOT_WRITABLE)
    driver = Driver(plan, attempt=attempt, hooks=hooks)
    # `ray job stop` (and the RayJob's deletion) send SIGTERM to the driver and its children
    # (ray/dashboard/modules/job/job_supervisor.py, Ray 2.54): stop the trainer, record it.
    signal.signal(signal.SIGTERM, lambda signum, frame: driver.stop_requested.set())
    try:
        return driver.run()
    except KeyboardInterrupt:
        return driver.end(ExitCode.TERMINATED, "interrupted")
    except OSError as exc:   # the run directory went away or became read-only mid-run
        print(f"{PREFIX} FAILED (exit {int(ExitCode.NOT_WRITABLE)} NOT_WRITABLE): "
              f"{exc.strerror or exc}: {getattr(exc, 'filename', '') or ''}", flush=True)
        return int(ExitCode.NOT_WRITABLE)
    finally:
        # Whatever ended the run: no GPU stays requested (the holder also clears it when this
        # process dies without getting here: jobs/head/gpu_gang.py).
        with contextlib.suppress(OSError):
            driver.release_gpus()


if __name__ == "__main__":
    sys.exit(main())
