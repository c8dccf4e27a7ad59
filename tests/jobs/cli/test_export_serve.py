"""`gke-grpo export` and `gke-grpo serve` from the CLI: the export's entrypoint (shell-safe, the deployed
plan's options), and serve against a fake kubectl that answers `get raycluster` with the
program's own RayCluster (the dev golden preview), `apply`, `get pods` and `delete`, and logs
its argv and stdin."""

from __future__ import annotations

import dataclasses
import io
import json
import sys
import textwrap
from pathlib import Path

import pytest

from jobs.cli import export_serve
from jobs.cli import main as cli
from jobs.cli.stack_outputs import StackTarget
from jobs.contract.run_plan import SHELL_SAFE
from tests.jobs.cli.test_main import dev_spec
from tests.jobs.plan.test_serve_manifest import ray_cluster_spec

RUN = "exp-12345678"

FAKE = textwrap.dedent("""\
    #!{python}
    import json, sys
    argv = sys.argv[1:]
    stdin = sys.stdin.read() if "apply" in argv else ""
    with open({log!r}, "a") as f:
        f.write(json.dumps({{"argv": argv, "stdin": stdin}}) + "\\n")
    if argv[:2] == ["get", "raycluster"]:
        print(json.dumps({{"spec": {spec!r}}}))
    elif argv[:2] == ["get", "pods"]:
        print(json.dumps({{"items": [{pod!r}]}}))
    elif argv[:2] == ["logs", "-n"]:
        print("[serve] error: cannot serve step 40 of run exp-12345678: half-written")
    elif argv[0] in ("apply", "delete"):
        print("deployment.apps/grpo-serve-x deleted" if argv[0] == "delete" else "applied")
    else:
        sys.exit(2)
    """)

READY = {"metadata": {"name": "grpo-serve-1"}, "status": {"containerStatuses": [{"ready": True}]}}
CRASHED = {"metadata": {"name": "grpo-serve-1"}, "status": {"containerStatuses": [
    {"ready": False, "lastState": {"terminated": {"exitCode": 2}}}]}}


def fake_kubectl(tmp_path: Path, pod: dict) -> tuple[Path, Path]:
    spec, _ = ray_cluster_spec("dev")
    log = tmp_path / "kubectl.log"
    script = tmp_path / "kubectl"
    script.write_text(FAKE.format(python=sys.executable, log=str(log), spec=spec, pod=pod))
    script.chmod(0o755)
    return script, log


