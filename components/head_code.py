"""The jobs code the Ray head runs, as the head's ConfigMap and its mount: shared by KubeRay
(which mounts it on the head) and GrpoJob (whose run plan is one of its files), so neither
component imports the other.

Also the RayJob submitter's pod label, which KubeRay's NetworkPolicy admits to the dashboard
and GrpoJob puts on the submitter pod.
"""

from __future__ import annotations

from pathlib import Path

JOBS_DIR = Path(__file__).resolve().parent.parent / "jobs"
# Standard-library (plus ray/pyarrow/huggingface_hub, present in the framework images) modules
# the entrypoint runs on the Ray head before training starts.
HEAD_MODULES = ("__init__.py", "layout.py", "spec.py", "wait_for_gpus.py", "prepare.py",
                "plan.py", "run.py", "timeline.py", "checkpoints.py",
                "health.py")
HEAD_CODE_ROOT = "/opt/gke-grpo"
HEAD_CODE_CONFIGMAP = "grpo-jobs-code"
# The RayJob submitter pod's label (its template is built by the run-driver branch, issue 11;
# notes/INTERFACES.md "Labels"): the only pod besides the operator admitted to the dashboard.
SUBMITTER_LABELS = {"gke-grpo/role": "rayjob-submitter"}


def head_code_files(plan: str) -> dict[str, str]:
    """The head's jobs ConfigMap: the jobs modules the driver runs, and the run's plan."""
    from jobs.plan import PLAN_FILE

    return {**{name: (JOBS_DIR / name).read_text() for name in HEAD_MODULES}, PLAN_FILE: plan}


def head_code_mount() -> tuple[list[dict], list[dict], list[dict]]:
    """Volumes, volume mounts and env that put the jobs package on the head's PYTHONPATH and the
    run plan at jobs.plan.PLAN_PATH. Whole-directory mounts (no subPath): the kubelet refreshes
    them when the ConfigMap changes, so a new plan reaches the head without a pod restart."""
    from jobs.plan import PLAN_DIR, PLAN_FILE

    volumes = [
        {"name": "jobs-code", "configMap": {
            "name": HEAD_CODE_CONFIGMAP, "items": [{"key": name, "path": name} for name in HEAD_MODULES]}},
        {"name": "run-plan", "configMap": {
            "name": HEAD_CODE_CONFIGMAP, "items": [{"key": PLAN_FILE, "path": PLAN_FILE}]}},
    ]
    mounts = [{"name": "jobs-code", "mountPath": f"{HEAD_CODE_ROOT}/jobs", "readOnly": True},
              {"name": "run-plan", "mountPath": PLAN_DIR, "readOnly": True}]
    env = [{"name": "PYTHONPATH", "value": HEAD_CODE_ROOT}]
    return volumes, mounts, env
