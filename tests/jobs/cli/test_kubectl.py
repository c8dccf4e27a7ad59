"""jobs/cli/kubectl.py against a stand-in kubectl (a script that prints its argv and stdin, or
fails as kubectl does: its message on stderr, exit 1)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from jobs.cli.kubectl import REASON_MAX, KubectlFailed, kubectl_argv, kubectl_reason, run_kubectl

KLOG_LINE = ('E1206 04:12:33.123456   4242 memcache.go:265] "Unhandled Error" err="couldn\'t get current '
             'server API group list: Get \\"http://localhost:8080/api?timeout=32s\\": dial tcp '
             '[::1]:8080: connect: connection refused"')
STAND_IN = f"""#!{sys.executable}
import json, sys, time
args = sys.argv[1:]
if "sleep" in args:
    time.sleep(30)
if "noise" in args:   # what kubectl 1.3x prints without a reachable cluster
    for _ in range(5):
        print({KLOG_LINE!r}, file=sys.stderr)
    if "only-klog" not in args:
        print("The connection to the server localhost:8080 was refused - did you specify the right "
              "host or port?", file=sys.stderr)
    sys.exit(1)
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
    with pytest.raises(KubectlFailed, match=r"^kubectl cp failed \(exit 1\): Error from server"):
        run_kubectl(kubectl, "cp", "fail", timeout=30, what="kubectl cp")


def test_a_missing_kubectl_and_a_hung_one(kubectl, tmp_path):
    missing = str(tmp_path / "no-kubectl")
    with pytest.raises(KubectlFailed, match=f"^{missing} not found$") as exc:
        run_kubectl(missing, "get", "pods", timeout=5)
    assert exc.value.not_found
    with pytest.raises(KubectlFailed, match=r"^kubectl logs did not finish in 1 s$"):
        run_kubectl(kubectl, "logs", "sleep", timeout=1, what="kubectl logs")
    assert Path(kubectl).exists()


def test_client_go_noise_becomes_kubectl_s_reason_in_one_line(kubectl):
    with pytest.raises(KubectlFailed) as exc:
        run_kubectl(kubectl, "get", "pods", "noise", timeout=30)
    assert str(exc.value) == ("kubectl get pods failed (exit 1): The connection to the server "
                              "localhost:8080 was refused - did you specify the right host or port?")
    with pytest.raises(KubectlFailed) as exc:
        run_kubectl(kubectl, "get", "pods", "noise", "only-klog", timeout=30)
    assert str(exc.value) == ("kubectl get pods failed (exit 1): couldn't get current server API group "
                              'list: Get "http://localhost:8080/api?timeout=32s": dial tcp [::1]:8080: '
                              "connect: connection refused")
    assert "memcache.go" not in str(exc.value) and "\n" not in str(exc.value)


def test_a_reason_is_one_bounded_line():
    assert kubectl_reason("") == "(no output)"
    assert kubectl_reason("a\nb\n\n") == "b"
    assert len(kubectl_reason("x" * 5000)) == REASON_MAX
    assert kubectl_reason('W1206 01:02:03.000001 7 loader.go:223] Config not found: /x') == "Config not found: /x"
