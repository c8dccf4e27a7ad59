"""The outputs the jobs CLI targets a stack by, computed from the stack's validated config alone:
no Pulumi program runs and no cloud SDK is imported, so offline targeting (`gke-grpo status -s
dev` without Pulumi) costs about what reading and validating the stack file costs, not a whole
preview. `tools/stack_target.py` prints them; tests/components/test_stack_target.py holds them
equal to what `__main__.py` exports for the same config (the offline preview's outputs)."""

from __future__ import annotations

import json
from typing import Any

from components.capacity_output import capacity_output
from components.config import StackConfig
from components.cost import estimate_cost
from components.run_spec import preflight_errors, preflight_findings, spec_from_config

# The outputs of __main__.py the jobs CLI reads (jobs/cli/stack_outputs.py target_from_outputs).
TARGET_OUTPUTS = ("rayNamespace", "rayClusterName", "rayDashboardService", "runId", "submissionId",
                  "runCheckpointDir", "runSpec", "costEstimate", "gpuCapacity", "getCredentials")


def target_outputs(config: StackConfig) -> dict[str, Any]:
    """TARGET_OUTPUTS as __main__.py exports them. ConfigError when the job preflight refuses the
    config, as `pulumi up` (and the preview) would."""
    spec = spec_from_config(config)
    if config.job.enabled:
        error = preflight_errors(preflight_findings(config, spec))
        if error is not None:
            raise error
    waterfall = config.capacity.waterfall and not config.autopilot
    name = config.cluster.name
    return {
        "rayNamespace": config.kuberay.namespace,
        "rayClusterName": config.kuberay.ray_cluster_name,
        "rayDashboardService": f"{config.kuberay.ray_cluster_name}-head-svc",   # KubeRay's naming
        "runId": spec.run_id,
        "submissionId": spec.submission_id(),
        "runCheckpointDir": spec.checkpoint_dir,
        "runSpec": json.loads(spec.to_json()),
        "costEstimate": estimate_cost(config),
        "gpuCapacity": capacity_output(config, config.compute_class_name if waterfall else None,
                                       standard=not config.autopilot),
        "getCredentials": (f"gcloud container clusters get-credentials {name} --location {config.region} "
                           f"--project {config.project}"
                           + (" --dns-endpoint" if config.cluster.control_plane_access == "dns" else "")),
    }
