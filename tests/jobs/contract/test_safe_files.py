"""The one safe file reader (jobs/contract/safe_files.py): its exact bounds, and the caps the docs
state. Hostile files through every reader: tests/jobs/test_hostile_inputs.py and
tests/jobs/plan/test_stack_file.py."""

from __future__ import annotations

import re

import pytest

from jobs.contract.safe_files import (
    KINDS,
    MAX_INT_DIGITS,
    MAX_JSON_DEPTH,
    RUN_PLAN,
    OversizedInteger,
    UnusableFile,
    cap_text,
    json_lines,
    load_json_text,
    read_bytes,
)
from tests.conftest import ROOT


def test_the_docs_state_every_cap():
    text = (ROOT / "docs" / "errors-and-guarantees.md").read_text()
    section = text.split("## Files a run's programs read", 1)[1].split("\n## ", 1)[0]
    caps = dict(re.findall(r"^\| `[^`]+` \(([^)]+)\) \| [^|]+ \| ([^|]+?) (?:each )?\|", section, re.MULTILINE))
    caps.update(re.findall(r"^\| (console log) \(`plot --log`\) \| [^|]+ \| ([^|]+?) \|", section, re.MULTILINE))
    assert caps == {kind.what: cap_text(kind.max_bytes) for kind in KINDS}


def test_json_depth_and_integer_bounds_are_exact():
    assert load_json_text("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH, "f")
    with pytest.raises(UnusableFile, match=f"f nested deeper than {MAX_JSON_DEPTH} levels"):
        load_json_text("[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1), "f")
    assert load_json_text("9" * MAX_INT_DIGITS, "f") == int("9" * MAX_INT_DIGITS)
    assert load_json_text("-" + "9" * (MAX_INT_DIGITS + 1), "f") == OversizedInteger(MAX_INT_DIGITS + 1)


def test_a_file_at_the_cap_is_read_and_one_byte_more_is_not(tmp_path):
    path = tmp_path / "plan.json"
    path.write_bytes(b" " * RUN_PLAN.max_bytes)
    assert len(read_bytes(path, RUN_PLAN)) == RUN_PLAN.max_bytes
    path.write_bytes(b" " * (RUN_PLAN.max_bytes + 1))
    with pytest.raises(UnusableFile, match="is larger than 1 MiB: not a run plan"):
        read_bytes(path, RUN_PLAN)


def test_jsonl_lines_say_why_they_are_skipped():
    data = b'{"a": 1}\n\n[1]\n{"a": \n\xff\n' + b"[" * 100 + b"]" * 100 + b"\n{\"b\": 2}"
    assert [(n, row, why) for n, row, why in json_lines(data)] == [
        (1, {"a": 1}, None), (3, None, "not a JSON object"), (4, None, "not JSON"), (5, None, "not UTF-8"),
        (6, None, f"nested deeper than {MAX_JSON_DEPTH} levels"), (7, {"b": 2}, None)]
