"""ruff over the whole tree and mypy over jobs/ and components/, as configured in pyproject.toml.

Both are pinned in requirements-dev.txt; a missing linter is a failure, not a skip, so the test
command never passes without having linted."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)


def test_ruff_finds_nothing():
    result = _run("ruff", "check", "--no-fix", "--output-format", "concise", ".")
    assert result.returncode == 0, f"ruff check . (pyproject.toml [tool.ruff]):\n{result.stdout}{result.stderr}"


def test_mypy_finds_nothing_in_jobs_and_components():
    result = _run("mypy")   # files, plugins and overrides: pyproject.toml [tool.mypy]
    assert result.returncode == 0, f"mypy (pyproject.toml [tool.mypy]):\n{result.stdout}{result.stderr}"
    assert "jobs" in _configured_files() and "components" in _configured_files()


def _configured_files() -> list[str]:
    import tomllib
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]["files"]
