"""The results of the suite's background work (Ray inner runs: tests/jobs/ray_head.py; background
commands: tests/background.py), handed from the process that runs the work to the process whose
test reads its result.

Without xdist both are the one pytest process. `make test` runs pytest with xdist workers
(`-n auto`): then the controller starts every run once, when the workers have collected, and a
worker's test waits for the run's result file in the test run's shared folder (its path in
SHARED_ENV, which the workers inherit from the controller). A run is marked started before it is
queued, and the workers run no test before the controller has started them all, so a test that
finds no mark knows nobody runs its work and runs it itself.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

SHARED_ENV = "GKE_GRPO_TEST_SHARED"


def create_shared_folder() -> None:
    """In the process that starts the work (before xdist starts its workers)."""
    os.environ[SHARED_ENV] = tempfile.mkdtemp(prefix="gke-grpo-tests-")


def _folder() -> Path | None:
    value = os.environ.get(SHARED_ENV)
    return Path(value) if value else None


def name_of(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:24]


def mark_started(key: str) -> None:
    folder = _folder()
    if folder is not None:
        (folder / f"{name_of(key)}.started").touch()


def publish(key: str, payload: dict[str, Any]) -> None:
    folder = _folder()
    if folder is None:
        return
    partial = folder / f"{name_of(key)}.json.partial"
    partial.write_text(json.dumps(payload))
    partial.rename(folder / f"{name_of(key)}.json")       # readers never see half a file


def wait_for(key: str, bound: float) -> dict[str, Any] | None:
    """The published result of `key`, waiting up to `bound` seconds; None when nobody started it."""
    folder = _folder()
    if folder is None or not (folder / f"{name_of(key)}.started").exists():
        return None
    path = folder / f"{name_of(key)}.json"
    deadline = time.monotonic() + bound
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no result for {key} within {bound:.0f} s (its runner has a bound of its own)")
        time.sleep(0.5)
    result: dict[str, Any] = json.loads(path.read_text())
    return result


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
