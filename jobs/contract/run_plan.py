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
import os
import posixpath
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jobs.contract.credentials import redact
from jobs.contract.health import health_plan_problems
from jobs.contract.layout import CHECKPOINTS_DIR, MOUNT_PATH, RUNS_DIR
from jobs.contract.layouts import POOLS, Pool
from jobs.contract.records import LATEST_TIME
from jobs.contract.safe_files import RUN_PLAN, UnusableFile, read_json
from jobs.contract.spec import GrpoSpec
from jobs.contract.value_checks import (
    MAX_SECONDS,
    Check,
    Invalid,
    absolute_path,
    credential_problems,
    env_map,
    field_problems,
    given,
    integer,
    list_of,
    number,
    object_of,
    one_of,
    optional,
    seconds,
    text,
)

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
    """The plan file is missing, unreadable or not a plan: a one-line reason naming every bad key."""


@dataclass(frozen=True)
class Command:
    argv: tuple[str, ...]
    cwd: str | None = None
    env: dict[str, str] = field(default_factory=dict)   # names and values, never secrets


# Fields added with the split layout and the driver's metrics: written only when set.
OMITTED_WHEN_UNSET = ("pools", "completion_text", "metrics_port", "gpu_hourly_rate", "currency")


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
    # After a completed trainer: the Hugging Face export (jobs/head/export.py) and the GSM8K
    # test-split evaluation (jobs/head/evaluate.py); None: the stage does not run.
    export: Command | None = None
    evaluate: Command | None = None
    early_node_loss_retries: int = DEFAULT_EARLY_NODE_LOSS_RETRIES
    node_settle_seconds: float = DEFAULT_NODE_SETTLE_SECONDS
    # When the run's capacity ends on schedule and the margin to save before it
    # (jobs/contract/capacity_end.py; built by jobs/plan/capacity_end.py); None: no capacity source
    # of the stack has a scheduled end (Spot, a reservation without endTime).
    #   {"margin_seconds": 35.0, "margin_basis": "...", "flex_start_max_run_seconds": 86400 | null,
    #    "reservation_ends": [{"name": "r1", "ends_at": <epoch seconds>}, ...]}
    capacity_end: dict[str, Any] | None = None
    # The trainer's step bound (job.totalSteps), None when the run is bounded by epochs: NeMo RL
    # checks its save-by time before its step bound, so a stop for the capacity's end on the last
    # step is the run's end (jobs/head/driver.py).
    total_steps: int | None = None
    # A split layout's pools, {"rollout": R, "trainer": T} (nodes adding up to gpus /
    # gpus_per_node): the gang request and the GPU wait ask for each pool's own nodes
    # (jobs/contract/layouts.py); None: one group of GPU nodes.
    pools: dict[str, int] | None = None
    # A line the trainer prints only when it finished its last step: an exit 0 without it is not
    # a completed run. NeMo RL's asynchronous GRPO catches any error of its loop, prints it and
    # returns normally (nemo_rl/algorithms/grpo.py lines 4321-4325 at v0.7.0): its exit 0 alone
    # proves nothing. None: exit 0 is completion.
    completion_text: str | None = None
    # The driver's own Prometheus endpoint on the head (jobs/head/run_metrics.py): its port, None
    # for no endpoint; the price per GPU node-hour (the first capacity source's) its cost-so-far
    # gauge multiplies the node-hours held by, None when unknown (no cost gauge), and its currency.
    metrics_port: int | None = None
    gpu_hourly_rate: float | None = None
    currency: str | None = None
    version: int = PLAN_VERSION

    @property
    def pool_list(self) -> tuple[Pool, ...]:
        return tuple(Pool(name, nodes) for name, nodes in (self.pools or {}).items())

    def to_json(self) -> str:
        fields = dataclasses.asdict(self)
        for name in OMITTED_WHEN_UNSET:     # a colocated run's plan stays as it was before them
            if fields[name] is None:
                del fields[name]
        return json.dumps(fields, sort_keys=True, indent=1) + "\n"


# ---- the checks of a plan, one per field ----------------------------------------------------------
# A new plan field gets its check here (a test keeps this table equal to RunPlan's fields); the
# rules that read two fields are in ``_cross_field_problems``.

