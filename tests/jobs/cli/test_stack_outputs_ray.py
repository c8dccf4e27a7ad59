"""The jobs CLI against the DEPLOYED stack and a REAL Ray head (tests/jobs/ray_head.py: a
loopback-only network namespace, its own PID namespace and /tmp/ray).

The real Pulumi CLI cannot be installed here: a stand-in `pulumi` on PATH
(tests/jobs/stand_in_pulumi.py) prints the stack's outputs in the real CLI's documented format.
The deployed run differs from what Pulumi.dev.yaml says now (another experiment name), so the
test shows that the CLI submits and lists the deployed run, not the stack file's; the
port-forward (a fake kubectl relaying to the real dashboard) gets the exported kubeconfig.
"""

from __future__ import annotations

import io
import json
import os
import sys

import pytest

from jobs.cli import main as cli
from jobs.cli.ray_jobs import RetryPolicy
from jobs.contract.exit_codes import ExitCode
from tests.conftest import ROOT
from tests.jobs import ray_head, stand_in_pulumi
from tests.jobs.cli.test_main import dev_spec
from tests.jobs.hostile import fake_kubectl

PY = sys.executable
RUNTIME_ENV = {"env_vars": {"PYTHONPATH": str(ROOT)}}
RETRY = RetryPolicy(tries=6, base=0.3, cap=1.0, call_timeout=10.0, budget=30.0)
KUBECONFIG = "apiVersion: v1\nkind: Config\nusers:\n- name: u\n  user: {token: not-a-real-token-51c2}\n"
pytestmark = pytest.mark.filterwarnings("ignore:ssl=None is deprecated:DeprecationWarning")


# Started in the background when collection ends (tests/conftest.py); the outer test waits for it.
# Inner tests measured 2026-12-06 on the 2-core machine: 78 s beside another suite (with its own head then); the shared head's
# group of modules took 336 s alone and 503-573 s in the whole suite.
INNER = ray_head.InnerRun(__file__, "the Ray jobs tests", measured_seconds=78)

if not ray_head.inside_namespace():

    def test_deployed_stack_cli_runs_in_a_loopback_only_namespace():
        INNER.check()

else:

    # `head`: the inner run's shared head (tests/jobs/conftest.py).

    def test_submit_and_list_target_the_deployed_run(head, tmp_path, monkeypatch):
        deployed_spec = dev_spec(**{"gke-grpo:job.experimentName": "deployed-run"})
        outputs = {"rayNamespace": "grpo", "rayClusterName": "grpo-dev",
                   "rayDashboardService": "grpo-dev-head-svc", "runId": deployed_spec.run_id,
                   "submissionId": deployed_spec.submission_id(),
                   "runCheckpointDir": deployed_spec.checkpoint_dir,
                   "runSpec": json.loads(deployed_spec.to_json()), "kubeconfig": KUBECONFIG}
        bin_dir = tmp_path / "bin"
        calls = stand_in_pulumi.install(bin_dir, {"dev": {"outputs": outputs, "secrets": ["kubeconfig"]}})
        monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
        kubectl, log = fake_kubectl(tmp_path, "proxy")
        seen = []

        def build(spec, args):
            seen.append(spec)
            return f"{PY} -c \"print('deployed attempt ran')\"", RUNTIME_ENV

        out, err = io.StringIO(), io.StringIO()
        code = cli.main(["submit", "--kubectl", str(kubectl)], build_entrypoint=build, out=out, err=err,
                        retry=RETRY)
        assert code == ExitCode.OK, out.getvalue() + err.getvalue()
        assert seen == [deployed_spec]                     # the deployed spec, not Pulumi.dev.yaml's
        assert f"submitted {deployed_spec.submission_id(1)}" in out.getvalue()
        assert "deployed attempt ran" in out.getvalue()
        assert "falling back" not in err.getvalue()
        first_kubectl = log.read_text().splitlines()[0].split()
        assert first_kubectl[0] == "--kubeconfig" and not os.path.exists(first_kubectl[1])
        assert stand_in_pulumi.calls(calls)[0][:4] == ["stack", "output", "--json", "--show-secrets"]

        out, err = io.StringIO(), io.StringIO()
        assert cli.main(["list", "-s", "dev", "--kubectl", str(kubectl)], out=out, err=err,
                        retry=RETRY) == ExitCode.OK, err.getvalue()
        assert f"run {deployed_spec.run_id}" in out.getvalue()
        assert deployed_spec.submission_id(1) in out.getvalue() and "SUCCEEDED" in out.getvalue()
        assert "not-a-real-token" not in out.getvalue() + err.getvalue()
