"""`kubectl port-forward` to the Ray head's dashboard, as a context manager that always stops it.

    with port_forward("grpo", "grpo-dev-head-svc") as address:   # http://127.0.0.1:<port>
        ...

The forward listens on 127.0.0.1 only (the dashboard can submit arbitrary code: it is never
exposed beyond this machine). The context waits, bounded, until the local port answers, and on
exit (normal, exception or KeyboardInterrupt) terminates kubectl, then kills it if it lingers.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import tempfile
import time
from typing import Iterator, Optional, Sequence

DASHBOARD_PORT = 8265


class PortForwardError(Exception):
    """kubectl could not open the forward (not installed, no cluster credentials, no service)."""


def free_local_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _port_answers(port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout):
            return True
    except OSError:
        return False


def head_service(ray_cluster_name: str) -> str:
    """KubeRay's head service of a RayCluster: ``<name>-head-svc``."""
    return f"{ray_cluster_name}-head-svc"


def _stop(proc: subprocess.Popen, grace: float = 5.0) -> None:
    if proc.poll() is not None:
        return
    try:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=grace)
    except ProcessLookupError:  # pragma: no cover - already gone
        pass


@contextlib.contextmanager
def port_forward(namespace: str, service: str, *, remote_port: int = DASHBOARD_PORT,
                 local_port: Optional[int] = None, kubectl: str = "kubectl",
                 context: Optional[str] = None, ready_timeout: float = 30.0,
                 extra_args: Sequence[str] = ()) -> Iterator[str]:
    """Forward 127.0.0.1:<local_port> to svc/<service>:<remote_port>; yield the http address."""
    port = local_port or free_local_port()
    cmd = [kubectl, "port-forward", "-n", namespace, f"svc/{service}", f"{port}:{remote_port}",
           "--address", "127.0.0.1", *extra_args]
    if context:
        cmd[1:1] = ["--context", context]
    # kubectl prints a line per connection: a file, not a pipe nobody drains, takes them.
    log = tempfile.TemporaryFile(mode="w+")
    try:
        try:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                    start_new_session=True)
        except FileNotFoundError:
            raise PortForwardError(f"{kubectl!r} not found: install kubectl, or pass --address "
                                   "with a port-forward you opened yourself") from None
        try:
            deadline = time.monotonic() + ready_timeout
            while not _port_answers(port):
                if proc.poll() is not None:
                    log.seek(0)
                    raise PortForwardError(
                        f"`{' '.join(cmd)}` exited with code {proc.returncode}: "
                        f"{log.read().strip() or '(no output)'}\n  Check the cluster credentials "
                        f"(gcloud container clusters get-credentials ...), the namespace "
                        f"{namespace!r} and that the RayCluster's head service exists.")
                if time.monotonic() >= deadline:
                    log.seek(0)
                    raise PortForwardError(
                        f"`{' '.join(cmd)}` did not open 127.0.0.1:{port} within "
                        f"{ready_timeout:.0f}s: {log.read().strip() or '(no output)'}")
                time.sleep(0.1)
            yield f"http://127.0.0.1:{port}"
        finally:
            _stop(proc)
    finally:
        log.close()


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
