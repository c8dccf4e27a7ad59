"""Helpers for the hostile-input CLI tests: a fake `kubectl port-forward` with modes a real
kubectl shows (a forward that accepts and never answers, one that proxies to the real dashboard,
one that dies mid-follow), a loopback TCP server that accepts and never answers, and process
checks. Everything listens on 127.0.0.1 only."""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

FAKE_KUBECTL = '''#!{python}
"""Fake `kubectl port-forward` (tests/jobs/hostile.py), and `kubectl get` answering an empty List.
MODE: listen answers HTTP "ok";
silent accepts and never answers; proxy relays to 127.0.0.1:<remote> (the real dashboard in the
test's network namespace); proxy-die-once relays, and its FIRST run exits after {die_after}s
(kubectl dropping the forward), later runs proxy for good; fail exits 1 as kubectl does without
the service; hang never listens."""
import json, os, socket, sys, threading, time
mode, log, die_after = {mode!r}, {log!r}, {die_after!r}
if "get" in sys.argv[1:6] and "port-forward" not in sys.argv:
    # `kubectl get rayjobs.ray.io ... -o json` (gke-grpo status/list): kubectl's List, no RayJobs
    print(json.dumps({{"apiVersion": "v1", "items": [], "kind": "List", "metadata": {{"resourceVersion": ""}}}}))
    sys.exit(0)
with open(log, "a") as f:
    f.write(" ".join(sys.argv[1:]) + "\\n" + str(os.getpid()) + "\\n")
with open(log) as f:
    runs = len(f.read().splitlines()) // 2
if mode == "fail":
    print('error: services "nope-head-svc" not found', file=sys.stderr)
    sys.exit(1)
if mode == "no-cluster":   # kubectl 1.3x without a reachable API server: client-go's klog lines first
    for _ in range(5):
        print('E1206 04:12:33.123456    4242 memcache.go:265] "Unhandled Error" err="could not get current '
              'server API group list: dial tcp [::1]:8080: connect: connection refused"', file=sys.stderr)
    print("The connection to the server localhost:8080 was refused - did you specify the right host "
          "or port?", file=sys.stderr)
    sys.exit(1)
if mode == "hang":
    time.sleep(600)
local, remote = (int(p) for p in next(a for a in sys.argv if a.count(":") == 1 and a[0].isdigit()).split(":"))
assert sys.argv[sys.argv.index("--address") + 1] == "127.0.0.1"
server = socket.socket(); server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("127.0.0.1", local)); server.listen(64)
print(f"Forwarding from 127.0.0.1:{{local}} -> {{remote}}", flush=True)
if mode == "proxy-die-once" and runs == 1:
    threading.Timer(die_after, lambda: os._exit(1)).start()
held = []

def pump(a, b):
    try:
        while (data := a.recv(65536)):
            b.sendall(data)
    except OSError:
        pass
    finally:
        for s in (a, b):
            try: s.shutdown(socket.SHUT_RDWR)
            except OSError: pass

def serve(conn):
    if mode == "silent":
        held.append(conn)          # accepted, never answered
        return
    if mode == "listen":
        conn.recv(65536)
        conn.sendall(b"HTTP/1.1 200 OK\\r\\nContent-Length: 2\\r\\nConnection: close\\r\\n\\r\\nok")
        conn.close()
        return
    upstream = socket.create_connection(("127.0.0.1", remote))
    threading.Thread(target=pump, args=(conn, upstream), daemon=True).start()
    pump(upstream, conn)

while True:
    conn, _ = server.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
'''


def fake_kubectl(tmp_path: Path, mode: str, die_after: float = 2.0) -> tuple[Path, Path]:
    log = tmp_path / f"kubectl-{mode}.log"
    script = tmp_path / f"kubectl-{mode}"
    script.write_text(FAKE_KUBECTL.format(python=sys.executable, mode=mode, log=str(log),
                                          die_after=die_after))
    script.chmod(0o755)
    return script, log


def kubectl_calls(log: Path) -> list[tuple[list[str], int]]:
    """Each run of the fake kubectl: its arguments and its pid."""
    if not log.exists():
        return []
    lines = log.read_text().splitlines()
    return [(lines[i].split(), int(lines[i + 1])) for i in range(0, len(lines) - 1, 2)]


def kubectl_pids(log: Path) -> list[int]:
    return [pid for _, pid in kubectl_calls(log)]


def kubectl_port(log: Path) -> int:
    first = log.read_text().splitlines()[0].split()
    return int(next(a for a in first if a.count(":") == 1 and a[0].isdigit()).split(":")[0])


def alive(pid: int) -> bool:
    """Running (not a zombie, not gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return not f.read().rsplit(") ", 1)[1].startswith(("Z", "X"))
    except (FileNotFoundError, ProcessLookupError):
        return False


def wait_until(predicate, timeout: float, what: str) -> None:
    """Poll until predicate() (a bound on waiting, not a timing assertion)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for: {what}")
        time.sleep(0.05)


def listening(port: int) -> bool:
    """A TCP socket of this network namespace LISTENs on `port` (read from /proc/net/tcp*: a
    connect() probe could succeed by connecting to itself when the port is an ephemeral one)."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except FileNotFoundError:
            continue
        for row in rows:
            fields = row.split()
            if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                return True
    return False


def wait_forward_gone(pids: list[int], port: int, timeout: float, what: str) -> None:
    """Wait (bounded) until no kubectl of `pids` runs AND nothing LISTENs on `port`. Both, not
    one after the other: when a multi-threaded process is killed, /proc/<pid>/stat can show the
    thread-group leader as a zombie while its last thread is still exiting and still holds the
    file table, so the listening socket outlives "not alive" by a moment (seen under load in CI:
    the leader was Z and the port still in LISTEN). A kubectl that survives fails this."""
    wait_until(lambda: not any(alive(p) for p in pids) and not listening(port), timeout, what)


@contextlib.contextmanager
def silent_server() -> Iterator[int]:
    """A TCP server on 127.0.0.1 that accepts every connection and never answers; yields its port.
    Bounded: it stops (and closes what it accepted) when the block ends."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    server.settimeout(0.2)
    held, stop = [], threading.Event()

    def accept():
        while not stop.is_set():
            try:
                conn, _ = server.accept()
                held.append(conn)
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        thread.join(timeout=5)
        for conn in held:
            conn.close()
        server.close()


def child_env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "PYTEST_ADDOPTS")}
    return env
