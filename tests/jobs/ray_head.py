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
import dataclasses
import functools
import math
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
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
# How long a test waits for a short job (a one-line entrypoint) to end: its start alone is a
# supervisor actor, the job's runtime env and the driver process. A 30 s wait was passed once on
# the 2-core machine with a second suite running beside this one (2026-12-06); four times that.
SHORT_JOB_ENDS_WITHIN = 120
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


# An inner run may take this many times its measured time before it is stopped: the times below were
# measured with a second suite on the machine, and a slower or busier machine must still pass.
BOUND_MARGIN = 2.0


@dataclass(frozen=True)
class InnerRun:
    """The outer half of a Ray test module: its inner tests run inside a loopback-only namespace
    (`needs` names what the skip message says needs it), and the outer test requires that every
    one of them passed, none skipped; a missing namespace is a skip here and a failure in CI.

    Declared at module level (``INNER = InnerRun(__file__, ...)``) so that the suite can start the
    inner runs of every selected Ray module in the background as soon as collection ends
    (``start_in_background``, from tests/conftest.py) while the rest of the suite runs in the main
    process; each module's outer test (``INNER.check()``) waits for its own result.

    Modules that only submit jobs to a head share one: they run together, in one pytest and one
    namespace, against the session's head (``shared_ray_head`` in tests/jobs/conftest.py), each
    scenario with its own job ids, run directory and data root. A module whose scenarios start
    nodes, lose them, or stop and restart the head (``own_head=True``) runs alone in its own
    namespace with a head of its own.

    ``measured_seconds``: how long this module's inner tests took on the 2-core machine with
    another suite running beside it (the module says when); its bound is that times BOUND_MARGIN,
    and a group's bound is the sum of its modules'."""

    test_file: str
    needs: str
    measured_seconds: float
    own_head: bool = False
    # A module whose scenarios mostly wait on timers (clusters of its own, Pending pods, idle
    # timeouts) runs in a namespace of its own from the start, beside the others rather than after
    # them: its wall time is long, its CPU time small.
    alongside: bool = False

    @property
    def bound(self) -> int:
        return math.ceil(self.measured_seconds * BOUND_MARGIN)

    @property
    def key(self) -> str:
        return str(Path(self.test_file).resolve())

    @property
    def module(self) -> str:
        """The dotted name JUnit XML gives its test cases (``classname``)."""
        from tests.conftest import ROOT

        return ".".join(Path(self.test_file).resolve().relative_to(ROOT).with_suffix("").parts)

    def check(self) -> None:
        from tests.conftest import skip_or_fail

        reason = namespace_unavailable()
        if reason:
            skip_or_fail(f"{self.needs} need a loopback-only network namespace: {reason}")
        group = _BACKGROUND.result(self)
        cases = group.cases.get(self.module, [])
        mine = "\n".join(line for line in group.stdout.splitlines()
                         if line.startswith(self.module.replace(".", "/") + ".py"))
        report = (f"inner run of {group.describe()} ({group.seconds:.0f}s, exit {group.returncode}); "
                  f"this module's tests:\n{mine or '(none reported)'}\n"
                  f"--- end of the run's output ---\n{group.stdout[-6000:]}\n{group.stderr[-3000:]}")
        print(report)
        outcomes = [outcome for _, outcome in cases]
        assert cases, f"no result for {self.module}\n{report}"
        assert all(outcome == "passed" for outcome in outcomes), report


@dataclass
class GroupResult:
    """One pytest run inside one namespace: its exit, output, time and the outcome of every test
    case by module (from its JUnit XML)."""

    modules: list[str]
    bound: int
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    cases: dict[str, list[tuple[str, str]]]

    def describe(self) -> str:
        return ", ".join(self.modules)


def _read_junit(path: Path) -> dict[str, list[tuple[str, str]]]:
    """{module: [(test name, passed | failed | error | skipped)]} from pytest's JUnit XML."""
    from xml.etree import ElementTree

    cases: dict[str, list[tuple[str, str]]] = {}
    try:
        root = ElementTree.parse(path).getroot()
    except (OSError, ElementTree.ParseError):
        return cases
    for case in root.iter("testcase"):
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = "failed" if child.tag == "failure" else child.tag
        cases.setdefault(case.get("classname", ""), []).append((case.get("name", ""), outcome))
    return cases


