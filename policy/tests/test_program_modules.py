"""The policy pack imports, of the program, exactly the modules it declares (rules.PROGRAM_MODULES),
and those import nothing outside the standard library: the pack's virtualenv has none of the
program's dependencies, and a rule module that grew one would break `pulumi preview --policy-pack`
only on a reviewer's machine."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

POLICY_DIR = Path(__file__).resolve().parents[1]


def test_the_pack_loads_only_its_declared_program_modules():
    code = ("import sys\n"
            "before = set(sys.modules)\n"
            "import rules\n"
            "loaded = sorted(m for m in sys.modules if m == 'jobs' or m.startswith('jobs.'))\n"
            "print(' '.join(loaded))\n"
            "print(' '.join(rules.PROGRAM_MODULES))")
    done = subprocess.run([sys.executable, "-c", code], cwd=POLICY_DIR, capture_output=True,
                          text=True, timeout=60, check=True)
    loaded, declared = (line.split() for line in done.stdout.splitlines())
    packages = {name.rsplit(".", 1)[0] for name in declared} | {"jobs"}
    assert set(loaded) == set(declared) | packages, loaded


def test_the_declared_modules_need_only_the_standard_library():
    code = ("import sys\n"
            "import rules\n"
            "before = set(sys.modules)\n"
            "for name in rules.PROGRAM_MODULES:\n"
            "    __import__(name)\n"
            "import importlib\n"
            "third = set()\n"
            "for name in rules.PROGRAM_MODULES:\n"
            "    module = importlib.import_module(name)\n"
            "    for value in vars(module).values():\n"
            "        origin = getattr(value, '__name__', '') if type(value).__name__ == 'module' else ''\n"
            "        top = origin.split('.')[0]\n"
            "        if top and top != 'jobs' and top not in sys.stdlib_module_names:\n"
            "            third.add(origin)\n"
            "print(' '.join(sorted(third)))")
    done = subprocess.run([sys.executable, "-c", code], cwd=POLICY_DIR, capture_output=True,
                          text=True, timeout=60, check=True)
    assert done.stdout.strip() == ""
