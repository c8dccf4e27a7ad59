"""Recovery against a REAL Ray head with a fake GPU worker node (loopback-only namespace,
tests/jobs/ray_head.py): the run driver submitted as the head runs it, the trainer
tests/jobs/fake_trainer.py in its ``ray-*`` modes, whose one actor lives on the worker node, so
that what the trainer prints is what Ray 2.54 itself raises.

- a node lost mid-training (SIGTERM to its raylet, what deleting a preempted pod sends): the
  driver asks Ray which node died (jobs/head/node_deaths.py, a child process), restarts once the
  replacement node joins, and records the recovery (seconds from the loss, steps redone);
- a worker process that segfaults while its node lives: not restarted (exit 18);
- a head restart: KubeRay v1.7.0's submitter (rebuilt from ray-operator/controllers/ray/common/
  job.go BuildJobSubmitCommand, tests/jobs/kuberay_submitter.py) loses its log stream and exits
  non-zero, so the K8s Job runs it again (rayjob_controller.go createNewK8sJob: a Job with
  backoffLimit = submitterConfig.backoffLimit); the new submitter finds no such job on the new
  head (`ray job status` fails), resubmits the same submission id, and the new driver continues
  the attempt after the killed one: a new start index, nothing overwritten.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jobs.contract.exit_codes import ExitCode
from jobs.contract.run_plan import DATA_ROOT_ENV, RUN_COMMAND, Command
from jobs.head.failures import WORKER_DEATH_PATTERNS
from jobs.head.run_records import read_restarts
from tests.jobs import ray_head

PY = sys.executable
FAKE_TRAINER = str(Path(__file__).resolve().parents[1] / "fake_trainer.py")
pytestmark = pytest.mark.filterwarnings("ignore:ssl=None is deprecated:DeprecationWarning")

# Inner tests measured 2026-12-06 on the 2-core machine: 149 s in the whole suite alone; 330 s and
# 334 s in the whole suite with a second whole suite running beside it.
INNER = ray_head.InnerRun(__file__, "the run driver's recovery tests", measured_seconds=335, own_head=True)

if not ray_head.inside_namespace():

    def test_recovery_on_a_real_ray_head_in_a_loopback_only_namespace():
        INNER.check()

else:
    from tests.jobs.head.test_driver_ray import (
        _rendered_rayjob,
        _wait_terminal,
        events,
        job_info,
        jobs_of,
        run_submitter,
        write_plan,
    )
    from tests.jobs.ray_head import HEAD_DATA

    @pytest.fixture(scope="module")
    def head(tmp_path_factory):
        """A head of this module's own: it gains and loses a GPU node, and is stopped and started
        again (InnerRun own_head)."""
        # Laid out as the shared head is: the plans' directories lie below its /data.
        ray_head.lay_out_head_pod(tmp_path_factory.mktemp("data"))
        with ray_head.running_head() as dashboard:
            ray_head.add_gpu_worker(7111)
            yield dashboard

    def _submit(head, plan, submission_id: str) -> None:
        from ray.job_submission import JobSubmissionClient
        JobSubmissionClient(head).submit_job(entrypoint=RUN_COMMAND, submission_id=submission_id)

    def _wait_for(predicate, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            assert time.monotonic() < deadline, f"gave up waiting for {what}"
            time.sleep(0.2)

    def _cluster_plan(tmp_path, run_id, mode):
        """4 GPUs: the head's 2 and the worker node's 2; the trainer steps every 0.3 s."""
        checkpoints = HEAD_DATA[0] / "checkpoints" / run_id
        trainer = Command(argv=(PY, FAKE_TRAINER, mode, str(checkpoints), "0.3"))
        return write_plan(tmp_path, run_id, mode, gpus=2 * ray_head.FAKE_GPUS, prepare=None,
                          node_settle_seconds=3.0, gpu_wait_seconds=120, trainer=trainer)

    def test_a_lost_node_is_restarted_when_capacity_returns_and_the_recovery_is_recorded(head, tmp_path):
        plan = _cluster_plan(tmp_path, "node-loss", "ray-node")
        _submit(head, plan, "node-loss-attempt-1")
        tracker = Path(plan.checkpoint_dir) / "latest_checkpointed_iteration.txt"
        # 120 s passed before step 2's checkpoint beside a second suite (2026-12-06, load ~18),
        # with the module's whole inner run at 362 s: twice that, as the module's bound allows.
        _wait_for(tracker.exists, 240, "the checkpoint of step 2")
        time.sleep(0.8)                                       # a step or two past it
        ray_head.lose_node(7111, signal.SIGTERM)
        _wait_for(lambda: read_restarts(plan.run_dir), 60, "the driver's restart decision")
        ray_head.add_gpu_worker(7112)                          # the replacement node joins
        status, info = _wait_terminal(head, "node-loss-attempt-1", timeout=120)
        assert status == "SUCCEEDED", info.message
        [restart] = read_restarts(plan.run_dir)
        assert restart["reason"] == "node_lost" and restart["trained"] and len(restart["lost_nodes"]) == 1
        assert "EXPECTED_TERMINATION: received SIGTERM" in restart["evidence"]   # the cluster's record
        assert restart["last_checkpoint_step"] == 2
        names = [e["event"] for e in events(plan)]
        assert names.count("gpu_wait_start") == 2 and names.count("trainer_start") == 2
        [recovery] = [e for e in events(plan) if e["event"] == "recovery"]
        assert recovery["loss_source"] == "node marked dead"
        assert (recovery["resumed_from_step"], recovery["first_new_step"]) == (2, 3)
        assert recovery["steps_redone"] == restart["last_step"] - 2 >= 1
        assert 0 <= recovery["decision_s"] <= recovery["restart_s"] <= recovery["first_step_s"]

    def test_a_segfault_on_a_live_node_is_not_restarted(head, tmp_path):
        plan = _cluster_plan(tmp_path, "segfault", "ray-segfault")
        _submit(head, plan, "segfault-attempt-1")
        status, info = _wait_terminal(head, "segfault-attempt-1", timeout=120)
        assert status == "FAILED" and info.driver_exit_code == ExitCode.WORKER_CRASHED, info.message
        [exit_] = [e for e in events(plan) if e["event"] == "trainer_exit"]
        assert exit_["reason"] == "worker_crashed" and exit_["lost_nodes"] == []
        # Ray's own words for a dead worker (jobs/head/failures.py cites each): which of them the
        # trainer prints first depends on timing, the raylet's "Worker unexpectedly exits with a
        # connection error code 2" on an idle machine, ActorDiedError's first line on a loaded one.
        assert any(pattern.search(exit_["evidence"]) for pattern in WORKER_DEATH_PATTERNS), exit_["evidence"]
        assert read_restarts(plan.run_dir) == []

    def test_a_head_restart_resubmits_through_kuberays_submitter_and_the_driver_continues(head, tmp_path):
        spec, run_id = _rendered_rayjob("prod")
        plan = write_plan(tmp_path, run_id, "long", prepare=None)
        first = _start_submitter(tmp_path, spec, "first")
        tracker = Path(plan.checkpoint_dir) / "latest_checkpointed_iteration.txt"
        _wait_for(tracker.exists, 240, "the first driver's first checkpoint")      # as above
        killed_after = int(tracker.read_text())
        # The head goes, its dashboard first (a connection that breaks): the submitter's `ray job
        # logs --follow` then fails with "WebSocket connection closed unexpectedly with close code
        # 1006" (Ray 2.54 dashboard/modules/job/sdk.py tail_job_logs). When the dashboard instead
        # outlives the job's supervisor long enough to close the stream cleanly, the submitter
        # exits 0 and KubeRay does not resubmit (docs/run-driver.md, "A head restart").
        for pid in _pids_matching("dashboard/dashboard.py"):
            os.kill(pid, signal.SIGKILL)
        # The head pod is gone, and all in it: the driver too (its container's processes die with
        # it), not only Ray's. `ray stop` alone leaves the driver to Ray's supervisor watcher,
        # which can outlive a SIGKILLed supervisor long enough for the trainer to finish.
        [driver] = [e["pid"] for e in events(plan) if e["event"] == "driver_start"]
        os.killpg(os.getpgid(driver), signal.SIGKILL)         # the entrypoint's session (Ray's)
        ray_head.stop_head()
        assert first.wait(timeout=60) != 0                    # `ray job logs --follow` lost it
        _wait_for(lambda: not _processes_matching(FAKE_TRAINER), 15, "the trainer to die with its driver")
        # The new head pod's env is the first one's: its /data, not this test's tmp_path (the
        # autouse data-root fixture of tests/jobs/head/conftest.py set that for in-process drivers).
        os.environ[DATA_ROOT_ENV] = str(HEAD_DATA[0])
        ray_head.start_head()                                 # the new head: an empty job table
        (Path(plan.checkpoint_dir) / "finish").write_text("")  # the resumed trainer may end
        proc, _ = run_submitter(tmp_path, spec)               # the K8s Job's next pod
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
        assert "[jobs.run] done (exit 0 OK)" in proc.stdout
        [job] = jobs_of(head, run_id)
        assert job.submission_id == spec["jobId"] and job_info(head, job.submission_id).status == "SUCCEEDED"
        rows = events(plan)
        starts = [e for e in rows if e["event"] == "driver_start"]
        assert [s["resumed"] for s in starts] == [False, True] and starts[1]["start"] >= 1
        assert [e["start"] for e in rows if e["event"] == "trainer_start"] == [0, starts[1]["start"]]
        [lost] = [e for e in rows if e.get("reason") == "driver_lost"]
        assert lost["start"] == 0 and lost["estimated"] is True
        assert "driver_lost" in [e["event"] for e in rows] and rows[-1]["event"] == "driver_end"
        resumed = [e for e in rows if e["event"] == "trainer_start"][1]["resumed_from_step"]
        assert resumed >= killed_after and f"resumed from step {resumed}" in proc.stdout
        assert f"tensorboard/attempt-1-start-{starts[1]['start']}" in proc.stdout

    def _start_submitter(tmp_path, spec, name):
        """KubeRay's submitter script running in the background (as the submitter pod)."""
        from tests.jobs.kuberay_submitter import CONTAINER_COMMAND, submitter_container_args, submitter_env

        dashboard = ray_head.DASHBOARD.removeprefix("http://")
        env = {"PATH": f"{Path(PY).parent}:/usr/bin:/bin", "HOME": str(tmp_path),
               **submitter_env(dashboard, spec["jobId"])}
        workdir = tmp_path / f"submitter-{name}"
        workdir.mkdir(exist_ok=True)
        log = open(tmp_path / f"submitter-{name}.log", "w")   # noqa: SIM115 - the process owns it
        return subprocess.Popen([*CONTAINER_COMMAND, *submitter_container_args(spec, dashboard, spec["jobId"])],
                                cwd=workdir, env=env, stdout=log, stderr=subprocess.STDOUT)

    def _pids_matching(text: str) -> list[int]:
        return [int(line.split(" ", 1)[0]) for line in _processes_matching(text, with_pid=True)]

    def _processes_matching(text: str, with_pid: bool = False) -> list[str]:
        found = []
        for proc in Path("/proc").iterdir():
            if proc.name.isdigit():
                try:
                    cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                except OSError:
                    continue
                if text in cmdline and int(proc.name) != os.getpid():
                    found.append(f"{proc.name} {cmdline}" if with_pid else cmdline)
        return found
