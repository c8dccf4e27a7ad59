"""The one stack-file reader (jobs/plan/stack_file.py) and the table of hostile files
(tools/hostile_files.py): each is refused with one line that names the file and the problem,
exit 2, no traceback, nothing secret, in bounded memory (the preview runs under a 1 GiB address
space limit: a file that blew up memory would fail, not swap) and bounded time (the subprocess
timeout is a hang guard; figures: python -m tools.bench_hostile). Preview, preflight and the jobs
CLI all refuse the same way."""

from __future__ import annotations

import io
import resource
import subprocess
import sys

import pytest

from jobs.cli import main as cli
from jobs.cli import preflight as preflight_cli
from jobs.plan.stack_file import MAX_DEPTH, SECRET_PLACEHOLDER, ConfigFileError, load_yaml_text, read_stack_file
from tests.conftest import ROOT
from tools.hostile_files import CASES, PLANTED_TOKEN, make

MEMORY_LIMIT = 1 << 30
IDS = [c.name for c in CASES]


def _limit_memory():
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    directory = tmp_path_factory.mktemp("hostile")
    return {case.name: make(case.name, directory) for case in CASES}


def _assert_refusal(text: str, path, phrase: str) -> None:
    lines = [l for l in text.strip().splitlines() if l]
    assert len(lines) == 1, text
    assert str(path) in lines[0] and phrase in lines[0], text
    assert "Traceback" not in text and PLANTED_TOKEN not in text
    assert len(lines[0]) < 400, "echoed values are truncated"


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_reader_refuses(case, hostile):
    with pytest.raises(ConfigFileError) as err:
        read_stack_file(hostile[case.name])
    _assert_refusal(str(err.value), hostile[case.name], case.phrase)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_preview_refuses_with_exit_2(case, hostile):
    proc = subprocess.run([sys.executable, "-m", "tools.preview", "dev", "--config-file", str(hostile[case.name])],
                          cwd=ROOT, capture_output=True, text=True, timeout=60, preexec_fn=_limit_memory)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert proc.stderr.startswith("error: ")
    _assert_refusal(proc.stderr, hostile[case.name], case.phrase)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_preflight_refuses_with_exit_2(case, hostile, capsys):
    assert preflight_cli.main(["--stack", "dev", "--config-file", str(hostile[case.name])]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    _assert_refusal(captured.err, hostile[case.name], case.phrase)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_jobs_cli_refuses_with_exit_2(case, hostile):
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(["status", "--stack", "dev", "--config-file", str(hostile[case.name]),
                     "--address", "http://127.0.0.1:1"], out=out, err=err)
    assert code == 2
    # The CLI says first that it targets the file offline (docs/jobs-cli.md), then refuses.
    note, _, refusal = err.getvalue().partition("\n")
    assert note.startswith("[jobs] --config-file: targeting ") and "offline preview" in note
    _assert_refusal(refusal, hostile[case.name], case.phrase)


def test_committed_stack_files_read_as_before():
    for stack in ("dev", "prod"):
        raw, secret_keys = read_stack_file(ROOT / f"Pulumi.{stack}.yaml")
        # No ciphertext is committed: the secret comes from `pulumi config set --secret`.
        assert secret_keys == set() and raw["gke-grpo:environment"] == stack
        raw, secret_keys = read_stack_file(ROOT / f"Pulumi.{stack}.yaml", ["gke-grpo:hfToken"])
        assert secret_keys == {"gke-grpo:hfToken"} and raw["gke-grpo:hfToken"] == SECRET_PLACEHOLDER


def test_unquoted_timestamps_stay_text():
    document = load_yaml_text(b"config:\n  gke-grpo:cluster: {startTime: 2025-01-04T02:00:00Z}\n", "f")
    assert document["config"]["gke-grpo:cluster"]["startTime"] == "2025-01-04T02:00:00Z"


def test_depth_limit_is_exact():
    ok = "config: " + "[" * (MAX_DEPTH - 2) + "]" * (MAX_DEPTH - 2)
    load_yaml_text(ok.encode(), "f")
    with pytest.raises(ConfigFileError, match="nested deeper"):
        load_yaml_text(("config: " + "[" * MAX_DEPTH + "]" * MAX_DEPTH).encode(), "f")


def test_a_utf8_bom_is_accepted():
    assert load_yaml_text(b"\xef\xbb\xbfconfig: {}\n", "f") == {"config": {}}
