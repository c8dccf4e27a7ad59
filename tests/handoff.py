"""The suite's background work (Ray inner runs: tests/jobs/ray_head.py; background commands:
tests/background.py): the runner both use, and their results handed from the process that runs
the work to the process whose test reads its result.

Without xdist both are the one pytest process. `make test` runs pytest with xdist workers
(`-n auto`): then the controller starts every run once, when the workers have collected, and a
worker's test waits for the run's result file in the test run's shared folder (its path in
SHARED_ENV, which the workers inherit from the controller). A run is marked started before it is
queued, and the workers run no test before the controller has started them all, so a test that
finds no mark knows nobody runs its work and runs it itself. The mark holds the time by which the
result is due (its queue and its own bound), so a waiting test needs no list of the other work.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

Result = TypeVar("Result")

SHARED_ENV = "GKE_GRPO_TEST_SHARED"


def create_shared_folder() -> None:
    """In the process that starts the work (before xdist starts its workers)."""
    os.environ[SHARED_ENV] = tempfile.mkdtemp(prefix="gke-grpo-tests-")


def _folder() -> Path | None:
    value = os.environ.get(SHARED_ENV)
    return Path(value) if value else None


def name_of(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:24]


def mark_started(key: str, due_in: float) -> None:
    """`key` is queued; its result is due within `due_in` seconds (what runs before it included)."""
    folder = _folder()
    if folder is not None:
        (folder / f"{name_of(key)}.started").write_text(str(time.time() + due_in))


def publish(key: str, payload: dict[str, Any]) -> None:
    folder = _folder()
    if folder is None:
        return
    partial = folder / f"{name_of(key)}.json.partial"
    partial.write_text(json.dumps(payload))
    partial.rename(folder / f"{name_of(key)}.json")       # readers never see half a file


# Beyond the time a result is due: its runner stops the work at its bound, then publishes.
PUBLISH_SLACK_SECONDS = 60


def wait_for(key: str) -> dict[str, Any] | None:
    """The published result of `key`, waited for until it is due; None when nobody started it."""
    folder = _folder()
    marker = folder / f"{name_of(key)}.started" if folder is not None else None
    if marker is None or not marker.exists():
        return None
    path = marker.with_name(f"{name_of(key)}.json")
    deadline = float(marker.read_text()) + PUBLISH_SLACK_SECONDS
    while not path.exists():
        if time.time() > deadline:
            raise TimeoutError(f"no result for {key} by the time it was due (its runner has a bound of its own)")
        time.sleep(0.5)
    result: dict[str, Any] = json.loads(path.read_text())
    return result


# How long a process waits for a value that another process of the run is computing before it
# computes the value itself: a whole preview, the longest such value, took 4-15 s on the 2-core
# machine under the suite's load (2026-12-06).
COMPUTE_WAIT_SECONDS = 120


def computed_once(key: str, compute: Callable[[], Result]) -> tuple[Result, bool]:
    """`compute()`'s value, computed by one process of the test run and read by the others from
    the shared folder: (value, True) where this process computed it. The first process to ask
    claims the key; one that asks meanwhile waits for the value. A value that cannot be pickled,
    or a computation that failed, leaves each process to compute its own."""
    folder = _folder()
    if folder is None:
        return compute(), True
    name = name_of(key)
    done, failed = folder / f"{name}.pickle", folder / f"{name}.failed"
    try:
        os.close(os.open(folder / f"{name}.computing", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        deadline = time.monotonic() + COMPUTE_WAIT_SECONDS
        while time.monotonic() < deadline and not failed.exists():
            if done.exists():
                return pickle.loads(done.read_bytes()), False
            time.sleep(0.1)
        return compute(), True
    try:
        value = compute()
    except BaseException:
        failed.touch()
        raise
    try:
        data = pickle.dumps(value)
    except (pickle.PicklingError, TypeError, AttributeError):
        failed.touch()
        return value, True
    partial = done.with_suffix(".partial")
    partial.write_bytes(data)
    partial.rename(done)                # readers never see half a file
    return value, True


def publish_counts(name: str, counts: dict[str, int]) -> None:
    folder = _folder()
    if folder is not None:
        (folder / f"counts-{name}.json").write_text(json.dumps(counts))


def summed_counts() -> dict[str, int]:
    folder = _folder()
    total: dict[str, int] = {}
    for path in sorted(folder.glob("counts-*.json")) if folder is not None else []:
        for key, value in json.loads(path.read_text()).items():
            total[key] = total.get(key, 0) + value
    return total


class Runner:
    """Background work of one kind, started once for the test run: a pool of `workers` threads;
    each job marked started (with the time its result is due) before it is queued and its result
    published when it is done; every process it runs bounded and tracked, so that stop() ends them
    all and pids() names them."""

    def __init__(self, name: str, workers: int) -> None:
        self.name, self.workers = name, workers
        self.pool: ThreadPoolExecutor | None = None
        self.futures: dict[str, Future[Any]] = {}
        self.running: set[subprocess.Popen[str]] = set()

    def submit(self, keys: Sequence[str], work: Callable[[], Result],
               payload: Callable[[Result], dict[str, Any]], *, due_in: float) -> Future[Result]:
        if self.pool is None:
            self.pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix=self.name)
        for key in keys:
            mark_started(key, due_in)

        def run_and_publish() -> Result:
            result = work()
            for key in keys:
                publish(key, payload(result))
            return result

        future = self.pool.submit(run_and_publish)
        for key in keys:
            self.futures[key] = future
        return future

    def run_bounded(self, argv: Sequence[str], *, bound: float, cwd: Path, env: Mapping[str, str],
                    stopped: Callable[[str], str]) -> tuple[int, str, str, float]:
        """argv run to its end, or killed at `bound` seconds with `stopped(stdout)` appended to
        stderr: (exit code, stdout, stderr, seconds)."""
        start = time.monotonic()
        proc = subprocess.Popen(list(argv), cwd=cwd, env=dict(env), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
        self.running.add(proc)
        try:
            stdout, stderr = proc.communicate(timeout=bound)
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, stderr = proc.communicate()
            stderr += f"\n({stopped(stdout)})"
        finally:
            self.running.discard(proc)
        return proc.returncode, stdout, stderr, time.monotonic() - start

    def pids(self) -> set[int]:
        return {proc.pid for proc in list(self.running)}

    def stop(self) -> None:
        """The session ended (or was interrupted): nothing of ours keeps running."""
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)
        for proc in list(self.running):
            proc.kill()
