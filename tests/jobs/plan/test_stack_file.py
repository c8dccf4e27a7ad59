"""The one stack-file reader (jobs/plan/stack_file.py) and the table of hostile files
(tools/hostile_files.py): each is refused with one line that names the file and the problem,
exit 2, no traceback, nothing secret, in bounded memory (the preview runs under a 1 GiB address
space limit: a file that blew up memory would fail, not swap) and bounded time (the subprocess
timeout is a hang guard; figures: python -m tools.bench_hostile). Preview, preflight and the jobs
CLI all refuse the same way."""

from __future__ import annotations

import io
import json
import resource
import subprocess
import sys
from pathlib import Path

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
    assert note.startswith("[gke-grpo] --config-file: targeting ") and "(offline)" in note
    _assert_refusal(refusal, hostile[case.name], case.phrase)


def test_committed_stack_files_read_as_before():
    for stack in ("dev", "prod"):
        raw, secret_keys = read_stack_file(ROOT / f"Pulumi.{stack}.yaml")
        # No ciphertext is committed: the secret comes from `pulumi config set --secret`.
        assert secret_keys == set() and raw["gke-grpo:environment"] == stack
        raw, secret_keys = read_stack_file(ROOT / f"Pulumi.{stack}.yaml", ["gke-grpo:hfToken"])
        assert secret_keys == {"gke-grpo:hfToken"} and raw["gke-grpo:hfToken"] == SECRET_PLACEHOLDER


def test_quoted_timestamps_stay_text():
    document = load_yaml_text(b'config:\n  gke-grpo:cluster: {startTime: "2025-01-04T02:00:00Z"}\n', "f")
    assert document["config"]["gke-grpo:cluster"]["startTime"] == "2025-01-04T02:00:00Z"


def test_depth_limit_is_exact():
    ok = "config: " + "[" * (MAX_DEPTH - 2) + "]" * (MAX_DEPTH - 2)
    load_yaml_text(ok.encode(), "f")
    with pytest.raises(ConfigFileError, match="nested deeper"):
        load_yaml_text(("config: " + "[" * MAX_DEPTH + "]" * MAX_DEPTH).encode(), "f")


def test_a_utf8_bom_is_accepted():
    assert load_yaml_text(b"\xef\xbb\xbfconfig: {}\n", "f") == {"config": {}}


# ---- scalars typed as the Pulumi CLI types them -------------------------------------------------
# pulumi/pulumi v3.259.0 parses stack files with gopkg.in/yaml.v3 v3.0.1
# (sdk/go/common/encoding/marshal.go, sdk/go.mod) and hands objects to the program as JSON
# (sdk/go/common/resource/config/object.go); go-yaml's resolve.go decides what a plain scalar is.
# Read from the sources (no Pulumi CLI here to run).

@pytest.mark.parametrize(("written", "program_gets"), [
    ("1e-6", 1e-6), ("1.0e-6", 1e-6), ("1E-6", 1e-6), (".5", 0.5),     # YAML 1.2 floats: no dot needed
    ("0x10", 16), ("010", 8), ("0o10", 8), ("0b101", 5), ("1_000", 1000),  # Go's ParseInt(s, 0, 64)
    ("2.0", 2),                                                           # encoding/json writes 2
    ("yes", "yes"), ("no", "no"), ("on", "on"), ("off", "off"),          # YAML 1.1 booleans are text
    ("True", True), ("FALSE", False), ("~", None), ("null", None),
    ('"1e-6"', "1e-6"), ("'010'", "010"),                                 # quoted: text as written
])
def test_a_scalar_inside_an_object_reaches_the_program_as_pulumi_gives_it(tmp_path, written, program_gets):
    path = tmp_path / "Pulumi.dev.yaml"
    path.write_text(f"config:\n  gke-grpo:job:\n    value: {written}\n")
    raw, _ = read_stack_file(path)
    assert json.loads(raw["gke-grpo:job"])["value"] == program_gets
    assert type(json.loads(raw["gke-grpo:job"])["value"]) is type(program_gets)


def test_a_top_level_number_is_the_text_of_its_json_form(tmp_path):
    path = tmp_path / "Pulumi.dev.yaml"
    path.write_text("config:\n  gke-grpo:a: 1e-6\n  gke-grpo:b: 1e-7\n  gke-grpo:c: 0x10\n")
    raw, _ = read_stack_file(path)
    assert (raw["gke-grpo:a"], raw["gke-grpo:b"], raw["gke-grpo:c"]) == ("0.000001", "1e-7", "16")


@pytest.mark.parametrize(("written", "says"), [
    (".inf", "not a number JSON can carry"), ("-.Inf", "not a number JSON can carry"),
    (".nan", "not a number JSON can carry"),
    ("2025-01-04T02:00:00Z", "an unquoted date or time"), ("2025-01-04", "quote it"),
])
def test_what_the_pulumi_cli_cannot_pass_is_refused_with_the_line(tmp_path, written, says):
    path = tmp_path / "Pulumi.dev.yaml"
    path.write_text(f"config:\n  gke-grpo:cluster:\n    startTime: {written}\n")
    with pytest.raises(ConfigFileError, match="line 3") as refused:
        read_stack_file(path)
    assert says in str(refused.value)


def test_the_learning_rate_written_as_the_config_reference_writes_it_is_accepted(tmp_path):
    """`learningRate: 1e-6`, unquoted: PyYAML's YAML 1.1 rules made it the text "1e-6" (and the
    config refused it); Pulumi's YAML reads a float, and so does this reader."""
    from components.run_spec import StackFileError, load_stack_file

    text = (ROOT / "Pulumi.dev.yaml").read_text()
    path = tmp_path / "Pulumi.dev.yaml"
    path.write_text(text.replace("learningRate: 1.0e-6", "learningRate: 1e-6"))
    assert "learningRate: 1e-6" in path.read_text()
    try:
        config = load_stack_file("dev", path)
    except StackFileError as err:
        raise AssertionError(str(err)) from None
    assert config.job.learning_rate == 1e-6


def test_an_unknown_stack_lists_the_stacks_there_are(tmp_path):
    from jobs.plan.stack_file import stack_file_path

    for name in ("dev", "prod"):
        (tmp_path / f"Pulumi.{name}.yaml").write_text("config: {}\n")
    assert stack_file_path(tmp_path, "dev") == tmp_path / "Pulumi.dev.yaml"
    assert stack_file_path(tmp_path, "deev", "other.yaml") == Path("other.yaml")
    with pytest.raises(ConfigFileError) as err:
        stack_file_path(tmp_path, "deev")
    assert "no stack 'deev'" in str(err.value) and "the stacks here: dev, prod" in str(err.value)
