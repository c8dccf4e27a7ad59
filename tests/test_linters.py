"""ruff over the whole tree and mypy over jobs/ and components/, as configured in pyproject.toml:
ruff with pyflakes, pycodestyle errors, bugbear, import order, pyupgrade, simplify, pylint, ruff's
own rules and McCabe complexity; mypy checking unannotated bodies everywhere, and jobs/contract
and jobs/plan with the strict flags (every def annotated, no bare generics, no Any returned).

Both are pinned in requirements-dev.txt; a missing linter is a failure, not a skip, so the test
command never passes without having linted. The baseline itself is checked too: dropping a rule
family or a strict flag from pyproject.toml fails here, not silently."""

from __future__ import annotations

import subprocess
import sys

from tests import background
from tests.conftest import ROOT


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)


def test_ruff_finds_nothing():
    result = _run("ruff", "check", "--no-fix", "--output-format", "concise", ".")
    assert result.returncode == 0, f"ruff check . (pyproject.toml [tool.ruff]):\n{result.stdout}{result.stderr}"


# mypy's files, plugins and overrides: pyproject.toml [tool.mypy]. Run in the background
# (tests/background.py); measured 2026-12-06 on the 2-core machine: 15 s uncached with another suite
# beside it; uncached and niced in a clean clone's whole suite it had not finished at 60 s.
MYPY = background.Command("mypy", (sys.executable, "-m", "mypy"), measured_seconds=90)


def test_mypy_finds_nothing_in_jobs_and_components():
    result = MYPY.result()
    assert result.returncode == 0, f"mypy (pyproject.toml [tool.mypy]):\n{result.stdout}{result.stderr}"
    assert "jobs" in _configured_files() and "components" in _configured_files()


# The families the baseline added to ruff's defaults (E4, E7, E9, F) and bugbear (B).
RUFF_FAMILIES = {"I", "UP", "SIM", "PL", "RUF", "C90"}
STRICT_MODULES = {"jobs.contract.*", "jobs.plan.*"}
# mypy's --strict flags that apply per module (`strict` itself is global-only).
STRICT_FLAGS = ("disallow_untyped_defs", "disallow_incomplete_defs", "disallow_untyped_calls",
                "disallow_any_generics", "warn_return_any", "no_implicit_reexport", "strict_equality",
                "warn_unused_ignores")


def test_the_lint_baseline_keeps_its_rule_families_and_strict_packages():
    tool = _pyproject()["tool"]
    lost = sorted(RUFF_FAMILIES - set(tool["ruff"]["lint"]["select"]))
    assert not lost, f"[tool.ruff.lint] select lost {lost}"
    for family in RUFF_FAMILIES:   # a family ignored whole is as good as dropped
        assert family not in tool["ruff"]["lint"].get("ignore", []), family
    strict = {}
    for override in tool["mypy"].get("overrides", []):
        modules = override["module"]
        for module in [modules] if isinstance(modules, str) else modules:
            if module in STRICT_MODULES:
                strict.setdefault(module, {}).update(override)
    for module in sorted(STRICT_MODULES):
        flags = strict.get(module, {})
        missing = [flag for flag in STRICT_FLAGS if flags.get(flag) is not True]
        assert not missing, f"[[tool.mypy.overrides]] for {module}: {missing} not set to true"


def _pyproject() -> dict:
    import tomllib
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _configured_files() -> list[str]:
    return _pyproject()["tool"]["mypy"]["files"]
