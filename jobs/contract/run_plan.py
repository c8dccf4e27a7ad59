"""The run plan: everything the run driver (jobs/head/driver.py) needs, in one JSON file.

    RUN_COMMAND = "python3 -m jobs.run --plan /opt/gke-grpo/run/plan.json"

The Ray job of every attempt is that one command, for the Pulumi RayJob and the jobs CLI alike.
It is shell-safe on purpose (words of ``[A-Za-z0-9_./=-]`` separated by single spaces): KubeRay
v1.7.0's K8sJobMode submitter appends ``spec.entrypoint`` unquoted to a ``bash -c`` script
(ray-operator/controllers/ray/common/job.go, ``BuildJobSubmitCommand``: ``cmd = append(cmd,
"--", entrypoint, ";")``), and Ray's job CLI re-joins the words with ``subprocess.list2cmdline``
(ray/dashboard/modules/job/cli.py, Ray 2.54) before the head runs them in a shell again. A
command with nothing a shell interprets survives both parses unchanged.

Everything else (the trainer's argv and working directory, the stages, the budgets) is data in
the plan, which the Pulumi program writes into the head's jobs ConfigMap (mounted at
``/opt/gke-grpo/run/plan.json``). Changing a budget changes that file, not the RayJob: a live
driver has read its plan already, the next attempt reads the new one.

The Pulumi program builds the plan (jobs/plan/plan_builder.py); the driver reads it here.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jobs.contract.spec import GrpoSpec

PLAN_DIR = "/opt/gke-grpo/run"
PLAN_FILE = "plan.json"
PLAN_PATH = f"{PLAN_DIR}/{PLAN_FILE}"
PLAN_VERSION = 1
PYTHON = "python3"   # the framework images have python3; not all have `python`
RUN_COMMAND = f"python3 -m jobs.run --plan {PLAN_PATH}"
# What "shell-safe" means here: nothing bash would split, expand, redirect or chain.
SHELL_SAFE = re.compile(r"[A-Za-z0-9_./=-]+(?: [A-Za-z0-9_./=-]+)*")

DEFAULT_MAX_RESTARTS = 20
DEFAULT_STOP_GRACE_SECONDS = 120.0
DEFAULT_BACKOFF_BASE_SECONDS = 30.0
DEFAULT_BACKOFF_CAP_SECONDS = 600.0
DEFAULT_GPU_POLL_SECONDS = 2.0
# Node losses before a start's first training step (model load, vLLM start-up, the initial
# validation) restarted in a row: a Spot node can go early, but not forever.
DEFAULT_EARLY_NODE_LOSS_RETRIES = 2
# How long the driver keeps asking Ray whether a node died, after a trainer start failed in a way
# a leaving node could explain (a worker died, a collective failed) and no node was reported dead
# yet. Observed on Ray 2.54.0 (tools/bench_recovery.py): a node whose raylet is killed outright
# shows the trainer ActorUnavailableError ("The actor ... is unavailable: ... RpcError") within
# about 4 s, and the GCS marks the node dead ("health check failed due to missing too many
# heartbeats") about 15-18 s after the kill.
DEFAULT_NODE_SETTLE_SECONDS = 30.0
# How long Ray's job supervisor waits between the SIGTERM of `ray job stop` (or of a deleted
# RayJob) and its SIGKILL: RAY_JOB_STOP_WAIT_TIME_S, read from the supervisor actor's environment
# (Ray 2.54 dashboard/modules/job/job_supervisor.py, default 3 s), which carries the job's
# runtime_env env_vars (job_manager.py _get_supervisor_runtime_env; tested for real in
# tests/jobs/head/test_driver_ray.py). Every job's runtime env sets it (jobs/plan/render.py): the
# trainer gets a SIGTERM it can act on (Ray's own handler in a framework process that called
# ray.init: SystemExit, so atexit hooks and ray.shutdown run) and the driver records the stop.
JOB_STOP_WAIT_ENV = "RAY_JOB_STOP_WAIT_TIME_S"
JOB_STOP_WAIT_SECONDS = 30


class RunPlanError(Exception):
    """The plan file is missing, unreadable or not a plan: a one-line reason."""


@dataclass(frozen=True)
class Command:
    argv: tuple[str, ...]
    cwd: str | None = None
    env: dict[str, str] = field(default_factory=dict)   # names and values, never secrets


@dataclass(frozen=True)
class RunPlan:
    run_id: str
    attempt: int                       # the attempt the plan was written for (the RayJob's)
    framework: str                     # "verl" | "nemo-rl"
    run_dir: str                       # /data/runs/<run-id>: events.jsonl, restarts.jsonl
    checkpoint_dir: str                # /data/checkpoints/<run-id>, resumed by every start
    prepare: Command | None         # data and model staging (CPU, on the head)
    gpus: int
    gpus_per_node: int
    gpu_wait_seconds: float
    trainer: Command
    deadline_seconds: float | None  # job.activeDeadlineSeconds, from the first trainer start
    max_restarts: int = DEFAULT_MAX_RESTARTS
    stop_grace_seconds: float = DEFAULT_STOP_GRACE_SECONDS
    backoff_base_seconds: float = DEFAULT_BACKOFF_BASE_SECONDS
    backoff_cap_seconds: float = DEFAULT_BACKOFF_CAP_SECONDS
    gpu_poll_seconds: float = DEFAULT_GPU_POLL_SECONDS
    # The fabric/storage gate's settings (jobs/contract/health.py HealthPlan); None: no gate.
    health: dict[str, Any] | None = None
    # verl only: keep this many global_step_* directories before every start; None: no pruning.
    prune_checkpoints_keep: int | None = None
    early_node_loss_retries: int = DEFAULT_EARLY_NODE_LOSS_RETRIES
    node_settle_seconds: float = DEFAULT_NODE_SETTLE_SECONDS
    version: int = PLAN_VERSION

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True, indent=1) + "\n"


def _command(value: Any, where: str) -> Command:
    if not isinstance(value, dict) or not isinstance(value.get("argv"), list) or not value["argv"] \
            or not all(isinstance(a, str) and a for a in value["argv"]):
        raise RunPlanError(f"{where}.argv must be a non-empty list of strings")
    env = value.get("env") or {}
    if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        raise RunPlanError(f"{where}.env must map names to strings")
    cwd = value.get("cwd")
    if cwd is not None and not isinstance(cwd, str):
        raise RunPlanError(f"{where}.cwd must be a string")
    return Command(argv=tuple(value["argv"]), cwd=cwd, env=dict(env))


def plan_from_dict(data: Any) -> RunPlan:
    if not isinstance(data, dict):
        raise RunPlanError("not a JSON object")
    if data.get("version") != PLAN_VERSION:
        raise RunPlanError(f"plan version {data.get('version')!r}, this driver reads version {PLAN_VERSION}")
    names = {f.name for f in dataclasses.fields(RunPlan)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise RunPlanError(f"unknown plan keys: {', '.join(unknown)}")
    missing = sorted(f.name for f in dataclasses.fields(RunPlan) if f.name not in data
                     and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)
    if missing:
        raise RunPlanError(f"missing plan keys: {', '.join(missing)}")
    fields = dict(data)
    fields["trainer"] = _command(data.get("trainer"), "trainer")
    fields["prepare"] = None if data.get("prepare") is None else _command(data["prepare"], "prepare")
    plan = RunPlan(**fields)
    for name in ("run_id", "framework", "run_dir", "checkpoint_dir"):
        if not isinstance(getattr(plan, name), str) or not getattr(plan, name):
            raise RunPlanError(f"{name} must be a non-empty string")
    for name, low in (("attempt", 1), ("gpus", 1), ("gpus_per_node", 1), ("max_restarts", 0),
                      ("early_node_loss_retries", 0)):
        value = getattr(plan, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise RunPlanError(f"{name} must be an integer >= {low}, got {value!r}")
    for name in ("gpu_wait_seconds", "stop_grace_seconds", "backoff_base_seconds",
                 "backoff_cap_seconds", "gpu_poll_seconds"):
        value = getattr(plan, name)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
            raise RunPlanError(f"{name} must be a number > 0, got {value!r}")
    if not isinstance(plan.node_settle_seconds, (int, float)) or isinstance(plan.node_settle_seconds, bool) \
            or plan.node_settle_seconds < 0:
        raise RunPlanError(f"node_settle_seconds must be a number >= 0, got {plan.node_settle_seconds!r}")
    if plan.deadline_seconds is not None and (not isinstance(plan.deadline_seconds, (int, float))
                                              or plan.deadline_seconds <= 0):
        raise RunPlanError(f"deadline_seconds must be a number > 0 or null, got {plan.deadline_seconds!r}")
    return plan


def load_plan(path: str | Path) -> RunPlan:
    """Read and check a plan file; PlanError with a one-line reason otherwise."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise RunPlanError(f"plan file {path} does not exist (is the jobs ConfigMap mounted on the "
                        "head? `pulumi up` writes it)") from None
    except OSError as exc:
        raise RunPlanError(f"plan file {path} is unreadable: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise RunPlanError(f"plan file {path} is not JSON: {exc}") from None
    try:
        return plan_from_dict(data)
    except RunPlanError as exc:
        raise RunPlanError(f"plan file {path}: {exc}") from None


def submission_metadata(spec: GrpoSpec, attempt: int) -> dict[str, str]:
    """The Ray job metadata of an attempt (strings only, nothing secret), written alike by the
    Pulumi RayJob and the jobs CLI: what ties a Ray job to its run when read back."""
    return {"run_id": spec.run_id, "spec_hash": spec.spec_hash, "attempt": str(attempt),
            "experiment": spec.experiment_name, "framework": spec.framework}
