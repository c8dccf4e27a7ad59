"""The policy pack (policy/) is tested in its own virtualenv: pulumi-policy pins a protobuf the
program's Ray client cannot share, so policy/tests runs as a subprocess under policy/venv's
Python, and this test only asserts it passes. (pytest.ini's testpaths keep the program's
pytest from collecting policy/tests itself.)"""

from __future__ import annotations

import os
import subprocess

from tests.conftest import ROOT, skip_or_fail

POLICY_PYTHON = ROOT / "policy" / "venv" / "bin" / "python"


def test_policy_pack_suite_passes_in_its_own_venv():
    if not POLICY_PYTHON.exists():
        skip_or_fail("policy/venv is missing: build it with `make policy/venv/.installed`")
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "PYTEST_ADDOPTS", "VIRTUAL_ENV")}
    result = subprocess.run(
        [str(POLICY_PYTHON), "-m", "pytest", "-q", "-p", "no:cacheprovider", "policy/tests"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False,
    )
    assert result.returncode == 0, (
        f"policy/tests failed in policy/venv (exit {result.returncode}):\n"
        f"{result.stdout[-6000:]}\n{result.stderr[-3000:]}")
    assert " passed" in result.stdout
