"""The offline preview's contract (DESIGN.md): golden files, determinism, secrets, exit codes."""

from __future__ import annotations

import difflib
import json
import subprocess
import sys

import pytest

from jobs.plan.stack_file import SECRET_PLACEHOLDER
from tests import background
from tests.background import PREVIEW_DEV_DETAILS, PREVIEW_TREE
from tests.conftest import ROOT, SHARED, preview_with, skip_or_fail
from tools.golden import GOLDENS, golden_path
from tools.preview import render_json


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tools.preview", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("name", list(GOLDENS))
def test_preview_matches_the_golden_file(name, request):
    stack, changes = GOLDENS[name]
    result = request.getfixturevalue(f"{stack}_preview") if not changes else preview_with(stack, changes)
    assert result.error is None, result.error
    path = golden_path(name)
    actual = render_json(result)
    if not path.exists():
        pytest.fail(f"{path.relative_to(ROOT)} is missing: run `make golden` and commit it")
    expected = path.read_text()
    if actual != expected:
        diff = "".join(difflib.unified_diff(
            expected.splitlines(True), actual.splitlines(True),
            fromfile=f"{path.name} (committed)", tofile=f"{path.name} (this preview)"))
        pytest.fail(f"the {name} preview changed; review, then `make golden`:\n{diff}", pytrace=False)


def test_no_input_is_left_unknown(stack_preview):
    assert stack_preview.unknown_inputs == []
    assert "[unknown]" not in render_json(stack_preview)


def test_secrets_are_masked_everywhere(stack_preview):
    text = render_json(stack_preview)
    assert SECRET_PLACEHOLDER not in text


def test_document_shape(stack_preview):
    doc = json.loads(render_json(stack_preview))
    assert doc["project"] == "gke-grpo" and doc["stack"] == stack_preview.stack
    urns = [r["urn"] for r in doc["resources"]]
    assert urns == sorted(urns)
    assert not any(r["type"] == "pulumi:pulumi:Stack" for r in doc["resources"])


