"""The elastic GPU gang for real: Ray 2.54's own v2 autoscaler over fake GPU nodes
(tools/fake_capacity.py: Ray's fake multi-node provider with a join time and capacity sources
in order, as a GKE ComputeClass supplies them), in a loopback-only network namespace
(tests/jobs/ray_head.py). The run driver is the real one (`python3 -m jobs.run`), submitted as a
Ray job, as the RayJob and the jobs CLI submit it.

What it shows:
- no GPU node exists before the run asks for its gang (staging runs with none);
- the gang comes up from the sources in order (here a reservation with room for one node, then
  Spot), every trainer start records each node's name and source;
- the request keeps idle GPU nodes past the idle timeout while the run lives (the trainer here
  uses no GPU at all), and once the driver ends the nodes go within the idle timeout plus the
  autoscaler's period; a stopped run releases them too; a request outlives the process that made
  it (which is why the driver's holder must clear it);
- a gang the group cannot hold ends at once with exit 17, not a hang;
- `gke-grpo status` shows the workers up/requested, then releasing.
"""

from __future__ import annotations

import io
import json
import os
import threading
import time
from pathlib import Path

import pytest

from jobs.contract.exit_codes import ExitCode
from jobs.contract.run_plan import DATA_ROOT_ENV, Command, RunPlan
from tests.jobs import ray_head

# Inner tests measured 2026-12-06 on the 2-core machine: 80 s in the whole suite alone; 175 s and
# 176 s in the whole suite with a second whole suite running beside it.
INNER = ray_head.InnerRun(__file__, "the GPU gang's Ray autoscaler tests", measured_seconds=176,
                          own_head=True)
IDLE = 3.0          # the fake cluster's idle timeout (s)
pytestmark = pytest.mark.filterwarnings("ignore:ssl=None is deprecated:DeprecationWarning")

if not ray_head.inside_namespace():

    def test_gpu_gang_on_ray_autoscaler_in_a_loopback_only_namespace():
        INNER.check()

