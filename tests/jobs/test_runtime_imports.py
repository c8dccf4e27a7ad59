"""Every module of jobs/ imports, at run time, nothing of the Pulumi side (pulumi, components/,
tools/, the policy pack): the head's code runs in the framework image and the CLI on a
workstation without them. import-linter (tests/test_layers.py) checks the static imports; this
imports each module for real, so an import inside a function or through a string is caught too
when it runs at import time."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT

FORBIDDEN = ("pulumi", "pulumi_gcp", "pulumi_kubernetes", "components", "tools", "policy")


def jobs_modules() -> list[str]:
    modules = []
    for path in sorted((ROOT / "jobs").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] in ("__main__", "run"):
            continue        # entry points: importing them runs the command
        modules.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return modules


def test_every_jobs_module_is_found():
    modules = jobs_modules()
    assert {"jobs.contract.run_plan", "jobs.head.driver", "jobs.plan.render", "jobs.cli.main"} <= set(modules)


def test_no_jobs_module_imports_the_pulumi_side():
    code = ("import importlib, sys\n"
            f"for name in {jobs_modules()!r}:\n"
            "    importlib.import_module(name)\n"
            f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r})\n"
            "print(','.join(bad))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ""


def test_the_heads_code_imports_only_the_standard_library():
    """The head's packages run in the framework image, whatever it has installed: importing
    them (jobs/contract and jobs/head, what components/head_code.py ships) loads nothing outside
    the standard library and jobs/ itself; ray, torch, pyarrow and huggingface_hub are imported
    inside the functions that use them."""
    head = [m for m in jobs_modules() if m.split(".")[1:2] in (["contract"], ["head"])]
    code = ("import importlib, sys\n"
            "before = set(sys.modules)\n"
            f"for name in {head!r}:\n"
            "    importlib.import_module(name)\n"
            "new = {m.split('.')[0] for m in set(sys.modules) - before}\n"
            "print(','.join(sorted(m for m in new if m != 'jobs' and m not in sys.stdlib_module_names)))")
    done = subprocess.run([sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(ROOT)!r})\n" + code],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert len(head) > 15 and done.stdout.strip() == ""
