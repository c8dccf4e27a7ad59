"""One exit-code table for every program of a run (jobs/contract/exit_codes.py), documented once in
docs/errors-and-guarantees.md."""

from __future__ import annotations

import re

from jobs.contract.exit_codes import USED_BY, ExitCode
from tests.conftest import ROOT


def test_every_code_has_one_number_and_its_programs():
    assert len({int(code) for code in ExitCode}) == len(list(ExitCode))     # no aliases
    assert set(USED_BY) == set(ExitCode) and all(USED_BY.values())


def test_the_docs_table_is_the_codes_table():
    text = (ROOT / "docs" / "errors-and-guarantees.md").read_text()
    section = text.split("### One table for every program of a run", 1)[1]
    rows = re.findall(r"^\| (\d+) \| `(\w+)` \| ([^|]+) \|$", section, flags=re.MULTILINE)
    assert [(int(code), name, users.strip()) for code, name, users in rows] == [
        (int(code), code.name, ", ".join(USED_BY[code])) for code in ExitCode]


def test_the_shell_signal_codes_are_128_plus_the_signal():
    import signal

    assert ExitCode.HANGUP == 128 + signal.SIGHUP
    assert ExitCode.INTERRUPTED == 128 + signal.SIGINT
    assert ExitCode.TERMINATED == 128 + signal.SIGTERM


def test_no_other_code_looks_like_a_signal_exit():
    """A shell reports 128 + N for a process killed by signal N, and a process whose SIGTERM
    handler is Ray's exits 15 (Ray 2.54 ray/_private/worker.py ``init``: sys.exit(signum)): the
    driver's own codes must be told apart from both."""
    import signal

    from jobs.contract.exit_codes import RAY_SIGTERM_EXIT

    signal_codes = {ExitCode.HANGUP, ExitCode.INTERRUPTED, ExitCode.TERMINATED}
    assert RAY_SIGTERM_EXIT == signal.SIGTERM
    for code in ExitCode:
        if code not in signal_codes:
            assert code < 128 and code != RAY_SIGTERM_EXIT, code
