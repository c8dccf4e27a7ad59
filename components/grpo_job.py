"""GrpoJob: the post-deploy training run as a KubeRay RayJob on the stack's RayCluster.

The RayJob is named from a short hash of the run's spec and the attempt number, and its `jobId`
is the run id plus the attempt: a changed spec or a bumped `job.attempt` renames it, which
replaces it, deleting the old RayJob first (its finalizer stops the old Ray job) so two runs
never compete for the same GPUs. Every attempt of a spec writes to and resumes from the run's
checkpoint directory.

Its entrypoint is the run driver's one shell-safe command (jobs/contract/run_plan.py RUN_COMMAND); the run's
plan (trainer argv, stages, budgets: job.activeDeadlineSeconds, job.gpuWaitSeconds,
job.maxRestarts) is a file of the head's jobs ConfigMap, not part of the RayJob. A budget change
updates that file only: the live driver keeps the plan it read, the next attempt reads the new
one. The RayJob's other fields (runtime env, metadata, submitter pod, cluster selector) are not
part of the run's identity and are ignored on update (`ignore_changes`, said in the preview):
a RayJob is never updated in place while its run lives; a new attempt gets them all new.
The jobs code (driver, GPU wait, data preparation) reaches the head through the same ConfigMap
(`head_code_files`), without an image rebuild.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pulumi
import pulumi_kubernetes as k8s
import yaml

from components.config import NOT_SHOWN, ConfigError, Problem
from components.head_code import HEAD_CODE_CONFIGMAP, SUBMITTER_LABELS
from jobs.contract.spec import GrpoSpec
from jobs.plan.findings import Finding

if TYPE_CHECKING:   # annotations only: the config models import components' siblings
    from components.config import JobConfig, StackConfig
    from components.kuberay import KubeRay

# The RayJob submitter's pod: labelled for the NetworkPolicy (dashboard port 8265 admitted from
# pods with this label: components/head_code.py SUBMITTER_LABELS), small, on the head's non-Spot CPU nodes.
SUBMITTER_ROLE_LABEL = SUBMITTER_LABELS
# KubeRay v1.7.0's default submitter container (ray-operator/controllers/ray/common/job.go
# GetDefaultSubmitterContainer: requests 500m / 200Mi, limits 1 / 1Gi), as one Guaranteed size
# (Autopilot sets requests = limits anyway).
SUBMITTER_RESOURCES = {"cpu": "500m", "memory": "1Gi"}
# The uid of the `ray` user of the rayproject/ray images (docker/base-deps/Dockerfile:
# ARG RAY_UID=1000), so the submitter runs as non-root.
RAY_IMAGE_UID = 1000
# Pods the submitter's K8s Job may fail before KubeRay marks the RayJob Failed. KubeRay v1.7.0
# (ray-operator/apis/ray/v1/rayjob_types.go SubmitterConfig.BackoffLimit: "In K8sJobMode, this
# is the K8s Job backoffLimit"; rayjob_controller.go createNewK8sJob defaults it to 2) gives the
# submitter 3 tries. A head restart costs one: the running submitter's `ray job logs --follow`
# ends with "WebSocket connection closed unexpectedly with close code 1006" (exit 1, observed on
# Ray 2.54; tests/jobs/head/test_recovery_ray.py), and the next pod finds no such job on the new
# head (`ray job status` fails), resubmits the same submission id, and the new driver continues
# the attempt. 10 survives a head restart a day over a week-long budget; a submitter that fails
# for another reason (a refused submission) is retried with the K8s Job's own capped backoff
# (10 s doubling to 6 min), about half an hour in all, before the RayJob fails.
SUBMITTER_BACKOFF_LIMIT = 10


def require_preflight(findings: list[Finding]) -> None:
    """The job preflight's findings (components/run_spec.py preflight_findings) before any
    resource exists: errors stop the program with the config's own error (every problem at once,
    no traceback); warnings are logged."""
    from components.run_spec import preflight_errors

    error = preflight_errors(findings)
    if error is not None:
        raise error
    for finding in findings:
        pulumi.log.warn(f"preflight: {finding.key}: {finding.message}")


def run_plan(spec: GrpoSpec, config: StackConfig) -> str:
    """The run plan file (JSON) the driver reads on the head: the rendered trainer, the stages
    and the budgets of gke-grpo:job."""
    from components.health_gate import health_plan
    from components.run_spec import capacity_end
    from jobs.contract.layout import DATA_LAYOUT
    from jobs.plan.after_training import after_training_commands
    from jobs.plan.plan_builder import build_plan
    from jobs.plan.render import render

    job = config.job
    ends = capacity_end(spec, config)
    try:
        rendered = render(spec, None if ends is None else ends["margin_seconds"])
    except ValueError as exc:   # a refused OmegaConf resolver (jobs/plan/interpolations.py)
        raise ConfigError([Problem("gke-grpo:job.extraOverrides", NOT_SHOWN, str(exc))]) from None
    return build_plan(spec, rendered, deadline_seconds=job.active_deadline_seconds,
                      # when the capacity ends on schedule: each trainer start is told
                      capacity_end=ends,
                      # the fabric/storage gate before every trainer start
                      health=health_plan(config, DATA_LAYOUT.run_dir(spec.run_id)),
                      gpu_wait_seconds=job.gpu_wait_seconds,
                      max_restarts=job.max_restarts,
                      # verl forgets its older checkpoints on every restart (jobs/head/checkpoints.py)
                      prune_checkpoints_keep=spec.checkpoints_to_keep,
                      # the Hugging Face export and the test-split evaluation after training
                      after_training=after_training_commands(spec, job.evaluate,
                                                             job.export.hub_repo),
                      # the driver's own metrics endpoint and its cost so far (components/monitoring.py)
                      metrics=driver_metrics(config)).to_json()


def driver_metrics(config: StackConfig) -> dict[str, Any]:
    """The plan's metrics fields: the endpoint's port, and the run's capacity source's rate per GPU
    node-hour (data/prices.yaml, as the stack's gpuCapacity output prices it) for the cost so far."""
    from jobs.plan.prices import hourly_rate, load_price_table

    table = load_price_table()
    machine = table.machines.get(config.machine_type)
    source = config.capacity.sources[config.run_source_index]
    rate = hourly_rate(machine, source.provisioning_model).per_node_hour if machine is not None else None
    return {"metrics_port": config.monitoring.driver_metrics_port, "gpu_hourly_rate": rate,
            "currency": table.currency if rate is not None else None}


def submitter_pod_template(ray_version: str, node_selector: dict[str, str]) -> dict[str, Any]:
    """The RayJob submitter's pod (K8sJobMode): the `ray` CLI image of the cluster's Ray version
    (rayproject/ray:<version>, Ray's published images; the same Ray as the head so the job CLI
    and the dashboard agree), on the head's non-Spot CPU nodes, small and unprivileged. No
    `command`: KubeRay v1.7.0 fills in its submit script only when the container has none
    (rayjob_controller.go configureSubmitterContainer)."""
    resources = dict(SUBMITTER_RESOURCES)
    template: dict[str, Any] = {
        "metadata": {"labels": {"app.kubernetes.io/part-of": "gke-grpo", **SUBMITTER_ROLE_LABEL}},
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,   # it talks to the Ray dashboard only
            "nodeSelector": dict(node_selector),
            "securityContext": {"runAsNonRoot": True, "runAsUser": RAY_IMAGE_UID,
                                "runAsGroup": RAY_IMAGE_UID, "fsGroup": RAY_IMAGE_UID,
                                "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{
                "name": "ray-job-submitter",     # KubeRay's utils.SubmitterContainerName
                "image": f"rayproject/ray:{ray_version}",
                # A small image pinned by version tag: re-resolved at each (rare) submitter start.
                "imagePullPolicy": "Always",
                "resources": {"requests": resources, "limits": dict(resources)},
                # The CLI writes only temporary files: give it a writable /tmp and HOME there.
                "env": [{"name": "HOME", "value": "/tmp"}],
                "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
                "securityContext": {"allowPrivilegeEscalation": False,
                                    "readOnlyRootFilesystem": True,
                                    "capabilities": {"drop": ["ALL"]}},
            }],
            "volumes": [{"name": "tmp", "emptyDir": {"sizeLimit": "256Mi"}}],
        },
    }
    if not node_selector:   # Autopilot: no head pool; its default nodes are on-demand, not Spot
        del template["spec"]["nodeSelector"]
    return template


