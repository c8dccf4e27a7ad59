"""jobs/cli/kubectl.py against a stand-in kubectl (a script that prints its argv and stdin, or
fails as kubectl does: its message on stderr, exit 1)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from jobs.cli.kubectl import KubectlFailed, kubectl_argv, run_kubectl

STAND_IN = f"""#!{sys.executable}
import json, sys, time
args = sys.argv[1:]
if "sleep" in args:
    time.sleep(30)
if "fail" in args:
    print('Error from server (NotFound): rayclusters.ray.io "grpo-dev" not found', file=sys.stderr)
    sys.exit(1)
print(json.dumps({{"argv": args, "stdin": sys.stdin.read()}}))
"""


@pytest.fixture
def kubectl(tmp_path) -> str:
    path = tmp_path / "kubectl"
    path.write_text(STAND_IN)
    path.chmod(0o755)
    return str(path)


def test_the_kubeconfig_and_context_come_before_the_words(kubectl):
    assert kubectl_argv("kubectl", "get", "pods") == ["kubectl", "get", "pods"]
    out = run_kubectl(kubectl, "apply", "-f", "-", timeout=30, kubeconfig="/tmp/stack-kubeconfig",
                      context="gke_p_r_c", stdin='{"kind": "List"}')
    assert json.loads(out) == {"argv": ["--kubeconfig", "/tmp/stack-kubeconfig", "--context", "gke_p_r_c",
                                        "apply", "-f", "-"], "stdin": '{"kind": "List"}'}


def test_a_failure_names_the_command_and_ends_with_kubectls_message(kubectl):
    with pytest.raises(KubectlFailed, match=r'^kubectl get raycluster failed \(exit 1\): Error from server '
                                            r'\(NotFound\): rayclusters.ray.io "grpo-dev" not found$') as exc:
        run_kubectl(kubectl, "get", "raycluster", "fail", timeout=30)
    assert not exc.value.not_found
    with pytest.raises(KubectlFailed, match=r"^kubectl cp failed \(exit 1\): .{5}$"):
        run_kubectl(kubectl, "cp", "fail", timeout=30, what="kubectl cp", tail=5)


def test_a_missing_kubectl_and_a_hung_one(kubectl, tmp_path):
    missing = str(tmp_path / "no-kubectl")
    with pytest.raises(KubectlFailed, match=f"^{missing} not found$") as exc:
        run_kubectl(missing, "get", "pods", timeout=5)
    assert exc.value.not_found
    with pytest.raises(KubectlFailed, match=r"^kubectl logs did not finish in 1 s$"):
        run_kubectl(kubectl, "logs", "sleep", timeout=1, what="kubectl logs")
    assert Path(kubectl).exists()