else:
    from tools import fake_capacity as fc

    PY = fc.PY
    SOURCES = (
        fc.FakeSource("reservation", {"cloud.google.com/reservation-name": "r1",
                                      "cloud.google.com/reservation-affinity": "specific"},
                      capacity=1, join_seconds=1.0),
        fc.FakeSource("spot", {"cloud.google.com/gke-spot": "true"}, capacity=8, join_seconds=1.0),
    )

    class GpuNodeWatch:
        """(time, alive GPU nodes) every 0.2 s, from this process's Ray connection."""

        def __init__(self):
            self.samples: list[tuple[float, dict[str, dict]]] = []
            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._run, daemon=True)

        def _run(self):
            while not self._stop.is_set():
                self.samples.append((time.time(), fc.gpu_nodes_alive()))
                time.sleep(0.2)

        def __enter__(self):
            self._thread.start()
            return self

        def __exit__(self, *exc):
            self._stop.set()
            self._thread.join(timeout=5)

        def first_time_with(self, count: int) -> float | None:
            return next((t for t, nodes in self.samples if len(nodes) >= count), None)

        def last_time_with_any(self) -> float | None:
            times = [t for t, nodes in self.samples if nodes]
            return times[-1] if times else None

    @pytest.fixture(scope="module")
    def head(tmp_path_factory):
        links = os.popen("ip -o link").read()
        assert [line.split(":")[1].strip() for line in links.splitlines()] == ["lo"], links
        cluster = fc.FakeCluster(sources=SOURCES, max_workers=2, gpus_per_node=2,
                                 idle_timeout_seconds=IDLE)
        os.environ.update({k: v for k, v in fc.fake_cluster_env().items() if k in ("PYTHONPATH", "PATH")})
        try:
            fc.start_autoscaling_head(cluster, tmp_path_factory.mktemp("fake-capacity"))
            assert ray_head.non_loopback_listeners() == []
            import ray
            ray.init(address=fc.GCS, logging_level="ERROR", log_to_driver=False)
            yield fc.DASHBOARD
        finally:
            import ray
            ray.shutdown()           # this process's driver first: the head is going away
            fc.stop_autoscaling_head(ray_head.NS_ENV)

    def write_plan(tmp_path: Path, run_id: str, *, gpus: int, trainer_seconds: float,
                   staging_seconds: float = 1.0) -> Path:
        plan = RunPlan(
            run_id=run_id, attempt=1, framework="verl", run_dir=str(tmp_path / "runs" / run_id),
            checkpoint_dir=str(tmp_path / "checkpoints" / run_id),
            prepare=Command(argv=(PY, "-c", f"import time; time.sleep({staging_seconds})")),
            gpus=gpus, gpus_per_node=2, gpu_wait_seconds=60,
            trainer=Command(argv=(PY, "-c", f"import time; print('training'); time.sleep({trainer_seconds})")),
            deadline_seconds=300, max_restarts=0, stop_grace_seconds=1, gpu_poll_seconds=0.5)
        Path(plan.run_dir).mkdir(parents=True)
        path = tmp_path / f"{run_id}.json"
        path.write_text(plan.to_json())
        return path

    def submit(head: str, run_id: str, plan: Path) -> str:
        from ray.job_submission import JobSubmissionClient
        submission_id = f"{run_id}-attempt-1"
        # tmp_path stands in for /data: the plan's directories lie below it (DATA_ROOT_ENV).
        JobSubmissionClient(head).submit_job(entrypoint=f"{PY} -m jobs.run --plan {plan}",
                                             runtime_env={"env_vars": {DATA_ROOT_ENV: str(plan.parent)}},
                                             submission_id=submission_id)
        return submission_id

    def wait_terminal(head: str, submission_id: str, timeout: float = 120):
        from ray.job_submission import JobSubmissionClient
        client = JobSubmissionClient(head)
        deadline = time.monotonic() + timeout
        while True:
            info = client.get_job_info(submission_id)
            status = str(getattr(info.status, "value", info.status))
            if status in ("SUCCEEDED", "FAILED", "STOPPED") or time.monotonic() > deadline:
                return status, info, client.get_job_logs(submission_id)
            time.sleep(0.3)

    def events(tmp_path: Path, run_id: str) -> list[dict]:
        path = tmp_path / "runs" / run_id / "events.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def wait_for(predicate, timeout: float, what: str):
        deadline = time.monotonic() + timeout
        while not predicate():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            time.sleep(0.2)

    def status_rows(head: str, run_id: str) -> str:
        from jobs.cli import main as cli
        from jobs.cli.ray_jobs import RetryPolicy

        out, err = io.StringIO(), io.StringIO()
        cli.main(["status", "--address", head, "--run-id", run_id], out=out, err=err,
                 retry=RetryPolicy(tries=2, base=0.2, cap=0.5))
        return out.getvalue()

    def test_the_driver_holds_the_gang_records_its_sources_and_releases_it(head, tmp_path):
        run_id = "gang-ok"
        # The trainer uses no GPU: only the gang request keeps the idle nodes (3 x IDLE).
        plan = write_plan(tmp_path, run_id, gpus=4, trainer_seconds=3 * IDLE)
        with GpuNodeWatch() as watch:
            submission_id = submit(head, run_id, plan)
            wait_for(lambda: any(e["event"] == "trainer_start" for e in events(tmp_path, run_id)),
                     90, "the trainer start")
            status_live = status_rows(head, run_id)
            status, _info, logs = wait_terminal(head, submission_id)
            ended = time.time()
            wait_for(lambda: not fc.gpu_nodes_alive(), IDLE + 30, "the GPU nodes to go")
            status_after = status_rows(head, run_id)
        assert status == "SUCCEEDED", logs[-3000:]
        records = events(tmp_path, run_id)
        at = {e["event"]: e for e in records}
        # Nothing asked for a GPU node before the staging ended.
        first_node = watch.first_time_with(1)
        assert first_node is not None and first_node > at["prepare_end"]["time"]
        assert at["gpu_request"]["time"] >= at["prepare_end"]["time"]
        # The trainer started on two separate nodes: one reserved, one Spot (the reservation
        # had room for one), each recorded with its node name.
        start = at["trainer_start"]
        assert start["capacity_sources"] == {"reservation:r1": 1, "spot": 1}, start
        assert len(start["gpu_nodes"]) == 2 and len({n["node_id"] for n in start["gpu_nodes"]}) == 2
        assert "GPUs from 1 x reservation r1, 1 x Spot" in logs
        # Idle for the whole trainer (3 idle timeouts): kept by the request.
        during = [len(nodes) for t, nodes in watch.samples
                  if start["time"] + 0.5 < t < at["trainer_exit"]["time"] - 0.2]
        assert during and min(during) == 2
        # Released at the end: gone within the idle timeout plus the autoscaler's slack.
        assert at["driver_end"]["gpu_release_exit_code"] == 0 and "[gpu_gang] RELEASED" in logs
        gone = watch.last_time_with_any()
        assert gone is not None and gone - ended < IDLE + 20
        assert "GPU workers 2 up of 2 requested" in status_live, status_live
        assert "GPUs from   1 x reservation r1, 1 x Spot" in status_live, status_live
        assert "GPU workers 0" in status_after, status_after

    def test_a_request_outlives_the_process_that_made_it_until_released(head):
        """Why the driver must clear it: Ray's request belongs to the cluster."""
        import subprocess

        made = subprocess.run([PY, "-c", "from jobs.head.gpu_gang import GangRequest; "
                                          f"GangRequest({fc.GCS!r}).request(1, 2)"],
                              capture_output=True, text=True, timeout=120)
        assert made.returncode == 0, made.stderr       # the requesting process has exited
        wait_for(lambda: len(fc.gpu_nodes_alive()) == 1, 90, "the requested node")
        time.sleep(IDLE + 3)                           # idle for longer than the idle timeout
        assert len(fc.gpu_nodes_alive()) == 1          # kept: the request still stands
        released = subprocess.run([PY, "-m", "jobs.head.gpu_gang", "release", "--address", fc.GCS],
                                  capture_output=True, text=True, timeout=120)
        assert released.returncode == 0 and "[gpu_gang] RELEASED" in released.stdout
        wait_for(lambda: not fc.gpu_nodes_alive(), IDLE + 20, "the node to go after the release")

    def test_a_gang_the_group_cannot_hold_ends_with_exit_17_not_a_hang(head, tmp_path):
        run_id = "gang-too-big"
        plan = write_plan(tmp_path, run_id, gpus=6, trainer_seconds=1)   # 3 nodes > maxReplicas 2
        started = time.monotonic()
        status, info, logs = wait_terminal(head, submit(head, run_id, plan))
        assert status == "FAILED" and info.driver_exit_code == ExitCode.GPU_GANG_INFEASIBLE == 17, logs
        assert time.monotonic() - started < 45            # not the 60 s GPU wait
        assert "[wait_for_gpus] INFEASIBLE: the Ray autoscaler reports it can never provide 3 GPU nodes" in logs
        assert not any(e["event"] == "trainer_start" for e in events(tmp_path, run_id))
        assert "[gpu_gang] RELEASED" in logs
        wait_for(lambda: not fc.gpu_nodes_alive(), IDLE + 20, "no GPU node")

    def test_a_stopped_run_releases_its_gang(head, tmp_path):
        from ray.job_submission import JobSubmissionClient

        run_id = "gang-stopped"
        plan = write_plan(tmp_path, run_id, gpus=2, trainer_seconds=120)
        submission_id = submit(head, run_id, plan)
        wait_for(lambda: any(e["event"] == "trainer_start" for e in events(tmp_path, run_id)),
                 90, "the trainer start")
        assert len(fc.gpu_nodes_alive()) >= 1
        JobSubmissionClient(head).stop_job(submission_id)
        status, _info, _logs = wait_terminal(head, submission_id)
        assert status == "STOPPED"
        wait_for(lambda: "[gpu_gang] RELEASED" in JobSubmissionClient(head).get_job_logs(submission_id),
                 15, "the release line")
        wait_for(lambda: not fc.gpu_nodes_alive(), IDLE + 30, "the GPU nodes to go after the stop")
