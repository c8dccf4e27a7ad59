"""Why a trainer start ended, from its exit code, what it printed and what the cluster says about
its nodes: the run driver restarts the trainer only on evidence of lost capacity (a node that
died or was preempted while the start ran, or NeMo RL's stop after it saved because its capacity
ends on schedule: jobs/contract/capacity_end.py); everything else is a failure with its own reason.

    classify(exit_code, output, node_loss=..., attempt_saw_step=...) -> (Reason, evidence)

Why not "any worker death": Ray prints the same "The actor died unexpectedly before finishing
this task." for a node that died and for a worker process that segfaulted or was killed by the
kernel's OOM killer, and PyTorch's NCCL watchdog times out the same way whether a peer's node
left or a peer hangs. A crash or a hang repeats after a restart; a lost node does not. So the
driver restarts on node evidence only: Ray's own node-death text, or a node the cluster reports
DEAD since the start began (jobs/head/node_deaths.py asks Ray, read-only, from a child process).
"""

from __future__ import annotations

import collections
import enum
import re
from dataclasses import dataclass, field

from jobs.contract.capacity_end import CAPACITY_ENDED_REASON, NEMO_RL_TIMEOUT_TEXT, VERL_FORCED_SAVE_TEXT
from jobs.contract.exit_codes import ExitCode
from jobs.contract.layouts import NEMO_RL_ASYNC_LOOP_ERROR_TEXT


class Reason(enum.StrEnum):
    """Why a trainer start ended (the ``reason`` of trainer_exit and restarts.jsonl)."""
    COMPLETED = "completed"
    NODE_LOST = "node_lost"                      # restarted (bounded)
    USAGE_ERROR = "usage_error"
    BEFORE_FIRST_STEP = "before_first_step"
    OUT_OF_MEMORY = "out_of_memory"
    WORKER_CRASHED = "worker_crashed"
    COLLECTIVE_TIMEOUT = "collective_timeout"
    TRAINER_FAILED = "trainer_failed"
    DEADLINE = "deadline"
    TERMINATED = "terminated"
    CAPACITY_ENDED = CAPACITY_ENDED_REASON       # NeMo RL saved and stopped: restarted (bounded)


# Sources, Ray 2.54.0 (the wheel, read 2026-12-01: ray/exceptions.py, and the literal strings of
# ray/core/src/ray/gcs/gcs_server, raylet and ray/_raylet.so; each also observed live on
# ray.cluster_utils.Cluster, quoted in the patterns' comments).

