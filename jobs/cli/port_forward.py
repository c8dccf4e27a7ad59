"""`kubectl port-forward` to the Ray head's dashboard, as a context manager that always stops it.

    with port_forward("grpo", "grpo-dev-head-svc") as address:   # http://127.0.0.1:<port>
        ...

The forward listens on 127.0.0.1 only (the dashboard can submit arbitrary code: it is never
exposed beyond this machine). The context waits, bounded, until the local port answers; restarts
kubectl (same port, bounded) when it drops while the block runs; and on exit (normal, exception,
KeyboardInterrupt, the CLI's SIGTERM/SIGHUP) terminates kubectl, then kills it if it lingers.
kubectl also dies with this process when it is killed outright (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from typing import TextIO

from jobs.cli.kubectl import kubectl_argv, kubectl_reason

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


_PR_SET_PDEATHSIG = 1   # linux/prctl.h
# Runs kubectl with a parent-death signal: prctl(PR_SET_PDEATHSIG, SIGKILL), then exec. The
# signal survives execve, so kubectl is killed by the kernel when the thread that spawned it
# dies - a CLI killed with SIGKILL (no cleanup possible) leaves no kubectl listening. A wrapper
# process rather than preexec_fn: the CLI has threads, and preexec_fn is not safe with threads.
_DIE_WITH_PARENT = (
    "import ctypes, os, sys\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    f"libc.prctl({_PR_SET_PDEATHSIG}, {int(signal.SIGKILL)}, 0, 0, 0)\n"
    "if os.getppid() != int(sys.argv[1]):\n"   # the parent died before prctl took effect
    "    os._exit(1)\n"
    "os.execvp(sys.argv[2], sys.argv[2:])\n"
)


def _with_parent_death_signal(cmd: list[str]) -> list[str]:
    """`cmd` run through the parent-death wrapper (Linux); `cmd` itself elsewhere."""
    if not sys.platform.startswith("linux") or not sys.executable:
        return cmd
    return [sys.executable, "-I", "-S", "-c", _DIE_WITH_PARENT, str(os.getpid()), *cmd]


class _Forward:
    """One `kubectl port-forward`, restarted when kubectl exits while the forward is in use
    (as `kubectl ray session` does: kubectl drops forwards when the pod restarts or the
    connection breaks), up to `max_restarts` times in a row."""

    def __init__(self, cmd: list[str], port: int, namespace: str, ready_timeout: float,
                 max_restarts: int, err: TextIO | None, *, credentials_hint: str | None = None):
        self.cmd, self.port, self.namespace = cmd, port, namespace
        self.credentials_hint = credentials_hint or "gcloud container clusters get-credentials CLUSTER --location LOCATION"
        # The command as printed: a --kubeconfig file is the stack's (temporary, removed).
        self.shown = " ".join("STACK-KUBECONFIG" if i and cmd[i - 1] == "--kubeconfig" else a
                              for i, a in enumerate(cmd))
        self.ready_timeout, self.max_restarts, self.err = ready_timeout, max_restarts, err
        # kubectl prints a line per connection: a file, not a pipe nobody drains, takes them.
        self.log = tempfile.TemporaryFile(mode="w+")
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.proc: subprocess.Popen | None = None
        self.pids: list[int] = []
        self.restarts = 0
        self.watcher: threading.Thread | None = None

    def _spawn(self) -> subprocess.Popen:
        if shutil.which(self.cmd[0]) is None:
            raise PortForwardError(f"{self.cmd[0]!r} not found: install kubectl, or pass "
                                   "--address with a port-forward you opened yourself")
        try:
            proc = subprocess.Popen(_with_parent_death_signal(self.cmd), stdin=subprocess.DEVNULL,
                                    stdout=self.log, stderr=self.log, start_new_session=True)
        except FileNotFoundError:
            raise PortForwardError(f"{self.cmd[0]!r} not found: install kubectl, or pass "
                                   "--address with a port-forward you opened yourself") from None
        self.pids.append(proc.pid)
        return proc

    def _output(self) -> str:
        """kubectl's reason, one line: its client-go (klog) lines are noise to the user."""
        self.log.flush()
        self.log.seek(0)
        text = self.log.read()
        self.log.seek(0, os.SEEK_END)
        return kubectl_reason(text[-20000:])

    def _wait_ready(self, proc: subprocess.Popen) -> None:
        deadline = time.monotonic() + self.ready_timeout
        while not _port_answers(self.port):
            if proc.poll() is not None:
                raise PortForwardError(
                    f"`{self.shown}` exited with code {proc.returncode}: "
                    f"{self._output()}; check the cluster credentials "
                    f"(`{self.credentials_hint}`), the namespace "
                    f"{self.namespace!r} and that the RayCluster's head service exists")
            if time.monotonic() >= deadline or self.stopping.is_set():
                raise PortForwardError(
                    f"`{self.shown}` did not open 127.0.0.1:{self.port} within "
                    f"{self.ready_timeout:.0f}s: {self._output()}")
            time.sleep(0.1)

    def start(self) -> None:
        proc = self._spawn()
        with self.lock:
            self.proc = proc
        try:
            self._wait_ready(proc)
        except BaseException:
            _stop(proc)
            raise
        self.watcher = threading.Thread(target=self._watch, name="port-forward-watch", daemon=True)
        self.watcher.start()

    def _say(self, text: str) -> None:
        if self.err is not None:
            with contextlib.suppress(OSError, ValueError):
                print(f"[gke-grpo] {text}", file=self.err, flush=True)

    def _watch(self) -> None:
        # Runs for the life of the forward: kubectl processes it restarts die with this thread
        # (PR_SET_PDEATHSIG follows the spawning thread), which ends only when the forward does.
        up_since = time.monotonic()
        while not self.stopping.wait(0.1):
            with self.lock:
                proc = self.proc
            if proc is None or proc.poll() is None:
                if time.monotonic() - up_since > 60:
                    self.restarts = 0        # a forward that stayed up a minute starts afresh
                continue
            if self.restarts >= self.max_restarts:
                self._say(f"kubectl port-forward exited (code {proc.returncode}) and was "
                          f"restarted {self.restarts} times in a row: giving up")
                return
            self.restarts += 1
            self._say(f"kubectl port-forward exited (code {proc.returncode}); restarting it "
                      f"({self.restarts}/{self.max_restarts})")
            if self.stopping.wait(min(0.2 * 2 ** (self.restarts - 1), 5.0)):
                return
            try:
                new = self._spawn()
            except PortForwardError as exc:
                self._say(str(exc))
                return
            with self.lock:
                if self.stopping.is_set():
                    _stop(new)
                    return
                self.proc = new
            try:
                self._wait_ready(new)
                up_since = time.monotonic()
                self._say(f"port-forward restored on 127.0.0.1:{self.port}")
            except PortForwardError as exc:
                self._say(str(exc).splitlines()[0])
        with self.lock:
            proc = self.proc
        if proc is not None:
            _stop(proc)

    def stop(self) -> None:
        self.stopping.set()
        if self.watcher is not None and self.watcher is not threading.current_thread():
            # A signal inside Thread.start() leaves a watcher not yet marked started (join would
            # raise): it sees `stopping` as soon as it runs, and ends.
            with contextlib.suppress(RuntimeError):
                self.watcher.join(timeout=15)
        with self.lock:
            proc = self.proc
        if proc is not None:
            _stop(proc)
        self.log.close()


