"""The import contracts of .importlinter hold: tools/ -> components/ -> jobs/ one way, jobs/
without Pulumi, no import circles (import-linter, pinned in requirements-dev.txt)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def _lint(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    command = str(LINT_IMPORTS) if LINT_IMPORTS.exists() else shutil.which("lint-imports")
    assert command, "lint-imports is not installed: pip install -r requirements-dev.txt"
    return subprocess.run([command, "--no-cache", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


def test_import_contracts_hold():
    done = _lint()
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    for name in ("One-way layers", "jobs/ imports no Pulumi", "No import circles"):
        assert name in done.stdout


def test_the_layers_contract_catches_jobs_importing_components(tmp_path):
    """The contract can fail: a copy of the tree where jobs/ imports components/ breaks it."""
    for name in ("jobs", "components", "tools"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / ".importlinter", tmp_path / ".importlinter")
    with (tmp_path / "jobs" / "spec.py").open("a") as handle:
        handle.write("\nfrom components.config import StackConfig  # noqa\n")
    done = _lint(cwd=tmp_path)
    assert done.returncode != 0
    assert "One-way layers: tools -> components -> jobs BROKEN" in done.stdout
    assert "jobs.spec -> components.config" in done.stdout


def test_no_two_top_level_definitions_share_a_name():
    """A class or function name means one thing across the program (jobs/, components/, tools/,
    the policy pack): a second `PlanError` or `GateResult` makes a reader guess which one a module
    got. Every command's `main` is the exception."""
    import ast
    from collections import defaultdict

    where: dict[str, list[str]] = defaultdict(list)
    for root in ("jobs", "components", "tools", "policy"):
        for path in sorted((ROOT / root).rglob("*.py")):
            if "venv" in path.relative_to(ROOT).parts or "tests" in path.relative_to(ROOT).parts:
                continue
            for node in ast.parse(path.read_text()).body:
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    where[node.name].append(str(path.relative_to(ROOT)))
    shared = {name: paths for name, paths in where.items() if len(paths) > 1 and name != "main"}
    assert not shared, shared


def test_no_file_of_jobs_or_components_is_over_600_lines():
    """A file does one thing; past 600 lines it is doing several (split it by what runs where)."""
    long = {str(path.relative_to(ROOT)): n for root in ("jobs", "components")
            for path in (ROOT / root).rglob("*.py")
            if (n := len(path.read_text().splitlines())) > 600}
    assert not long, long
