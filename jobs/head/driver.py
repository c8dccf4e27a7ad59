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
  3. [health]  the fabric/storage gate, when the plan has one (jobs/head/fabric_gate.py): before
               the attempt's first trainer start, and before a restart only when the GPU nodes
               are not those of the last passing gate;
  4. [prune]   verl checkpoint pruning, when the plan asks (jobs/head/checkpoints.py);
  5. trainer   the framework's command, resuming from the run's checkpoint directory; told when
               its GPU nodes' capacity ends on schedule (flex-start, a reservation with an end),
               so that it saves before (jobs/head/capacity_end.py); its saves for that are recorded;
  6. after     once the trainer completed: the Hugging Face export and the GSM8K test-split
               evaluation, when the plan has them (jobs/head/export.py, jobs/head/evaluate.py),
               on the GPUs the run still holds; a failure there is recorded, not fatal;
  7. restarts  only on evidence of lost capacity: a node that died or was preempted while the
               start ran (Ray's node-death text, or the cluster's record of a dead node:
               jobs/head/failures.py, jobs/head/node_deaths.py). Then the driver waits (capped
               exponential backoff, reset whenever the checkpoint advances), waits for the GPUs
               again and restarts the trainer, at most max_restarts times, and only while
               restarts make progress: a second restart from the same checkpoint is a crash loop
               (exit 21); node losses before a start's first step are retried early_node_loss_retries
               times in a row. NeMo RL's stop after its save for its capacity's end is restarted
               the same way, once that end has passed (the next GPU wait finds new nodes). A
               crash, an OOM, a hang, a configuration error is never restarted.

Every stage but the driver's own bookkeeping runs as a child process in its own session that dies
with the driver (jobs/head/children.py); nothing in this process calls ``ray.init``, whose SIGTERM
handler (``sys.exit(signum)``, Ray 2.54 ray/_private/worker.py) would replace the driver's. A
SIGTERM (``ray job stop``, the RayJob deleted) stops the running stage within Ray's kill window
(RAY_JOB_STOP_WAIT_TIME_S) and is recorded (trainer_exit, driver_end) in every stage, exit 143.

The time budget (plan.deadline_seconds = gke-grpo:job.activeDeadlineSeconds) counts from the
attempt's first trainer start: at the deadline the trainer gets SIGTERM, then SIGKILL after
stop_grace_seconds, and the driver exits with DEADLINE.