@contextlib.contextmanager
def port_forward(namespace: str, service: str, *, remote_port: int = DASHBOARD_PORT,
                 local_port: int | None = None, kubectl: str = "kubectl",
                 context: str | None = None, ready_timeout: float = 30.0,
                 extra_args: Sequence[str] = (), max_restarts: int = 5,
                 err: TextIO | None = None, kubeconfig: str | None = None,
                 credentials_hint: str | None = None) -> Iterator[str]:
    """Forward 127.0.0.1:<local_port> to svc/<service>:<remote_port>; yield the http address.

    kubectl is restarted (same port) when it exits while the block runs, at most
    `max_restarts` times in a row; it is stopped on any exit of the block (an exception,
    KeyboardInterrupt, the CLI's SIGTERM/SIGHUP handlers), and killed by the kernel if this
    process dies without cleanup (SIGKILL): PR_SET_PDEATHSIG."""
    port = local_port or free_local_port()
    # kubeconfig: a file path (the stack's exported kubeconfig), never its content
    cmd = kubectl_argv(kubectl, "port-forward", "-n", namespace, f"svc/{service}", f"{port}:{remote_port}",
                       "--address", "127.0.0.1", *extra_args, kubeconfig=kubeconfig, context=context)
    forward = _Forward(cmd, port, namespace, ready_timeout, max_restarts, err,
                       credentials_hint=credentials_hint)
    try:
        forward.start()
        yield f"http://127.0.0.1:{port}"
    finally:
        forward.stop()


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
