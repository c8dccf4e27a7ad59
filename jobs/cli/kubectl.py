"""One way to run a bounded ``kubectl`` command from the workstation CLI: the stack's exported
kubeconfig (a temporary file) or the user's own, an optional context, a timeout, and one line
that says what went wrong. `gke-grpo status` (RayJobs), `gke-grpo report --fetch` (kubectl cp) and
`gke-grpo serve` (apply, get, logs, delete) all run kubectl this way; each turns KubectlFailed into
its own error with its own advice. The port-forward, a long-lived child (jobs/cli/port_forward.py),
builds its command line with the same kubectl_argv.
"""

from __future__ import annotations

import subprocess


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
                context: str | None = None, stdin: str | None = None, what: str | None = None,
                tail: int = 600) -> str:
    """kubectl's stdout; KubectlFailed naming ``what`` (default: the first two words, as in
    "kubectl get pods") with the end of kubectl's own message."""
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
                            f"{(done.stderr or done.stdout).strip()[-tail:]}")
    return done.stdout
