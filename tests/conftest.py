"""Shared fixtures: stack configs to mutate, cached previews, and CI-aware skipping."""

from __future__ import annotations

import copy
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tools.preview import PreviewResult, read_config_file, run_with_config

SHARED = ROOT.parent / "shared"
IN_CI = os.environ.get("CI") == "true"
DELETE = object()


def skip_or_fail(reason: str) -> None:
    """Skips are for users' minimal machines; in CI a missing schema, verl or Ray fails."""
    if IN_CI:
        pytest.fail(f"CI=true and {reason}", pytrace=False)
    pytest.skip(reason)


def stack_config(stack: str, changes: dict[str, Any] | None = None) -> tuple[dict[str, str], set[str]]:
    """Pulumi.<stack>.yaml as the engine passes it, with `changes` applied.

    Keys of `changes` are full config keys with an optional dotted path into the object
    (``gke-grpo:gpu.reservation.name``); the value DELETE removes the key.
    """
    raw, secret_keys = read_config_file(ROOT / f"Pulumi.{stack}.yaml")
    objects: dict[str, Any] = {}
    for key, value in raw.items():
        try:
            objects[key] = json.loads(value) if value[:1] in "{[" else value
        except json.JSONDecodeError:
            objects[key] = value
    for dotted, value in (changes or {}).items():
        head, _, path = dotted.partition(".")
        if not path:
            if value is DELETE:
                objects.pop(head, None)
            else:
                objects[head] = copy.deepcopy(value)
            continue
        target = objects.setdefault(head, {})
        parts = path.split(".")
        for part in parts[:-1]:
            target = target.setdefault(part, {})
        if value is DELETE:
            target.pop(parts[-1], None)
        else:
            target[parts[-1]] = copy.deepcopy(value)
    out = {k: (json.dumps(v) if isinstance(v, (dict, list)) else v) for k, v in objects.items()}
    return out, {k for k in secret_keys if k in out}


def preview_with(stack: str, changes: dict[str, Any] | None = None,
                 secret_keys: set[str] | None = None) -> PreviewResult:
    raw, secrets = stack_config(stack, changes)
    return run_with_config(stack, raw, secrets if secret_keys is None else secret_keys)


_CACHE: dict[str, PreviewResult] = {}


def _cached(stack: str) -> PreviewResult:
    if stack not in _CACHE:
        _CACHE[stack] = preview_with(stack)
        assert _CACHE[stack].error is None, _CACHE[stack].error
    return _CACHE[stack]


@pytest.fixture(scope="session")
def dev_preview() -> PreviewResult:
    return _cached("dev")


@pytest.fixture(scope="session")
def prod_preview() -> PreviewResult:
    return _cached("prod")


@pytest.fixture(scope="session", params=["dev", "prod"])
def stack_preview(request) -> PreviewResult:
    return _cached(request.param)


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """The Ray modules' outer tests only wait for their inner runs (``INNER.check()``): they go
    last, so that the rest of the suite runs while the inner runs go on in the background, instead
    of waiting at the first of them with a core half idle (measured in CI's run of 0c37df6: the
    main process waited 12 of the suite's 28 minutes; with them last the suite took 22)."""
    from tests.jobs import ray_head

    if ray_head.inside_namespace():
        return
    waiting = [item for item in items
               if isinstance(getattr(getattr(item, "module", None), "INNER", None), ray_head.InnerRun)]
    if waiting:
        items[:] = [item for item in items if item not in waiting] + waiting


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the inner runs of the selected Ray test modules (each declares ``INNER``) in the
    background: they run in their own namespaces while the rest of the suite runs here
    (tests/jobs/ray_head.py, ``InnerRun``)."""
    if session.config.option.collectonly:
        return
    from tests.jobs import ray_head

    inner_runs = []
    for item in session.items:
        inner = getattr(getattr(item, "module", None), "INNER", None)
        if isinstance(inner, ray_head.InnerRun):
            inner_runs.append(inner)
    ray_head.start_in_background(inner_runs)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    from tests.jobs import ray_head

    ray_head.stop_background()