def _where_it_stopped(stdout: str) -> str:
    """The test that was running when a bound passed: with -v, pytest prints a test's id before
    running it and its outcome after."""
    started = [line for line in stdout.splitlines() if "::" in line and not line.rstrip().endswith("]")
               and not any(word in line for word in ("PASSED", "FAILED", "ERROR", "SKIPPED"))]
    return started[-1].strip() if started else "before the first test started (the head's start?)"


def _run_group(group: list[InnerRun]) -> GroupResult:
    import tempfile

    from tests.conftest import ROOT

    bound = sum(inner.bound for inner in group)
    junit = Path(tempfile.mkdtemp(prefix="gke-grpo-inner-")) / "junit.xml"
    files = [str(Path(inner.test_file).resolve().relative_to(ROOT)) for inner in group]
    cmd = namespace_command(["-v", "-p", "no:cacheprovider", "-rfE", "--durations=10",
                             f"--junitxml={junit}", "-o", "junit_family=xunit2", *files])
    if any(inner.alongside for inner in group):
        cmd = ["nice", "-n", str(ALONGSIDE_NICENESS), *cmd]
    env = dict(os.environ, **{NS_ENV: "1"}, PATH=SESSION_PATH)
    env.pop("RAY_ADDRESS", None)
    env.pop("PYTEST_ADDOPTS", None)       # the outer run's options are not the inner run's
    # Killed at its bound: it is PID 1 of the namespace, so the kernel ends everything inside it.
    returncode, stdout, stderr, seconds = _BACKGROUND.runner.run_bounded(
        cmd, bound=bound, cwd=ROOT, env=env,
        stopped=lambda out: f"stopped after its {bound}s bound, while running: {_where_it_stopped(out)}")
    return GroupResult([inner.module for inner in group], bound, returncode, stdout, stderr, seconds,
                       _read_junit(junit))


# How many namespaces run at once: the shared head's modules and each own-head module are
# independent (each namespace has its own ports, /tmp/ray and processes). Two: the shared group
# (the longest) beside the own-head modules one after another. Measured 2026-12-06 on the 2-core
# machine: a namespace uses about half a core while it waits on its head (the shared group 184
# CPU-s in 345 s), but three at once beside the xdist workers (load average 17) slowed the
# drivers past Ray's 3 s stop window and the recovery run past its bound. Modules alongside
# (InnerRun.alongside) add one namespace each.
NAMESPACES_AT_ONCE = 2
# A module alongside yields the CPU to the other namespaces (niceness 0), whose Ray heads its
# clusters slowed by a third when it ran at their priority (2026-12-06); the xdist workers stay
# below it (tests/conftest.py THROUGHPUT_NICENESS, 10).
ALONGSIDE_NICENESS = 5


