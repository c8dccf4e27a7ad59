"""The run driver's command line: ``python3 -m jobs.run --plan FILE`` (jobs/run.py) reads the plan,
finds its attempt from the Ray submission id, installs the SIGTERM handler and runs the driver
(jobs/head/driver.py).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import time
from collections.abc import Callable, Sequence

from jobs.contract.exit_codes import ExitCode
from jobs.contract.run_plan import PLAN_PATH, RunPlan, RunPlanError, load_plan
from jobs.head.checkpoints import check_writable
from jobs.head.driver import PREFIX, Driver, Hooks
from jobs.head.driver import __doc__ as DRIVER_DOC

# Ray 2.54 gives a job's entrypoint its JobConfig, with the submission id in the metadata
# (ray/dashboard/modules/job/job_supervisor.py `_get_driver_env_vars`: RAY_JOB_CONFIG_JSON_ENV_VAR
# = {"runtime_env", "metadata": {"job_submission_id": ..., ...}}).
RAY_JOB_CONFIG_ENV = "RAY_JOB_CONFIG_JSON_ENV_VAR"
# How long a driver whose plan names another run waits for the mounted ConfigMap to catch up
# (the kubelet refreshes ConfigMap volumes within about a minute after `pulumi up`).
PLAN_REFRESH_SECONDS = 180.0


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
    parser = argparse.ArgumentParser(prog="python3 -m jobs.run", description=(DRIVER_DOC or "").split("\n\n")[0])
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
    # (ray/dashboard/modules/job/job_supervisor.py, Ray 2.54): stop the stage, record it. This
    # process never calls ray.init, so nothing replaces this handler.
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

