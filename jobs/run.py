"""The run driver: one process per attempt, on the (non-Spot) Ray head, that runs the whole run.

    python3 -m jobs.run --plan /opt/gke-grpo/run/plan.json

Stages, in order (plan: jobs/plan.py):
  1. prepare   stage the dataset and the model on /data (CPU, on the head; idempotent), BEFORE
               the GPU wait, so the GPUs never idle while a model downloads;
  2. GPU wait  until the run's GPUs are available (bounded by the plan's gpu_wait_seconds);
  3. [health]  the fabric/storage gate, when the plan has one (hook: jobs.health.fabric_gate);
  4. [prune]   verl checkpoint pruning, when the plan asks (hook: jobs.checkpoints.prune_verl_checkpoints);
  5. trainer   the framework's command as a child process (no shell), resuming from the run's
               checkpoint directory;
  6. restarts  after a lost worker (node preempted or repaired, NCCL/collective timeout, actor
               died) the driver waits for the GPUs again and restarts the trainer, up to the
               plan's max_restarts with capped exponential backoff. It does not restart what
               would fail again: a usage/config error, a failure before the attempt's first
               training step, an exhausted budget, or an unclassified crash.

The time budget (plan.deadline_seconds = gke-grpo:job.activeDeadlineSeconds) counts from the
first trainer start: at the deadline the trainer gets SIGTERM, then SIGKILL after
stop_grace_seconds, and the driver exits with DEADLINE.

Records, under the plan's run_dir (/data/runs/<run-id>/): events.jsonl (one JSON object per
stage boundary, INTERFACES.md) and restarts.jsonl (one per restart). Each restart is also
printed as one ``[jobs.run] RESTART {json}`` line: the jobs CLI reads it back from the Ray job's
log (``python -m jobs status`` / ``list``).

Exit codes (``DriverExit``; the Ray job FAILS with this driver exit code):
  0   the trainer finished
  1   TRAINER_FAILED: the trainer failed after training steps, not as a lost worker
  2   USAGE: the plan file is missing/unreadable/invalid or for another run, or the trainer
      refused its configuration (argparse/hydra/OmegaConf errors)
  3   GPU_WAIT_TIMEOUT: the GPUs did not become available in time (jobs.wait_for_gpus)
  10  BEFORE_FIRST_STEP: the trainer failed before the attempt's first training step
  11  RESTARTS_EXHAUSTED: lost workers max_restarts times
  12  DEADLINE: the time budget is spent; the trainer was stopped
  13  PREPARE_FAILED: data or model staging failed
  6   HEALTH_GATE_FAILED: the fabric/storage gate did not pass (jobs.health.EXIT_GATE_FAILED)
  15  TRAINER_NOT_FOUND: the trainer command (or its working directory) does not exist
  16  NOT_WRITABLE: the checkpoint or run directory cannot be written
  143 TERMINATED: the driver got SIGTERM (`ray job stop`, the RayJob deleted); trainer stopped

Nothing here deletes a checkpoint: the only file the driver removes is its own write probe.
Standard library only (plus the ``ray`` CLI/SDK the child stages use): this runs in the
framework image, without Pulumi, GPUs or this repository's components/ and tools/.
"""

from __future__ import annotations

import argparse
import collections
import enum
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Protocol, Sequence, TextIO

from jobs.plan import PLAN_PATH, Command, PlanError, RunPlan, load_plan
# The run directory's names, shared with what reads them (status, report: jobs/timeline.py).
from jobs.timeline import EVENTS_FILE, RESTARTS_FILE, TENSORBOARD_ENV, tensorboard_dir

PREFIX = "[jobs.run]"
RESTART_MARKER = f"{PREFIX} RESTART "
# Ray 2.54 gives a job's entrypoint its JobConfig, with the submission id in the metadata
# (ray/dashboard/modules/job/job_supervisor.py `_get_driver_env_vars`: RAY_JOB_CONFIG_JSON_ENV_VAR
# = {"runtime_env", "metadata": {"job_submission_id": ..., ...}}).
RAY_JOB_CONFIG_ENV = "RAY_JOB_CONFIG_JSON_ENV_VAR"
# How long a driver whose plan names another run waits for the mounted ConfigMap to catch up
# (the kubelet refreshes ConfigMap volumes within about a minute after `pulumi up`).
PLAN_REFRESH_SECONDS = 180.0


