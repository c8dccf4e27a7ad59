"""The run driver against a REAL Ray head (2 CPUs, 2 fake GPUs, loopback-only network namespace,
see tests/jobs/ray_head.py), submitted the two ways a run is submitted:

- by KubeRay's K8sJobMode submitter: the exact bash script KubeRay v1.7.0 builds
  (tests/jobs/kuberay_submitter.py, from ``BuildJobSubmitCommand`` in
  ray-operator/controllers/ray/common/job.go at v1.7.0) from the RayJob this program renders
  (the offline preview), run in bash here as the submitter pod runs it;
- by the jobs CLI (`python -m jobs submit`), which submits the same single command.

The head is laid out as the real one: inside the test's own mount namespace a tmpfs on /opt holds
/opt/gke-grpo/jobs (this checkout's jobs package) and /opt/gke-grpo/run/plan.json (what the
ConfigMap mounts), and the head runs with PYTHONPATH=/opt/gke-grpo as the head pod does. The
trainer is tests/jobs/fake_trainer.py (verl-like step lines and checkpoints, Ray's lost-worker
messages); the GPU wait is the real jobs.wait_for_gpus against the head's fake GPUs.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jobs.cli import main as cli
from jobs.cli.ray_jobs import RetryPolicy
from jobs.contract.exit_codes import ExitCode
from jobs.contract.run_plan import JOB_STOP_WAIT_ENV, JOB_STOP_WAIT_SECONDS, PLAN_PATH, RUN_COMMAND, Command, RunPlan
from jobs.head.run_records import read_restarts
from tests.conftest import preview_with
from tests.jobs import ray_head
from tests.jobs.cli.test_main import dev_spec, write_config
from tests.jobs.kuberay_submitter import CONTAINER_COMMAND, submitter_container_args, submitter_env

PY = sys.executable
FAKE_TRAINER = str(Path(__file__).resolve().parents[1] / "fake_trainer.py")
FAST_RETRY = RetryPolicy(tries=3, base=0.2, cap=0.5)
pytestmark = pytest.mark.filterwarnings("ignore:ssl=None is deprecated:DeprecationWarning")


# Started in the background when collection ends (tests/conftest.py); the outer test waits for it.
# Inner tests measured 2026-12-06 on the 2-core machine: 555 s beside another suite (with its own head then); the shared head's
# group of modules took 336 s alone and 503-573 s in the whole suite.
INNER = ray_head.InnerRun(__file__, "the run driver's Ray tests", measured_seconds=555)

if not ray_head.inside_namespace():

    def test_run_driver_on_a_real_ray_head_in_a_loopback_only_namespace():
        INNER.check()

else:

    # The head is the inner run's shared one (tests/jobs/conftest.py `head`), laid out as the head
    # pod (components/grpo_job.py head_code_mount): /opt/gke-grpo/jobs, PYTHONPATH, and its /data.
    HEAD_DATA = ray_head.HEAD_DATA

    def write_plan(tmp_path: Path, run_id: str, mode: str, **changes) -> RunPlan:
        checkpoints = HEAD_DATA[0] / "checkpoints" / run_id
        staged = tmp_path / "staged"
        fields = dict(
            run_id=run_id, attempt=1, framework="verl", run_dir=str(HEAD_DATA[0] / "runs" / run_id),
            checkpoint_dir=str(checkpoints),
            # a staging step that leaves a marker, as jobs.prepare does
            prepare=Command(argv=(PY, "-c", f"import pathlib; pathlib.Path({str(staged)!r}).write_text('ok')")),
            gpus=ray_head.FAKE_GPUS, gpus_per_node=ray_head.FAKE_GPUS, gpu_wait_seconds=30,
            trainer=Command(argv=(PY, FAKE_TRAINER, mode, str(checkpoints))),
            deadline_seconds=300, max_restarts=3, stop_grace_seconds=1,
            backoff_base_seconds=0.2, backoff_cap_seconds=0.5, gpu_poll_seconds=0.5)
        fields.update(changes)
        plan = RunPlan(**fields)
        Path(PLAN_PATH).write_text(plan.to_json())
        return plan

    def events(plan: RunPlan) -> list[dict]:
        path = Path(plan.run_dir) / "events.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def job_info(head, submission_id):
        from ray.job_submission import JobSubmissionClient
        return JobSubmissionClient(head).get_job_info(submission_id)

    def jobs_of(head, prefix):
        from ray.job_submission import JobSubmissionClient
        return [j for j in JobSubmissionClient(head).list_jobs() if (j.submission_id or "").startswith(prefix)]

    # ---- KubeRay's submitter ---------------------------------------------------------------

    # The submitter's whole run (the dashboard wait, the submission, the job followed to its end):
    # 55.6 s beside a second suite (2026-12-06, the 2-core machine); with a third job running as
    # well it passed 180 s. Bound: 300 s.
    SUBMITTER_SECONDS = 300

    def run_submitter(tmp_path: Path, rayjob_spec: dict):
        """Run KubeRay's submitter script in bash, with `python`/`python3` shims that log every
        interpreter the submitter's shell starts (the `ray` CLI runs through its own shebang)."""
        shims = tmp_path / "submitter-bin"
        shims.mkdir(exist_ok=True)
        log = tmp_path / "submitter-exec.log"
        for name in ("python", "python3"):
            shim = shims / name
            shim.write_text(f"#!/bin/bash\nprintf '%s\\n' \"$*\" >> {log}\nexec {PY} \"$@\"\n")
            shim.chmod(0o755)
        job_id = rayjob_spec["jobId"]
        dashboard = ray_head.DASHBOARD.removeprefix("http://")   # status.dashboardURL: host:port
        env = {"PATH": f"{shims}:{Path(PY).parent}:/usr/bin:/bin", "HOME": str(tmp_path),
               **submitter_env(dashboard, job_id)}
        workdir = tmp_path / "submitter-cwd"        # the submitter pod has no jobs code, no /data
        workdir.mkdir(exist_ok=True)
        proc = subprocess.run([*CONTAINER_COMMAND, *submitter_container_args(rayjob_spec, dashboard, job_id)],
                              cwd=workdir, env=env, capture_output=True, text=True,
                              timeout=SUBMITTER_SECONDS)
        execs = log.read_text().splitlines() if log.exists() else []
        return proc, execs

    def _rendered_rayjob(stack: str) -> tuple[dict, str]:
        result = preview_with(stack)
        [rayjob] = [r for r in result.resources if r.inputs.get("kind") == "RayJob"]
        return rayjob.inputs["spec"], result.outputs["runId"]

    def test_kuberay_submitter_submits_one_job_that_runs_the_driver_on_the_head(head, tmp_path):
        # prod's RayJob: its runtime env is env vars only (dev's installs verl with pip, which
        # needs the network this namespace does not have).
        spec, run_id = _rendered_rayjob("prod")
        assert spec["entrypoint"] == RUN_COMMAND
        plan = write_plan(tmp_path, run_id, "ok")
        proc, execs = run_submitter(tmp_path, spec)
        assert proc.returncode == 0, proc.stdout + proc.stderr

        [job] = jobs_of(head, run_id)                       # exactly one Ray job of the run
        assert job.submission_id == spec["jobId"]
        assert job.entrypoint == RUN_COMMAND                # the command the head ran
        assert job.metadata["run_id"] == run_id and job.runtime_env["env_vars"]["HF_HOME"] == "/data/huggingface_cache"
        status, info = _wait_terminal(head, spec["jobId"])
        assert status == "SUCCEEDED", info.message
        # the driver ran on the head: its records, its staging marker, its trainer
        names = [e["event"] for e in events(plan)]
        assert names[0] == "driver_start" and names[-1] == "driver_end"
        assert names.index("prepare_end") < names.index("gpu_wait_end") < names.index("trainer_start")
        assert (tmp_path / "staged").read_text() == "ok"
        # nothing of the run executed in the submitter: its shell started only KubeRay's
        # dashboard health probe, never jobs.* or a trainer
        assert execs and all(e.startswith("-c import urllib.request;") for e in execs), execs
        assert "[jobs.run] done (exit 0 OK)" in proc.stdout      # it only followed the logs

        # a restarted submitter (the K8s Job retries) attaches instead of submitting again
        proc, _ = run_submitter(tmp_path, spec)
        assert proc.returncode == 0 and len(jobs_of(head, run_id)) == 1

    def test_the_harness_sees_a_chained_entrypoint_run_in_the_submitter(head, tmp_path):
        """Control: the old `a && b` entrypoint leaks `b` into the submitter, and the check above
        sees it (so that check can fail)."""
        spec, run_id = _rendered_rayjob("prod")
        leaky = dict(spec, jobId=f"{run_id}-attempt-90",
                     entrypoint="python3 -m jobs.run --help && python3 -m jobs.prepare --help")
        _proc, execs = run_submitter(tmp_path, leaky)
        assert any("jobs.prepare" in e for e in execs), execs
        [job] = jobs_of(head, f"{run_id}-attempt-90")
        assert job.entrypoint == "python3 -m jobs.run --help"   # only the first part became the job

    def _wait_terminal(head, submission_id, timeout=120):
        deadline = time.monotonic() + timeout
        while True:
            info = job_info(head, submission_id)
            status = str(getattr(info.status, "value", info.status))
            if status in ("SUCCEEDED", "FAILED", "STOPPED") or time.monotonic() > deadline:
                return status, info
            time.sleep(0.5)

    # ---- the jobs CLI ------------------------------------------------------------------------

    def cli_run(argv, submit_runtime_env=None):
        out, err = io.StringIO(), io.StringIO()
        build = None
        if submit_runtime_env is not None:
            # the CLI's own command (cli.default_entrypoint); the runtime env without verl's pip
            build = lambda spec, args: (cli.default_entrypoint(spec, args)[0], submit_runtime_env)
        code = cli.main([str(a) for a in argv], build_entrypoint=build, out=out, err=err, retry=FAST_RETRY)
        return code, out.getvalue(), err.getvalue()

    def _submit(head, tmp_path, name, mode, env_vars=None, follow=True, **plan_changes):
        tmp_path.mkdir(parents=True, exist_ok=True)
        spec = dev_spec(**{"gke-grpo:job.experimentName": name})
        plan = write_plan(tmp_path, spec.run_id, mode, **plan_changes)
        where = ["--stack", "dev", "--config-file", write_config(tmp_path, experimentName=name),
                 "--address", head]
        # Ray's stop window as every job of the program gets it (jobs/contract/run_plan.py): with
        # Ray's default 3 s, a driver stopped in its GPU wait beside a second suite was SIGKILLed
        # before it recorded driver_end (2026-12-06).
        code, out, err = cli_run(["submit", *where, "--status-every", "5", *([] if follow else ["--no-follow"])],
                                 {"env_vars": {"PYTHONUNBUFFERED": "1", JOB_STOP_WAIT_ENV: str(JOB_STOP_WAIT_SECONDS),
                                               **(env_vars or {})}})
        return spec, plan, where, code, out, err

    def _wait_event(plan, name, timeout=90):
        deadline = time.monotonic() + timeout
        while name not in [e["event"] for e in events(plan)]:
            assert time.monotonic() < deadline, f"no {name} event"
            time.sleep(0.2)

    def test_a_crash_loop_and_a_retried_early_preemption(head, tmp_path):
        """Ray's node-death text twice from the same checkpoint ends the attempt (17) after two
        starts; a node lost before the first step is retried and the run goes on."""
        spec, plan, _where, code, out, err = _submit(head, tmp_path / "a", "loop", "lost-no-progress",
                                                     max_restarts=20)
        assert code == ExitCode.FAILED, out + err
        assert job_info(head, spec.submission_id(1)).driver_exit_code == ExitCode.CRASH_LOOP
        assert [e["event"] for e in events(plan)].count("trainer_start") == 2
        spec, plan, _where, code, out, err = _submit(head, tmp_path / "b", "early", "lost-early-once")
        assert code == ExitCode.OK, out + err
        [restart] = read_restarts(plan.run_dir)
        assert restart["reason"] == "node_lost" and restart["trained"] is False

    def test_a_collective_timeout_with_no_node_lost_is_a_hang_not_a_restart(head, tmp_path):
        """The trainer prints PyTorch's NCCL watchdog timeout (tests/jobs/fake_trainer.py); the
        driver asks the real cluster, which lost no node, and ends the attempt (20) without a
        restart. The other texts (Ray's memory monitor, a worker's death) are classified the
        same way in tests/jobs/head/test_driver.py; a real segfault on a live node in
        tests/jobs/head/test_recovery_ray.py."""
        cases = {"hang": ExitCode.COLLECTIVE_TIMEOUT}
        for mode, code in cases.items():
            spec, plan, _where, submit_code, out, err = _submit(
                head, tmp_path / mode, f"class-{mode}", mode, follow=False, prepare=None,
                node_settle_seconds=1.0)
            assert submit_code == ExitCode.OK, out + err
            status, info = _wait_terminal(head, spec.submission_id(1))
            assert status == "FAILED" and info.driver_exit_code == code, (mode, info.message)
            [exit_] = [e for e in events(plan) if e["event"] == "trainer_exit"]
            assert exit_["lost_nodes"] == [] and read_restarts(plan.run_dir) == []

    def test_a_stop_during_the_gpu_wait_is_terminated_and_recorded(head, tmp_path):
        # 4 GPUs on a head that has 2: the GPU wait waits
        spec, plan, where, code, out, err = _submit(head, tmp_path, "stop-wait", "ok", follow=False,
                                                    gpus=2 * ray_head.FAKE_GPUS, prepare=None)
        assert code == ExitCode.OK, out + err
        _wait_event(plan, "gpu_wait_start")
        time.sleep(2.0)                                   # the wait has called ray.init by now
        code, out, _ = cli_run(["stop", *where, "--wait"])
        assert f"{spec.submission_id(1)}: STOPPED" in out, out
        rows = events(plan)
        assert [e["event"] for e in rows][-3:] == ["gpu_wait_end", "trainer_exit", "driver_end"]
        assert rows[-2]["reason"] == "terminated" and rows[-2]["stage"] == "the GPU wait"
        assert rows[-1]["exit_code"] == ExitCode.TERMINATED == 143

    def test_a_stop_after_the_gate_lets_the_trainer_stop_cleanly_within_rays_window(head, tmp_path):
        """The gate (a child that calls ray.init) leaves the driver's SIGTERM handler alone; the
        job's runtime env sets RAY_JOB_STOP_WAIT_TIME_S, which Ray's supervisor reads (its actor
        inherits the job's env_vars: job_manager.py _get_supervisor_runtime_env), so a trainer
        that needs 3 s to stop (more than Ray's default window of 3 s less the driver's margin)
        gets them."""
        from jobs.contract.health import HealthPlan

        gate = HealthPlan(mode="enforce", backend="gloo", machine_type="loopback",
                          sizes_bytes=(64 * 1024,), collectives=("all_reduce",), warmup_iterations=0,
                          iterations=1, min_average_busbw_gbps=1e-6, published=(), placement_timeout_s=30,
                          timeout_s=120, env={"GLOO_SOCKET_IFNAME": "lo"}, localize=False,
                          intra_node_outlier_fraction=0.0, sources={"min_average_busbw_gbps": "test"})
        spec, plan, where, code, out, err = _submit(
            head, tmp_path, "stop-gate", "slow-stop", follow=False, prepare=None, health=gate.to_dict(),
            env_vars={"RAY_JOB_STOP_WAIT_TIME_S": "10", "FAKE_TRAINER_STOP_SECONDS": "3"})
        assert code == ExitCode.OK, out + err
        _wait_event(plan, "first_step", timeout=180)
        [gate_end] = [e for e in events(plan) if e["event"] == "health_end"]
        assert gate_end["passed"] is True
        code, out, _ = cli_run(["stop", *where, "--wait"])
        assert f"{spec.submission_id(1)}: STOPPED" in out, out
        rows = events(plan)
        assert (Path(plan.checkpoint_dir) / "stopped-cleanly").exists()
        exits = [e for e in rows if e["event"] == "trainer_exit"]
        assert exits[-1]["reason"] == "terminated" and exits[-1]["exit_code"] == 0
        assert rows[-1]["event"] == "driver_end" and rows[-1]["exit_code"] == 143

    def test_a_lost_node_is_restarted_once_and_resumes_then_status_shows_it(head, tmp_path):
        spec, plan, where, code, out, err = _submit(head, tmp_path, "lost-once", "lost-once")
        assert code == ExitCode.OK, out + err
        assert job_info(head, spec.submission_id(1)).entrypoint == RUN_COMMAND
        assert "resumed from step 1" in out and "step:2 - " in out
        [restart] = read_restarts(plan.run_dir)
        assert (restart["reason"], restart["exit_code"], restart["last_checkpoint_step"]) == ("node_lost", 1, 1)
        starts = [e for e in events(plan) if e["event"] == "trainer_start"]
        assert [(e["attempt"], e["start"]) for e in starts] == [(1, 0), (1, 1)]
        assert [e["event"] for e in events(plan)].count("gpu_wait_end") == 2   # waited again

        code, out, _ = cli_run(["status", *where])
        assert code == ExitCode.OK, out
        assert "restarts    1 (last: node_lost, exit 1, resumed from checkpoint step 1)" in out
        assert "recovery    restart 1: from the node loss (trainer exit) decision " in out
        assert "rayjob      not checked: " in out or "rayjob      none for this attempt" in out
        code, out, _ = cli_run(["list", *where])
        [row] = [line for line in out.splitlines() if line.startswith("1 ")]
        assert row.split()[-1] == "1" and "SUCCEEDED" in row

    def test_a_trainer_that_fails_before_any_step_is_not_restarted(head, tmp_path):
        spec, plan, where, code, out, err = _submit(head, tmp_path, "early-fail", "fail-early")
        assert code == ExitCode.FAILED, out + err
        assert read_restarts(plan.run_dir) == []
        assert [e["event"] for e in events(plan)].count("trainer_start") == 1
        info = job_info(head, spec.submission_id(1))
        assert info.driver_exit_code == ExitCode.BEFORE_FIRST_STEP
        code, out, _ = cli_run(["status", *where])
        assert "restarts    0" in out and "FAILED" in out

    def test_a_trainer_that_overruns_the_budget_is_stopped(head, tmp_path):
        spec, plan, _where, code, out, err = _submit(head, tmp_path, "overrun", "overrun",
                                                     deadline_seconds=3, stop_grace_seconds=1)
        assert code == ExitCode.FAILED, out + err
        info = job_info(head, spec.submission_id(1))
        assert info.driver_exit_code == ExitCode.DEADLINE
        assert "SIGTERM ignored" in out and "time budget" in out
        assert [e["event"] for e in events(plan)][-2:] == ["deadline", "driver_end"]
        # the trainer is gone (SIGKILL after the grace period): no step line after the job ended
        assert not _processes_matching(FAKE_TRAINER)

    def _processes_matching(text: str) -> list[str]:
        found = []
        for proc in Path("/proc").iterdir():
            if proc.name.isdigit():
                try:
                    cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                except OSError:
                    continue
                if text in cmdline:
                    found.append(cmdline)
        return found

    def test_jobs_stop_stops_the_driver_and_its_trainer(head, tmp_path):
        name = "stopped"
        spec = dev_spec(**{"gke-grpo:job.experimentName": name})
        plan = write_plan(tmp_path, spec.run_id, "overrun", deadline_seconds=300)
        where = ["--stack", "dev", "--config-file", write_config(tmp_path, experimentName=name),
                 "--address", head]
        # Ray's stop window as every job of the program gets it (jobs/contract/run_plan.py): with
        # Ray's default 3 s a loaded 2-core machine missed it (no driver_end before the SIGKILL).
        code, out, err = cli_run(["submit", *where, "--no-follow"],
                                 {"env_vars": {"PYTHONUNBUFFERED": "1",
                                               "RAY_JOB_STOP_WAIT_TIME_S": str(JOB_STOP_WAIT_SECONDS)}})
        assert code == ExitCode.OK, out + err
        deadline = time.monotonic() + 60
        while "trainer_start" not in [e["event"] for e in events(plan)]:
            assert time.monotonic() < deadline, "the trainer never started"
            time.sleep(0.3)
        code, out, _ = cli_run(["stop", *where, "--wait"])
        assert code == ExitCode.OK and f"{spec.submission_id(1)}: STOPPED" in out, out
        # the driver stopped its trainer and recorded why before Ray's SIGKILL (3 s)
        ends = [e for e in events(plan) if e["event"] == "driver_end"]
        assert [e["exit_code"] for e in ends] == [ExitCode.TERMINATED]
        deadline = time.monotonic() + 10
        while _processes_matching(FAKE_TRAINER):
            assert time.monotonic() < deadline, _processes_matching(FAKE_TRAINER)
            time.sleep(0.2)