def rayjob_name(spec: GrpoSpec) -> str:
    return f"grpo-{spec.short_hash}-attempt-{spec.attempt}"


def rayjob_spec(spec: GrpoSpec, ray_cluster_name: str,
                submitter_node_selector: dict[str, str] | None = None) -> dict:
    """The RayJob spec (ray.io/v1), validated in tests against the KubeRay 1.7.0 CRD."""
    from jobs.contract.run_plan import RUN_COMMAND, submission_metadata
    from jobs.plan.render import render

    rendered = render(spec)
    return {
        # Submit to the stack's RayCluster; the operator never deletes a selected cluster.
        "clusterSelector": {"ray.io/cluster": ray_cluster_name},
        "submissionMode": "K8sJobMode",
        # The submitter runs `ray job status <id>` and submits only when that fails: a
        # restarted submitter attaches to the attempt instead of starting it twice.
        "jobId": spec.submission_id(),
        "entrypoint": RUN_COMMAND,
        "runtimeEnvYAML": yaml.safe_dump(rendered.runtime_env, sort_keys=True),
        # No activeDeadlineSeconds: with clusterSelector KubeRay v1.7.0 marks the RayJob Failed
        # at the deadline and skips all cleanup (rayjob_controller.go "skipping resource
        # deletion"), so the run would keep its GPUs. The driver enforces the budget itself.
        # The same metadata the jobs CLI writes: either submitter's attempt reads back alike.
        "metadata": submission_metadata(spec, spec.attempt),
        "submitterPodTemplate": submitter_pod_template(spec.ray_version, submitter_node_selector or {}),
        "submitterConfig": {"backoffLimit": SUBMITTER_BACKOFF_LIMIT},
    }