# A node died or was preempted: lost capacity, restarted.
NODE_DEATH_PATTERNS = tuple(re.compile(p) for p in (
    # gcs_server GcsActorManager GenNodeDiedCause: "The actor died because its node has died.
    # Node Id: ..." then "\tthe actor's node was terminated expectedly: received SIGTERM" (a pod
    # deleted), "... terminated unexpectedly: health check failed due to missing too many
    # heartbeats" (a node gone), "... was preempted: <drain reason>" (a drained Spot node).
    r"because its node has died",
    r"the actor's node was preempted",
    # common.proto NodeDeathInfo.Reason, printed by name in Ray's and the frameworks' logs.
    r"\bAUTOSCALER_DRAIN_PREEMPTED\b",
    # _raylet.so, a plain task on a dead node (ErrorType NODE_DIED -> ray.exceptions.NodeDiedError):
    # "Task failed because the node it was running on is dead or unavailable. ..." (2.54.0,
    # 2.55.1); Ray 2.49.2's says "Task failed due to the node (where this task was running)
    # <node> was dead or unavailable." (its _raylet.so, read 2026-12-06).
    r"the node it was running on is dead or unavailable",
    r"Task failed due to the node \(where this task was running\)",
    r"\bNodeDiedError\b",
    # _raylet.so: "Actor died by preemption." and "... failed due to node preemption."
    r"Actor died by preemption",
    r"failed due to node preemption",
))
# Ray's memory monitor killed a worker (raylet: "Task was killed due to the node running low on
# memory." up to Ray 2.54; "%d worker(s) were killed due to the node running low on memory. %s, %s"
# in Ray 2.55.1's raylet, read from the wheel's binary 2026-12-06; both
# -> ray.exceptions.OutOfMemoryError), or CUDA ran out of memory (PyTorch
# c10/cuda/CUDACachingAllocator.cpp: "CUDA out of memory. Tried to allocate ...", raised as
# torch.OutOfMemoryError). Either repeats on the same nodes with the same configuration.
OOM_PATTERNS = tuple(re.compile(p) for p in (
    r"Task was killed due to the node running low on memory",
    r"worker\(s\) were killed due to the node running low on memory",
    r"\bray\.exceptions\.OutOfMemoryError\b",
    r"CUDA out of memory",
    r"\btorch\.(?:cuda\.)?OutOfMemoryError\b",
))
# A collective that timed out or was aborted (PyTorch c10d ProcessGroupNCCL.cpp: "Watchdog caught
# collective operation timeout: WorkNCCL(...) ran for N milliseconds before timing out", "Some
# NCCL operations have failed or timed out", "NCCL communicator was aborted"; NCCL's
# ncclRemoteError; Python's torch.distributed.DistBackendError). With TORCH_NCCL_ASYNC_ERROR_HANDLING
# at its default (3) the watchdog then tears the process down. A lost node only when a node
# actually left (the cluster says so); else a hang.
COLLECTIVE_PATTERNS = tuple(re.compile(p) for p in (
    r"Watchdog caught collective operation timeout",
    r"Some NCCL operations have failed or timed out",
    r"NCCL communicator was aborted",
    r"\bncclRemoteError\b",
    r"\bDistBackendError\b",
))
# A process died (its node did not, as far as this text says): gcs_server GenWorkerDiedCause "The
# actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR ..." with the
# raylet's "Worker unexpectedly exits with a connection error code 2. End of file. Some common
# causes include: (1) the process was killed by the OOM killer ..., (3) the worker crashed
# unexpectedly due to SIGSEGV ..." (identical for SIGSEGV, SIGKILL and a kernel OOM kill, observed);
# ray/exceptions.py ActorDiedError ("The actor died unexpectedly before finishing this task.",
# also the first line of a node death: only the lines above tell which), WorkerCrashedError ("The
# worker died unexpectedly while executing this task."), LocalRayletDiedError, OwnerDiedError,
# ActorUnavailableError ("The actor ... is unavailable: ..."; a node that is leaving can show
# this first, which the cluster query settles).
WORKER_DEATH_PATTERNS = tuple(re.compile(p) for p in (
    r"The actor is dead because its worker process has died",
    r"Worker unexpectedly exits with a connection error code",
    r"The worker died unexpectedly while executing this task",
    r"\bWorkerCrashedError\b",
    r"The actor died unexpectedly before finishing this task",
    r"\bActorDiedError\b",
    r"\bActorUnavailableError\b",
    r"\bLocalRayletDiedError\b",
    r"\bOwnerDiedError\b",
))
# An actor that failed in its own __init__ (ray/exceptions.py ActorDiedError: "The actor died
# because of an error raised in its creation task") fails the same way on every start.
CREATION_TASK_PATTERNS = (re.compile(r"The actor died because of an error raised in its creation task"),)
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
# The trainer saves because its capacity ends (jobs/contract/capacity_end.py): verl v0.7.1 prints
# this before the forced save and trains on (verl/trainer/ppo/ray_trainer.py fit, from its
# TaskRunner actor: Ray forwards it as "(TaskRunner pid=...) Force saving ..."); NeMo RL v0.5.0
# prints the other after its save, then grpo_train returns (nemo_rl/algorithms/grpo.py).
FORCED_SAVE_PATTERNS = (re.compile(re.escape(VERL_FORCED_SAVE_TEXT)),)
CAPACITY_STOP_PATTERNS = (re.compile(re.escape(NEMO_RL_TIMEOUT_TEXT)),)
# NeMo RL's asynchronous loop caught an error and returned (jobs/contract/layouts.py).
ASYNC_ERROR_PATTERNS = (re.compile(re.escape(NEMO_RL_ASYNC_LOOP_ERROR_TEXT)),)
# One training step, as the frameworks log it (jobs/cli/training_logs.py has the sources): verl's
# console logger prints "step:N - ..." per step; NeMo RL's grpo_train prints "===== Step N/M =====".
STEP_PATTERNS = (re.compile(r"(?:^|[\s)\]])step:(\d+) - "), re.compile(r"=+ Step (\d+)/(\d+) =+"))
# Ray colours the prefixes of the lines it forwards ("\x1b[33m(raylet)\x1b[0m ..."): not evidence.
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")