MAX_COUNT = 1_000_000
MAX_GPUS_PER_NODE = 64
RUN_ID_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}"
# Where the shared storage is mounted on the head (jobs/contract/layout.py): run_dir and
# checkpoint_dir must lie below its runs/ and checkpoints/. Tests and benchmarks that run the
# driver against a scratch directory set this variable; nothing else should.
DATA_ROOT_ENV = "GKE_GRPO_DATA_ROOT"

_COMMAND_FIELDS: dict[str, Check] = {
    "argv": list_of(text(), min_length=1, max_length=10_000),
    "cwd": optional(absolute_path),
    "env": env_map,
}
_command = object_of(_COMMAND_FIELDS, required=("argv",))


_CAPACITY_END = object_of({
    "margin_seconds": number(low=0, high=MAX_SECONDS),
    "margin_basis": text(max_length=1000),
    "flex_start_max_run_seconds": optional(seconds()),
    "reservation_ends": list_of(object_of({"name": text(max_length=253), "ends_at": number(above=0, high=LATEST_TIME)},
                                          required=("name", "ends_at")), max_length=1000),
}, required=("margin_seconds", "margin_basis", "flex_start_max_run_seconds", "reservation_ends"))


def _health(value: Any, key: str) -> None:
    problems = health_plan_problems(value, where=f"{key}.")
    if problems:
        raise Invalid("; ".join(problems))


PLAN_FIELDS: dict[str, Check] = {
    "version": integer(PLAN_VERSION, PLAN_VERSION),
    "run_id": text(pattern=RUN_ID_PATTERN, meaning="a run id (letters, digits, '.', '_', '-')"),
    "attempt": integer(1, MAX_COUNT),
    "framework": one_of("verl", "nemo-rl"),
    "run_dir": absolute_path,
    "checkpoint_dir": absolute_path,
    "prepare": optional(_command),
    "export": optional(_command),
    "evaluate": optional(_command),
    "gpus": integer(1, MAX_COUNT),
    "gpus_per_node": integer(1, MAX_GPUS_PER_NODE),
    "gpu_wait_seconds": seconds(),
    "trainer": _command,
    "deadline_seconds": optional(seconds()),
    "max_restarts": integer(0, MAX_COUNT),
    "stop_grace_seconds": seconds(),
    "backoff_base_seconds": seconds(),
    "backoff_cap_seconds": seconds(),
    "gpu_poll_seconds": seconds(3600),
    "health": optional(_health),
    "prune_checkpoints_keep": optional(integer(1, MAX_COUNT)),
    "early_node_loss_retries": integer(0, MAX_COUNT),
    "node_settle_seconds": number(low=0, high=3600),
    "capacity_end": optional(_CAPACITY_END),
    "total_steps": optional(integer(1, MAX_COUNT)),
    "pools": optional(object_of({name: integer(1, MAX_COUNT) for name in POOLS}, required=POOLS)),
    "completion_text": optional(text(max_length=1000)),
    "metrics_port": optional(integer(1024, 65535)),
    "gpu_hourly_rate": optional(number(low=0, high=1e6)),
    "currency": optional(text(pattern=r"[A-Z]{3}", meaning="a currency code such as USD")),
}
REQUIRED_FIELDS = tuple(f.name for f in dataclasses.fields(RunPlan)
                        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)


def data_root() -> str:
    """The shared storage's mount point the plan's directories must lie under."""
    root = os.environ.get(DATA_ROOT_ENV) or MOUNT_PATH
    if not root.startswith("/") or posixpath.normpath(root) != root:
        raise RunPlanError(f"{DATA_ROOT_ENV} must be an absolute, normalized path, got {given(root)}")
    return root


def _below(path: str, root: str) -> bool:
    return path.startswith(root.rstrip("/") + "/") and path != root