# The fields of the RayJob spec that identify its run: the run id and attempt (`jobId`, also in
# the RayJob's name). Every other field is ignored on update.
RAYJOB_IDENTITY_FIELDS = ("jobId",)


def rayjob_ignored_fields(spec: dict) -> list[str]:
    return sorted(f"spec.{key}" for key in spec if key not in RAYJOB_IDENTITY_FIELDS)


def update_policy_message(spec: GrpoSpec, job: JobConfig) -> str:
    return (f"RayJob {rayjob_name(spec)} (Ray job {spec.submission_id()}): a change of "
            "job.activeDeadlineSeconds, job.gpuWaitSeconds or job.maxRestarts (now "
            f"{job.active_deadline_seconds}s, {job.gpu_wait_seconds}s, {job.max_restarts}) "
            f"updates the run plan in ConfigMap {HEAD_CODE_CONFIGMAP} only: a live run keeps "
            "the plan its driver read, the next attempt reads the new one. Changes to the "
            "RayJob's runtime env, metadata or submitter pod are ignored until the next attempt "
            "(bump job.attempt); a change to what the run computes renames the RayJob and its "
            "jobId and replaces it (the old Ray job is stopped first).")


@dataclass(frozen=True)
class GrpoJobArgs:
    enabled: bool                        # gke-grpo:job.enabled: submit the run as a RayJob
    spec: GrpoSpec
    job: JobConfig                       # the budgets named in the update policy
    health_gate_warning: str | None   # said on every preview when the gate is weakened
    # From KubeRay:
    ray_cluster_name: str
    namespace: pulumi.Output[str]
    kubernetes_provider: k8s.Provider
    ray_cluster: pulumi.Resource
    # The submitter runs where the head runs (GkeCluster's head pool; {} on Autopilot).
    submitter_node_selector: dict[str, str] | None = None


def grpo_job_args(config: StackConfig, spec: GrpoSpec, kuberay: KubeRay,
                  submitter_node_selector: dict[str, str] | None = None) -> GrpoJobArgs:
    from components.health_gate import health_gate_warning

    return GrpoJobArgs(
        enabled=config.job.enabled, spec=spec, job=config.job,
        health_gate_warning=health_gate_warning(config),
        ray_cluster_name=kuberay.ray_cluster_name, namespace=kuberay.namespace,
        kubernetes_provider=kuberay.provider, ray_cluster=kuberay.ray_cluster,
        submitter_node_selector=submitter_node_selector)


class GrpoJob(pulumi.ComponentResource):
    rayjob: k8s.apiextensions.CustomResource | None
    update_policy: str          # what a config change does to a live run (exported, previewed)
    spec: GrpoSpec
    submission_id: str

    def __init__(self, name: str, args: GrpoJobArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gke-grpo:components:GrpoJob", name, None, opts)
        if args.health_gate_warning:
            pulumi.log.warn(args.health_gate_warning, resource=self)
        spec = args.spec
        self.spec = spec
        self.submission_id = spec.submission_id()
        self.rayjob = None
        self.update_policy = update_policy_message(spec, args.job) if args.enabled else ""
        if args.enabled:
            job_spec = rayjob_spec(spec, args.ray_cluster_name, args.submitter_node_selector)
            self.rayjob = k8s.apiextensions.CustomResource(
                f"{name}-rayjob",
                api_version="ray.io/v1",
                kind="RayJob",
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name=rayjob_name(spec), namespace=args.namespace,
                    labels={"app.kubernetes.io/part-of": "gke-grpo", "gke-grpo/run": spec.short_hash}),
                spec=job_spec,
                opts=pulumi.ResourceOptions(
                    parent=self, provider=args.kubernetes_provider,
                    depends_on=[args.ray_cluster],
                    # A new run or attempt (jobId, with the name) replaces the RayJob, the old
                    # one first so two attempts never hold the same GPUs; nothing else of it
                    # ever stops a live run (module docstring).
                    replace_on_changes=["spec.jobId"],
                    ignore_changes=rayjob_ignored_fields(job_spec),
                    delete_before_replace=True,
                ),
            )
            pulumi.log.info(self.update_policy, resource=self.rayjob)
        self.register_outputs({"submission_id": self.submission_id, "run_id": spec.run_id})
