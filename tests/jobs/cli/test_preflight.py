"""`gke-grpo preflight`'s layout and its independence from the current directory (the rules
themselves: tests/jobs/plan/test_preflight.py)."""

from __future__ import annotations

import os

import pytest

from components.config import load_stack_config
from components.run_spec import spec_from_config
from jobs.cli import preflight
from jobs.cli.stack_outputs import _config_file_args
from tests.conftest import stack_config


def _spec(stack: str, changes: dict):
    raw, secrets = stack_config(stack, changes)
    return spec_from_config(load_stack_config(raw, secrets, stack))


@pytest.mark.parametrize("stack,expected", [("dev", ("spot", None)), ("prod", ("reservation", 500))])
def test_the_stack_file_is_read_from_the_project_root_whatever_the_directory(tmp_path, monkeypatch, stack, expected):
    assert preflight._capacity_and_tier(stack, None) == expected
    monkeypatch.chdir(tmp_path)
    assert preflight._capacity_and_tier(stack, None) == expected


def test_a_relative_config_file_is_the_user_s_directory_s(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert _config_file_args("mine.yaml") == ["--config-file", os.path.join(str(tmp_path), "mine.yaml")]
    assert _config_file_args(None) == []


def test_errors_come_again_after_the_detail_then_the_counts(monkeypatch, capsys):
    # Two rule errors, then the memory plan and the replacement note: the last lines repeat them.
    # verl 0.7.1: the release whose memory path is measured, so the plan is printed.
    spec = _spec("dev", {"gke-grpo:job.generationsPerPrompt": 1, "gke-grpo:job.microBatchSizePerGpu": 7,
                         "gke-grpo:job.dynamicBatchSize": False, "gke-grpo:job.release": "verl-0.7.1"})
    monkeypatch.setattr(preflight, "offline_spec", lambda stack, config_file: spec)
    monkeypatch.setenv("PATH", "")                       # no pulumi: "replacements not checked"
    assert preflight.main(["--stack", "dev"]) == 2
    lines = capsys.readouterr().out.splitlines()
    errors = [line for line in lines if line.startswith("error: ")]
    first = errors[: len(errors) // 2]
    assert len(errors) >= 4 and errors[len(errors) // 2:] == first
    block = lines.index(f"{len(first)} error(s) to fix:")
    assert any("replacements not checked" in line for line in lines[:block])
    assert lines[block + 1:-1] == first
    assert lines[-1].endswith(f"{len(first)} error(s), 0 warning(s)")


def test_errors_alone_are_not_repeated():
    assert preflight.summary(["error: a", "error: b"]) == []
    assert preflight.summary(["warning: w", "plan"]) == []
    assert preflight.summary(["error: a\nplan line", "error: b"]) == ["", "2 error(s) to fix:", "error: a", "error: b"]
    assert preflight.summary(["error: a", "plan"]) == ["", "1 error(s) to fix:", "error: a"]
