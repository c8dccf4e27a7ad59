"""KubeRay's view of an attempt beside Ray's (jobs/cli/rayjob_status.py), against a stand-in
kubectl that prints what `kubectl get rayjobs.ray.io -o json` prints (a `List` of the objects,
kubectl's documented output), with RayJob statuses exactly as KubeRay v1.7.0's controller writes
them (ray-operator/controllers/ray/rayjob_controller.go at tag v1.7.0, read 2026-12-01):
- checkJobStatusCheckTimeoutAndUpdateStatusIfNeeded: JobDeploymentStatusFailed, reason
  JobStatusCheckTimeoutExceeded, message "Job status checks have been failing since %v;
  exceeded timeout of %ds";
- checkSubmitterAndUpdateStatusIfNeeded (K8sJobMode, the submitter Job failed): Failed,
  SubmissionFailed, "Job submission has failed. Reason: %s. Message: %s";
- the Running branch: jobStatus copied from Ray's JobInfo at each reconcile, Complete/Failed only
  once the submitter finished; after Complete/Failed nothing is read again."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from types import SimpleNamespace

from jobs.cli.live_commands import cmd_list
from jobs.cli.ray_jobs import Attempt
from jobs.cli.rayjob_status import KubectlAccess, RayJobView, mismatch, rayjob_rows, rayjobs_of_run

RUN = "qwen7b-gsm8k-dev-53d0cfce"


def rayjob(attempt: int, deployment: str, job_status: str, reason: str = "", message: str = "") -> dict:
    status = {"jobDeploymentStatus": deployment, "jobStatus": job_status, "jobId": f"{RUN}-attempt-{attempt}"}
    if reason:
        status.update(reason=reason, message=message)
    return {"apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": {"name": f"grpo-53d0cfce-attempt-{attempt}", "namespace": "grpo",
                         "labels": {"gke-grpo/run": "53d0cfce"}},
            "spec": {"jobId": f"{RUN}-attempt-{attempt}", "entrypoint": "python3 -m jobs.run"},
            "status": status}


TIMED_OUT = rayjob(1, "Failed", "RUNNING", "JobStatusCheckTimeoutExceeded",
                   "Job status checks have been failing since 2026-12-01 10:00:00; exceeded timeout of 300s")
SUBMISSION_FAILED = rayjob(2, "Failed", "RUNNING", "SubmissionFailed",
                           "Job submission has failed. Reason: BackoffLimitExceeded. Message: Job has "
                           "reached the specified backoff limit")


def fake_kubectl(tmp_path: Path, items: list[dict], code: int = 0) -> tuple[Path, Path]:
    """A kubectl that logs its arguments and prints the RayJobs as `kubectl get -o json` does."""
    log, listing = tmp_path / "kubectl.log", tmp_path / "rayjobs.json"
    listing.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""},
                                   "items": items}))
    script = tmp_path / "kubectl"
    script.write_text(f"#!{sys.executable}\nimport sys\n"
                      f"open({str(log)!r}, 'a').write(' '.join(sys.argv[1:]) + '\\n')\n"
                      f"if {code}:\n"
                      "    print('error: the server could not find the requested resource', file=sys.stderr)\n"
                      f"    sys.exit({code})\n"
                      f"print(open({str(listing)!r}).read())\n")
    script.chmod(0o755)
    return script, log


def test_kubectl_is_asked_for_the_runs_rayjobs_by_label(tmp_path):
    kubectl, log = fake_kubectl(tmp_path, [TIMED_OUT, SUBMISSION_FAILED])
    access = KubectlAccess("grpo", kubectl=str(kubectl), context="my-ctx", kubeconfig="/tmp/kc.yaml")
    found = rayjobs_of_run(access, RUN)
    assert set(found) == {f"{RUN}-attempt-1", f"{RUN}-attempt-2"}
    assert log.read_text().split() == ["--kubeconfig", "/tmp/kc.yaml", "--context", "my-ctx", "get",
                                       "rayjobs.ray.io", "-n", "grpo", "-l", "gke-grpo/run=53d0cfce",
                                       "-o", "json"]


def test_a_rayjob_failed_while_its_ray_job_runs_is_a_mismatch(tmp_path):
    kubectl, _ = fake_kubectl(tmp_path, [TIMED_OUT])
    rows = rayjob_rows(KubectlAccess("grpo", kubectl=str(kubectl)), RUN, f"{RUN}-attempt-1", "RUNNING")
    assert rows[0] == ("rayjob", "RayJob grpo-53d0cfce-attempt-1: Failed (JobStatusCheckTimeoutExceeded)")
    key, text = rows[1]
    assert key == "MISMATCH" and text.startswith("RayJob Failed (JobStatusCheckTimeoutExceeded), Ray job RUNNING: ")
    assert "stopped watching" in text and "the run goes on" in text


def test_mismatches_follow_kuberays_controller():
    view = lambda d, r="": RayJobView("n", "id", d, "", r, "")
    assert "the submitter lost the log stream" in mismatch(view("Failed", "SubmissionFailed"), "RUNNING")
    assert "submitter pod has finished" in mismatch(view("Running"), "SUCCEEDED")
    assert mismatch(view("Running"), "RUNNING") is None
    assert mismatch(view("Complete"), "SUCCEEDED") is None and mismatch(view("Failed", "AppFailed"), "FAILED") is None
    assert mismatch(view("Complete"), "FAILED") is not None
    assert mismatch(view("Failed", "DeadlineExceeded"), "PENDING").endswith("not the RayJob")


def test_kubectl_trouble_is_a_note_never_an_error(tmp_path):
    kubectl, _ = fake_kubectl(tmp_path, [], code=1)
    rows = rayjob_rows(KubectlAccess("grpo", kubectl=str(kubectl)), RUN, f"{RUN}-attempt-1", "RUNNING")
    assert rows == [("rayjob", "not checked: kubectl get rayjobs failed (exit 1): error: the server "
                               "could not find the requested resource")]
    rows = rayjob_rows(KubectlAccess("grpo", kubectl=str(tmp_path / "nope")), RUN, "x", "RUNNING")
    assert rows[0][1].startswith("not checked: ") and "not found" in rows[0][1]
    assert rayjob_rows(None, RUN, "x", "RUNNING") == []          # --address alone: no cluster API
    kubectl, _ = fake_kubectl(tmp_path, [])
    assert rayjob_rows(KubectlAccess("grpo", kubectl=str(kubectl)), RUN, "x", "RUNNING") == [
        ("rayjob", "none for this attempt (submitted by the jobs CLI, or deleted)")]


def test_list_shows_each_attempts_rayjob_and_the_mismatch(tmp_path):
    kubectl, _ = fake_kubectl(tmp_path, [TIMED_OUT])
    attempts = [Attempt(f"{RUN}-attempt-1", 1, "RUNNING", start_time=1_796_000_000_000),
                Attempt(f"{RUN}-attempt-2", 2, "FAILED", start_time=1_796_000_000_000)]
    runs = SimpleNamespace(attempts=lambda run_id: attempts, restarts=lambda sid: [])
    target = SimpleNamespace(run_id=RUN, address="http://127.0.0.1:8265",
                             kube=KubectlAccess("grpo", kubectl=str(kubectl)))
    out = io.StringIO()
    assert cmd_list(runs, target, None, out, io.StringIO()) == 0
    lines = out.getvalue().splitlines()
    assert "RAYJOB" in lines[1]
    assert lines[2].split()[-2:] == ["Failed", "0"] and lines[3].split()[-2:] == ["-", "0"]
    assert lines[4].startswith("MISMATCH attempt 1: RayJob Failed (JobStatusCheckTimeoutExceeded), Ray job RUNNING")
