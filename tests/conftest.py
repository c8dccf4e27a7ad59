"""Shared fixtures: stack configs to mutate, cached previews, and CI-aware skipping."""

from __future__ import annotations

import copy
import json
import logging
import os
import sys
import time
from collections.abc import Iterator
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


class PreviewCache:
    """Whole offline previews, computed once per distinct (stack, config content, secret keys)
    for the whole test run: many modules preview the same variants (the committed stacks above
    all), and one preview costs seconds on the 2-core machine. Under xdist the workers share them
    through the run's shared folder (tests/handoff.py ``computed_once``): the first process to
    need a variant computes it, a process that needs it meanwhile waits for it.

    What a test may see of a preview besides the result is replayed on every hit: the program's
    log records (pulumi.log.warn/info under the mocks reach the "gke-grpo.preview" logger, which
    caplog reads), so a hit looks to a test exactly like a run. A test whose closure uses
    ``monkeypatch`` (it may have patched the program's code, data or environment) is never served
    from the cache and never fills it; ``fresh=True`` asks for a new run explicitly (determinism
    tests compare two real runs). Each hit is a deep copy: a test mutating its result cannot
    change another test's."""

    LOGGER = "gke-grpo.preview"

    def __init__(self) -> None:
        self.entries: dict[str, tuple[PreviewResult, list[logging.LogRecord]]] = {}
        self.bypass = False          # set for the test running now by _preview_cache_bypass
        self.hits = self.runs = self.uncached = 0
        self.cpu_seconds = 0.0

    @staticmethod
    def key(stack: str, raw: dict[str, str], secrets: set[str]) -> str:
        return json.dumps([stack, sorted(raw.items()), sorted(secrets)])

    def preview(self, stack: str, raw: dict[str, str], secrets: set[str], *, fresh: bool = False) -> PreviewResult:
        if fresh or self.bypass:
            self.runs += 1
            self.uncached += 1
            return self._timed(run_with_config, stack, raw, secrets)
        key = self.key(stack, raw, secrets)
        if key in self.entries:
            self.hits += 1
        else:
            def compute() -> tuple[PreviewResult, list[logging.LogRecord]]:
                self.runs += 1
                return self._recorded_run(stack, raw, secrets)
            from tests import handoff

            entry, computed_here = handoff.computed_once("preview " + key, compute)
            self.hits += not computed_here
            self.entries[key] = entry
        result, records = self.entries[key]
        self._replay(records)
        return copy.deepcopy(result)

    def _recorded_run(self, stack: str, raw: dict[str, str],
                      secrets: set[str]) -> tuple[PreviewResult, list[logging.LogRecord]]:
        """The run with every record of the preview's logger kept (all levels) and none passed
        on: ``_replay`` passes on what the logger's level of the moment lets through."""
        logger = logging.getLogger(self.LOGGER)
        records: list[logging.LogRecord] = []
        collector = logging.Handler(logging.NOTSET)
        collector.emit = records.append             # type: ignore[method-assign]
        level, propagate = logger.level, logger.propagate
        logger.addHandler(collector)
        logger.setLevel(logging.DEBUG)
        logger.propagate = False
        try:
            result = self._timed(run_with_config, stack, raw, secrets)
        finally:
            logger.removeHandler(collector)
            logger.setLevel(level)
            logger.propagate = propagate
        return result, records

    def _timed(self, run: Any, *args: Any) -> Any:
        started = time.process_time()
        try:
            return run(*args)
        finally:
            self.cpu_seconds += time.process_time() - started

    def _replay(self, records: list[logging.LogRecord]) -> None:
        logger = logging.getLogger(self.LOGGER)
        for record in records:
            if logger.isEnabledFor(record.levelno):
                logger.handle(copy.copy(record))


PREVIEWS = PreviewCache()


@pytest.fixture(autouse=True)
def _preview_cache_bypass(request: pytest.FixtureRequest) -> Iterator[None]:
    PREVIEWS.bypass = "monkeypatch" in request.fixturenames
    yield
    PREVIEWS.bypass = False


def preview_with(stack: str, changes: dict[str, Any] | None = None,
                 secret_keys: set[str] | None = None, *, fresh: bool = False) -> PreviewResult:
    """The offline preview of `stack` with `changes` (see stack_config), from the run's cache
    (PreviewCache) unless ``fresh``."""
    raw, secrets = stack_config(stack, changes)
    return PREVIEWS.preview(stack, raw, secrets if secret_keys is None else secret_keys, fresh=fresh)


def _cached(stack: str) -> PreviewResult:
    result = preview_with(stack)
    assert result.error is None, result.error
    return result


@pytest.fixture(scope="session")
def dev_preview() -> PreviewResult:
    return _cached("dev")


@pytest.fixture(scope="session")
def prod_preview() -> PreviewResult:
    return _cached("prod")


@pytest.fixture(scope="session", params=["dev", "prod"])
def stack_preview(request) -> PreviewResult:
    return _cached(request.param)


# Markers for choosing a fast subset while working (docs/development.md "Tests and CI"), given by
# module so that a new test in these files is marked too; `ray` is given to every module that
# declares an inner run (tests/jobs/ray_head.py InnerRun).
MARKED_MODULES = {
    "toolchain": ("tests/test_linters.py", "tests/test_layers.py", "tests/test_security_scan.py",
                  "tests/test_workflows.py", "tests/test_policy_pack.py"),
    "properties": ("tests/test_config_properties.py",),
    "kuberay": ("tests/jobs/head/test_autoscaler_kuberay_ray.py",),
}


