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
from dataclasses import dataclass
from pathlib import Path

from tests import handoff

ROOT = Path(__file__).resolve().parent.parent
# One at a time, niced as the xdist workers are (THROUGHPUT_NICENESS in tests/conftest.py).
_RUNNER = handoff.Runner("background-command", workers=1)
_FINISHED: dict[str, tuple[float, int]] = {}     # each finished command's (seconds, bound), by its `what`


@dataclass(frozen=True)
class Command:
    what: str
    argv: tuple[str, ...]
    measured_seconds: float
    env: tuple[tuple[str, str], ...] = ()

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
        future = _RUNNER.futures.get(self.key)
        if future is not None:
            return future.result()
        published = handoff.wait_for(self.key)
        if published is not None:
            return subprocess.CompletedProcess(published["args"], published["returncode"],
                                               published["stdout"], published["stderr"])
        return _run(self)


def _run(command: Command) -> subprocess.CompletedProcess[str]:
    returncode, stdout, stderr, seconds = _RUNNER.run_bounded(
        ["nice", "-n", "10", *command.argv], bound=command.bound, cwd=ROOT, env={**os.environ, **dict(command.env)},
        stopped=lambda _stdout: f"{command.what}: stopped after its {command.bound}s bound")
    _FINISHED[command.what] = (seconds, command.bound)
    return subprocess.CompletedProcess(list(command.argv), returncode, stdout, stderr)


def _payload(done: subprocess.CompletedProcess[str]) -> dict:
    return {"args": done.args, "returncode": done.returncode, "stdout": done.stdout, "stderr": done.stderr}


def start(commands: list[Command]) -> None:
    """Queue each command once, shortest first: most results are ready before the main process
    reaches their tests. Each is due after the bounds of those before it and its own."""
    due_in = 0.0
    for command in sorted(dict.fromkeys(commands), key=lambda command: command.measured_seconds):
        if command.key not in _RUNNER.futures:
            due_in += command.bound
            _RUNNER.submit([command.key], lambda command=command: _run(command), _payload, due_in=due_in)


def stop() -> None:
    _RUNNER.stop()


def pids() -> set[int]:
    return _RUNNER.pids()


def summary() -> list[str]:
    return [f"background command {seconds:5.0f} s (bound {bound} s): {what}"
            for what, (seconds, bound) in _FINISHED.items()]


def _preview(*args: str, measured_seconds: float) -> Command:
    import sys

    return Command(f"python -m tools.preview {' '.join(args)}", (sys.executable, "-m", "tools.preview", *args),
                   measured_seconds=measured_seconds)


# The preview as a user runs it, shared by the tests that read its text (tests/tools/test_preview.py,
# tests/components/test_cost.py). Measured 2026-12-06 on the 2-core machine, niced in the whole
# suite: `dev` and `prod` 15-32 s alone, 35-47 s in the whole suite with a second whole suite running beside it;
# `dev --details` 58 s alone, 109 s and 148 s with the second suite.
PREVIEW_TREE = {"dev": _preview("dev", measured_seconds=86), "prod": _preview("prod", measured_seconds=86)}
PREVIEW_DEV_DETAILS = _preview("dev", "--details", measured_seconds=150)
