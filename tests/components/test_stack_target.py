"""The offline stack target (components/stack_target.py) is what __main__.py exports: the same
outputs, computed without the Pulumi program (the waterfall variants: test_capacity_waterfall.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from components.config import ConfigError, load_stack_config
from components.stack_target import TARGET_OUTPUTS, target_outputs
from tests.conftest import ROOT, stack_config


def _outputs(stack: str, changes: dict | None = None) -> dict:
    return target_outputs(load_stack_config(*stack_config(stack, changes), stack))


def test_the_target_is_the_program_s_outputs(stack_preview):
    assert _outputs(stack_preview.stack) == {k: stack_preview.outputs[k] for k in TARGET_OUTPUTS}


def test_a_preflight_error_refuses_the_target_as_pulumi_up_would():
    with pytest.raises(ConfigError) as err:
        _outputs("dev", {"gke-grpo:job.generationsPerPrompt": 1})
    assert [p.key for p in err.value.problems] == ["gke-grpo:job.generationsPerPrompt"]
    # With the job off, the program runs no preflight: neither does the target.
    assert _outputs("dev", {"gke-grpo:job.generationsPerPrompt": 1, "gke-grpo:job.enabled": False})["runId"]


def test_the_command_prints_json_or_the_problems(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("config:\n  gke-grpo:environment: staging\n")
    done = subprocess.run([sys.executable, "-m", "tools.stack_target", "dev", "--config-file", str(bad)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert "gke-grpo:environment" in done.stderr and "Traceback" not in done.stderr
