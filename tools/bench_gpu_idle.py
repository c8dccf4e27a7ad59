"""GPU-idle benchmark: seconds between the run's GPUs becoming available and the trainer's start.

    python -m tools.bench_gpu_idle [--staging-seconds 4] [--join-after 6]

Runs full attempts against a real Ray head on this machine, inside its own network namespace
with only loopback (and its own PID namespace and /tmp/ray), with fake GPUs: the head has none,
and a second Ray node with 2 fake GPUs joins while or after the attempt stages its data (as a
Spot/flex-start GPU node joins a RayCluster). A benchmark, not a test: it prints figures.

Scenarios, each on a fresh head:
  driver, GPUs join after staging   jobs.run: prepare -> GPU wait -> trainer (this project now)
  driver, GPUs there from the start the same driver; the staging is inside the window by
                                    definition (the GPUs were there before the attempt began)
  old chained entrypoint            `wait_for_gpus && prepare && trainer` (before the driver),
                                    GPUs joining at the same moment as in the first scenario

"Available" is the moment this process first sees the GPUs free in the cluster (polling Ray every
50 ms); "trainer start" is the trainer's own first line of code. "prep in window" is the part of
the staging step that ran after the GPUs were available.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from tools import local_ray
from tools.loopback_namespace import inside, namespace_init, run_in_namespace

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
GCS, DASHBOARD = local_ray.GCS, local_ray.DASHBOARD
GPUS = 2
POLL = 2.0   # the plan's default GPU poll (jobs/contract/run_plan.py DEFAULT_GPU_POLL_SECONDS), for both orders


def start_idle_bench_head() -> None:
    local_ray.start_head(num_cpus=2, num_gpus=0, env=local_ray.ray_env(PYTHONPATH=str(ROOT)))


def join_idle_bench_gpu_node() -> None:
    local_ray.join_node(num_gpus=GPUS, env=local_ray.ray_env(PYTHONPATH=str(ROOT)))


def stop_idle_bench() -> None:
    local_ray.stop_all(inside=inside())


def wait_gpus_seen(timeout: float = 120) -> float:
    """time.time() when the GPUs are first seen free, polled every 50 ms from this process."""
    import ray
    ray.init(address=GCS, logging_level="ERROR", log_to_driver=False)
    try:
        deadline = time.monotonic() + timeout
        while ray.available_resources().get("GPU", 0) < GPUS:
            if time.monotonic() > deadline:
                raise RuntimeError("the fake GPU node never showed up")
            time.sleep(0.05)
        return time.time()
    finally:
        ray.shutdown()


def _trainer_code(marker: Path) -> str:
    return f"import time, pathlib; pathlib.Path({str(marker)!r}).write_text(repr(time.time()))"


def _wait_job(submission_id: str, timeout: float = 180) -> str:
    from ray.job_submission import JobSubmissionClient
    client = JobSubmissionClient(DASHBOARD)
    deadline = time.monotonic() + timeout
    while True:
        status = str(client.get_job_status(submission_id))
        if status.rsplit(".", maxsplit=1)[-1] in ("SUCCEEDED", "FAILED", "STOPPED") or time.monotonic() > deadline:
            return status.rsplit(".", maxsplit=1)[-1]
        time.sleep(0.2)


def scenario(name: str, work: Path, *, driver: bool, gpus_first: bool, staging: float,
             join_after: float) -> dict:
    from ray.job_submission import JobSubmissionClient

    from jobs.contract.run_plan import DATA_ROOT_ENV, Command, RunPlan

    work.mkdir(parents=True)
    start_idle_bench_head()
    try:
        if gpus_first:
            join_idle_bench_gpu_node()
            available = wait_gpus_seen()
        trainer_marker = work / "trainer-started"
        staging_cmd = (PY, "-c", f"import time; time.sleep({staging})")
        if driver:
            # work/ stands in for /data: the driver reads a plan only when its directories
            # lie under the data root (jobs/contract/run_plan.py DATA_ROOT_ENV)
            plan = RunPlan(run_id=name, attempt=1, framework="verl", run_dir=str(work / "runs" / name),
                           checkpoint_dir=str(work / "checkpoints" / name),
                           prepare=Command(argv=staging_cmd), gpus=GPUS, gpus_per_node=GPUS,
                           gpu_wait_seconds=120, deadline_seconds=None, gpu_poll_seconds=POLL,
                           trainer=Command(argv=(PY, "-c", _trainer_code(trainer_marker))))
            (work / "plan.json").write_text(plan.to_json())
            entrypoint = f"{PY} -m jobs.run --plan {work / 'plan.json'}"
        else:
            import shlex
            entrypoint = (f"{PY} -m jobs.head.gpu_wait --gpus {GPUS} --timeout-seconds 120 "
                          f"--poll-seconds {POLL} && {shlex.join(staging_cmd)} && "
                          f"{shlex.join([PY, '-c', _trainer_code(trainer_marker)])}")
        submitted = time.time()
        submission_id = f"{name}-attempt-1"      # the driver checks it names the plan's run
        JobSubmissionClient(DASHBOARD).submit_job(
            entrypoint=entrypoint, submission_id=submission_id,
            runtime_env={"env_vars": {DATA_ROOT_ENV: str(work)}})
        if not gpus_first:
            time.sleep(max(0.0, submitted + join_after - time.time()))
            join_idle_bench_gpu_node()
            available = wait_gpus_seen()
        status = _wait_job(submission_id)
        if status != "SUCCEEDED":
            logs = JobSubmissionClient(DASHBOARD).get_job_logs(submission_id)
            raise RuntimeError(f"{name}: {status}\n{logs[-3000:]}")
        trainer_start = float(trainer_marker.read_text())
        idle = trainer_start - available
        if driver:
            events = [json.loads(line) for line in (work / "runs" / name / "events.jsonl").read_text().splitlines()]
            prep_end = next(e["time"] for e in events if e["event"] == "prepare_end")
            prep_in_window = max(0.0, min(prep_end, trainer_start) - available)
        else:
            # the old chain starts its staging only after its GPU wait has ended: all of it
            prep_in_window = min(staging, idle)
        return {"scenario": name, "idle_s": idle, "prep_in_window_s": prep_in_window,
                "submitted_to_trainer_s": trainer_start - submitted}
    finally:
        stop_idle_bench()


def run_scenarios_inside_namespace(args) -> int:
    work = Path(tempfile.mkdtemp(prefix="bench-gpu-idle-"))
    rows = []
    try:
        rows.append(scenario("driver-gpus-join-after-staging", work / "a", driver=True, gpus_first=False,
                             staging=args.staging_seconds, join_after=args.join_after))
        rows.append(scenario("driver-gpus-there-from-start", work / "b", driver=True, gpus_first=True,
                             staging=args.staging_seconds, join_after=0))
        rows.append(scenario("old-chained-entrypoint", work / "c", driver=False, gpus_first=False,
                             staging=args.staging_seconds, join_after=args.join_after))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"GPU-idle benchmark: staging step {args.staging_seconds:.1f}s, GPU node joins "
          f"{args.join_after:.1f}s after submission (or before it), GPU poll {POLL:.1f}s")
    print(f"{'scenario':<34}{'GPUs idle before trainer':>26}{'prep in window':>16}{'submit->trainer':>17}")
    for row in rows:
        print(f"{row['scenario']:<34}{row['idle_s']:>25.2f}s{row['prep_in_window_s']:>15.2f}s"
              f"{row['submitted_to_trainer_s']:>16.2f}s")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench_gpu_idle", description=__doc__.split("\n\n")[0])
    parser.add_argument("--staging-seconds", type=float, default=4.0)
    parser.add_argument("--join-after", type=float, default=6.0,
                        help="seconds after submission at which the GPU node joins")
    parser.add_argument("--init", action="store_true", help=argparse.SUPPRESS)
    args, rest = parser.parse_known_args(argv)
    forwarded = ["--staging-seconds", str(args.staging_seconds), "--join-after", str(args.join_after)]
    if inside():
        if args.init:
            return namespace_init([PY, "-m", "tools.bench_gpu_idle", *rest, *forwarded])
        return run_scenarios_inside_namespace(args)
    return run_in_namespace("tools.bench_gpu_idle", forwarded, timeout=900, ray_tmpfs="1g")


if __name__ == "__main__":
    sys.exit(main())
