"""The jobs CLI targets the deployed stack: `pulumi stack output --json --show-secrets`, the
exported kubeconfig for kubectl, and the stack file only as the offline fallback, said on stderr.

The real Pulumi CLI cannot be installed here (no network, no backend, nothing deployed): these
tests put a stand-in `pulumi` on PATH (tests/jobs/stand_in_pulumi.py) that prints outputs in the
real CLI's documented format. Its outputs are the dev stack's offline-preview outputs with a
different namespace and head service (so "deployed" and "stack file" can be told apart) and a
kubeconfig, which the preview only shows as "[secret]".
"""

from __future__ import annotations

import io
import json
import os
import stat
import sys
import textwrap
from pathlib import Path

import pytest

from jobs.cli import main as cli
from jobs.cli.stack_outputs import StackError, kubeconfig_file, offline_outputs, stack_target, target_from_outputs
from jobs.contract.exit_codes import ExitCode
from jobs.contract.spec import GrpoSpec
from tests.conftest import ROOT
from tests.jobs import stand_in_pulumi

FAKE_TOKEN = "ya29.not-a-real-token-7f3a9c"
KUBECONFIG = textwrap.dedent(f"""\
    apiVersion: v1
    kind: Config
    clusters:
    - name: grpo-dev
      cluster: {{server: "https://gke-0123.us-central1.gke.goog"}}
    users:
    - name: grpo-dev
      user: {{token: "{FAKE_TOKEN}"}}
    contexts:
    - name: grpo-dev
      context: {{cluster: grpo-dev, user: grpo-dev}}
    current-context: grpo-dev
    """)


@pytest.fixture(scope="module")
def dev_offline() -> dict:
    return offline_outputs("dev")


@pytest.fixture
def deployed(dev_offline) -> dict:
    outputs = dict(dev_offline, rayNamespace="grpo-live", rayDashboardService="grpo-live-head-svc",
                   kubeconfig=KUBECONFIG)
    return outputs


@pytest.fixture
def pulumi_on_path(tmp_path, monkeypatch, deployed):
    """The stand-in pulumi first on PATH, with stack dev (selected) deployed."""
    bin_dir = tmp_path / "bin"
    log = stand_in_pulumi.install(bin_dir, {"dev": {"outputs": deployed, "secrets": ["kubeconfig"]}})
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    return bin_dir, log


@pytest.fixture
def no_pulumi(tmp_path, monkeypatch):
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))


def test_the_stand_in_prints_the_documented_format(pulumi_on_path, deployed):
    import subprocess

    masked = json.loads(subprocess.run(["pulumi", "stack", "output", "--json"], capture_output=True,
                                       text=True, check=True).stdout)
    assert masked["kubeconfig"] == "[secret]" and masked["runId"] == deployed["runId"]
    shown = json.loads(subprocess.run(["pulumi", "stack", "output", "--json", "--show-secrets", "-s", "dev"],
                                      capture_output=True, text=True, check=True).stdout)
    assert shown == deployed


def test_the_deployed_stack_is_the_target(pulumi_on_path, deployed):
    _, log = pulumi_on_path
    err = io.StringIO()
    target = stack_target("dev", None, err)
    assert stand_in_pulumi.calls(log) == [["stack", "output", "--json", "--show-secrets",
                                           "--non-interactive", "--stack", "dev"]]
    assert target.source == "deployed" and target.stack == "dev"
    assert (target.namespace, target.head_service, target.ray_cluster_name) == \
        ("grpo-live", "grpo-live-head-svc", "grpo-dev")
    assert target.run_id == deployed["runId"] and target.spec.run_id == deployed["runId"]
    assert target.submission_id == deployed["submissionId"] == target.spec.submission_id()
    assert target.checkpoint_dir == deployed["runCheckpointDir"] == target.spec.checkpoint_dir
    assert target.kubeconfig == KUBECONFIG
    assert FAKE_TOKEN not in repr(target)
    assert err.getvalue() == ""