class DriverExit(enum.IntEnum):
    OK = 0
    TRAINER_FAILED = 1
    USAGE = 2
    GPU_WAIT_TIMEOUT = 3
    BEFORE_FIRST_STEP = 10
    RESTARTS_EXHAUSTED = 11
    DEADLINE = 12
    PREPARE_FAILED = 13
    HEALTH_GATE_FAILED = 6       # = jobs.health.EXIT_GATE_FAILED
    TRAINER_NOT_FOUND = 15
    NOT_WRITABLE = 16
    TERMINATED = 143


class Reason(str, enum.Enum):
    """Why a trainer start ended (the ``reason`` of trainer_exit and restarts.jsonl)."""
    COMPLETED = "completed"
    LOST_WORKER = "lost_worker"
    USAGE_ERROR = "usage_error"
    BEFORE_FIRST_STEP = "before_first_step"
    TRAINER_FAILED = "trainer_failed"
    DEADLINE = "deadline"
    TERMINATED = "terminated"


# ---- failure classification ---------------------------------------------------------------
# Lost workers, as Ray 2.54 and PyTorch print them. Sources (read 2026-12-01):
# - ray/exceptions.py (Ray 2.54.0): ActorDiedError (BASE_ERROR_MSG "The actor died unexpectedly
#   before finishing this task."), ActorUnavailableError, NodeDiedError, WorkerCrashedError
#   ("The worker died unexpectedly while executing this task."), LocalRayletDiedError ("The
#   task's local raylet died."), OwnerDiedError; the class names appear in the trainer's traceback.
# - the GCS and core worker of Ray 2.54.0 (strings of gcs_server and _raylet.so): "The actor died
#   because its node has died. Node Id: ...", "Task failed because the node it was running on is
#   dead or unavailable ... This can happen if the node was preempted ...", "Health check failed
#   for node", and the NodeDeathInfo reason AUTOSCALER_DRAIN_PREEMPTED.
# - PyTorch c10d ProcessGroupNCCL.cpp: "Watchdog caught collective operation timeout", "Some
#   NCCL operations have failed or timed out", and NCCL's own "NCCL communicator was aborted" /
#   ncclRemoteError (a peer went away); DistBackendError is the Python exception class.
LOST_WORKER_PATTERNS = tuple(re.compile(p) for p in (
    r"\bActorDiedError\b",
    r"The actor died unexpectedly before finishing this task",
    r"\bActorUnavailableError\b",
    r"\bNodeDiedError\b",
    r"\bWorkerCrashedError\b",
    r"The worker died unexpectedly while executing this task",
    r"\bLocalRayletDiedError\b",
    r"\bOwnerDiedError\b",
    r"because its node has died",
    r"the node it was running on is dead or unavailable",
    r"Health check failed for node",
    r"AUTOSCALER_DRAIN_PREEMPTED",
    r"Watchdog caught collective operation timeout",
    r"Some NCCL operations have failed or timed out",
    r"NCCL communicator was aborted",
    r"\bncclRemoteError\b",
    r"\bDistBackendError\b",
))
# An actor that failed in its own __init__ (ray/exceptions.py ActorDiedError: "The actor died
# because of an error raised in its creation task") fails the same way on every start: a bug or
# a configuration error, never a lost worker.
NOT_LOST_PATTERNS = (re.compile(r"The actor died because of an error raised in its creation task"),)
# Configuration refused by the trainer: hydra (verl's main_ppo is a @hydra.main app; NeMo RL
# parses its overrides with hydra's OverridesParser) and OmegaConf exception names and messages.
USAGE_PATTERNS = tuple(re.compile(p) for p in (
    r"\bConfigCompositionException\b",
    r"\bOverrideParseException\b",
    r"Could not override '",
    r"Could not append to config",
    r"\bConfigKeyError\b",
    r"\bConfigAttributeError\b",
    r"\bMissingMandatoryValue\b",
    r"is not in struct",
    r"\bomegaconf\.errors\.ValidationError\b",
    r"^usage: ",
))
# One training step, as the frameworks log it (jobs/logs.py has the sources): verl's console
# logger prints "step:N - ..." per step; NeMo RL's grpo_train prints "===== Step N/M =====".
STEP_PATTERNS = (re.compile(r"(?:^|[\s)\]])step:(\d+) - "), re.compile(r"=+ Step (\d+)/(\d+) =+"))


