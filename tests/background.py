"""Commands whose tests only read their result, started when collection ends and run beside the rest
of the suite (as the Ray inner runs are: tests/jobs/ray_head.py).

A test module declares one at module level::

    CHECKER = background.Command("the shared contract checker", (sys.executable, str(path)),
                                 measured_seconds=...)

    def test_it_passes():
        run = CHECKER.result()          # waits for it; runs it here if it was not started

The suite's subprocess-heavy checks (the shared contract checker, mypy, the user-facing preview
commands) are CPU work that needs no result from the main process; started early, they use the
core that the Ray inner runs leave idle while they wait on their heads. They run one at a time, in
order of their measured times (shortest first), so that they never take both cores from the
main process. Each has a bound: its
measured time (with another suite on the machine) times ray_head.BOUND_MARGIN.
"""

from __future__ import annotations

import math
import os
import subprocess
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from tests import handoff

ROOT = Path(__file__).resolve().parent.parent
COMMANDS_SEEN: list[Command] = []     # every Command declared in this process


@dataclass(frozen=True)
class Command:
    what: str
    argv: tuple[str, ...]
    measured_seconds: float
    env: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        COMMANDS_SEEN.append(self)

    @property
    def bound(self) -> int:
        from tests.jobs.ray_head import BOUND_MARGIN

        return math.ceil(self.measured_seconds * BOUND_MARGIN)

    @property
    def key(self) -> str:
        return "command " + "\0".join(self.argv)

    def result(self) -> subprocess.CompletedProcess[str]:
        """The finished run (the test's own process waits here); a run that passed its bound is
        a CompletedProcess with returncode -9 and the reason appended to stderr. Started by the
        xdist controller, it is read from its result file (tests/handoff.py); started by nobody
        (a module run by hand), it runs here."""
        future = _RUNNER.futures.get(self)
        if future is not None:
            return future.result()
        # They run one at a time: wait for every declared command's bound at most.
        published = handoff.wait_for(self.key, sum(command.bound for command in COMMANDS_SEEN) + 60)
        if published is not None:
            return subprocess.CompletedProcess(published["args"], published["returncode"],
                                               published["stdout"], published["stderr"])
        return _run(self)


def _run(command: Command) -> subprocess.CompletedProcess[str]:
    start = time.monotonic()
    # niced as the xdist workers are (THROUGHPUT_NICENESS in tests/conftest.py)
    proc = subprocess.Popen(["nice", "-n", "10", *command.argv], cwd=ROOT, env={**os.environ, **dict(command.env)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL)
    _RUNNER.running.add(proc)
    try:
        stdout, stderr = proc.communicate(timeout=command.bound)
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, stderr = proc.communicate()
        stderr += f"\n({command.what}: stopped after its {command.bound}s bound)"
    finally:
        _RUNNER.running.discard(proc)
    _RUNNER.seconds[command] = time.monotonic() - start
    return subprocess.CompletedProcess(list(command.argv), proc.returncode, stdout, stderr)


class _Runner:
    def __init__(self) -> None:
        self.pool: ThreadPoolExecutor | None = None
        self.futures: dict[Command, Future[subprocess.CompletedProcess[str]]] = {}
        self.running: set[subprocess.Popen[str]] = set()
        self.seconds: dict[Command, float] = {}

    def start(self, commands: list[Command]) -> None:
        if not commands:
            return
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="background-command")
        # Shortest first: most results are ready before the main process reaches their tests.
        for command in sorted(dict.fromkeys(commands), key=lambda command: command.measured_seconds):
            if command not in self.futures:
                handoff.mark_started(command.key)
                self.futures[command] = self.pool.submit(self._run_and_publish, command)

    @staticmethod
    def _run_and_publish(command: Command) -> subprocess.CompletedProcess[str]:
        done = _run(command)
        handoff.publish(command.key, {"args": done.args, "returncode": done.returncode,
                                      "stdout": done.stdout, "stderr": done.stderr})
        return done

    def stop(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)
        for proc in list(self.running):
            proc.kill()


_RUNNER = _Runner()


def start(commands: list[Command]) -> None:
    _RUNNER.start(commands)


def stop() -> None:
    _RUNNER.stop()


def pids() -> set[int]:
    return {proc.pid for proc in list(_RUNNER.running)}


def summary() -> list[str]:
    return [f"background command {seconds:5.0f} s (bound {command.bound} s): {command.what}"
            for command, seconds in _RUNNER.seconds.items()]


def _preview(*args: str, measured_seconds: float) -> Command:
    import sys

    return Command(f"python -m tools.preview {' '.join(args)}", (sys.executable, "-m", "tools.preview", *args),
                   measured_seconds=measured_seconds)


# The preview as a user runs it, shared by the tests that read its text (tests/tools/test_preview.py,
# tests/components/test_cost.py). Measured 2026-12-06 on the 2-core machine: 15 s alone; 28 to
# 86 s niced in the whole suite (xdist workers and Ray inner runs beside it).
PREVIEW_TREE = {"dev": _preview("dev", measured_seconds=86), "prod": _preview("prod", measured_seconds=86)}
PREVIEW_DEV_DETAILS = _preview("dev", "--details", measured_seconds=86)
