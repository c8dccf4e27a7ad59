"""The manifest security scan (tools/scan_manifests.py): checkov over every Kubernetes object of
both stacks, offline, against the committed baseline (security/checkov-baseline.yaml).

checkov runs once per session (fixture `scan`) over dev, prod and a crafted privileged pod
written next to them; the tests read that one report. The CLI tests run it twice more, on the
cached previews.
"""

from __future__ import annotations

import copy
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from jobs.plan.stack_file import SECRET_PLACEHOLDER
from tests.conftest import ROOT, _cached, skip_or_fail
from tools import scan_manifests as scan_mod
from tools.scan_manifests import (
    CHECKOV,
    DEFAULT_BASELINE,
    SECRET_VALUE,
    SKIPPED_FILE,
    BaselineError,
    CheckovReport,
    StackManifests,
    apply_baseline,
    load_baseline,
    require_scanned,
    run_checkov,
    stack_manifests,
    write_manifests,
)

STACKS = ("dev", "prod")
CRAFTED_NAME = "grpo-crafted-head"   # matches the head's baseline entries on purpose
# checkov is slow to start; one run over both stacks stays far below this.
SCAN_BUDGET_SECONDS = 60


def _require_checkov() -> None:
    if not CHECKOV.exists():
        skip_or_fail(f"{CHECKOV.relative_to(ROOT)} is missing: run `make .venv-checkov/.installed`")


@dataclass
class Scan:
    out: Path
    stacks: dict[str, StackManifests]
    crafted: Path
    report: CheckovReport


