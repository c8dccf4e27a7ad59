"""One way to run a bounded ``kubectl`` command from the workstation CLI: the stack's exported
kubeconfig (a temporary file) or the user's own, an optional context, a timeout, and one line
that says what went wrong. `gke-grpo status` (RayJobs), `gke-grpo report --fetch` (kubectl cp) and
`gke-grpo serve` (apply, get, logs, delete) all run kubectl this way; each turns KubectlFailed into
its own error with its own advice. The port-forward, a long-lived child (jobs/cli/port_forward.py),
builds its command line with the same kubectl_argv.
"""

from __future__ import annotations

import re
import subprocess

# klog's line header (k8s.io/klog/v2: Lmmdd hh:mm:ss.uuuuuu threadid file:line] msg), which
# kubectl writes for its client-go errors: `E1206 05:01:02.123456  4242 memcache.go:265] ...`.
_KLOG = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+\s+[\w.-]+:\d+\]\s*(?P<msg>.*)$")
_KLOG_ERR = re.compile(r'\berr="(?P<err>(?:[^"\\]|\\.)*)"')
REASON_MAX = 300


def kubectl_reason(output: str) -> str:
    """kubectl's own reason in one line: its last line that is not klog's (client-go's
    `E1206 ... memcache.go:265] "Unhandled Error" err=...` repeats), else the err="..." of the
    last klog line; cut to REASON_MAX characters."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    plain = [line for line in lines if not _KLOG.match(line)]
    if plain:
        reason = plain[-1]
    elif lines:
        message = _KLOG.match(lines[-1]).group("msg")   # type: ignore[union-attr]
        found = _KLOG_ERR.search(message)
        reason = found.group("err").replace('\\"', '"') if found else message
    else:
        return "(no output)"
    return reason if len(reason) <= REASON_MAX else reason[:REASON_MAX - 3] + "..."


class KubectlFailed(Exception):
    """kubectl could not be run, did not finish, or exited non-zero; ``str()`` is one line
    without the kubeconfig's path. ``not_found``: the kubectl binary is missing."""

    def __init__(self, message: str, *, not_found: bool = False):
        super().__init__(message)
        self.not_found = not_found


def kubectl_argv(kubectl: str, *words: str, kubeconfig: str | None = None,
                 context: str | None = None) -> list[str]:
    return [kubectl, *(["--kubeconfig", kubeconfig] if kubeconfig else []),
            *(["--context", context] if context else []), *words]


def run_kubectl(kubectl: str, *words: str, timeout: float, kubeconfig: str | None = None,
                context: str | None = None, stdin: str | None = None, what: str | None = None) -> str:
    """kubectl's stdout; KubectlFailed naming ``what`` (default: the first two words, as in
    "kubectl get pods") with kubectl's own reason, one line (kubectl_reason)."""
    what = what or f"kubectl {' '.join(words[:2])}"
    try:
        done = subprocess.run(kubectl_argv(kubectl, *words, kubeconfig=kubeconfig, context=context),
                              input=stdin, capture_output=True, text=True, timeout=timeout, check=False)
    except FileNotFoundError:
        raise KubectlFailed(f"{kubectl} not found", not_found=True) from None
    except subprocess.TimeoutExpired:
        raise KubectlFailed(f"{what} did not finish in {timeout:.0f} s") from None
    if done.returncode != 0:
        raise KubectlFailed(f"{what} failed (exit {done.returncode}): "
                            f"{kubectl_reason(done.stderr or done.stdout)}")
    return done.stdout
