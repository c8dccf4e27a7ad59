"""NeMo RL's start against a REAL Ray head: a driver reproducing v0.5.0's ``init_ray``
(tests/jobs/fixtures/nemo_rl_init_ray.py, from nemo_rl/distributed/virtual_cluster.py at tag
v0.5.0) is submitted as a Ray job with the runtime env the program renders for the prod stack
(jobs.render.render(PROD).runtime_env) and SUCCEEDS; the same driver under the runtime env the
program rendered before (HF_HOME and PYTHONUNBUFFERED, no RAY_OVERRIDE_JOB_RUNTIME_ENV) FAILS
with Ray's merge error, as the prod job did at start.

The head runs in a loopback-only network namespace with its own PID namespace (tests/jobs/
ray_head.py); outside it this module holds one test that re-runs the module inside.
"""

from __future__ import annotations

import re
import shlex
import sys
import time
from pathlib import Path

import pytest

from tests.jobs import ray_head

DRIVER = Path(__file__).resolve().parents[1] / "fixtures" / "nemo_rl_init_ray.py"
MERGE_ERROR = "Failed to merge the Job's runtime env"
# Ray's merge error quotes the driver's whole environment (this machine's): never print it.
_DRIVER_ENV = re.compile(r"(with a ray\.init's runtime env ).*?( because of a conflict)", re.S)


def shown(logs: str) -> str:
    return _DRIVER_ENV.sub(r"\1{<the driver's environment, not shown>}\2", logs)
pytestmark = pytest.mark.filterwarnings("ignore:ssl=None is deprecated:DeprecationWarning")


# Started in the background when collection ends (tests/conftest.py); the outer test waits for it.
# Inner tests measured 2026-12-06 on the 2-core machine: 40 s beside another suite (with its own head then); the shared head's
# group of modules took 336 s alone and 503-573 s in the whole suite.
INNER = ray_head.InnerRun(__file__, "the Ray runtime-env test", measured_seconds=40)

if not ray_head.inside_namespace():

    def test_nemo_rl_init_ray_against_a_real_head():
        INNER.check()

else:

    @pytest.fixture(scope="module")
    def client(head):
        """A Jobs client of the inner run's shared head (tests/jobs/conftest.py)."""
        from ray.job_submission import JobSubmissionClient

        return JobSubmissionClient(head)

    def run_driver(client, submission_id, runtime_env, *names, timeout=120):
        from ray.job_submission import JobStatus

        entrypoint = shlex.join([sys.executable, str(DRIVER), *names])
        client.submit_job(entrypoint=entrypoint, runtime_env=runtime_env,
                          submission_id=submission_id)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status = client.get_job_status(submission_id)
            if status in (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.STOPPED):
                return status.value, shown(client.get_job_logs(submission_id))
            time.sleep(0.5)
        client.stop_job(submission_id)
        pytest.fail(f"{submission_id} did not finish within {timeout}s")

    def test_rendered_runtime_env_survives_init_ray(client):
        from jobs.plan.render import render
        from tests.jobs.plan.test_preflight import PROD

        runtime_env = render(PROD).runtime_env
        assert runtime_env["env_vars"]["RAY_OVERRIDE_JOB_RUNTIME_ENV"] == "1"
        status, logs = run_driver(client, "nemo-rl-rendered-env", runtime_env,
                                  "HF_HOME", "PYTHONUNBUFFERED")
        print(f"--- rendered runtime env {runtime_env}: {status}\n{logs}")
        assert status == "SUCCEEDED", logs
        assert MERGE_ERROR not in logs
        assert "init_ray pattern: connected and ran a task" in logs
        # The job's env vars reach NeMo RL's tasks (through the driver's pass-through).
        assert "task sees HF_HOME=/data/huggingface_cache" in logs
        assert "task sees PYTHONUNBUFFERED=1" in logs

    def test_todays_runtime_env_fails_with_rays_merge_error(client):
        from jobs.plan.render import base_env_vars

        # What jobs/plan/render.py rendered for NeMo RL before: the job's env vars, no override.
        runtime_env = {"env_vars": base_env_vars()}
        assert "RAY_OVERRIDE_JOB_RUNTIME_ENV" not in runtime_env["env_vars"]
        status, logs = run_driver(client, "nemo-rl-todays-env", runtime_env, "HF_HOME")
        print(f"--- previous runtime env {runtime_env}: {status}\n{logs}")
        assert status == "FAILED", logs
        assert MERGE_ERROR in logs
        assert "Use RAY_OVERRIDE_JOB_RUNTIME_ENV=1" in logs
        assert "init_ray pattern: connected" not in logs