@dataclass
class TrainerOutput:
    """What the driver saw of one trainer start, scanned line by line."""
    tail: collections.deque = field(default_factory=lambda: collections.deque(maxlen=200))
    steps: int = 0                       # step lines seen
    last_step: Optional[int] = None
    lost_worker: Optional[str] = None    # first line that shows a lost worker
    not_lost: Optional[str] = None
    usage: Optional[str] = None

    def feed(self, line: str) -> None:
        text = line.rstrip("\n")
        self.tail.append(text)
        for pattern in STEP_PATTERNS:
            match = pattern.search(text)
            if match:
                self.steps += 1
                self.last_step = int(match.group(1))
                break
        if self.lost_worker is None and any(p.search(text) for p in LOST_WORKER_PATTERNS):
            self.lost_worker = text.strip()
        if self.not_lost is None and any(p.search(text) for p in NOT_LOST_PATTERNS):
            self.not_lost = text.strip()
        if self.usage is None and any(p.search(text) for p in USAGE_PATTERNS):
            self.usage = text.strip()


def classify(exit_code: int, output: TrainerOutput, *, attempt_saw_step: bool,
             deadline_hit: bool = False, terminated: bool = False) -> tuple[Reason, str]:
    """Why a trainer start ended, and the evidence (one line). Only LOST_WORKER is retried."""
    if terminated:
        return Reason.TERMINATED, "the driver was asked to stop (SIGTERM)"
    if deadline_hit:
        return Reason.DEADLINE, "the run's time budget is spent"
    if exit_code == 0:
        return Reason.COMPLETED, "the trainer exited 0"
    if exit_code == 2 or output.usage:
        return Reason.USAGE_ERROR, output.usage or "the trainer exited 2 (usage error)"
    lost = output.lost_worker if not output.not_lost else None
    if not attempt_saw_step and output.steps == 0:
        why = f"; it looked like a lost worker ({lost})" if lost else ""
        return Reason.BEFORE_FIRST_STEP, (f"the trainer exited {exit_code} before the attempt's "
                                          f"first training step{why}")
    if lost:
        return Reason.LOST_WORKER, lost
    return Reason.TRAINER_FAILED, (output.not_lost or
                                   f"the trainer exited {exit_code} (not a lost worker)")


REASON_EXIT = {
    Reason.COMPLETED: DriverExit.OK,
    Reason.USAGE_ERROR: DriverExit.USAGE,
    Reason.BEFORE_FIRST_STEP: DriverExit.BEFORE_FIRST_STEP,
    Reason.TRAINER_FAILED: DriverExit.TRAINER_FAILED,
    Reason.DEADLINE: DriverExit.DEADLINE,
    Reason.TERMINATED: DriverExit.TERMINATED,
    Reason.LOST_WORKER: DriverExit.RESTARTS_EXHAUSTED,
}


def backoff_seconds(restart: int, base: float, cap: float) -> float:
    """Capped exponential backoff before restart ``restart`` (1, 2, ...)."""
    return min(cap, base * (2 ** max(restart - 1, 0)))


# ---- checkpoints ----------------------------------------------------------------------------

_STEP_DIR = re.compile(r"^(?:global_step|step)_(\d+)$")


def last_checkpoint_step(checkpoint_dir: str | Path) -> Optional[int]:
    """The last step checkpointed in a run's directory, read-only. verl v0.7.1 writes
    ``latest_checkpointed_iteration.txt`` after a complete ``global_step_<n>`` save
    (verl/trainer/ppo/ray_trainer.py `_save_checkpoint`); NeMo RL renames ``tmp_step_<n>`` to
    ``step_<n>`` once a save is complete (nemo_rl/utils/checkpoint.py CheckpointManager, the
    stored version; the same layout in its v0.5.0 docs is unconfirmed)."""
    root = Path(checkpoint_dir)
    try:
        tracker = (root / "latest_checkpointed_iteration.txt").read_text().strip()
        return int(tracker)
    except (OSError, ValueError):
        pass
    try:
        steps = [int(m.group(1)) for p in root.iterdir() if p.is_dir()
                 for m in [_STEP_DIR.match(p.name)] if m]
    except OSError:
        return None
    return max(steps) if steps else None


def check_writable(directory: str | Path) -> Optional[str]:
    """None if a file can be created in ``directory`` (created if missing), else why not. Only
    the probe file this creates is ever removed."""
    path = Path(directory)
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".gke-grpo-write-probe-"):
            pass
    except OSError as exc:
        return f"{path} is not writable: {exc.strerror or exc}"
    return None


