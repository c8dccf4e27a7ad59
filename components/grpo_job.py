"""GrpoJob: the post-deploy training run as a KubeRay RayJob on the stack's RayCluster.

The RayJob is named from a short hash of the run's spec and the attempt number: an unchanged
spec registers identical inputs (no diff); a changed spec or a bumped `job.attempt` renames it,
which replaces it, deleting the old RayJob first (its finalizer stops the old Ray job) so two
runs never compete for the same GPUs. Every attempt of a spec writes to and resumes from the
run's checkpoint directory. The code the entrypoint runs on the head (GPU wait, data
preparation) reaches it through a ConfigMap (`head_code_files`), without an image rebuild.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import pulumi
import pulumi_kubernetes as k8s
import yaml

from components.config import NOT_SHOWN, ConfigError, Problem, StackConfig
from components.kuberay import KubeRay
from jobs.spec import GrpoSpec

JOBS_DIR = Path(__file__).resolve().parent.parent / "jobs"
# Standard-library (plus ray/pyarrow/huggingface_hub, present in the framework images) modules
# the entrypoint runs on the Ray head before training starts.
HEAD_MODULES = ("__init__.py", "layout.py", "spec.py", "wait_for_gpus.py", "prepare.py", "health.py")
HEAD_CODE_ROOT = "/opt/gke-grpo"
HEAD_CODE_CONFIGMAP = "grpo-jobs-code"


def require_preflight(spec: GrpoSpec) -> None:
    """Run the job preflight before any resource exists: errors stop the program with the
    config's own error (every problem at once, no traceback); warnings are logged."""
    from jobs.preflight import check

    findings = check(spec)
    errors = [Problem(f.key, NOT_SHOWN, f.message) for f in findings if f.level == "error"]
    if errors:
        raise ConfigError(errors)
    for finding in findings:
        pulumi.log.warn(f"preflight: {finding.key}: {finding.message}")


def head_code_files() -> dict[str, str]:
    return {name: (JOBS_DIR / name).read_text() for name in HEAD_MODULES}


def head_code_mount() -> tuple[list[dict], list[dict], list[dict]]:
    """Volumes, volume mounts and env that put the jobs package on the head's PYTHONPATH."""
    volumes = [{"name": "jobs-code", "configMap": {
        "name": HEAD_CODE_CONFIGMAP, "items": [{"key": name, "path": name} for name in HEAD_MODULES]}}]
    mounts = [{"name": "jobs-code", "mountPath": f"{HEAD_CODE_ROOT}/jobs", "readOnly": True}]
    env = [{"name": "PYTHONPATH", "value": HEAD_CODE_ROOT}]
    return volumes, mounts, env


def rayjob_name(spec: GrpoSpec) -> str:
    return f"grpo-{spec.short_hash}-attempt-{spec.attempt}"


def rayjob_spec(spec: GrpoSpec, config: StackConfig, ray_cluster_name: str) -> dict:
    """The RayJob spec (ray.io/v1), validated in tests against the KubeRay 1.7.0 CRD."""
    from jobs.render import render
    from jobs.runs import compose_entrypoint, submission_metadata

    rendered = render(spec)
    return {
        # Submit to the stack's RayCluster; the operator never deletes a selected cluster.
        "clusterSelector": {"ray.io/cluster": ray_cluster_name},
        "submissionMode": "K8sJobMode",
        # The submitter runs `ray job status <id>` and submits only when that fails: a
        # restarted submitter attaches to the attempt instead of starting it twice.
        "jobId": spec.submission_id(),
        "entrypoint": compose_entrypoint(spec, rendered.entrypoint,
                                         gpu_wait_seconds=config.job.gpu_wait_seconds),
        "runtimeEnvYAML": yaml.safe_dump(rendered.runtime_env, sort_keys=True),
        "activeDeadlineSeconds": config.job.active_deadline_seconds,
        # The same metadata the jobs CLI writes: either submitter's attempt reads back alike.
        "metadata": submission_metadata(spec, spec.attempt),
    }


class GrpoJob(pulumi.ComponentResource):
    rayjob: Optional[k8s.apiextensions.CustomResource]
    spec: GrpoSpec
    submission_id: str

    def __init__(self, name: str, config: StackConfig, spec: GrpoSpec, kuberay: KubeRay,
                 opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__("gke-grpo:components:GrpoJob", name, None, opts)
        from components.health_gate import health_gate_warning
        if health_gate_warning(config):
            pulumi.log.warn(health_gate_warning(config), resource=self)
        self.spec = spec
        self.submission_id = spec.submission_id()
        self.rayjob = k8s.apiextensions.CustomResource(
            f"{name}-rayjob",
            api_version="ray.io/v1",
            kind="RayJob",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=rayjob_name(spec), namespace=kuberay.namespace,
                labels={"app.kubernetes.io/part-of": "gke-grpo", "gke-grpo/run": spec.short_hash}),
            spec=rayjob_spec(spec, config, kuberay.ray_cluster_name),
            opts=pulumi.ResourceOptions(
                parent=self, provider=kuberay.provider,
                depends_on=[kuberay.ray_cluster],
                # A finished RayJob is never reconciled again: any change is a new RayJob, and
                # the old one goes first so two attempts never hold the same GPUs.
                replace_on_changes=["spec"],
                delete_before_replace=True,
            ),
        ) if config.job.enabled else None
        self.register_outputs({"submission_id": self.submission_id, "run_id": spec.run_id})
