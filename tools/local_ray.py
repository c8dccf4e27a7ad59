"""A real Ray 2.54 cluster on 127.0.0.1: the head, the fake GPU nodes that join it, losing one
and stopping them all. What drives real Ray on this machine starts it through here: the Ray tests
(tests/jobs/ray_head.py) and the benchmarks (tools/bench_recovery.py, tools/bench_gpu_idle.py,
and tools/bench_capacity.py through tools/fake_capacity.py).

Only ever inside a loopback-only network and PID namespace (tools/loopback_namespace.py for the
benchmarks, tests/jobs/ray_head.py for the tests): Ray binds 127.0.0.1 there, and `ray stop
--force` and a signal to a raylet (found by its command line) touch nothing of the machine's.
Every function that stops or signals takes the caller's own "am I inside" answer and refuses
without it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

RAY = str(Path(sys.executable).with_name("ray"))
GCS = "127.0.0.1:6379"
DASHBOARD = "http://127.0.0.1:8265"
OBJECT_STORE_BYTES = 100_000_000


def ray_env(**extra: str) -> dict[str, str]:
    """The environment `ray start` gets here.

    RAY_memory_monitor_refresh_ms=0: Ray's OOM killer judges the whole (shared) machine, so a busy
    test machine would kill tasks that use a few MB ("node running low on memory"). On a loaded
    2-core machine the head's processes can take longer to start than Ray allows, and `ray start
    --head` then fails: the dashboard's modules (RAY_DASHBOARD_SUBPROCESS_MODULE_WAIT_READY_TIMEOUT,
    30 s by default, ray/dashboard/consts.py: "Module MetricsHead failed to start") and the GCS
    (RAY_gcs_rpc_server_reconnect_timeout_s, 60 s: "Failed to connect to GCS within 60 seconds"),
    both seen while several Ray test modules ran side by side."""
    return dict(os.environ, RAY_USAGE_STATS_ENABLED="0", RAY_memory_monitor_refresh_ms="0",
                RAY_DASHBOARD_SUBPROCESS_MODULE_WAIT_READY_TIMEOUT="180",
                RAY_gcs_rpc_server_reconnect_timeout_s="180",
                PATH=f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}", **extra)


def _run_ray_start(args: Sequence[str], env: dict[str, str] | None, timeout: float, what: str) -> None:
    done = subprocess.run([RAY, "start", *args], capture_output=True, text=True, timeout=timeout,
                          env=env if env is not None else ray_env())
    if done.returncode != 0:     # say why: the command line alone tells nothing
        raise RuntimeError(f"`ray start` ({what}) exited {done.returncode}:\n{done.stdout[-1500:]}\n"
                           f"{done.stderr[-3000:]}")


def start_head(*, num_cpus: int, num_gpus: int, extra_args: Sequence[str] = (),
               env: dict[str, str] | None = None, object_store_bytes: int = OBJECT_STORE_BYTES,
               timeout: float = 240, dashboard_timeout: float = 60) -> None:
    """`ray start --head` on 127.0.0.1 (GCS 6379, dashboard 8265); returns once the dashboard's
    job API answers."""
    _run_ray_start(["--head", "--node-ip-address=127.0.0.1", "--port=6379", f"--num-cpus={num_cpus}",
                f"--num-gpus={num_gpus}", "--include-dashboard=true", "--dashboard-host=127.0.0.1",
                "--dashboard-port=8265", "--disable-usage-stats",
                f"--object-store-memory={object_store_bytes}", *extra_args],
               env, timeout, "the head")
    wait_for_dashboard(dashboard_timeout)


def wait_for_dashboard(timeout: float = 60) -> None:
    from ray.job_submission import JobSubmissionClient

    deadline = time.monotonic() + timeout
    while True:
        try:
            JobSubmissionClient(DASHBOARD).list_jobs()
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def join_node(*, num_gpus: int, num_cpus: int = 1, resources: str | None = None,
              node_manager_port: int | None = None, env: dict[str, str] | None = None,
              object_store_bytes: int = OBJECT_STORE_BYTES, timeout: float = 240) -> None:
    """A second node on this loopback (as a GPU worker pod joins the RayCluster): ``resources``
    is Ray's JSON (``'{"gpu_worker": 1}'``); ``node_manager_port`` names its raylet for
    ``lose_node``."""
    _run_ray_start([f"--address={GCS}", "--node-ip-address=127.0.0.1", f"--num-gpus={num_gpus}",
                f"--num-cpus={num_cpus}", *([f"--resources={resources}"] if resources else []),
                *([f"--node-manager-port={node_manager_port}"] if node_manager_port else []),
                f"--object-store-memory={object_store_bytes}", "--disable-usage-stats"],
               env, timeout, "a node")


def raylet_pid(node_manager_port: int) -> int | None:
    """The raylet of the node started with ``node_manager_port`` (this PID namespace only)."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if "raylet/raylet" in cmdline and f"--node_manager_port={node_manager_port} " in cmdline:
            return int(proc.name)
    return None


def lose_node(node_manager_port: int, sig: int, *, inside: bool) -> float:
    """End a node as a Spot preemption does (SIGTERM to its raylet: what deleting its pod sends)
    or as a vanished machine does (SIGKILL); returns when (time.time()) the signal was sent."""
    assert inside, "never signal a raylet outside this machinery's own PID namespace"
    pid = raylet_pid(node_manager_port)
    if pid is None:
        raise RuntimeError(f"no raylet with node manager port {node_manager_port}")
    at = time.time()
    os.kill(pid, sig)
    return at


def stop_all(*, inside: bool, timeout: float = 120) -> None:
    """`ray stop --force`: every Ray process it finds by name, so only inside the namespace."""
    assert inside, "never `ray stop` outside this machinery's own PID namespace"
    subprocess.run([RAY, "stop", "--force"], capture_output=True, timeout=timeout)