# ---- hooks ------------------------------------------------------------------------------------

class GateResult(Protocol):
    passed: bool
    exit_code: int
    message: str


class Hooks(Protocol):
    """What the driver calls outside itself; tests inject fakes, the defaults are below."""

    def wait_for_gpus(self, plan: RunPlan, timeout: float) -> int: ...

    def fabric_gate(self, plan_health: dict, nodes: int, gpus_per_node: int,
                    run_dir: Path) -> GateResult: ...

    def prune_checkpoints(self, checkpoint_dir: Path, keep: int) -> list[Path]: ...


class DefaultHooks:
    def wait_for_gpus(self, plan: RunPlan, timeout: float) -> int:
        argv = [sys.executable, "-m", "jobs.wait_for_gpus", "--gpus", str(plan.gpus),
                "--gpus-per-node", str(plan.gpus_per_node),
                "--timeout-seconds", str(max(timeout, 1.0)),
                "--poll-seconds", str(plan.gpu_poll_seconds)]
        return subprocess.run(argv).returncode

    def fabric_gate(self, plan_health, nodes, gpus_per_node, run_dir):
        from jobs.health import fabric_gate   # issue 17
        return fabric_gate(plan_health, nodes, gpus_per_node, run_dir)

    def prune_checkpoints(self, checkpoint_dir, keep):
        from jobs.checkpoints import prune_verl_checkpoints
        return prune_verl_checkpoints(checkpoint_dir, keep)


# ---- records ------------------------------------------------------------------------------------

class Records:
    """events.jsonl and restarts.jsonl of a run: appended, one flushed line per record."""

    def __init__(self, run_dir: Path, attempt: int, clock: Callable[[], float] = time.time):
        self.run_dir = run_dir
        self.attempt = attempt
        self.clock = clock

    def _append(self, name: str, record: dict) -> None:
        with open(self.run_dir / name, "a") as f:
            f.write(json.dumps(record, sort_keys=True) + "\n")
            f.flush()

    def event(self, event: str, start: int, **extra: Any) -> None:
        self._append(EVENTS_FILE, {"time": self.clock(), "event": event, "attempt": self.attempt,
                                   "start": start, **extra})

    def restart(self, *, reason: str, exit_code: int, last_checkpoint_step: Optional[int],
                start: int) -> dict:
        record = {"time": self.clock(), "reason": reason, "exit_code": exit_code,
                  "last_checkpoint_step": last_checkpoint_step, "attempt": self.attempt,
                  "start": start}
        self._append(RESTARTS_FILE, record)
        return record


def read_restarts(run_dir: str | Path) -> list[dict]:
    try:
        lines = (Path(run_dir) / RESTARTS_FILE).read_text().splitlines()
    except OSError:
        return []
    return [json.loads(line) for line in lines if line.strip()]


def restarts_from_log(text: str) -> list[dict]:
    """The RESTART records a driver printed into its Ray job log (what the CLI can read)."""
    found = []
    for line in text.splitlines():
        at = line.find(RESTART_MARKER)
        if at < 0:
            continue
        try:
            found.append(json.loads(line[at + len(RESTART_MARKER):]))
        except ValueError:
            continue
    return found


# ---- the trainer --------------------------------------------------------------------------------

@dataclass
class TrainerRun:
    exit_code: int
    output: TrainerOutput
    deadline_hit: bool = False
    terminated: bool = False