class _Background:
    """The inner runs started when collection ends: the shared-head group first, then each
    own-head module, NAMESPACES_AT_ONCE at a time (tests/handoff.py Runner, made on first use:
    this file is also the namespace's PID 1, where tests.handoff cannot be imported)."""

    def __init__(self) -> None:
        self._runner = None
        self._workers = NAMESPACES_AT_ONCE

    @property
    def runner(self):  # tests.handoff.Runner
        if self._runner is None:
            self._runner = _handoff().Runner("ray-namespace", workers=self._workers)
        return self._runner

    @staticmethod
    def groups(inner_runs: list[InnerRun]) -> list[list[InnerRun]]:
        """The modules alongside first (each alone), then the shared head's group, then each
        own-head module, longest first."""
        unique = list({inner.key: inner for inner in inner_runs}.values())
        alongside = [[inner] for inner in unique if inner.alongside]
        shared = [inner for inner in unique if not inner.own_head and not inner.alongside]
        own = sorted((inner for inner in unique if inner.own_head and not inner.alongside),
                     key=lambda inner: -inner.bound)
        return alongside + ([shared] if shared else []) + [[inner] for inner in own]

    def start(self, inner_runs: list[InnerRun]) -> None:
        if not inner_runs or inside_namespace() or namespace_unavailable() is not None:
            return      # nothing to run, or each outer test skips (fails in CI) on its own
        groups = self.groups(inner_runs)
        if self._runner is None:
            self._workers = NAMESPACES_AT_ONCE + sum(1 for group in groups if group[0].alongside)
        # NAMESPACES_AT_ONCE at a time: every result is due within the bounds of them all.
        due_in = sum(inner.bound for group in groups for inner in group)
        for group in groups:
            self.runner.submit([inner.key for inner in group], lambda group=group: _run_group(group),
                               dataclasses.asdict, due_in=due_in)

    def result(self, inner: InnerRun) -> GroupResult:
        future = self.runner.futures.get(inner.key)
        if future is not None:
            return future.result()
        published = _handoff().wait_for(inner.key)        # started by the xdist controller
        if published is not None:
            return GroupResult(**published)
        return _run_group([inner])     # a module run by hand: nobody started it


def _handoff():  # the module tests.handoff
    # Imported here, not at the top: this file is also the namespace's PID 1 (`init` below), run
    # as a script, where the checkout is not on sys.path (and `tests` may name another package's).
    from tests import handoff

    return handoff


_BACKGROUND = _Background()


def start_in_background(inner_runs: list[InnerRun]) -> None:
    _BACKGROUND.start(inner_runs)


def stop_background() -> None:
    _BACKGROUND.runner.stop()


def background_pids() -> set[int]:
    """The processes of the inner runs running now (children of this process, as tests that look
    for leftover children see them)."""
    return _BACKGROUND.runner.pids()


def background_summary() -> list[str]:
    """One line per inner run that finished: its modules, time, bound and exit."""
    lines = []
    seen: set[int] = set()
    for future in _BACKGROUND.runner.futures.values():
        if id(future) in seen or not future.done() or future.cancelled() or future.exception():
            continue
        seen.add(id(future))
        group = future.result()
        lines.append(f"inner Ray run {group.seconds:5.0f} s (bound {group.bound} s, exit {group.returncode}): "
                     f"{group.describe()}")
    return lines


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


# ---- the head pod's layout -----------------------------------------------------------------------

# The head's /data: one scratch directory for the namespace's head (its env names it), where every
# test's run has its own runs/<run-id> and checkpoints/<run-id>, as runs share /data on GKE.
HEAD_DATA: list[Path] = []


def install_head_layout() -> None:
    """/opt/gke-grpo as the head pod has it, in this namespace only (a private tmpfs): the jobs
    package, and run/plan.json where the ConfigMap mounts it."""
    from tests.conftest import ROOT

    assert inside_namespace(), "/opt is mounted over only inside the namespace"
    mounts = Path("/proc/self/mountinfo").read_text()
    if " /opt " not in mounts:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", "/opt"], check=True)
    Path("/opt/gke-grpo/run").mkdir(parents=True, exist_ok=True)
    if not Path("/opt/gke-grpo/jobs").exists():
        Path("/opt/gke-grpo/jobs").symlink_to(ROOT / "jobs")


def lay_out_head_pod(data: Path) -> None:
    """This namespace's head laid out as the head pod (components/grpo_job.py head_code_mount):
    /opt/gke-grpo with the jobs package, PYTHONPATH naming it, and `data` as the head's /data
    (HEAD_DATA, and the driver's data root), for the head started after this."""
    from jobs.contract.run_plan import DATA_ROOT_ENV

    install_head_layout()
    os.environ["PYTHONPATH"] = "/opt/gke-grpo"
    HEAD_DATA[:] = [data]
    os.environ[DATA_ROOT_ENV] = str(data)


def only_loopback_links() -> None:
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True).stdout
    assert [line.split(":")[1].strip() for line in links.splitlines()] == ["lo"], links
