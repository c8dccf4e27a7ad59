"""NeMo RL's start relies on Ray merging a job's runtime env with the one NeMo RL's init_ray
passes (``{"env_vars": dict(os.environ)}``, nemo_rl/distributed/virtual_cluster.py at v0.5.0 and
v0.7.0): with overlapping keys Ray refuses the merge unless RAY_OVERRIDE_JOB_RUNTIME_ENV=1, which
the rendered runtime env sets (tests/jobs/plan/test_nemo_rl_runtime_env_ray.py runs it on a real
head of this environment's Ray). Here the merge itself, Ray's own
``ray.runtime_env.runtime_env._merge_runtime_env`` and the ray.init code that calls it
(ray/_private/worker.py), runs on every Ray version a supported image carries, each in its own
environment (.venv-ray-<version>, Makefile)."""

from __future__ import annotations

import json
import subprocess

import pytest

from jobs.plan.render import render
from tests.conftest import skip_or_fail
from tests.jobs.plan.test_preflight import PROD, PROD_050
from tools.kuberay_scenarios import ray_python, supported_ray_versions

MERGE = """
import json, sys, inspect
import ray._private.worker as worker
from ray.runtime_env.runtime_env import _merge_runtime_env
job, driver = json.loads(sys.argv[1]), json.loads(sys.argv[2])
source = inspect.getsource(worker)
print(json.dumps({
    "version": __import__("ray").__version__,
    "refused": _merge_runtime_env(job, driver, override=False),
    "merged": _merge_runtime_env(job, driver, override=True),
    "reads_the_variable": 'os.getenv("RAY_OVERRIDE_JOB_RUNTIME_ENV") == "1"' in source,
}))
"""


@pytest.mark.parametrize("version", supported_ray_versions())
def test_the_merge_needs_the_override_on_every_supported_ray(version):
    python = ray_python(version)
    if python is None:
        skip_or_fail(f"no environment with Ray {version} (make setup installs .venv-ray-{version})")
    runtime_env = render(PROD).runtime_env
    assert runtime_env == render(PROD_050).runtime_env          # both NeMo RL releases
    job = runtime_env
    # init_ray's runtime env: the driver's whole environment, the job's variables included.
    driver = {"env_vars": {**job["env_vars"], "PATH": "/opt/nemo_rl_venv/bin:/usr/bin"}}
    done = subprocess.run([python, "-c", MERGE, json.dumps(job), json.dumps(driver)],
                          capture_output=True, text=True, timeout=120, check=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["version"] == version
    assert result["refused"] is None                # a conflict without the override
    assert result["merged"]["env_vars"]["PATH"] == "/opt/nemo_rl_venv/bin:/usr/bin"
    assert result["reads_the_variable"]
    assert job["env_vars"]["RAY_OVERRIDE_JOB_RUNTIME_ENV"] == "1"