class Driver:
    def __init__(self, plan: RunPlan, *, attempt: int, hooks: Optional[Hooks] = None,
                 out: Optional[TextIO] = None, clock: Callable[[], float] = time.monotonic,
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
        self.first_trainer_start: Optional[float] = None
        self.attempt_saw_step = False
        self.stop_requested = threading.Event()
        self._not_found = ""

    def say(self, text: str) -> None:
        print(f"{PREFIX} {text}", file=self.out, flush=True)

    # -- budget ------------------------------------------------------------------------------
    def deadline_at(self) -> Optional[float]:
        if self.plan.deadline_seconds is None or self.first_trainer_start is None:
            return None
        return self.first_trainer_start + self.plan.deadline_seconds

    def remaining(self) -> float:
        at = self.deadline_at()
        return math.inf if at is None else at - self.clock()

    def end(self, code: DriverExit, message: str) -> int:
        self.say(f"{'done' if code == DriverExit.OK else 'FAILED'} (exit {int(code)} "
                 f"{code.name}): {message}")
        self.records.event("driver_end", self.start, exit_code=int(code), message=message)
        return int(code)

    # -- stages ------------------------------------------------------------------------------
    def run(self) -> int:
        plan = self.plan
        self.records.event("driver_start", 0, run_id=plan.run_id, pid=os.getpid())
        self.say(f"run {plan.run_id}, attempt {self.attempt}: plan has {plan.gpus} GPUs, "
                 f"max {plan.max_restarts} restarts, budget "
                 f"{'none' if plan.deadline_seconds is None else f'{plan.deadline_seconds:.0f}s'}")
        problem = check_writable(plan.checkpoint_dir)
        if problem:
            return self.end(DriverExit.NOT_WRITABLE, f"checkpoint directory {problem}")
        # Before any staging or GPU wait: a trainer that cannot start would only fail later.
        problem = self._trainer_missing()
        if problem:
            return self.end(DriverExit.TRAINER_NOT_FOUND, problem)

        if plan.prepare is not None:
            self.records.event("prepare_start", 0)
            code = self._run_stage(plan.prepare)
            self.records.event("prepare_end", 0, exit_code=code)
            if code != 0:
                return self.end(DriverExit.PREPARE_FAILED,
                                f"data/model staging exited {code} (see its lines above)")

        restarts = 0
        while True:
            if self.stop_requested.is_set():
                return self.end(DriverExit.TERMINATED, "stopped (SIGTERM) before the trainer started")
            ended = self._gpus_and_gates()   # the driver's exit code once it ended, else None
            if ended is not None:
                return ended
            result = self._run_trainer()
            if result is None:
                return self.end(DriverExit.TRAINER_NOT_FOUND, self._not_found)
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
                return self.end(DriverExit.DEADLINE, (
                    f"the run's time budget (gke-grpo:job.activeDeadlineSeconds = "
                    f"{plan.deadline_seconds:.0f}s from the first trainer start) is spent: trainer "
                    f"stopped; last checkpointed step {step if step is not None else 'none'}"))
            if reason != Reason.LOST_WORKER:
                return self.end(REASON_EXIT[reason], f"{reason.value}: {evidence}" + (
                    "; not retried (it would fail again)"
                    if reason in (Reason.USAGE_ERROR, Reason.BEFORE_FIRST_STEP, Reason.TRAINER_FAILED)
                    else ""))
            if restarts >= plan.max_restarts:
                return self.end(DriverExit.RESTARTS_EXHAUSTED, (
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
                return self.end(DriverExit.DEADLINE, "the run's time budget ends before the "
                                "next restart could start")
            self.sleep(delay)
            self.start += 1

    def _gpus_and_gates(self) -> Optional[int]:
        plan = self.plan
        timeout = min(plan.gpu_wait_seconds, self.remaining())
        self.records.event("gpu_wait_start", self.start, gpus=plan.gpus)
        code = self.hooks.wait_for_gpus(plan, timeout)
        self.records.event("gpu_wait_end", self.start, exit_code=code)
        if code != 0:
            if self.remaining() <= 0:
                return self.end(DriverExit.DEADLINE, "the run's time budget ran out while "
                                "waiting for the GPUs")
            return self.end(DriverExit.GPU_WAIT_TIMEOUT if code == 3 else DriverExit.TRAINER_FAILED,
                            f"the GPU wait exited {code}: the {plan.gpus} GPUs did not become "
                            f"available within {timeout:.0f}s")
        if plan.health is not None:
            self.records.event("health_start", self.start)
            try:
                gate = self.hooks.fabric_gate(plan.health, plan.gpus // max(plan.gpus_per_node, 1),
                                              plan.gpus_per_node, self.run_dir)
            except Exception as exc:  # noqa: BLE001 - a gate that cannot run fails the gate
                self.records.event("health_end", self.start, passed=False)
                return self.end(DriverExit.HEALTH_GATE_FAILED,
                                f"health gate could not run: {type(exc).__name__}: {exc}")
            self.records.event("health_end", self.start, passed=bool(gate.passed))
            if not gate.passed:
                return self.end(DriverExit.HEALTH_GATE_FAILED, f"health gate: {gate.message}")
        if plan.prune_checkpoints_keep is not None and plan.framework == "verl":
            removed = self.hooks.prune_checkpoints(Path(plan.checkpoint_dir), plan.prune_checkpoints_keep)
            self.records.event("checkpoint_prune", self.start, removed=[str(p) for p in removed])
        return None

    def _run_stage(self, command: Command) -> int:
        try:
            return subprocess.run(list(command.argv), cwd=command.cwd,
                                  env={**os.environ, **command.env}).returncode
        except OSError as exc:
            self.say(f"cannot start {command.argv[0]}: {exc.strerror or exc}")
            return 127

    def _trainer_missing(self) -> Optional[str]:
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

    def _run_trainer(self) -> Optional[TrainerRun]:
        trainer = self.plan.trainer
        if trainer.cwd is not None and not Path(trainer.cwd).is_dir():
            self._not_found = f"the trainer's working directory {trainer.cwd} does not exist"
            return None
        if self.first_trainer_start is None:
            self.first_trainer_start = self.clock()
        self.records.event("trainer_start", self.start, argv0=trainer.argv[0])
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
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                pass
        signal_group(signal.SIGTERM)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
        signal_group(signal.SIGKILL)   # whatever of the group is left
        proc.wait()


# ---- entry point ------------------------------------------------------------------------------

def submission_id_from_env(environ=os.environ) -> Optional[str]:
    try:
        config = json.loads(environ.get(RAY_JOB_CONFIG_ENV, "") or "{}")
    except ValueError:
        return None
    return (config.get("metadata") or {}).get("job_submission_id") or None


def attempt_of(plan: RunPlan, submission_id: Optional[str]) -> Optional[int]:
    """The attempt number of this Ray job if its submission id belongs to the plan's run
    (``<run_id>-attempt-<n>``, jobs.spec.GrpoSpec.submission_id), the plan's own attempt when
    there is no submission id (run by hand), None when the id names another run."""
    if not submission_id:
        return plan.attempt
    match = re.fullmatch(re.escape(plan.run_id) + r"-attempt-(\d+)", submission_id)
    return int(match.group(1)) if match else None


def load_matching_plan(path: str, submission_id: Optional[str], wait_seconds: float,
                       sleep: Callable[[float], None] = time.sleep,
                       clock: Callable[[], float] = time.monotonic) -> tuple[RunPlan, int]:
    """The plan and this job's attempt number; waits (bounded) for a mounted plan that still
    names the previous run; PlanError otherwise."""
    started = clock()
    while True:
        plan = load_plan(path)
        attempt = attempt_of(plan, submission_id)
        if attempt is not None:
            return plan, attempt
        if clock() - started >= wait_seconds:
            raise PlanError(
                f"plan file {path} is for run {plan.run_id}, but this Ray job is {submission_id}: "
                "the head's plan comes from the last `pulumi up`; deploy the config you submitted "
                "(or submit with the deployed stack's config)")
        sleep(5.0)


def main(argv: Optional[Sequence[str]] = None, *, hooks: Optional[Hooks] = None) -> int:
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
    except PlanError as exc:
        print(f"{PREFIX} FAILED (exit {int(DriverExit.USAGE)} USAGE): {exc}", flush=True)
        return int(DriverExit.USAGE)
    problem = check_writable(plan.run_dir)
    if problem:
        print(f"{PREFIX} FAILED (exit {int(DriverExit.NOT_WRITABLE)} NOT_WRITABLE): run "
              f"directory {problem}", flush=True)
        return int(DriverExit.NOT_WRITABLE)
    driver = Driver(plan, attempt=attempt, hooks=hooks)
    # `ray job stop` (and the RayJob's deletion) send SIGTERM to the driver and its children
    # (ray/dashboard/modules/job/job_supervisor.py, Ray 2.54): stop the trainer, record it.
    signal.signal(signal.SIGTERM, lambda signum, frame: driver.stop_requested.set())
    try:
        return driver.run()
    except KeyboardInterrupt:
        return driver.end(DriverExit.TERMINATED, "interrupted")
    except OSError as exc:   # the run directory went away or became read-only mid-run
        print(f"{PREFIX} FAILED (exit {int(DriverExit.NOT_WRITABLE)} NOT_WRITABLE): "
              f"{exc.strerror or exc}: {getattr(exc, 'filename', '') or ''}", flush=True)
        return int(DriverExit.NOT_WRITABLE)


if __name__ == "__main__":
    sys.exit(main())
