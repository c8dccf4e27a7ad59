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