def _cross_field_problems(data: dict[str, Any], root: str) -> list[str]:
    problems = []
    for name, folder in (("run_dir", RUNS_DIR), ("checkpoint_dir", CHECKPOINTS_DIR)):
        parent = posixpath.join(root, folder)
        if not _below(data[name], parent):
            problems.append(f"{name} must be a directory below {parent}/, got {redact(data[name])[:200]}")
    if data["gpus"] % data["gpus_per_node"]:
        problems.append(f"gpus ({data['gpus']}) must be a multiple of gpus_per_node ({data['gpus_per_node']})")
    pools = data.get("pools")
    if pools and sum(pools.values()) * data["gpus_per_node"] != data["gpus"]:
        problems.append(f"pools ({', '.join(f'{k} {v}' for k, v in pools.items())} nodes) must add up "
                        f"to gpus / gpus_per_node ({data['gpus']} / {data['gpus_per_node']})")
    base = data.get("backoff_base_seconds", DEFAULT_BACKOFF_BASE_SECONDS)
    cap = data.get("backoff_cap_seconds", DEFAULT_BACKOFF_CAP_SECONDS)
    if cap < base:
        problems.append(f"backoff_cap_seconds ({cap:g}) must not be below backoff_base_seconds ({base:g})")
    storage = (data.get("health") or {}).get("storage")
    if storage and not _below(storage["directory"], data["run_dir"]):
        problems.append(f"health.storage.directory must be below run_dir ({data['run_dir']}): the "
                        "storage probe writes and deletes there")
    return problems


def plan_problems(data: Any, root: str | None = None) -> list[str]:
    """Every problem of a plan's JSON, each naming its key: exact types, bounds, paths under the
    data root, the health gate's plan, and no credential-shaped value anywhere."""
    if not isinstance(data, dict):
        return ["not a JSON object"]
    version = data.get("version")
    if isinstance(version, bool) or version != PLAN_VERSION:
        return [f"plan version {given(version)}, this driver reads version {PLAN_VERSION}"]
    problems = field_problems(data, PLAN_FIELDS, required=REQUIRED_FIELDS, what="plan")
    secrets = credential_problems(data, "")
    if secrets:
        problems.append("the plan must never carry a secret (the head reads the Hugging Face "
                        "token from its mounted Secret): " + "; ".join(secrets))
    if not problems:
        problems = _cross_field_problems(data, root if root is not None else data_root())
    return problems


def _as_command(value: dict[str, Any]) -> Command:
    return Command(argv=tuple(value["argv"]), cwd=value.get("cwd"), env=dict(value.get("env") or {}))


def plan_from_dict(data: Any, *, root: str | Path | None = None) -> RunPlan:
    """The plan of a JSON object, checked (``plan_problems``); RunPlanError naming every bad key
    otherwise. ``root``: the data root the directories must lie under (default: /data, or
    $GKE_GRPO_DATA_ROOT)."""
    problems = plan_problems(data, None if root is None else str(root))
    if problems:
        count = f"{len(problems)} problems: " if len(problems) > 1 else ""
        raise RunPlanError(count + "; ".join(problems))
    fields = dict(data)
    fields["trainer"] = _as_command(data["trainer"])
    for stage in ("prepare", "export", "evaluate"):
        fields[stage] = None if data.get(stage) is None else _as_command(data[stage])
    return RunPlan(**fields)


def load_plan(path: str | Path, *, root: str | Path | None = None) -> RunPlan:
    """Read and check a plan file (through the one safe reader: a regular file of at most
    1 MiB, UTF-8 JSON of bounded depth); RunPlanError with a one-line reason otherwise."""
    path = Path(path)
    try:
        data = read_json(path, RUN_PLAN)
    except UnusableFile as exc:
        if exc.missing:
            raise RunPlanError(f"plan file {path} does not exist (is the jobs ConfigMap mounted on the "
                               "head? `pulumi up` writes it)") from None
        reason = exc.reason
        if not reason.startswith(("is not JSON", "nested")):
            reason = "is unreadable: " + reason.removeprefix("is ")
        raise RunPlanError(f"plan file {path} {reason}") from None
    try:
        return plan_from_dict(data, root=root)
    except RunPlanError as exc:
        raise RunPlanError(f"plan file {path}: {exc}") from None


def submission_metadata(spec: GrpoSpec, attempt: int) -> dict[str, str]:
    """The Ray job metadata of an attempt (strings only, nothing secret), written alike by the
    Pulumi RayJob and the jobs CLI: what ties a Ray job to its run when read back."""
    return {"run_id": spec.run_id, "spec_hash": spec.spec_hash, "attempt": str(attempt),
            "experiment": spec.experiment_name, "framework": spec.framework}
