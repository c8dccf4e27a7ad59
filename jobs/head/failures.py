"""Why a trainer start ended, from its exit code and what it printed: the run driver restarts the
trainer only after a lost worker, and classifies everything else as a failure with its reason.
"""

from __future__ import annotations

import collections
import enum
import re
from dataclasses import dataclass, field

from jobs.contract.exit_codes import ExitCode


class Reason(enum.StrEnum):
    """Why a trainer start ended (the ``reason`` of trainer_exit and restarts.jsonl)."""
    COMPLETED = "completed"
    LOST_WORKER = "lost_worker"
    USAGE_ERROR = "usage_error"
    BEFORE_FIRST_STEP = "before_first_step"
    TRAINER_FAILED = "trainer_failed"
    DEADLINE = "deadline"
    TERMINATED = "terminated"


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
# One training step, as the frameworks log it (jobs/cli/training_logs.py has the sources): verl's console
# logger prints "step:N - ..." per step; NeMo RL's grpo_train prints "===== Step N/M =====".
STEP_PATTERNS = (re.compile(r"(?:^|[\s)\]])step:(\d+) - "), re.compile(r"=+ Step (\d+)/(\d+) =+"))


@dataclass
class TrainerOutput:
    """What the driver saw of one trainer start, scanned line by line."""
    tail: collections.deque = field(default_factory=lambda: collections.deque(maxlen=200))
    steps: int = 0                       # step lines seen
    last_step: int | None = None
    lost_worker: str | None = None    # first line that shows a lost worker
    not_lost: str | None = None
    usage: str | None = None

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


REASON_EXIT: dict[Reason, ExitCode] = {
    Reason.COMPLETED: ExitCode.OK,
    Reason.USAGE_ERROR: ExitCode.USAGE,
    Reason.BEFORE_FIRST_STEP: ExitCode.BEFORE_FIRST_STEP,
    Reason.TRAINER_FAILED: ExitCode.FAILED,
    Reason.DEADLINE: ExitCode.DEADLINE,
    Reason.TERMINATED: ExitCode.TERMINATED,
    Reason.LOST_WORKER: ExitCode.RESTARTS_EXHAUSTED,
}


def backoff_seconds(restart: int, base: float, cap: float) -> float:
    """Capped exponential backoff before restart ``restart`` (1, 2, ...)."""
    return min(cap, base * (2 ** max(restart - 1, 0)))
