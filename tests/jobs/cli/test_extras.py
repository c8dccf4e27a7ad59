"""A command that needs more than `make preview` installs (requirements-cli.txt) says so in one
line naming `make cli`, before any work, never with a ModuleNotFoundError."""

from __future__ import annotations

import io
import sys

import pytest

from jobs.cli import main as cli
from jobs.cli.extras import CLI_MODULES, missing_cli_module, not_installed
from jobs.contract.exit_codes import ExitCode
from tests.conftest import ROOT


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(argv, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_the_modules_named_are_requirements_cli_txt_s():
    pins = {line.split("==")[0].split("[")[0] for line in (ROOT / "requirements-cli.txt").read_text().splitlines()
            if "==" in line and not line.startswith("#")}
    assert set(CLI_MODULES) == pins


@pytest.mark.parametrize("command", ["submit", "status", "list", "logs", "attach", "stop"])
def test_a_dashboard_command_without_ray_says_how_to_install_it(monkeypatch, command):
    monkeypatch.setitem(sys.modules, "ray", None)      # `import ray` fails, find_spec says absent
    code, out, err = _run([command, "--address", "http://127.0.0.1:1", "--run-id", "r-1234abcd"])
    assert code == ExitCode.USAGE
    assert out == ""
    [line] = err.splitlines()
    assert line.startswith(f"[gke-grpo] error: `gke-grpo {command}` needs Ray's Job Submission client")
    assert "`make cli`" in line and "internal error" not in line


def test_a_module_missing_mid_command_is_the_same_line(monkeypatch, tmp_path):
    log = tmp_path / "attempt-1.log"
    log.write_text("step:1 - critic/score/mean:0.5 - response_length/mean:100\n")
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    code, _, err = _run(["plot", "--log", str(log), "--out", str(tmp_path / "run.png")])
    assert code == ExitCode.USAGE
    [line] = err.splitlines()
    assert "`gke-grpo plot` needs matplotlib" in line and "`make cli`" in line


def test_another_missing_module_is_still_a_bug():
    assert missing_cli_module(ModuleNotFoundError(name="yaml"), "x") is None
    assert "tensorboard" in (missing_cli_module(ModuleNotFoundError(name="tensorboard.compat"), "x") or "")
    assert not_installed("json", "x") is None