# (attribute of TrainerOutput, patterns): the first matching line of each kind is kept.
_KINDS = (("node_death", NODE_DEATH_PATTERNS), ("oom", OOM_PATTERNS),
          ("collective", COLLECTIVE_PATTERNS), ("worker_death", WORKER_DEATH_PATTERNS),
          ("creation_task", CREATION_TASK_PATTERNS), ("usage", USAGE_PATTERNS),
          ("forced_save", FORCED_SAVE_PATTERNS), ("capacity_stop", CAPACITY_STOP_PATTERNS),
          ("async_error", ASYNC_ERROR_PATTERNS))


@dataclass
class TrainerOutput:
    """What the driver saw of one trainer start, scanned line by line."""
    tail: collections.deque = field(default_factory=lambda: collections.deque(maxlen=200))
    steps: int = 0                       # step lines seen
    first_step: int | None = None
    last_step: int | None = None
    node_death: str | None = None        # the first line of each kind
    oom: str | None = None
    collective: str | None = None
    worker_death: str | None = None
    creation_task: str | None = None
    usage: str | None = None
    forced_save: str | None = None       # verl saved before its capacity's end (and trains on)
    capacity_stop: str | None = None     # NeMo RL saved and stopped before its capacity's end
    async_error: str | None = None       # NeMo RL's asynchronous loop caught an error
    # The line an exit 0 needs to be a completed run (the plan's completion_text), and whether it
    # came: NeMo RL's asynchronous loop exits 0 after an error too.
    expected_end: str | None = None
    end_seen: bool = False

    def feed(self, line: str) -> int | None:
        """Scan one line; the step number when it is a step line."""
        text = ANSI_ESCAPE.sub("", line.rstrip("\n"))
        self.tail.append(text)
        if self.expected_end is not None and not self.end_seen and self.expected_end in text:
            self.end_seen = True
        for name, patterns in _KINDS:
            if getattr(self, name) is None and any(p.search(text) for p in patterns):
                setattr(self, name, text.strip())
        for pattern in STEP_PATTERNS:
            match = pattern.search(text)
            if match:
                self.steps += 1
                self.last_step = int(match.group(1))
                if self.first_step is None:
                    self.first_step = self.last_step
                return self.last_step
        return None

    @property
    def may_be_node_loss(self) -> bool:
        """The text shows a death or a collective failure that a node leaving could explain:
        worth asking the cluster (and waiting for it to notice) before calling it a crash."""
        return any((self.node_death, self.collective, self.worker_death))


@dataclass(frozen=True)
class DeadNode:
    """A Ray node the cluster reports DEAD (jobs/head/node_deaths.py)."""
    node_id: str
    address: str
    reason: str                    # NodeDeathInfo.Reason name, e.g. AUTOSCALER_DRAIN_PREEMPTED
    message: str                   # its reason_message, e.g. "received SIGTERM"
    died_at: float | None          # epoch seconds the GCS marked it dead (None: not known)

    def describe(self) -> str:
        return f"node {self.node_id[:12]} ({self.address}) {self.reason}: {self.message}"