def test_no_stack_means_pulumis_selected_stack(tmp_path, monkeypatch, deployed):
    bin_dir = tmp_path / "bin"
    log = stand_in_pulumi.install(bin_dir, {"prod": {"outputs": deployed}}, selected="prod")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    target = stack_target(None, None, io.StringIO())
    assert stand_in_pulumi.calls(log)[0] == ["stack", "output", "--json", "--show-secrets", "--non-interactive"]
    assert target.stack == "prod" and target.source == "deployed"


def test_without_pulumi_the_stack_file_is_the_fallback_and_it_says_so(no_pulumi, dev_offline):
    err = io.StringIO()
    target = stack_target("dev", None, err)
    assert target.source == "offline"
    assert (target.namespace, target.head_service) == ("grpo", "grpo-dev-head-svc")
    assert target.run_id == dev_offline["runId"] == target.spec.run_id
    assert target.kubeconfig is None            # the preview prints secrets as "[secret]"
    assert "pulumi is not installed" in err.getvalue()
    assert "falling back to the stack file Pulumi.dev.yaml (offline)" in err.getvalue()


def test_a_stack_pulumi_does_not_know_falls_back_with_pulumis_reason(tmp_path, monkeypatch, deployed):
    bin_dir = tmp_path / "bin"
    stand_in_pulumi.install(bin_dir, {"prod": {"outputs": deployed}}, selected="prod")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    err = io.StringIO()
    target = stack_target("dev", None, err)
    assert target.source == "offline" and target.namespace == "grpo"
    assert "`pulumi stack output -s dev` failed: error: no stack named 'dev' found" in err.getvalue()


def test_no_stack_and_no_pulumi_is_a_usage_error(no_pulumi):
    with pytest.raises(StackError, match="give --stack STACK"):
        stack_target(None, None, io.StringIO())
    err = io.StringIO()
    assert cli.main(["list"], out=io.StringIO(), err=err) == ExitCode.USAGE
    assert "pulumi is not installed" in err.getvalue() and "give --stack STACK" in err.getvalue()


def test_a_config_file_is_offline_even_with_pulumi(pulumi_on_path, tmp_path):
    _, log = pulumi_on_path
    path = tmp_path / "Pulumi.dev.yaml"
    path.write_text((ROOT / "Pulumi.dev.yaml").read_text())
    err = io.StringIO()
    target = stack_target("dev", str(path), err)
    assert target.source == "offline" and stand_in_pulumi.calls(log) == []
    assert f"--config-file: targeting {path} (offline), not the deployed stack" in err.getvalue()


def test_the_kubeconfig_file_is_private_and_removed():
    with kubeconfig_file(KUBECONFIG) as path:
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        assert Path(path).read_text() == KUBECONFIG
    assert not os.path.exists(path)
    with pytest.raises(RuntimeError), kubeconfig_file(KUBECONFIG) as path:
        raise RuntimeError("boom")
    assert not os.path.exists(path)
    with kubeconfig_file(None) as nothing:
        assert nothing is None


def test_numbers_carried_as_doubles_keep_the_run(deployed):
    """Pulumi's wire format carries numbers as doubles: 2.0 must hash to the same run as 2."""
    doubles = {k: (float(v) if isinstance(v, int) and not isinstance(v, bool) else v)
               for k, v in deployed["runSpec"].items()}
    target = target_from_outputs(dict(deployed, runSpec=doubles), stack="dev", source="deployed", origin="t")
    assert target.spec.nodes == 2 and isinstance(target.spec.nodes, int)
    assert target.spec.run_id == deployed["runId"]


def test_a_run_spec_that_is_not_the_exported_run_is_refused(deployed):
    other = dict(deployed["runSpec"], experiment_name="someone-else")
    with pytest.raises(StackError, match="hashes to run someone-else-"):
        target_from_outputs(dict(deployed, runSpec=other), stack="dev", source="deployed", origin="t")
    with pytest.raises(StackError, match="does not match this checkout's GrpoSpec"):
        target_from_outputs(dict(deployed, runSpec=dict(deployed["runSpec"], new_field=1)),
                            stack="dev", source="deployed", origin="t")