@pytest.fixture
def stack(monkeypatch):
    target = StackTarget(stack="dev", source="deployed", namespace="grpo", ray_cluster_name="grpo-dev",
                         head_service="grpo-dev-head-svc", run_id=None, submission_id=None,
                         checkpoint_dir=None, spec=dev_spec(), kubeconfig=None)
    monkeypatch.setattr(export_serve, "load_stack", lambda *args: target)
    return target


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def calls(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_export_entrypoint_is_shell_safe_and_names_the_deployed_plan():
    entrypoint = export_serve.export_entrypoint(RUN, 40)
    assert entrypoint == ("python3 -m jobs.head.export --plan /opt/gke-grpo/run/plan.json "
                          f"--run-id {RUN} --step 40")
    assert SHELL_SAFE.fullmatch(entrypoint)


@pytest.mark.parametrize(("argv", "message"), [
    (["export", "../etc", "--address", "http://127.0.0.1:1"], "run id '../etc'"),
    (["export", RUN, "--step", "-3"], "must be >= 0"),
    (["serve", "--stack", "dev"], "which run?"),
])
def test_bad_input_is_one_message(argv, message, stack, capsys):
    code, _, err = run(*argv)
    assert code == 2 and message in err + capsys.readouterr().err   # argparse writes to sys.stderr


def test_serve_applies_waits_and_says_where(tmp_path, stack):
    kubectl, log = fake_kubectl(tmp_path, READY)
    code, out, err = run("serve", RUN, "--step", "20", "--no-forward", "--kubectl", str(kubectl),
                         "--poll-seconds", "0.01")
    assert code == 0, err
    seen = calls(log)
    assert [c["argv"][:2] for c in seen] == [["get", "raycluster"], ["apply", "-f"], ["get", "pods"]]
    applied = json.loads(seen[1]["stdin"])
    deployment, service = applied["items"]
    assert deployment["kind"] == "Deployment" and service["kind"] == "Service"
    script = deployment["spec"]["template"]["spec"]["containers"][0]["command"][2]
    # Qwen2.5-7B (28 heads, 4 KV heads) on a node of 8 H200: TP 4.
    assert "--step 20" in script and "--tensor-parallel-size 4" in script
    assert f"kubectl port-forward -n grpo svc/{deployment['metadata']['name']} 8000:8000" in out


def test_a_pod_that_ends_before_ready_shows_its_log(tmp_path, stack):
    kubectl, _ = fake_kubectl(tmp_path, CRASHED)
    code, _, err = run("serve", RUN, "--step", "40", "--no-forward", "--kubectl", str(kubectl),
                         "--poll-seconds", "0.01")
    assert code == 2
    assert "ended before it was ready" in err and "cannot serve step 40" in err and "--stop" in err


def test_serve_stop_removes_the_runs_server(tmp_path, stack):
    kubectl, log = fake_kubectl(tmp_path, READY)
    code, out, _ = run("serve", RUN, "--stop", "--kubectl", str(kubectl))
    assert code == 0 and "deleted" in out
    argv = calls(log)[0]["argv"]
    assert argv[:2] == ["delete", "deployment,service"]
    assert argv[argv.index("-l") + 1].startswith("gke-grpo/role=vllm-serve,gke-grpo/serve-run=")


def test_serve_dry_run_prints_the_manifest(tmp_path, stack):
    spec, _ = ray_cluster_spec("dev")
    cluster = tmp_path / "raycluster.json"
    cluster.write_text(json.dumps({"spec": spec}))
    code, out, _ = run("serve", RUN, "--dry-run", "--ray-cluster-json", str(cluster))
    assert code == 0
    import yaml

    kinds = [doc["kind"] for doc in yaml.safe_load_all(out)]
    assert kinds == ["Deployment", "Service"]


def test_curl_example_is_an_openai_chat_request():
    text = export_serve.curl_example("http://127.0.0.1:5555", RUN)
    assert text.startswith("curl -s http://127.0.0.1:5555/v1/chat/completions")
    body = json.loads(text.split("-d '", 1)[1].rstrip("'"))
    assert body["model"] == RUN and body["temperature"] == 0 and body["max_tokens"] == 512


@pytest.fixture
def offline_preview_of_dev(monkeypatch, dev_preview):
    """`python -m tools.preview dev --json` answered with the cached dev preview (no subprocess)."""
    from jobs.cli import stack_outputs
    from tools.preview import render_json

    asked = []

    def module(name, args, what):
        asked.append([name, *args])
        assert name == "tools.preview" and args[:2] == ["dev", "--json"]
        return render_json(dev_preview)

    monkeypatch.setattr(stack_outputs, "_module", module)
    return asked


def test_serve_dry_run_needs_no_cluster_offline(stack, offline_preview_of_dev, monkeypatch):
    import yaml

    offline = dataclasses.replace(stack, source="offline")
    monkeypatch.setattr(export_serve, "load_stack", lambda *args: offline)
    code, out, err = run("serve", RUN, "--dry-run", "--stack", "dev", "--kubectl", "/nonexistent/kubectl")
    assert code == 0, err
    assert offline_preview_of_dev == [["tools.preview", "dev", "--json"]]
    deployment, service = yaml.safe_load_all(out)
    assert (deployment["kind"], service["kind"]) == ("Deployment", "Service")
    assert "&id" not in out and "*id" not in out        # every object written out, no YAML aliases


def test_serve_dry_run_of_an_unreachable_deployed_stack_says_so_in_one_line(tmp_path, stack, offline_preview_of_dev):
    kubectl = tmp_path / "kubectl"
    kubectl.write_text(f"#!{sys.executable}\nimport sys\n"
                       "print('E1206 04:12:33.123456   4242 memcache.go:265] \"Unhandled Error\" err=\"x\"', file=sys.stderr)\n"
                       "print('The connection to the server localhost:8080 was refused', file=sys.stderr)\n"
                       "sys.exit(1)\n")
    kubectl.chmod(0o755)
    code, out, err = run("serve", RUN, "--dry-run", "--stack", "dev", "--kubectl", str(kubectl))
    assert code == 0, err
    [line] = err.splitlines()
    assert line.startswith("[gke-grpo] the deployed RayCluster could not be read (kubectl get raycluster "
                           "failed (exit 1): The connection to the server localhost:8080 was refused)")
    assert "memcache" not in err and out.startswith("apiVersion: apps/v1")