def classify(exit_code: int, output: TrainerOutput, *, attempt_saw_step: bool,
             dead_nodes: tuple[DeadNode, ...] = (), deadline_hit: bool = False,
             terminated: bool = False, split: bool = False) -> tuple[Reason, str]:
    """Why a trainer start ended, and the evidence (one line). Only NODE_LOST is restarted.

    ``dead_nodes``: the nodes the cluster reports dead since this start began. ``split``: a split
    layout's run, whose exit 0 is a completed run only if none of its nodes died: verl 0.9.1's
    fully-async rollouter takes a lost rollout replica for the end of its data and the trainer
    then finishes normally (verl/experimental/fully_async_policy/fully_async_rollouter.py; the
    research note of docs/layouts.md), so a lost rollout node can look like a completed run."""
    lost_text = output.node_death or output.collective or output.worker_death
    no_node = "no node left the cluster"
    missing_end = output.expected_end is not None and not output.end_seen
    rules: tuple[tuple[bool, Reason, str], ...] = (
        (terminated, Reason.TERMINATED, "the driver was asked to stop (SIGTERM)"),
        (deadline_hit, Reason.DEADLINE, "the run's time budget is spent"),
        # NeMo RL returns normally once it saved for its capacity's end: not a finished run.
        (exit_code == 0 and bool(output.capacity_stop), Reason.CAPACITY_ENDED,
         f"the trainer saved and stopped before its capacity ends: {output.capacity_stop}"),
        (exit_code == 0 and split and bool(dead_nodes), Reason.NODE_LOST,
         "the trainer exited 0 but a node of the run was lost meanwhile: "
         + "; ".join(n.describe() for n in dead_nodes)),
        (exit_code == 0 and missing_end, Reason.TRAINER_FAILED,
         f"the trainer exited 0 without its end-of-run line ({output.expected_end!r}): "
         f"{output.async_error or 'its loop stopped early'}"),
        (exit_code == 0, Reason.COMPLETED, "the trainer exited 0"),
        (exit_code == 2 or bool(output.usage), Reason.USAGE_ERROR,
         output.usage or "the trainer exited 2 (usage error)"),
        (bool(dead_nodes), Reason.NODE_LOST, "; ".join(
            [n.describe() for n in dead_nodes] + ([f"trainer: {lost_text}"] if lost_text else []))),
        (bool(output.node_death), Reason.NODE_LOST, output.node_death or ""),
        (bool(output.creation_task), Reason.TRAINER_FAILED, output.creation_task or ""),
        (bool(output.oom), Reason.OUT_OF_MEMORY, output.oom or ""),
        (bool(output.collective), Reason.COLLECTIVE_TIMEOUT,
         f"{output.collective} ({no_node}: a hang or a crashed peer, not lost capacity)"),
        (bool(output.worker_death), Reason.WORKER_CRASHED,
         f"{output.worker_death} ({no_node}: a crash, a kill or the kernel's OOM killer)"),
        (not attempt_saw_step and output.steps == 0, Reason.BEFORE_FIRST_STEP,
         f"the trainer exited {exit_code} before the attempt's first training step"),
    )
    return next(((reason, evidence) for applies, reason, evidence in rules if applies),
                (Reason.TRAINER_FAILED, f"the trainer exited {exit_code}"))


