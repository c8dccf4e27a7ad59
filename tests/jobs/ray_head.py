"""A real Ray head for the jobs tests, isolated in Linux namespaces.

The test module re-runs itself with pytest under

    unshare --net --pid --fork --mount-proc sh -c 'ip link set lo up && mount -t tmpfs ... /tmp/ray && ...'

- a network namespace with only loopback: Ray binds its node address and the dashboard to
  127.0.0.1 here, and even a component binding 0.0.0.0 could not be reached from outside;
- a PID namespace with its own /proc: `ray stop --force` (which kills Ray processes by name)
  sees only this head, never another Ray on the machine, and when the namespace's first process
  exits the kernel kills whatever is left in it;
- a private tmpfs on /tmp/ray: the head's sessions, sockets and logs stay out of the host's
  /tmp/ray and vanish with the namespace.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from tools import local_ray
from tools.loopback_namespace import namespace_init

NS_ENV = "GKE_GRPO_RAY_TEST_NAMESPACE"
# The PATH the session started with: the inner runs start from a background thread, possibly
# while a test of the main process has monkeypatched PATH (tests/jobs/cli/test_stack_outputs.py
# empties it to hide `pulumi`), and `unshare`, `ip` and `mount` must still be found.
SESSION_PATH = os.environ.get("PATH", "")
DASHBOARD = local_ray.DASHBOARD
GCS = local_ray.GCS
FAKE_GPUS = 2
RAY = local_ray.RAY


def inside_namespace() -> bool:
    return os.environ.get(NS_ENV) == "1"


@functools.cache
def namespace_unavailable() -> str | None:
    """Why the namespace cannot be made here (None if it can)."""
    for tool in ("unshare", "ip", "mount"):
        if shutil.which(tool) is None:
            return f"`{tool}` is not installed (util-linux / iproute2)"
    probe = subprocess.run(["unshare", "--net", "--pid", "--fork", "--kill-child", "--mount-proc", "sh", "-c",
                            "ip link set lo up && mkdir -p /tmp/ray && mount -t tmpfs tmpfs /tmp/ray"],
                           capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        return ("cannot create network/PID/mount namespaces (`unshare --net --pid --mount-proc`, "
                f"needs root or CAP_SYS_ADMIN): {probe.stderr.strip()}")
    return None


def namespace_command(pytest_args: list[str]) -> list[str]:
    # PID 1 of the namespace is this file's `init`: it reaps the orphans Ray leaves behind
    # (otherwise zombies that `ray stop` waits for) and exits with pytest's exit code.
    inner = " ".join([
        "ip link set lo up",
        "&& mkdir -p /tmp/ray && mount -t tmpfs -o size=2g tmpfs /tmp/ray",
        "&& exec", sys.executable, __file__, "init", sys.executable, "-m", "pytest", *pytest_args,
    ])
    # --kill-child: when unshare itself is killed (a bound passed, the session interrupted), the
    # kernel kills PID 1 of the namespace, and with it everything inside.
    unshare = shutil.which("unshare", path=SESSION_PATH) or "unshare"
    return [unshare, "--net", "--pid", "--fork", "--kill-child", "--mount-proc", "sh", "-c", inner]


@dataclass(frozen=True)
class InnerRun:
    """The outer half of a Ray test module: re-run `test_file` inside a loopback-only namespace
    (`needs` names what the skip message says needs it) and require that every test there passed,
    none skipped; a missing namespace is a skip here and a failure in CI.

    Declared at module level (``INNER = InnerRun(__file__, ...)``) so that the suite can start the
    inner runs of every selected Ray module in the background as soon as collection ends
    (``start_in_background``, from tests/conftest.py): they run one after another, in their own
    namespaces, while the rest of the suite runs in the main process, and each module's outer test
    (``INNER.check()``) waits for its own result. On 2 cores this overlaps the Ray heads' work with
    the other tests instead of leaving one core idle."""

    test_file: str
    needs: str
    timeout: int = 420
    pytest_args: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return str(Path(self.test_file).resolve())

    def check(self) -> None:
        from tests.conftest import skip_or_fail

        reason = namespace_unavailable()
        if reason:
            skip_or_fail(f"{self.needs} need a loopback-only network namespace: {reason}")
        returncode, stdout, stderr, seconds = _BACKGROUND.result(self)
        report = f"inner run ({seconds:.0f}s, exit {returncode}):\n{stdout[-8000:]}\n{stderr[-3000:]}"
        print(report)
        assert returncode == 0, report
        summary = stdout.strip().splitlines()[-1] if stdout.strip() else ""
        assert " passed" in summary and "skipped" not in summary and "failed" not in summary, report


def _run(inner: InnerRun, running: list[subprocess.Popen]) -> tuple[int, str, str, float]:
    from tests.conftest import ROOT

    cmd = namespace_command(["-q", "-p", "no:cacheprovider", "-rfE", *inner.pytest_args,
                             str(Path(inner.test_file).resolve().relative_to(ROOT))])
    env = dict(os.environ, **{NS_ENV: "1"}, PATH=SESSION_PATH)
    env.pop("RAY_ADDRESS", None)
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    running.append(proc)
    try:
        stdout, stderr = proc.communicate(timeout=inner.timeout)
    except subprocess.TimeoutExpired:
        proc.kill()               # PID 1 of the namespace: the kernel ends everything inside it
        stdout, stderr = proc.communicate()
        stderr += f"\n(stopped after its {inner.timeout}s bound)"
    finally:
        running.remove(proc)
    return proc.returncode, stdout, stderr, time.monotonic() - start


class _Background:
    """The inner runs started when collection ends, one at a time, in collection order."""

    def __init__(self) -> None:
        self.pool: ThreadPoolExecutor | None = None
        self.futures: dict[str, Future] = {}
        self.running: list[subprocess.Popen] = []

    def start(self, inner_runs: list[InnerRun]) -> None:
        if not inner_runs or inside_namespace() or namespace_unavailable() is not None:
            return      # nothing to run, or each outer test skips (fails in CI) on its own
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ray-namespace")
        for inner in inner_runs:
            if inner.key not in self.futures:
                self.futures[inner.key] = self.pool.submit(_run, inner, self.running)

    def result(self, inner: InnerRun) -> tuple[int, str, str, float]:
        future = self.futures.get(inner.key)
        if future is None:        # not started with the session (a module run by hand)
            return _run(inner, self.running)
        return future.result()

    def stop(self) -> None:
        """The session ended (or was interrupted): nothing of ours keeps running."""
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)
        for proc in list(self.running):
            proc.kill()


_BACKGROUND = _Background()


def start_in_background(inner_runs: list[InnerRun]) -> None:
    _BACKGROUND.start(inner_runs)


def stop_background() -> None:
    _BACKGROUND.stop()


def non_loopback_listeners() -> list[str]:
    """TCP listeners of this namespace that are NOT on loopback (expected: none)."""
    bad = []
    for table, _width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except FileNotFoundError:
            continue
        for row in rows:
            fields = row.split()
            local, state = fields[1], fields[3]
            if state != "0A":          # LISTEN
                continue
            addr = local.split(":")[0]
            loopback = ((addr.endswith("7F") and len(addr) == 8)                 # 127.x.x.x
                        or addr == "00000000000000000000000001000000"          # ::1
                        or (addr.startswith("0000000000000000FFFF0000") and addr.endswith("7F")))
            if not loopback:
                bad.append(f"{table} {local}")
    return bad


def start_head() -> None:
    local_ray.start_head(num_cpus=FAKE_GPUS, num_gpus=FAKE_GPUS)


@contextlib.contextmanager
def running_head() -> Iterator[str]:
    """The module fixtures' head: started, checked to listen on loopback only, always stopped;
    yields the dashboard address."""
    try:
        start_head()
        assert non_loopback_listeners() == []
        yield DASHBOARD
    finally:
        stop_head()


def stop_head() -> None:
    # Inside our own PID namespace `ray stop` only sees this head's processes.
    local_ray.stop_all(inside=inside_namespace(), timeout=60)


if __name__ == "__main__" and sys.argv[1:2] == ["init"]:
    # PID 1 of the namespace: the benchmarks' init (run argv, reap every orphan, pass on TERM,
    # INT and HUP, exit with argv's code).
    sys.exit(namespace_init(sys.argv[2:]))


# ---- more nodes, and losing them ---------------------------------------------------------------

GPU_WORKER_RESOURCE = "gpu_worker"     # what tests/jobs/fake_trainer.py's ray-* modes place on


def add_gpu_worker(node_manager_port: int, gpus: int = FAKE_GPUS) -> None:
    """A second Ray node on this loopback: `gpus` fake GPUs and the custom resource the fake
    trainer's actor asks for (as a GPU worker pod joins the RayCluster)."""
    local_ray.join_node(num_gpus=gpus, resources=f'{{"{GPU_WORKER_RESOURCE}": 1}}',
                        node_manager_port=node_manager_port)


def lose_node(node_manager_port: int, sig: int) -> float:
    """A Spot preemption (SIGTERM to the node's raylet) or a vanished machine (SIGKILL)."""
    return local_ray.lose_node(node_manager_port, sig, inside=inside_namespace())
