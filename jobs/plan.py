"""The run plan: everything the run driver (jobs/run.py) needs, in one JSON file.

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

Standard library only: this module is read on the Ray head by the driver.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

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


class PlanError(Exception):
    """The plan file is missing, unreadable or not a plan: a one-line reason."""


@dataclass(frozen=True)
class Command:
    argv: tuple[str, ...]
    cwd: Optional[str] = None
    env: dict[str, str] = field(default_factory=dict)   # names and values, never secrets


@dataclass(frozen=True)
class RunPlan:
    run_id: str
    attempt: int                       # the attempt the plan was written for (the RayJob's)
    framework: str                     # "verl" | "nemo-rl"
    run_dir: str                       # /data/runs/<run-id>: events.jsonl, restarts.jsonl
    checkpoint_dir: str                # /data/checkpoints/<run-id>, resumed by every start
    prepare: Optional[Command]         # data and model staging (CPU, on the head)
    gpus: int
    gpus_per_node: int
    gpu_wait_seconds: float
    trainer: Command
    deadline_seconds: Optional[float]  # job.activeDeadlineSeconds, from the first trainer start
    max_restarts: int = DEFAULT_MAX_RESTARTS
    stop_grace_seconds: float = DEFAULT_STOP_GRACE_SECONDS
    backoff_base_seconds: float = DEFAULT_BACKOFF_BASE_SECONDS
    backoff_cap_seconds: float = DEFAULT_BACKOFF_CAP_SECONDS
    gpu_poll_seconds: float = DEFAULT_GPU_POLL_SECONDS
    # Issue 17's fabric/storage gate settings; None: no gate.
    health: Optional[dict[str, Any]] = None
    # verl only: keep this many global_step_* directories before every start; None: no pruning.
    prune_checkpoints_keep: Optional[int] = None
    version: int = PLAN_VERSION

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True, indent=1) + "\n"


def _command(value: Any, where: str) -> Command:
    if not isinstance(value, dict) or not isinstance(value.get("argv"), list) or not value["argv"] \
            or not all(isinstance(a, str) and a for a in value["argv"]):
        raise PlanError(f"{where}.argv must be a non-empty list of strings")
    env = value.get("env") or {}
    if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        raise PlanError(f"{where}.env must map names to strings")
    cwd = value.get("cwd")
    if cwd is not None and not isinstance(cwd, str):
        raise PlanError(f"{where}.cwd must be a string")
    return Command(argv=tuple(value["argv"]), cwd=cwd, env=dict(env))


def plan_from_dict(data: Any) -> RunPlan:
    if not isinstance(data, dict):
        raise PlanError("not a JSON object")
    if data.get("version") != PLAN_VERSION:
        raise PlanError(f"plan version {data.get('version')!r}, this driver reads version {PLAN_VERSION}")
    names = {f.name for f in dataclasses.fields(RunPlan)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise PlanError(f"unknown plan keys: {', '.join(unknown)}")
    missing = sorted(f.name for f in dataclasses.fields(RunPlan) if f.name not in data
                     and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)
    if missing:
        raise PlanError(f"missing plan keys: {', '.join(missing)}")
    fields = dict(data)
    fields["trainer"] = _command(data.get("trainer"), "trainer")
    fields["prepare"] = None if data.get("prepare") is None else _command(data["prepare"], "prepare")
    plan = RunPlan(**fields)
    for name in ("run_id", "framework", "run_dir", "checkpoint_dir"):
        if not isinstance(getattr(plan, name), str) or not getattr(plan, name):
            raise PlanError(f"{name} must be a non-empty string")
    for name, low in (("attempt", 1), ("gpus", 1), ("gpus_per_node", 1), ("max_restarts", 0)):
        value = getattr(plan, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise PlanError(f"{name} must be an integer >= {low}, got {value!r}")
    for name in ("gpu_wait_seconds", "stop_grace_seconds", "backoff_base_seconds",
                 "backoff_cap_seconds", "gpu_poll_seconds"):
        value = getattr(plan, name)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
            raise PlanError(f"{name} must be a number > 0, got {value!r}")
    if plan.deadline_seconds is not None and (not isinstance(plan.deadline_seconds, (int, float))
                                              or plan.deadline_seconds <= 0):
        raise PlanError(f"deadline_seconds must be a number > 0 or null, got {plan.deadline_seconds!r}")
    return plan


def load_plan(path: str | Path) -> RunPlan:
    """Read and check a plan file; PlanError with a one-line reason otherwise."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise PlanError(f"plan file {path} does not exist (is the jobs ConfigMap mounted on the "
                        "head? `pulumi up` writes it)") from None
    except OSError as exc:
        raise PlanError(f"plan file {path} is unreadable: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise PlanError(f"plan file {path} is not JSON: {exc}") from None
    try:
        return plan_from_dict(data)
    except PlanError as exc:
        raise PlanError(f"plan file {path}: {exc}") from None


def build_plan(spec, rendered, *, deadline_seconds: Optional[float], gpu_wait_seconds: float,
               max_restarts: int = DEFAULT_MAX_RESTARTS, run_dir: Optional[str] = None,
               health: Optional[dict[str, Any]] = None,
               prune_checkpoints_keep: Optional[int] = None) -> RunPlan:
    """The plan of one run from its spec (jobs.spec.GrpoSpec) and its rendered training command
    (jobs.render.RenderedJob), plus the budgets that are not part of the run's identity.

    ``health`` (issue 17's gate settings) and ``prune_checkpoints_keep`` (issue 12's verl
    pruning) switch the driver's hook points on; both stay off until those modules exist."""
    from jobs.layout import DATA_LAYOUT

    if not rendered.argv:
        raise ValueError("the rendered job has no argv")
    revisions = ((("--model-revision", spec.model_revision) if spec.model_revision else ())
                 + (("--dataset-revision", spec.dataset_revision) if spec.dataset_revision else ()))
    prepare = Command(argv=(PYTHON, "-m", "jobs.prepare", "--framework", spec.framework,
                            "--model", spec.model, "--dataset", spec.dataset, *revisions))
    return RunPlan(
        run_id=spec.run_id, attempt=spec.attempt, framework=spec.framework,
        run_dir=run_dir or DATA_LAYOUT.run_dir(spec.run_id),
        checkpoint_dir=spec.checkpoint_dir, prepare=prepare,
        gpus=spec.total_gpus, gpus_per_node=spec.gpus_per_node,
        gpu_wait_seconds=float(gpu_wait_seconds),
        trainer=Command(argv=tuple(rendered.argv), cwd=rendered.cwd),
        deadline_seconds=None if deadline_seconds is None else float(deadline_seconds),
        max_restarts=int(max_restarts), health=health,
        prune_checkpoints_keep=prune_checkpoints_keep if spec.framework == "verl" else None,
    )