REASON_EXIT: dict[Reason, ExitCode] = {
    Reason.COMPLETED: ExitCode.OK,
    Reason.USAGE_ERROR: ExitCode.USAGE,
    Reason.BEFORE_FIRST_STEP: ExitCode.BEFORE_FIRST_STEP,
    Reason.OUT_OF_MEMORY: ExitCode.OUT_OF_MEMORY,
    Reason.WORKER_CRASHED: ExitCode.WORKER_CRASHED,
    Reason.COLLECTIVE_TIMEOUT: ExitCode.COLLECTIVE_TIMEOUT,
    Reason.TRAINER_FAILED: ExitCode.FAILED,
    Reason.DEADLINE: ExitCode.DEADLINE,
    Reason.TERMINATED: ExitCode.TERMINATED,
    Reason.NODE_LOST: ExitCode.RESTARTS_EXHAUSTED,
    Reason.CAPACITY_ENDED: ExitCode.RESTARTS_EXHAUSTED,
}


def backoff_seconds(restart: int, base: float, cap: float) -> float:
    """Capped exponential backoff before the ``restart``-th restart since the checkpoint last
    advanced (1, 2, ...)."""
    return min(cap, base * (2 ** max(restart - 1, 0)))


@dataclass
class RestartPolicy:
    """When a node loss is restarted: on evidence of lost capacity only (the caller classified
    it), and only while restarts make progress.

    - A start that lost a node after printing a training step is restarted once from a given
      checkpoint: when the next start loses a node too and the last complete checkpoint has not
      moved since the previous restart, the attempt ends (a crash loop: the same work would be
      redone for nothing).
    - A start that lost a node before its own first step (model load, vLLM start-up, the initial
      validation: a Spot node preempted early) could not make progress; up to ``early_retries``
      such losses in a row are restarted.
    - In all, at most ``max_restarts`` restarts per attempt.
    The backoff counts the restarts since the checkpoint last advanced, so it resets with
    progress."""
    max_restarts: int
    early_retries: int
    restarts: int = 0
    early_in_a_row: int = 0
    checkpoint_at_restart: int | None = None   # the checkpoint the last trained restart resumed
    trained_restart_done: bool = False
    since_progress: int = 0

    @classmethod
    def resumed(cls, max_restarts: int, early_retries: int, earlier: list[dict]) -> RestartPolicy:
        """The policy as an earlier driver of the attempt left it (its restarts.jsonl records)."""
        policy = cls(max_restarts, early_retries)
        for record in earlier:
            checkpoint = record.get("last_checkpoint_step")
            checkpoint = checkpoint if isinstance(checkpoint, int) else None
            policy.restarts += 1
            if record.get("trained", True):
                policy.trained_restart_done = True
                policy.checkpoint_at_restart = checkpoint
                policy.early_in_a_row = 0
            else:
                policy.early_in_a_row += 1
        return policy

    def decide(self, *, trained: bool, checkpoint: int | None) -> tuple[ExitCode | None, str]:
        """(None, why) to restart; (exit code, why not) to end the attempt."""
        if self.restarts >= self.max_restarts:
            return ExitCode.RESTARTS_EXHAUSTED, (f"lost nodes again after {self.restarts} restarts "
                                                 f"(gke-grpo:job.maxRestarts = {self.max_restarts})")
        progressed = (checkpoint is not None and (self.checkpoint_at_restart is None
                                                  or checkpoint > self.checkpoint_at_restart))
        if progressed:
            self.since_progress = 0
        if not trained:
            if self.early_in_a_row >= self.early_retries:
                return ExitCode.CRASH_LOOP, (
                    f"lost a node before the first training step {self.early_in_a_row + 1} times "
                    f"in a row (at most {self.early_retries} such restarts)")
            self.early_in_a_row += 1
        else:
            if self.trained_restart_done and not progressed:
                return ExitCode.CRASH_LOOP, (
                    "lost a node again with no newer complete checkpoint than at the previous "
                    f"restart (step {_step_text(checkpoint)}): a second restart would redo the "
                    "same steps")
            self.early_in_a_row = 0
            self.trained_restart_done = True
            self.checkpoint_at_restart = checkpoint
        self.restarts += 1
        self.since_progress += 1
        return None, "restart"


def _step_text(step: int | None) -> str:
    return "none" if step is None else str(step)