@pytest.hookimpl(tryfirst=True)        # before `-m` deselects by marker
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Marks (MARKED_MODULES, `ray`), then the Ray modules' outer tests only wait for their inner runs (``INNER.check()``): they go
    last, so that the rest of the suite runs while the inner runs go on in the background, instead
    of waiting at the first of them with a core half idle (measured in CI's run of 0c37df6: the
    main process waited 12 of the suite's 28 minutes; with them last the suite took 22)."""
    from tests.jobs import ray_head

    for item in items:
        path = item.path.relative_to(ROOT).as_posix() if item.path.is_relative_to(ROOT) else ""
        for marker, modules in MARKED_MODULES.items():
            if path in modules:
                item.add_marker(marker)
        if isinstance(getattr(getattr(item, "module", None), "INNER", None), ray_head.InnerRun):
            item.add_marker("ray")
    if ray_head.inside_namespace():
        return
    waiting = [item for item in items
               if isinstance(getattr(getattr(item, "module", None), "INNER", None), ray_head.InnerRun)]
    if waiting:
        items[:] = [item for item in items if item not in waiting] + waiting


def _background_work(modules: list[Any]) -> tuple[list[Any], list[Any]]:
    """The inner Ray runs (``INNER``) and background commands (tests/background.py) that the given
    test modules declare at module level."""
    from tests import background
    from tests.jobs import ray_head

    inner_runs, commands = [], []
    for module in modules:
        inner = getattr(module, "INNER", None)
        if isinstance(inner, ray_head.InnerRun):
            inner_runs.append(inner)
        for value in vars(module).values():
            values = value.values() if isinstance(value, dict) else (value,)
            commands += [each for each in values if isinstance(each, background.Command)]
    return inner_runs, commands


def _start_background_work(modules: list[Any]) -> None:
    from tests import background
    from tests.jobs import ray_head

    inner_runs, commands = _background_work(modules)
    ray_head.start_in_background(inner_runs)
    background.start(commands)


def _is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


# The niceness of throughput work (xdist workers, background commands): the Ray inner runs are
# latency-bound (each scenario waits on job starts, polls and its head's processes) and on 2 cores
# they get the CPU first. Measured 2026-12-06: with every process at the same priority the
# fabric gate's inner run passed its 400 s bound (load average 8); niced, see docs/development.md.
THROUGHPUT_NICENESS = 10


def pytest_configure(config: pytest.Config) -> None:
    from tests import handoff
    from tests.jobs import ray_head

    # Bytecode caches on, for this run and every process it starts. The program's dependencies are
    # installed without .pyc files (Makefile: Python writes them at first import), but where
    # PYTHONDONTWRITEBYTECODE is set, as on the CI machine, every process that runs the Pulumi
    # program compiles pulumi_gcp's modules again. Measured 2026-12-06 on the 2-core machine: one
    # `python -m tools.preview dev` took 11.7 CPU-s without the caches and 4.3 with them.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    sys.dont_write_bytecode = False
    if _is_xdist_worker(config):
        os.nice(THROUGHPUT_NICENESS)
    elif not ray_head.inside_namespace():
        handoff.create_shared_folder()      # before xdist starts its workers: they inherit it


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the background work of the selected modules (Ray inner runs in their own namespaces,
    background commands) while the rest of the suite runs here. Under xdist the controller does
    that once, when the workers have collected (below); a worker starts nothing."""
    from tests.jobs import ray_head

    if session.config.option.collectonly or _is_xdist_worker(session.config) or ray_head.inside_namespace():
        return
    modules: list[Any] = []
    for item in session.items:
        module = getattr(item, "module", None)
        if module is not None and module not in modules:
            modules.append(module)
    _start_background_work(modules)


_XDIST_STARTED: list[bool] = []


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:
    """xdist's controller: the first worker's collection names the selected tests (every worker
    collects the same); their modules' background work starts here, once for the test run."""
    import importlib

    if _XDIST_STARTED or node.config.option.collectonly:
        return
    _XDIST_STARTED.append(True)
    files = dict.fromkeys(test_id.split("::", 1)[0] for test_id in ids)
    modules = [importlib.import_module(".".join(Path(file).with_suffix("").parts)) for file in files]
    _start_background_work(modules)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    from tests import background, handoff
    from tests.jobs import ray_head

    ray_head.stop_background()
    background.stop()
    if not ray_head.inside_namespace():
        worker = getattr(session.config, "workerinput", {}).get("workerid", "main")
        handoff.publish_counts(f"previews-{worker}", {"computed": PREVIEWS.runs, "served": PREVIEWS.hits,
                                                             "uncached": PREVIEWS.uncached,
                                                             "cpu_seconds": round(PREVIEWS.cpu_seconds)})


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """Where the suite's time went, printed (never asserted): the previews computed and served from
    the cache, and each inner Ray run (namespace) with its time and bound."""
    from tests import background, handoff
    from tests.jobs import ray_head

    if ray_head.inside_namespace():
        return
    terminalreporter.write_sep("-", "suite timing")
    counts = handoff.summed_counts()       # every worker's (tests/handoff.py), or this process's
    terminalreporter.write_line(f"offline previews: {counts.get('computed', 0)} computed "
                                f"({counts.get('uncached', 0)} of them fresh or under monkeypatch), "
                                f"{counts.get('served', 0)} served from the cache; "
                                f"{counts.get('cpu_seconds', 0)} CPU-s computing them")
    for line in [*ray_head.background_summary(), *background.summary()]:
        terminalreporter.write_line(line)