@pytest.fixture(scope="session")
def scan(tmp_path_factory) -> Scan:
    _require_checkov()
    out = tmp_path_factory.mktemp("manifests")
    stacks = {s: write_manifests(stack_manifests(_cached(s)), out) for s in STACKS}
    # A privileged copy of the dev head pod, next to the real manifests.
    head = next(m for m in stacks["dev"].manifests
                if m.kind == "Pod" and m.name.endswith("-head"))
    crafted = copy.deepcopy(head.manifest)
    crafted["metadata"]["name"] = CRAFTED_NAME
    crafted["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    crafted_path = out / "crafted" / f"Pod.grpo.{CRAFTED_NAME}.yaml"
    crafted_path.parent.mkdir()
    crafted_path.write_text(yaml.safe_dump(crafted, sort_keys=False))
    files = [f for s in stacks.values() for f in s.files] + [crafted_path]
    report = run_checkov(files)
    print(f"\ncheckov: {len(files)} manifests in {report.seconds:.1f} s")
    return Scan(out, stacks, crafted_path, report)


@pytest.fixture(scope="session")
def baseline():
    return load_baseline(DEFAULT_BASELINE)


# ------------------------------------------------------------------------------------------
# The manifests
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("stack", STACKS)
def test_every_kubernetes_registration_is_written_or_skipped_with_a_reason(stack):
    result = _cached(stack)
    manifests = stack_manifests(result)
    sources = {m.source for m in manifests.manifests}
    skipped = dict(manifests.skipped)
    for r in result.resources:
        if r.type.startswith("kubernetes:"):
            assert r.urn in sources or skipped.get(r.urn), f"{r.urn} neither written nor skipped"
    for urn, reason in manifests.skipped:
        assert ":helm.sh/" in urn or ":yaml/" in urn, urn
        assert reason


@pytest.mark.parametrize("stack", STACKS)
def test_ray_pod_templates_are_written_as_pods(stack):
    result = _cached(stack)
    cluster = result.one("kubernetes:ray.io/v1:RayCluster").inputs
    name = cluster["metadata"]["name"]
    pods = {m.name: m.manifest for m in stack_manifests(result).manifests if m.kind == "Pod"}
    groups = [g["groupName"] for g in cluster["spec"]["workerGroupSpecs"]]
    rayjob = result.one("kubernetes:ray.io/v1:RayJob").inputs
    submitter = f"{rayjob['metadata']['name']}-submitter"
    assert set(pods) == {f"{name}-head", *(f"{name}-worker-{g}" for g in groups), submitter}
    head = pods[f"{name}-head"]
    assert head["spec"] == cluster["spec"]["headGroupSpec"]["template"]["spec"]
    assert head["metadata"]["namespace"] == cluster["metadata"]["namespace"]
    # KubeRay's labels: the NetworkPolicy's podSelector applies to the written pods too.
    assert head["metadata"]["labels"]["ray.io/cluster"] == name
    worker = pods[f"{name}-worker-{groups[0]}"]
    assert worker["spec"] == cluster["spec"]["workerGroupSpecs"][0]["template"]["spec"]
    assert worker["metadata"]["annotations"]["networking.gke.io/interfaces"]
    # The RayJob's own submitter pod is scanned as a Pod too.
    assert pods[submitter]["spec"] == rayjob["spec"]["submitterPodTemplate"]["spec"]
    assert pods[submitter]["metadata"]["labels"]["gke-grpo/role"] == "rayjob-submitter"


@pytest.mark.parametrize("stack", STACKS)
def test_secrets_keep_their_shape_and_no_value(stack, tmp_path):
    written = write_manifests(stack_manifests(_cached(stack)), tmp_path)
    secret = yaml.safe_load((tmp_path / stack / "Secret.grpo.hf-secret.yaml").read_text())
    assert secret["stringData"] == {"hf_api_token": SECRET_VALUE}
    for path in written.files:
        assert SECRET_PLACEHOLDER not in path.read_text(), path
    assert (tmp_path / stack / SKIPPED_FILE).exists()


def test_rewriting_removes_the_previous_runs_files(tmp_path):
    stale = tmp_path / "dev" / "Pod.grpo.gone.yaml"
    stale.parent.mkdir()
    stale.write_text("kind: Pod\n")
    write_manifests(stack_manifests(_cached("dev")), tmp_path)
    assert not stale.exists()


# ------------------------------------------------------------------------------------------
# The scan
# ------------------------------------------------------------------------------------------


def test_checkov_runs_offline(scan, monkeypatch):
    for flag in ("--skip-download", "--skip-results-upload"):
        assert flag in scan.report.command
    monkeypatch.setenv("BC_API_KEY", "not-a-key")
    monkeypatch.setenv("PRISMA_API_URL", "https://example.invalid")
    env = scan_mod.checkov_env()
    assert "BC_API_KEY" not in env and "PRISMA_API_URL" not in env
    assert env["CKV_SKIP_PACKAGE_UPDATE_CHECK"] == "true"


def test_one_scan_of_both_stacks_is_fast(scan):
    assert scan.report.seconds < SCAN_BUDGET_SECONDS, f"checkov took {scan.report.seconds:.1f} s"


@pytest.mark.parametrize("stack", STACKS)
def test_scan_passes_with_the_baseline(scan, baseline, stack):
    report = scan.report.under(scan.out / stack)
    require_scanned(report, scan.stacks[stack].files)   # every workload manifest was checked
    assert report.failed, "checkov reported no failed check at all: is it checking anything?"
    gate = apply_baseline(report, baseline)
    assert gate.ok, "failed checks not in security/checkov-baseline.yaml:\n" + "\n".join(
        f"  {f.check_id} {f.resource} {f.file.relative_to(scan.out)} ({f.check_name})"
        for f in gate.new_failures)


def test_a_crafted_privileged_pod_fails_the_scan(scan, baseline):
    crafted = scan.report.under(scan.crafted.parent)
    gate = apply_baseline(crafted, baseline)
    new = {(f.check_id, f.resource) for f in gate.new_failures}
    assert ("CKV_K8S_16", f"Pod.grpo.{CRAFTED_NAME}") in new
    # Its name matches the head pod's exceptions, so only what privileged changed is new (the
    # real head drops every capability, so a privileged one is flagged for that too).
    assert {check for check, _ in new} <= {"CKV_K8S_16", "CKV_K8S_20", "CKV_K8S_28", "CKV_K8S_37"}
    # Next to the real manifests, the whole scan fails.
    assert not apply_baseline(scan.report, baseline).ok


def test_every_baseline_entry_still_matches_a_failure(scan, baseline):
    real = [f for f in scan.report.findings if not f.file.is_relative_to(scan.crafted.parent)]
    gate = apply_baseline(CheckovReport(real, [], 0, []), baseline)
    assert gate.unused == [], "stale exceptions: remove them from security/checkov-baseline.yaml:\n" + \
        "\n".join(f"  {e.check} {e.resource}" for e in gate.unused)


# ------------------------------------------------------------------------------------------
# The baseline loader
# ------------------------------------------------------------------------------------------


def test_committed_baseline_entries_all_have_reasons(baseline):
    assert baseline
    for entry in baseline:
        assert len(entry.reason) > 20, entry


@pytest.mark.parametrize("body, message", [
    ("- {check: CKV_K8S_16, resource: DaemonSet.kube-system.x}", "no reason"),
    ("- {check: CKV_K8S_16, resource: DaemonSet.kube-system.x, reason: '  '}", "no reason"),
    ("- {check: CKV_K8S_16, resource: DaemonSet.kube-system.x, reason: null}", "no reason"),
    ("- {check: CKV_K8S_*, resource: Pod.grpo.x, reason: r}", "check must be"),
    ("- {check: CKV_AWS_1, resource: Pod.grpo.x, reason: r}", "check must be"),
    ("- {check: CKV_K8S_16, resource: '*.grpo.x', reason: r}", "too broad"),
    ("- {check: CKV_K8S_16, resource: 'Pod.*.*', reason: r}", "too broad"),
    ("- {check: CKV_K8S_16, resource: Pod, reason: r}", "<Kind>.<namespace>.<name>"),
    ("- {check: CKV_K8S_16, resource: Pod.grpo.x, reason: r, until: never}", "unknown key"),
    (("- {check: CKV_K8S_16, resource: Pod.grpo.x, reason: r}\n"
      "- {check: CKV_K8S_16, resource: Pod.grpo.x, reason: s}"), "duplicate"),
    ("check: CKV_K8S_16", "expected a list"),
])
def test_loader_refuses_an_invalid_baseline(tmp_path, body, message):
    path = tmp_path / "baseline.yaml"
    path.write_text(body + "\n")
    with pytest.raises(BaselineError, match=message.replace("*", r"\*")):
        load_baseline(path)


# ------------------------------------------------------------------------------------------
# The CLI: exit codes (real checkov, the session's cached previews)
# ------------------------------------------------------------------------------------------


@pytest.fixture
def cached_previews(monkeypatch):
    monkeypatch.setattr("tools.preview.run_preview", lambda stack, config_file=None: _cached(stack))


def test_cli_passes_on_both_stacks(tmp_path, capsys, cached_previews):
    _require_checkov()
    assert scan_mod.main(["--out", str(tmp_path), "--check"]) == scan_mod.EXIT_OK
    out = capsys.readouterr().out
    assert "0 not)" in out and "matched nothing" not in out
    assert (tmp_path / "prod" / SKIPPED_FILE).read_text().count("urn:pulumi") == 2


def test_cli_fails_and_prints_a_failure_outside_the_baseline(tmp_path, capsys, cached_previews):
    _require_checkov()
    entries = yaml.safe_load(DEFAULT_BASELINE.read_text())
    trimmed = [e for e in entries if e["check"] != "CKV_K8S_16"]
    assert len(trimmed) == len(entries) - 1
    baseline = tmp_path / "baseline.yaml"
    baseline.write_text(yaml.safe_dump(trimmed))
    code = scan_mod.main(["prod", "--out", str(tmp_path / "out"), "--check", "--baseline", str(baseline)])
    assert code == scan_mod.EXIT_FINDINGS
    err = capsys.readouterr().err
    assert ("CKV_K8S_16  DaemonSet.kube-system.nccl-rdma-installer  "
            "prod/DaemonSet.kube-system.nccl-rdma-installer.yaml") in err


def test_cli_refuses_a_baseline_without_reason(tmp_path, capsys):
    baseline = tmp_path / "baseline.yaml"
    baseline.write_text(textwrap.dedent("""\
        - check: CKV_K8S_16
          resource: DaemonSet.kube-system.nccl-rdma-installer
        """))
    code = scan_mod.main(["--out", str(tmp_path), "--check", "--baseline", str(baseline)])
    assert code == scan_mod.EXIT_INVALID
    assert "no reason" in capsys.readouterr().err


def test_cli_reports_a_missing_checkov(tmp_path, capsys, cached_previews):
    code = scan_mod.main(["dev", "--out", str(tmp_path), "--check", "--checkov", str(tmp_path / "nope")])
    assert code == scan_mod.EXIT_SCAN_ERROR
    assert "make .venv-checkov/.installed" in capsys.readouterr().err


def test_cli_unknown_stack_is_invalid_input(tmp_path, capsys):
    assert scan_mod.main(["nosuchstack", "--out", str(tmp_path)]) == scan_mod.EXIT_INVALID
    assert "error:" in capsys.readouterr().err
