"""The suite's own sharing between processes (tests/handoff.py): a value computed once for the test
run and read by every other process that asks for it (the preview cache relies on it)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests import handoff
from tests.conftest import ROOT

# A process of the run: asks for `key`; its compute() records that it ran, sleeps, then returns a
# value (or fails, or returns something pickle refuses). Prints what it got and who computed it.
ASKER = textwrap.dedent("""
    import sys, threading, time
    from pathlib import Path
    from tests import handoff

    key, mode, log = sys.argv[1], sys.argv[2], Path(sys.argv[3])

    def compute():
        with log.open("a") as f:
            f.write("computed\\n")
        time.sleep(1.5)
        if mode == "fails":
            raise RuntimeError("the computation failed")
        return threading.Lock() if mode == "unpicklable" else {"value": 42}

    try:
        value, here = handoff.computed_once(key, compute)
    except RuntimeError as exc:
        print("raised", exc)
    else:
        print(type(value).__name__, value if isinstance(value, dict) else "", "here" if here else "shared")
""")


def _ask_twice(tmp_path: Path, mode: str) -> tuple[list[str], int]:
    """Two processes of one run ask for the same key at once: (their answers, computations)."""
    shared, log = tmp_path / "shared", tmp_path / "computed.log"
    shared.mkdir()
    env = {"PATH": "/usr/bin:/bin", handoff.SHARED_ENV: str(shared), "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-c", ASKER, "the key", mode, str(log)], cwd=ROOT, env=env,
                              stdout=subprocess.PIPE, text=True) for _ in range(2)]
    answers = sorted(proc.communicate(timeout=60)[0].strip() for proc in procs)
    return answers, len(log.read_text().splitlines()) if log.exists() else 0


def test_a_value_is_computed_by_one_process_and_read_by_the_other(tmp_path):
    answers, computed = _ask_twice(tmp_path, "ok")
    assert computed == 1
    assert answers == ["dict {'value': 42} here", "dict {'value': 42} shared"]


@pytest.mark.parametrize("mode,answers", [
    ("unpicklable", ["lock  here", "lock  here"]),                  # each keeps its own
    ("fails", ["raised the computation failed"] * 2),              # the waiter tries for itself
])
def test_what_cannot_be_shared_is_computed_by_each(tmp_path, mode, answers):
    got, computed = _ask_twice(tmp_path, mode)
    assert got == answers and computed == 2


def test_without_a_shared_folder_each_process_computes(monkeypatch):
    monkeypatch.delenv(handoff.SHARED_ENV, raising=False)
    calls = []
    assert handoff.computed_once("k", lambda: calls.append(1) or "v") == ("v", True)
    assert handoff.computed_once("k", lambda: calls.append(1) or "v") == ("v", True)
    assert len(calls) == 2
