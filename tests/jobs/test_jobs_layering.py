"""The new jobs/ modules run on the Ray head or the laptop without the Pulumi side: importing
them loads no pulumi, components, tools or policy module (DESIGN.md, Layers)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT

MODULES = ["jobs.timeline", "jobs.metrics", "jobs.goodput", "jobs.run_cost", "jobs.report", "jobs.fetch_run",
           # issue 15: the CLI, preflight, the spec and the versions table too (.importlinter)
           "jobs.cli", "jobs.preflight", "jobs.spec", "jobs.render", "jobs.stack_outputs", "jobs.versions"]


@pytest.mark.parametrize("module", MODULES)
def test_imports_nothing_of_the_pulumi_side(module):
    code = (f"import sys, {module}\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('pulumi', 'components', 'tools', 'policy'))\n"
            "print(','.join(bad))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ""