def test_a_missing_output_is_named(deployed):
    outputs = dict(deployed)
    del outputs["rayNamespace"]
    with pytest.raises(StackError, match="t has no output 'rayNamespace': deploy this version"):
        target_from_outputs(outputs, stack="dev", source="deployed", origin="t")


def test_a_stack_without_run_spec_cannot_submit(tmp_path, monkeypatch, deployed):
    outputs = dict(deployed)
    del outputs["runSpec"]          # deployed by a program before this export
    bin_dir = tmp_path / "bin"
    stand_in_pulumi.install(bin_dir, {"dev": {"outputs": outputs}})
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    err = io.StringIO()
    code = cli.main(["submit", "--address", "http://127.0.0.1:9", "--no-follow"], out=io.StringIO(), err=err)
    assert code == ExitCode.USAGE
    assert "submit needs the stack's run spec (output runSpec)" in err.getvalue()


# ---- the port-forward uses the exported kubeconfig ----------------------------------------------

RECORDING_KUBECTL = '''#!{python}
"""Records its argv and the --kubeconfig file's mode and content, then fails like kubectl."""
import json, os, stat, sys
argv = sys.argv[1:]
seen = {{"argv": argv}}
if "--kubeconfig" in argv:
    path = argv[argv.index("--kubeconfig") + 1]
    seen.update(path=path, mode=stat.S_IMODE(os.stat(path).st_mode), content=open(path).read())
with open({log!r}, "a") as f:
    f.write(json.dumps(seen) + "\\n")
print("error: the test's kubectl stops here", file=sys.stderr)
sys.exit(1)
'''


def recording_kubectl(tmp_path: Path) -> tuple[Path, Path]:
    log = tmp_path / "kubectl.log"
    script = tmp_path / "kubectl"
    script.write_text(RECORDING_KUBECTL.format(python=sys.executable, log=str(log)))
    script.chmod(0o755)
    return script, log


def test_the_port_forward_uses_the_exported_kubeconfig_and_never_prints_it(pulumi_on_path, tmp_path):
    kubectl, log = recording_kubectl(tmp_path)
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(["list", "--kubectl", str(kubectl)], out=out, err=err)   # no -s: the selected stack
    assert code == ExitCode.DASHBOARD_UNREACHABLE          # the recording kubectl fails on purpose
    seen = [json.loads(line) for line in log.read_text().splitlines()]
    first = seen[0]
    assert first["argv"][:2] == ["--kubeconfig", first["path"]]
    assert first["argv"][2:6] == ["port-forward", "-n", "grpo-live", "svc/grpo-live-head-svc"]
    assert first["mode"] == 0o600 and first["content"] == KUBECONFIG
    assert not os.path.exists(first["path"])               # removed afterwards
    assert "port-forward svc/grpo-live-head-svc -n grpo-live" in err.getvalue()
    assert "stack dev from the deployed stack; kubeconfig: the exported one" in err.getvalue()
    for text in (out.getvalue(), err.getvalue()):
        assert FAKE_TOKEN not in text and first["path"] not in text


def test_a_kube_context_uses_your_own_kubeconfig(pulumi_on_path, tmp_path):
    kubectl, log = recording_kubectl(tmp_path)
    err = io.StringIO()
    code = cli.main(["list", "-s", "dev", "--kube-context", "mine", "--kubectl", str(kubectl)],
                    out=io.StringIO(), err=err)
    assert code == ExitCode.DASHBOARD_UNREACHABLE
    first = json.loads(log.read_text().splitlines()[0])
    assert "--kubeconfig" not in first["argv"] and first["argv"][:2] == ["--context", "mine"]
    assert "kubeconfig: yours" in err.getvalue()


def test_the_spec_round_trips_through_the_output(deployed):
    spec = GrpoSpec.from_json(json.dumps(deployed["runSpec"]))
    assert spec.run_id == deployed["runId"]
