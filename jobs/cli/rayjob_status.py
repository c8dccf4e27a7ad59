"""What KubeRay says about an attempt, beside what Ray says: `gke-grpo status` and `gke-grpo list` name the
RayJob of an attempt and say when the two disagree.

    rayjobs = rayjobs_of_run(access, run_id)                # jobId -> RayJobView, via kubectl
    mismatch(rayjobs[submission_id], "RUNNING")             # a sentence, or None

Why they can disagree (KubeRay v1.7.0, ray-operator/controllers/ray/rayjob_controller.go at tag
v1.7.0, read 2026-12-01): once a RayJob's ``status.jobDeploymentStatus`` is ``Complete`` or
``Failed`` the controller only cleans up (``case rayv1.JobDeploymentStatusComplete,
rayv1.JobDeploymentStatusFailed``) and never reads the Ray job again. It marks a RayJob Failed
while its Ray job may still run:
- ``JobStatusCheckTimeoutExceeded``: ``GetJobInfo`` failed (the dashboard unreachable, e.g. while
  the head restarts) for ``RAYJOB_STATUS_CHECK_TIMEOUT_SECONDS`` (300 s by default,
  utils/constant.go), "Job status checks have been failing since ...";
- ``SubmissionFailed``: the submitter's K8s Job failed, i.e. its pods exhausted
  ``spec.submitterConfig.backoffLimit`` (``checkSubmitterAndUpdateStatusIfNeeded``), typically
  because ``ray job logs --follow`` lost the head again and again;
- ``AppFailed`` with "Submitter completed but Ray job not found in RayCluster." (the submitter
  finished, a restarted head no longer knows the job).
And it can show ``Running`` a while after the Ray job ended: it waits for the submitter to finish
(``isJobTerminal && finishedAt != nil``).

The RayJobs are found by the label the Pulumi program puts on them (components/grpo_job.py:
``gke-grpo/run: <spec short hash>``) and matched by ``spec.jobId`` (the attempt's submission id).
``kubectl get -o json`` prints a ``List`` whose ``items`` are the objects (kubectl's documented
output); a kubectl that is missing, refused or slow is a note, never an error.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from jobs.cli.kubectl import KubectlFailed, run_kubectl

KUBECTL_TIMEOUT = 15.0
RUN_LABEL = "gke-grpo/run"
TERMINAL_DEPLOYMENT = ("Complete", "Failed")
LIVE_RAY = ("PENDING", "RUNNING")


class RayJobQueryError(Exception):
    """kubectl could not list the run's RayJobs (the message says why; nothing secret)."""


@dataclass(frozen=True)
class KubectlAccess:
    """How the CLI reaches the cluster's API: the stack's namespace, kubectl, and the exported
    kubeconfig (a private temporary file) or your own context."""
    namespace: str
    kubectl: str = "kubectl"
    context: str | None = None
    kubeconfig: str | None = None


@dataclass(frozen=True)
class RayJobView:
    name: str
    job_id: str
    deployment: str          # status.jobDeploymentStatus ("" = New)
    job_status: str          # status.jobStatus, as KubeRay last copied it
    reason: str              # status.reason
    message: str             # status.message

    def describe(self) -> str:
        text = f"RayJob {self.name}: {self.deployment or 'New'}"
        if self.reason:
            text += f" ({self.reason})"
        return text


def _short_hash(run_id: str) -> str:
    return run_id.rsplit("-", 1)[-1]


def parse_rayjobs(document: Any) -> dict[str, RayJobView]:
    """jobId -> RayJob from ``kubectl get rayjobs -o json``."""
    found: dict[str, RayJobView] = {}
    items = document.get("items") if isinstance(document, dict) else None
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        spec, status = item.get("spec") or {}, item.get("status") or {}
        job_id = str(spec.get("jobId") or status.get("jobId") or "")
        if not job_id:
            continue
        found[job_id] = RayJobView(
            name=str((item.get("metadata") or {}).get("name", "?")), job_id=job_id,
            deployment=str(status.get("jobDeploymentStatus") or ""),
            job_status=str(status.get("jobStatus") or ""), reason=str(status.get("reason") or ""),
            message=str(status.get("message") or ""))
    return found


def rayjobs_of_run(access: KubectlAccess, run_id: str, timeout: float = KUBECTL_TIMEOUT) -> dict[str, RayJobView]:
    try:
        out = run_kubectl(access.kubectl, "get", "rayjobs.ray.io", "-n", access.namespace,
                          "-l", f"{RUN_LABEL}={_short_hash(run_id)}", "-o", "json", timeout=timeout,
                          kubeconfig=access.kubeconfig, context=access.context,
                          what="kubectl get rayjobs")
    except KubectlFailed as exc:
        raise RayJobQueryError(str(exc)) from None
    try:
        return parse_rayjobs(json.loads(out))
    except ValueError:
        raise RayJobQueryError("kubectl get rayjobs printed no JSON") from None


def mismatch(rayjob: RayJobView, ray_status: str) -> str | None:
    """A sentence when KubeRay's view of the attempt contradicts Ray's, else None."""
    head = f"RayJob {rayjob.deployment or 'New'}" + (f" ({rayjob.reason})" if rayjob.reason else "")
    if rayjob.deployment in TERMINAL_DEPLOYMENT and ray_status in LIVE_RAY:
        why = {
            "JobStatusCheckTimeoutExceeded": (
                "KubeRay could not reach the dashboard for its status-check timeout (300 s by "
                "default; a head restart?) and stopped watching this RayJob"),
            "SubmissionFailed": (
                "the submitter lost the log stream and its K8s Job ran out of retries "
                "(submitterConfig.backoffLimit)"),
            "AppFailed": "KubeRay saw the submitter finish without the Ray job",
        }.get(rayjob.reason, "KubeRay no longer watches this RayJob")
        return (f"{head}, Ray job {ray_status}: {why}; the run goes on, follow it with "
                "`gke-grpo status` / `attach`, not the RayJob")
    if rayjob.deployment == "Running" and ray_status in ("SUCCEEDED", "FAILED", "STOPPED"):
        return (f"{head}, Ray job {ray_status}: KubeRay marks the RayJob once its submitter pod "
                "has finished (it may still be following the log)")
    expected = {"Complete": ("SUCCEEDED", "STOPPED"), "Failed": ("FAILED", "STOPPED")}
    if rayjob.deployment in expected and ray_status not in (*expected[rayjob.deployment], *LIVE_RAY):
        return f"{head}, Ray job {ray_status}: the RayJob kept an earlier state of the attempt"
    return None


def rayjob_rows(access: KubectlAccess | None, run_id: str | None, submission_id: str,
                ray_status: str) -> list[tuple[str, str]]:
    """The `status` rows: the attempt's RayJob and, when they disagree, why."""
    if access is None or not run_id:
        return []
    try:
        rayjobs = rayjobs_of_run(access, run_id)
    except RayJobQueryError as exc:
        return [("rayjob", f"not checked: {exc}")]
    rayjob = rayjobs.get(submission_id)
    if rayjob is None:
        return [("rayjob", "none for this attempt (submitted by the jobs CLI, or deleted)")]
    rows = [("rayjob", rayjob.describe())]
    problem = mismatch(rayjob, ray_status)
    if problem:
        rows.append(("MISMATCH", problem))
    return rows