A driver resubmitted with the same submission id (KubeRay's submitter resubmits after a head
restart: the new head's job table is empty) finds the earlier drivers' records of its attempt
and continues after them: a new start index (never an earlier TensorBoard folder), the same
budget start and restart history, and the start the lost driver left open closed as
``driver_lost``.

Records, under the plan's run_dir (/data/runs/<run-id>/): events.jsonl and restarts.jsonl
(jobs/contract/records.py); each restart is also printed as one ``[jobs.run] RESTART {json}``
line, and its recovery (seconds from the node loss to the decision, the restart and the first new
step; steps redone) as ``[jobs.run] RECOVERY {json}``: the jobs CLI reads both from the log.

Exit codes: jobs/contract/exit_codes.py (the Ray job FAILS with the driver's exit code). Nothing
here deletes a checkpoint but verl's pruning of old ``global_step_*`` directories the plan asks
for; the only other file the driver removes is its own write probe. Standard library only: this
runs in the framework image, without Pulumi, GPUs or this repository's components/ and tools/.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from jobs.contract.exit_codes import ExitCode
from jobs.contract.health import HEALTH_FILE
from jobs.contract.records import (
    DRIVER_LOG_PREFIX,
    RECOVERY_MARKER,
    RESTART_MARKER,
    TENSORBOARD_ENV,
    tensorboard_dir,
)
from jobs.contract.run_plan import Command, RunPlan
from jobs.contract.safe_files import HEALTH_RESULT, json_if_usable
from jobs.head.capacity_end import SaveWatch, Told, restart_delay, tell
from jobs.head.checkpoints import check_writable, last_checkpoint_step
from jobs.head.children import CANNOT_START, spawn, stop_grace, stop_group, was_sigterm
from jobs.head.driver_hooks import DefaultHooks, Hooks
from jobs.head.failures import (
    REASON_EXIT,
    DeadNode,
    Reason,
    RestartPolicy,
    TrainerOutput,
    backoff_seconds,
    classify,
)
from jobs.head.gpu_gang import GangRequestError
from jobs.head.node_loss_watch import NodeLossWatch
from jobs.head.recoveries import PendingRecovery, not_reached, reached
from jobs.head.run_records import PreviousDrivers, Records, previous_drivers

PREFIX = DRIVER_LOG_PREFIX
# Node deaths this long before a start's trainer_start still count for it (clock skew between
# the GCS's record and this process; a node marked dead just before the start did hurt it).
DEATH_SLACK_SECONDS = 5.0
NODE_QUERY_EVERY_SECONDS = 5.0


# ---- the trainer --------------------------------------------------------------------------------

@dataclass
class TrainerRun:
    exit_code: int
    output: TrainerOutput
    started_at: float                  # epoch seconds
    ended_at: float
    deadline_hit: bool = False
    terminated: bool = False


class Driver:
    def __init__(self, plan: RunPlan, *, attempt: int, hooks: Hooks | None = None,
                 out: TextIO | None = None, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] | None = None):
        self.plan = plan
        self.attempt = attempt
        self.hooks = hooks or DefaultHooks()
        self.out = out or sys.stdout
        self.clock = clock
        self.run_dir = Path(plan.run_dir)
        self.records = Records(self.run_dir, attempt)
        self.start = 0
        self.first_trainer_start: float | None = None
        self.attempt_saw_step = False
        self.stop_requested = threading.Event()
        # Waiting (backoff, the node query's settling) ends early on a stop; tests pass a sleep.
        self.sleep = sleep or self.stop_requested.wait
        self.policy = RestartPolicy(plan.max_restarts, plan.early_node_loss_retries)
        self.gated = False
        self.pending: PendingRecovery | None = None
        self.exit_code: int | None = None
        self.gang = None      # the held GPU gang request (jobs/head/gpu_gang.py GangHolder)
        self.told = Told()    # what the running start was told of its capacity's end

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

    # -- the one way out ---------------------------------------------------------------------
    def release_gpus(self) -> dict:
        """Clear the gang request (idempotent): the GPU workers idle out after the run. What
        driver_end records of it ({} when no gang was held)."""
        gang, self.gang = self.gang, None
        if gang is None:
            return {}
        released = {"gpu_release_exit_code": gang.release()}
        fallback = getattr(gang, "fallback_exit_code", None)
        if fallback is not None or released["gpu_release_exit_code"] != 0:
            # The holder did not clear the request itself: the bounded `release` did, or not.
            released["gpu_release_fallback_exit_code"] = fallback
        return released

    def gang_event(self, name: str, **fields: Any) -> None:
        """What the gang holder's watcher reports (another thread): recorded and said."""
        self.records.event(name, self.start, **fields)
        self.say(f"GPU request: {name.removeprefix('gpu_request_').replace('_', ' ')} "
                 + json.dumps(fields, sort_keys=True))

    def end(self, code: ExitCode, message: str) -> int:
        """Every exit of the driver: the gang released, one driver_end record, one last line,
        the exit code."""
        if self.exit_code is not None:
            return self.exit_code
        self.exit_code = int(code)
        released = self.release_gpus()
        self.say(f"{'done' if code == ExitCode.OK else 'FAILED'} (exit {int(code)} "
                 f"{code.name}): {message}")
        self.records.event("driver_end", self.start, exit_code=int(code), message=message,
                           **released)
        return self.exit_code

    def stopped(self, stage: str, child_exit: int | None = None) -> int:
        """A stop (SIGTERM) outside the trainer: recorded as the start's trainer_exit too, so
        every start index that began ends in the record."""
        self.records.event("trainer_exit", self.start, exit_code=child_exit, stage=stage,
                           reason=Reason.TERMINATED.value,
                           last_checkpoint_step=last_checkpoint_step(self.plan.checkpoint_dir))
        return self.end(ExitCode.TERMINATED, f"stopped (SIGTERM) during {stage}")

    def stop_seen(self, code: int | None) -> bool:
        """Whether a stop was requested; a child that died of the same SIGTERM can be seen
        before the driver's handler ran, so such an exit waits a moment for it."""
        if self.stop_requested.is_set():
            return True
        return was_sigterm(code) and self.stop_requested.wait(1.0)

    # -- children ----------------------------------------------------------------------------
    def run_child(self, argv: Sequence[str], *, capture: bool = False, cwd: str | None = None,
                  env: dict[str, str] | None = None) -> tuple[int, str]:
        """Run a stage's command as a child; a stop ends it within Ray's window."""
        try:
            proc = spawn(argv, cwd=cwd, env=env, stdout=subprocess.PIPE if capture else None,
                         text=capture)
        except OSError as exc:
            self.say(f"cannot start {argv[0]}: {exc.strerror or exc}")
            return CANNOT_START, ""
        captured: list[str] = []
        reader = None
        if capture and proc.stdout is not None:
            stream = proc.stdout
            reader = threading.Thread(target=lambda: captured.extend(stream), daemon=True)
            reader.start()
        while True:
            try:
                proc.wait(timeout=0.2)
                break
            except subprocess.TimeoutExpired:
                pass
            if self.stop_requested.is_set():
                stop_group(proc, stop_grace())
                break
        if reader is not None:
            reader.join(timeout=5)
        return proc.returncode, "".join(captured)

    # -- stages ------------------------------------------------------------------------------
    def run(self) -> int:
        plan = self.plan
        from jobs.head.run_metrics import serve_run_metrics  # prometheus_client only when asked
        serve_run_metrics(plan, self.attempt, self.records, self.say)   # fed by the records
        previous = previous_drivers(self.run_dir, self.attempt)
        self.resume_after(previous)
        self.records.event("driver_start", self.start, run_id=plan.run_id, pid=os.getpid(),
                           resumed=previous.found)
        self.say(f"run {plan.run_id}, attempt {self.attempt}: plan has {plan.gpus} GPUs, "
                 f"max {plan.max_restarts} restarts, budget "
                 f"{'none' if plan.deadline_seconds is None else f'{plan.deadline_seconds:.0f}s'}"
                 + (f"; continuing after {previous.drivers} earlier driver(s) of this attempt "
                    f"at start {self.start}" if previous.found else ""))
        ended = self.checks_and_staging()
        while ended is None:
            if self.stop_requested.is_set():
                return self.stopped("the wait before the trainer")
            ended = self.gpus_and_gates()   # the driver's exit code once it ended, else None
            if ended is not None:
                return ended
            result = self.run_trainer()
            if result is None:               # it could not start: the driver has ended
                return self.exit_code if self.exit_code is not None else int(ExitCode.FAILED)
            ended = self.after_trainer(result)
        return ended

    def resume_after(self, previous: PreviousDrivers) -> None:
        """Continue after the earlier drivers of this attempt (a resubmission)."""
        if not previous.found:
            return
        self.start = previous.next_start
        if previous.first_trainer_start is not None:
            self.first_trainer_start = self.clock() - max(0.0, time.time() - previous.first_trainer_start)
        self.policy = RestartPolicy.resumed(self.plan.max_restarts, self.plan.early_node_loss_retries,
                                            previous.restarts)
        self.attempt_saw_step = previous.saw_step
        if previous.unfinished_start is not None:
            seen = previous.unfinished_last_seen
            self.records.event("trainer_exit", previous.unfinished_start, at=seen, exit_code=None,
                               reason="driver_lost", estimated=True,
                               last_checkpoint_step=last_checkpoint_step(self.plan.checkpoint_dir))
        if previous.unended:
            self.records.event("driver_lost", previous.unended_start, at=previous.last_seen)

    def checks_and_staging(self) -> int | None:
        """What runs once per driver, before the first GPU wait; the exit code once it ended."""
        plan = self.plan
        problem = check_writable(plan.checkpoint_dir)
        if problem:
            return self.end(ExitCode.NOT_WRITABLE, f"checkpoint directory {problem}")
        # Before any staging or GPU wait: a trainer that cannot start would only fail later.
        problem = self.trainer_missing()
        if problem:
            return self.end(ExitCode.TRAINER_NOT_FOUND, problem)
        if plan.prepare is not None:
            self.records.event("prepare_start", self.start)
            code = self.run_stage(plan.prepare)
            self.records.event("prepare_end", self.start, exit_code=code)
            if self.stop_seen(code):
                return self.stopped("data and model staging", code)
            if code != 0:
                return self.end(ExitCode.PREPARE_FAILED,
                                f"data/model staging exited {code} (see its lines above)")
        return None

    def gpu_wait(self) -> int | None:
        """The GPU wait stage (one hook); the exit code once the driver ended, else None."""
        plan = self.plan
        timeout = min(plan.gpu_wait_seconds, self.remaining())
        hold = getattr(self.hooks, "hold_gpus", None)
        if self.gang is None and hold is not None:
            # Never a GPU wait on a request nobody made: without the holder's confirmation the
            # run ends now, naming the cause (jobs/head/gpu_gang.py GangHolder).
            try:
                self.gang = hold(plan, on_event=self.gang_event, stop_seen=self.stop_seen)
            except GangRequestError as exc:
                code = exc.code if exc.code in {int(c) for c in ExitCode} else int(ExitCode.FAILED)
                return self.end(ExitCode(code), "the GPU gang request was not made, so no GPU "
                                f"node is coming: {exc.message}")
            except OSError as exc:
                return self.end(ExitCode.GANG_REQUEST_UNCONFIRMED, "the GPU gang holder could "
                                f"not start: {exc.strerror or exc}")
            else:
                self.records.event("gpu_request", self.start, gpus=plan.gpus,
                                   gpus_per_node=plan.gpus_per_node)
        self.records.event("gpu_wait_start", self.start, gpus=plan.gpus)
        code = self.hooks.wait_for_gpus(plan, timeout, self.run_child)
        self.records.event("gpu_wait_end", self.start, exit_code=code)
        if self.stop_seen(code):
            return self.stopped("the GPU wait", code)
        if code == 0:
            return None
        if code == ExitCode.GPU_GANG_INFEASIBLE:
            return self.end(ExitCode.GPU_GANG_INFEASIBLE, "the Ray autoscaler can never "
                            f"provide the run's {plan.gpus} GPUs ({plan.gpus_per_node} per "
                            "node): see the GPU wait's lines above")
        if self.remaining() <= 0:
            return self.end(ExitCode.DEADLINE, "the run's time budget ran out while waiting "
                            "for the GPUs")
        return self.end(ExitCode.GPU_WAIT_TIMEOUT if code == ExitCode.GPU_WAIT_TIMEOUT else ExitCode.FAILED,
                        f"the GPU wait exited {code}: the {plan.gpus} GPUs did not become "
                        f"available within {timeout:.0f}s")

    def gpus_and_gates(self) -> int | None:
        plan = self.plan
        ended = self.gpu_wait()
        if ended is not None:
            return ended
        if plan.health is not None:
            ended = self.health_gate()
            if ended is not None:
                return ended
        if plan.prune_checkpoints_keep is not None and plan.framework == "verl":
            removed = self.hooks.prune_checkpoints(Path(plan.checkpoint_dir), plan.prune_checkpoints_keep)
            self.records.event("checkpoint_prune", self.start, removed=[str(p) for p in removed])
        return None

    def health_gate(self) -> int | None:
        launched = time.time()
        self.records.event("health_start", self.start, reuse_on_same_nodes=self.gated)
        problem: str | None = None
        try:
            code = self.hooks.fabric_gate(self.plan, self.run_dir, self.gated, self.run_child)
        except OSError as exc:
            code, problem = int(ExitCode.HEALTH_GATE_FAILED), f"{type(exc).__name__}: {exc}"
        doc = self.health_result()
        reused = code == 0 and isinstance(doc.get("started"), (int, float)) and doc["started"] < launched
        self.records.event("health_end", self.start, passed=code == 0, exit_code=code, reused=reused)
        if self.stop_seen(code):
            return self.stopped("the health gate", code)
        if code != 0:
            if problem is None and code in (ExitCode.HEALTH_GATE_FAILED,) and doc.get("message"):
                return self.end(ExitCode.HEALTH_GATE_FAILED, f"health gate: {doc['message']}")
            return self.end(ExitCode.HEALTH_GATE_FAILED, f"health gate could not run (exit {code})"
                            + (f": {problem}" if problem else ""))
        self.gated = True
        return None

    def health_result(self) -> dict[str, Any]:
        doc = json_if_usable(self.run_dir / HEALTH_FILE, HEALTH_RESULT)
        return doc if isinstance(doc, dict) else {}

    def after_training(self) -> str:
        """The plan's export and evaluation after a completed trainer, while the run still holds
        its GPUs (stoppable children: the driver itself never connects to Ray). Their failure does
        not fail the trained run: it is recorded and said, and `gke-grpo export` redoes it."""
        said = []
        for name, command in (("export", self.plan.export), ("evaluate", self.plan.evaluate)):
            if command is None:
                continue
            if self.stop_requested.is_set():
                said.append(f"{name} not run (stopped)")
                continue
            self.records.event(f"{name}_start", self.start)
            code = self.run_stage(command)
            self.records.event(f"{name}_end", self.start, exit_code=code)
            said.append(f"{name} {'done' if code == 0 else f'FAILED (exit {code})'}")
        return f"; {', '.join(said)}" if said else ""

    def run_stage(self, command: Command) -> int:
        return self.run_child(list(command.argv), cwd=command.cwd,
                              env={**os.environ, **command.env})[0]

    def trainer_missing(self) -> str | None:
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

    # -- the trainer -------------------------------------------------------------------------
    def run_trainer(self) -> TrainerRun | None:
        """One trainer start; None when it could not start (the driver has ended)."""
        trainer = self.plan.trainer
        problem = self.trainer_missing()
        if problem:
            self.end(ExitCode.TRAINER_NOT_FOUND, problem)
            return None
        if self.first_trainer_start is None:
            self.first_trainer_start = self.clock()
        started_at = time.time()
        if self.pending is not None:
            self.pending.restarted_at = started_at
        placement = getattr(self.hooks, "gpu_placement", None)
        placed = placement(self.plan) if placement is not None else {}
        self.told = tell(self.plan, placed, self.run_dir, started_at)
        if self.told.line:
            self.say(self.told.line)
        self.records.event("trainer_start", self.start, at=started_at, argv0=trainer.argv[0],
                           resumed_from_step=last_checkpoint_step(self.plan.checkpoint_dir),
                           **placed, **self.told.record)
        tensorboard = tensorboard_dir(self.run_dir, self.attempt, self.start)
        proc = spawn(trainer.argv, cwd=trainer.cwd, stdout=subprocess.PIPE, text=True,
                     env={**os.environ, **trainer.env, TENSORBOARD_ENV: tensorboard, **self.told.env})
        output = TrainerOutput(expected_end=self.plan.completion_text)
        watch = NodeLossWatch(lambda since: self.hooks.dead_nodes(since, self.run_child)[0],
                              started_at - DEATH_SLACK_SECONDS) if self.plan.pools else None
        saves = SaveWatch(self.records, self.start, self.told, self.say)
        stdout = proc.stdout
        if stdout is None:    # impossible: stdout=PIPE
            raise RuntimeError("the trainer's stdout is not a pipe")

        def pump():
            for line in stdout:
                self.out.write(line)
                self.out.flush()
                step = output.feed(line)
                self.records.note_step(self.start, step)
                if step is not None and output.steps == 1:
                    self.first_step(step)
                saves.line(output.tail[-1], output)

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
                stop_group(proc, stop_grace())
                break
            if watch is not None and watch.stalled(output.steps):
                self.say(watch.reason)
                stop_group(proc, self.plan.stop_grace_seconds)
                break
            if self.remaining() <= 0:
                deadline_hit = True
                self.say(f"the time budget ({self.plan.deadline_seconds:.0f}s) is spent: stopping "
                         f"the trainer (SIGTERM, SIGKILL after {self.plan.stop_grace_seconds:.0f}s)")
                stop_group(proc, self.plan.stop_grace_seconds)
                break
        reader.join(timeout=5)
        ended_at = time.time()
        if proc.returncode == CANNOT_START and output.tail and output.tail[-1].startswith("cannot start "):
            self.records.event("trainer_exit", self.start, exit_code=CANNOT_START,
                               reason="trainer_not_found", last_checkpoint_step=None)
            self.end(ExitCode.TRAINER_NOT_FOUND, f"the trainer {output.tail[-1]}")
            return None
        # `ray job stop` signals the driver AND every descendant at once (Ray 2.54
        # dashboard/modules/job/job_supervisor.py: [job_process] + children(recursive=True)), so
        # the trainer often exits from that same SIGTERM before the loop above sees the request:
        # its exit is then the stop, not a failure of the trainer.
        terminated = terminated or self.stop_seen(proc.returncode)
        return TrainerRun(exit_code=proc.returncode, output=output, started_at=started_at,
                          ended_at=ended_at, deadline_hit=deadline_hit, terminated=terminated)

    def first_step(self, step: int) -> None:
        """The start's first step line (from the trainer's output thread): recorded, and the
        recovery of the restart that led here completed."""
        now = time.time()
        self.records.event("first_step", self.start, at=now, step=step)
        pending, self.pending = self.pending, None
        if pending is None:
            return
        record = reached(pending, now, step)
        self.records.event("recovery", self.start, at=now, **record)
        print(RECOVERY_MARKER + json.dumps({"attempt": self.attempt, "start": self.start, **record},
                                           sort_keys=True), file=self.out, flush=True)

    def dead_nodes_since(self, result: TrainerRun) -> list[DeadNode]:
        """The nodes the cluster reports dead since this start began. When the trainer's text
        could be a node leaving and none is reported yet, asks again for a while: a deleted
        pod's workers can die before the GCS marks its node dead."""
        since = result.started_at - DEATH_SLACK_SECONDS
        output = result.output
        settle = self.plan.node_settle_seconds if output.may_be_node_loss and not output.node_death else 0.0
        give_up = time.monotonic() + settle
        while True:
            nodes, problem = self.hooks.dead_nodes(since, self.run_child)
            if problem:
                self.say(f"node query: {problem}")
            dead = [n for n in nodes if n.died_at is not None and n.died_at >= since]
            if dead or time.monotonic() >= give_up or self.stop_requested.is_set():
                return dead
            self.say(f"no node reported dead yet; asking Ray again for up to "
                     f"{give_up - time.monotonic():.0f}s (a node that is leaving is marked dead late)")
            self.sleep(NODE_QUERY_EVERY_SECONDS)

    def after_trainer(self, result: TrainerRun) -> int | None:
        """Classify the start, record it, and restart or end; the exit code once ended."""
        plan, output = self.plan, result.output
        ordinary = ((result.exit_code == 0 and not plan.pools) or result.terminated or result.deadline_hit
                    or result.exit_code == 2 or output.usage)
        dead = [] if ordinary else self.dead_nodes_since(result)
        reason, evidence = classify(result.exit_code, output, attempt_saw_step=self.attempt_saw_step,
                                    dead_nodes=tuple(dead), deadline_hit=result.deadline_hit,
                                    terminated=result.terminated or self.stop_requested.is_set(),
                                    split=bool(plan.pools))
        trained = output.steps > 0
        self.attempt_saw_step |= trained
        if self.pending is not None:    # the restart led to a start that never logged a step
            pending, self.pending = self.pending, None
            self.records.event("recovery", self.start, **not_reached(pending, result.started_at, reason.value))
        step = last_checkpoint_step(plan.checkpoint_dir)
        if ((reason == Reason.CAPACITY_ENDED or result.exit_code == 0) and plan.total_steps is not None
                and step is not None and step >= plan.total_steps and reason != Reason.COMPLETED):
            # NeMo RL checks its save-by time before its step bound (grpo.py at v0.5.0), and a split
            # run's exit 0 with a lost node or without NeMo RL's end line (a start resumed from the
            # last step prints none: grpo.py 3650, 4314): a checkpoint of the last step is the end.
            reason, evidence = Reason.COMPLETED, f"{evidence}; its checkpoint is the last step ({step})"
        self.records.event("trainer_exit", self.start, at=result.ended_at, exit_code=result.exit_code,
                           reason=reason.value, last_checkpoint_step=step, last_step=output.last_step,
                           evidence=evidence[:600], lost_nodes=[n.node_id for n in dead])
        if reason == Reason.DEADLINE:
            self.records.event("deadline", self.start, deadline_seconds=plan.deadline_seconds)
            return self.end(ExitCode.DEADLINE, (
                f"the run's time budget (gke-grpo:job.activeDeadlineSeconds = "
                f"{plan.deadline_seconds:.0f}s from the first trainer start) is spent: trainer "
                f"stopped; last checkpointed step {step if step is not None else 'none'}"))
        if reason == Reason.TERMINATED:
            return self.end(ExitCode.TERMINATED, "stopped (SIGTERM) while the trainer ran; it "
                            f"resumes from checkpoint step {step if step is not None else 'none'}")
        if reason == Reason.COMPLETED:
            evidence += self.after_training()
        if reason not in (Reason.NODE_LOST, Reason.CAPACITY_ENDED):
            return self.end(REASON_EXIT[reason], f"{reason.value}: {evidence}" + (
                "" if reason == Reason.COMPLETED else "; not restarted (no node was lost: it "
                "would fail again)"))
        refused, why = self.policy.decide(trained=trained, checkpoint=step)
        if refused is not None:
            return self.end(refused, f"{why}; last loss: {evidence}")
        deaths = [n.died_at for n in dead if n.died_at is not None]
        loss_at, source = (min(deaths), "node marked dead") if deaths else (result.ended_at, "trainer exit")
        delay = backoff_seconds(self.policy.since_progress, plan.backoff_base_seconds,
                                plan.backoff_cap_seconds)
        if reason == Reason.CAPACITY_ENDED:     # wait until the nodes have gone, not a backoff
            loss_at, source = result.ended_at, "capacity end"
            delay = restart_delay(self.told, time.time(), plan.node_settle_seconds)
        record = self.records.restart(
            reason=reason.value, exit_code=result.exit_code, last_checkpoint_step=step,
            start=self.start, trained=trained, last_step=output.last_step, evidence=evidence[:600],
            lost_nodes=[n.node_id for n in dead], loss_at=round(loss_at, 3), backoff_s=delay)
        print(RESTART_MARKER + json.dumps(record, sort_keys=True), file=self.out, flush=True)
        self.say(f"restart {self.policy.restarts}/{plan.max_restarts} "
                 f"{'as its capacity ends' if reason == Reason.CAPACITY_ENDED else 'after a lost node'} ({evidence}); "
                 f"resuming from step {step if step is not None else 'none'} in {delay:.0f}s")
        if delay >= self.remaining():
            self.records.event("deadline", self.start, deadline_seconds=plan.deadline_seconds)
            return self.end(ExitCode.DEADLINE, "the run's time budget ends before the next restart "
                            "could start")
        self.pending = PendingRecovery(
            restart=self.policy.restarts, from_start=self.start, loss_at=loss_at, loss_source=source,
            decided_at=time.time(), backoff_s=delay, last_step=output.last_step,
            resumed_from_step=step)
        self.sleep(delay)
        if self.stop_requested.is_set():
            return self.stopped("the backoff before a restart")
        self.start += 1
        return None
