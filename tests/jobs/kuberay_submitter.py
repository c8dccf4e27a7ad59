"""KubeRay v1.7.0's K8sJobMode submitter, rebuilt line for line from its Go source, so a test can
run the exact script the submitter pod runs.

Source: ray-project/kuberay, tag v1.7.0 (read 2026-12-01 with
`git --git-dir=<mirror> show v1.7.0:<path>`):
- ray-operator/controllers/ray/common/job.go, ``BuildJobSubmitCommand`` (K8sJobMode branch):
  address = "http://" + status.dashboardURL; the GCS health wait loop; ``if ! ray job status
  --address A ID >/dev/null 2>&1 ; then ray job submit --address A --no-wait
  [--runtime-env-json Q(json)] [--metadata-json Q(json)] [--submission-id ID] [entrypoint
  resource flags] -- <entrypoint> ; fi ; ray job logs --address A --follow ID``, where the
  entrypoint is ``strings.TrimSpace(spec.entrypoint)`` appended as ONE word, unquoted;
- ray-operator/controllers/ray/utils/constant.go: BasePythonHealthCommand, RayDashboardGCSHealthPath
  "api/gcs_healthz", RayDashboardGCSHealthCheckTimeoutSeconds 10;
- ray-operator/controllers/ray/rayjob_controller.go, ``configureSubmitterContainer``: when the
  container has no command, Command = utils.GetContainerCommand(["e"]) = ["/bin/bash", "-ce",
  "--"] and Args = [strings.Join(cmd, " ")]; env PYTHONUNBUFFERED=1, RAY_DASHBOARD_ADDRESS,
  RAY_JOB_SUBMISSION_ID;
- getRuntimeEnvJson: sigs.k8s.io/yaml YAMLToJSON (keys sorted by encoding/json, HTML characters
  escaped); getMetadataJSONForSubmitCommand: json.Marshal(map[string]string) (sorted keys);
  both then go through strconv.Quote.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

HEALTH_PATH = "api/gcs_healthz"
HEALTH_TIMEOUT_SECONDS = 10
BASE_PYTHON_HEALTH_COMMAND = ('python -c "import urllib.request; r=urllib.request.urlopen(\'%s\', '
                              'timeout=%d); exit(0 if b\'success\' in r.read() else 1)"')
CONTAINER_COMMAND = ["/bin/bash", "-ce", "--"]

_GO_ESCAPES = {"\a": r"\a", "\b": r"\b", "\f": r"\f", "\n": r"\n", "\r": r"\r", "\t": r"\t",
               "\v": r"\v", "\\": "\\\\", '"': '\\"'}


def go_quote(text: str) -> str:
    """Go's strconv.Quote for ASCII text (all this program ever sends)."""
    if not text.isascii():
        raise ValueError("go_quote here covers ASCII only")
    out = []
    for ch in text:
        if ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def go_json(value: Any) -> str:
    """encoding/json.Marshal of decoded YAML/JSON: map keys sorted, compact, and <, >, & escaped
    as \\u003c, \\u003e, \\u0026 (Go's default HTML-safe encoding)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    for ch, escaped in (("&", "\\u0026"), ("<", "\\u003c"), (">", "\\u003e"),
                        ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(ch, escaped)
    return text


def build_job_submit_command(spec: dict[str, Any], dashboard_url: str, job_id: str) -> list[str]:
    """BuildJobSubmitCommand(rayJob, K8sJobMode) of KubeRay v1.7.0, as the []string it returns.
    ``dashboard_url`` is status.dashboardURL, ``job_id`` status.jobId (= spec.jobId when set)."""
    if spec.get("submissionMode", "K8sJobMode") != "K8sJobMode":
        raise ValueError("only K8sJobMode is rebuilt here")
    address = dashboard_url if dashboard_url.startswith("http://") else "http://" + dashboard_url
    entrypoint = spec.get("entrypoint", "").strip()
    health = BASE_PYTHON_HEALTH_COMMAND % (address + "/" + HEALTH_PATH, HEALTH_TIMEOUT_SECONDS)
    cmd = ["until", health, ">/dev/null", "2>&1", ";",
           "do", "echo", go_quote(f"Waiting for Ray Dashboard GCS to become healthy at {address} ..."),
           ";", "sleep", "2", ";", "done", ";"]
    cmd += ["if", "!", "ray", "job", "status", "--address", address, job_id, ">/dev/null", "2>&1",
            ";", "then"]
    cmd += ["ray", "job", "submit", "--address", address, "--no-wait"]
    if spec.get("runtimeEnvYAML"):
        cmd += ["--runtime-env-json", go_quote(go_json(yaml.safe_load(spec["runtimeEnvYAML"])))]
    if spec.get("metadata"):
        cmd += ["--metadata-json", go_quote(go_json(spec["metadata"]))]
    if job_id:
        cmd += ["--submission-id", job_id]
    if spec.get("entrypointNumCpus", 0) > 0:
        cmd += ["--entrypoint-num-cpus", f"{float(spec['entrypointNumCpus']):f}"]
    if spec.get("entrypointNumGpus", 0) > 0:
        cmd += ["--entrypoint-num-gpus", f"{float(spec['entrypointNumGpus']):f}"]
    if spec.get("entrypointResources"):
        cmd += ["--entrypoint-resources", go_quote(spec["entrypointResources"])]
    cmd += ["--", entrypoint, ";"]
    cmd += ["fi", ";"]
    cmd += ["ray", "job", "logs", "--address", address, "--follow", job_id]
    return cmd


def submitter_container_args(spec: dict[str, Any], dashboard_url: str, job_id: str) -> list[str]:
    """The submitter container's Args: one bash script (configureSubmitterContainer)."""
    return [" ".join(build_job_submit_command(spec, dashboard_url, job_id))]


def submitter_env(dashboard_url: str, job_id: str) -> dict[str, str]:
    return {"PYTHONUNBUFFERED": "1", "RAY_DASHBOARD_ADDRESS": dashboard_url,
            "RAY_JOB_SUBMISSION_ID": job_id}