def test_invalid_config_exits_2_with_problems_on_stderr_only(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("config:\n  gcp:project: 123-NOT-VALID\n  gke-grpo:gpu:\n    nodes: 0\n")
    run = _run("dev", "--config-file", str(bad), "--json")
    assert run.returncode == 2
    assert run.stdout == ""
    assert "gcp:project" in run.stderr and "gke-grpo:gpu" in run.stderr
    assert "Traceback" not in run.stderr


@pytest.mark.parametrize("content,message", [
    (None, "cannot read"),
    ("config: [unclosed", "not valid YAML"),
    ("- just\n- a list\n", "expected a mapping"),
])
def test_unusable_config_file_is_a_clear_error(tmp_path, content, message):
    path = tmp_path / "stack.yaml"
    if content is not None:
        path.write_text(content)
    run = _run("dev", "--config-file", str(path))
    assert run.returncode == 2 and run.stdout == ""
    assert message in run.stderr and "Traceback" not in run.stderr


def test_tree_output_lists_every_resource(dev_preview):
    run = PREVIEW_TREE["dev"].result()
    assert run.returncode == 0, run.stderr
    for resource in dev_preview.resources:
        assert resource.name in run.stdout
    assert f"+ {len(dev_preview.resources) + 1} to create" in run.stdout


# The shared checker runs each stack's preview twice and compares the bytes (determinism), checks
# the document's shape and an invalid config's exit: 6 previews as subprocesses, in the background
# (tests/background.py). Measured 2026-12-06 on the 2-core machine: 91 s with another suite beside
# it; 168 s niced in the whole suite (xdist workers and Ray inner runs beside it).
CONTRACT_CHECKER = background.Command("the shared preview contract checker",
                                      (sys.executable, str(SHARED / "tools" / "check_preview_contract.py")),
                                      measured_seconds=168)


def test_shared_contract_checker_passes():
    """Also the determinism test: two runs of each stack's `--json` preview print identical bytes."""
    checker = SHARED / "tools" / "check_preview_contract.py"
    if not checker.exists():
        skip_or_fail(f"{checker} is absent (shared/ is not beside the project)")
    run = CONTRACT_CHECKER.result()
    assert run.returncode == 0, run.stdout + run.stderr
    assert "preview contract: 0 problem(s)" in run.stdout, run.stdout


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_stack_files_carry_no_ciphertext(stack):
    # A fake `secure:` value stops a real `pulumi preview` that cannot decrypt it; the secret is
    # added per stack with `pulumi config set --secret` and the offline readers stand in for it.
    assert "secure:" not in (ROOT / f"Pulumi.{stack}.yaml").read_text()


def test_offline_readers_stand_in_a_secret_for_an_unset_required_key(stack_preview):
    from components.config import OFFLINE_SECRET_KEYS
    from tools.preview import read_config_file

    raw, secret_keys = read_config_file(ROOT / "Pulumi.dev.yaml")
    assert OFFLINE_SECRET_KEYS == ("gke-grpo:hfToken",)
    assert raw["gke-grpo:hfToken"] == SECRET_PLACEHOLDER and "gke-grpo:hfToken" in secret_keys
    # ...and it reaches the cluster only as a masked Kubernetes Secret.
    text = render_json(stack_preview)
    assert SECRET_PLACEHOLDER not in text and '"[secret]"' in text


def test_a_plain_text_token_in_a_stack_file_is_still_refused(tmp_path):
    text = (ROOT / "Pulumi.dev.yaml").read_text() + "  gke-grpo:hfToken: hf_" + "a" * 34 + "\n"
    path = tmp_path / "Pulumi.dev.yaml"
    path.write_text(text)
    result = subprocess.run([sys.executable, "-m", "tools.preview", "dev", "--config-file", str(path), "--json"],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and result.stdout == ""
    assert "gke-grpo:hfToken" in result.stderr and "must be stored as a secret" in result.stderr
    assert "hf_" + "a" * 34 not in result.stderr


# ---- the warnings block -------------------------------------------------------------------------

def test_warnings_are_one_grouped_line_each():
    from tools.preview import SUMMARY_MAX, render_warnings, warning_summary

    long = "KubeRay token authentication is off. " + "The detail goes on. " * 40
    block = render_warnings([long, long, "Short one"], details=False)
    lines = block.strip().splitlines()
    assert lines[0].startswith("2 warnings (first sentences; --details prints them in full")
    assert lines[1:] == ["  - KubeRay token authentication is off", "  - Short one"]
    assert len(warning_summary("x" * 400)) == SUMMARY_MAX
    assert long in render_warnings([long], details=True)
    assert render_warnings([], details=False) == ""


def test_the_dev_preview_prints_each_warning_on_one_line():
    done = PREVIEW_TREE["dev"].result()
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    block = next(part for part in done.stdout.split("\n\n") if " warnings (" in part).splitlines()
    assert block[0].split()[1] == "warnings" and len(block) == int(block[0].split()[0]) + 1
    assert all(len(line) <= 165 for line in block[1:]), block
    detailed = PREVIEW_DEV_DETAILS.result()
    assert "docker manifest inspect" in detailed.stdout and "docker manifest inspect" not in done.stdout


def test_the_text_view_reads_top_down(dev_preview):
    from tools.preview import OUTPUT_MAX, render_text

    text = render_text(dev_preview)
    lines = text.splitlines()
    order = [lines.index(next(line for line in lines if line.startswith(head)))
             for head in ("Previewing update (dev)", "Resources:", "Outputs (", "Capacity plan:",
                          "Cost estimate:", f"{len(set(dev_preview.warnings))} warnings (", "Next:")]
    assert order == sorted(order), order
    assert dev_preview.warnings, "the dev stack warns (Autopilot limits, unconfirmed images)"
    outputs = lines[order[2] + 1:order[3] - 1]
    assert {line.split(":")[0].strip() for line in outputs} == set(dev_preview.outputs)
    assert all(len(line) <= OUTPUT_MAX + 40 for line in outputs), max(outputs, key=len)
    [identity] = [line for line in outputs if line.strip().startswith("deployedIdentity:")]
    assert "characters)" in identity and "resources" in identity
    assert lines[-3].strip().startswith("gke-grpo preflight --stack dev")
    assert "python -m tools.preview dev --json" in text


@pytest.mark.parametrize("value,shown", [
    ("short", '"short"'), ({"a": 1}, '{"a": 1}'), ([1] * 60, "[60 items] (180 characters)"),
    ({f"k{i}": "v" * 20 for i in range(9)}, "{9 keys: k0, k1, k2, k3, k4, k5, k6, k7, k8} (270 characters)"),
    ("x" * 200, '"' + "x" * 59 + "... (202 characters)")])
def test_a_long_output_is_summarised(value, shown):
    from tools.preview import output_summary

    assert output_summary(value) == shown
