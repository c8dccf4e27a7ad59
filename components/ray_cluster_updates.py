"""How RayCluster changes reach the pods, and how a GPU worker refuses to start without RDMA.

Pure functions used by components/kuberay.py and components/ray_pods.py (kept apart so the
component stays small).

Updates. KubeRay recreates a RayCluster's pods after a spec change only with
``spec.upgradeStrategy.type: Recreate`` (ray-operator/apis/ray/v1/raycluster_types.go: the field
exists from v1.6.0, enum Recreate|None; read at v1.6.0 and v1.7.0 on 2026-12-01). Without it a
changed pod template never reaches running pods. With the Helm operator (this program accepts
only kuberay-operator 1.6.x/1.7.x charts) the RayCluster gets Recreate. The GKE Ray addon does not
publish its KubeRay version, so the field may be unknown to it: there the program replaces the
RayCluster itself (delete, then create) when a pod template changes, and says so in the preview.

RDMA. KubeRay v1.7.0 runs a worker's container as ``bash -c '<args> && ulimit -n ...; ray
start ...'`` (ray-operator/controllers/ray/common/pod.go, BuildPod: ``args = fmt.Sprintf("%s &&
%s", cmd, generatedCmd)`` with generatedCmd = ``ulimit ...; ray start ...``): a failing
``source`` in the args skips only the ``ulimit``, and ``ray start`` still runs, without the gIB
plugin. So the args end the shell (``exit 1``) instead: the container fails and restarts, and
a worker without RDMA never joins the cluster.
"""

from __future__ import annotations

import shlex

RECREATE_MIN_KUBERAY = (1, 6, 0)
# Changing these replaces the RayCluster under the addon (its pods are rebuilt from them). The
# autoscaler's options are rendered into the head pod by KubeRay (its sidecar's env, image and
# resources: ray-operator/controllers/ray/common/pod.go mergeAutoscalerOverrides @v1.7.0), so a
# change there only reaches the sidecar through a new head pod too.
POD_TEMPLATE_PATHS = ("spec.headGroupSpec.template", "spec.workerGroupSpecs", "spec.autoscalerOptions")

# How long a fresh GPU worker waits for the gIB plugin before it gives up (worker_setup_script):
# part of a GPU worker's bring-up, which the Ray autoscaler's allocate timeout must cover
# (components/ray_autoscaler.py).
GIB_WAIT_TRIES, GIB_WAIT_SLEEP_SECONDS = 60, 10
GIB_WAIT_SECONDS = GIB_WAIT_TRIES * GIB_WAIT_SLEEP_SECONDS


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def upgrade_strategy(operator: str, helm_chart_version: str | None) -> dict | None:
    """``spec.upgradeStrategy`` of the RayCluster: Recreate with KubeRay >= 1.6 from Helm."""
    if operator == "helm" and helm_chart_version and _version(helm_chart_version) >= RECREATE_MIN_KUBERAY:
        return {"type": "Recreate"}
    return None


def replacement_options(operator: str, helm_chart_version: str | None) -> dict:
    """Extra resource options of the RayCluster: without Recreate, a pod template change
    replaces it (the same name: delete first)."""
    if upgrade_strategy(operator, helm_chart_version) is not None:
        return {}
    return {"replace_on_changes": list(POD_TEMPLATE_PATHS), "delete_before_replace": True}


def replacement_message(operator: str, helm_chart_version: str | None, name: str) -> str | None:
    if upgrade_strategy(operator, helm_chart_version) is not None:
        return None
    return (f"A pod template change REPLACES RayCluster {name} and stops a live run. The GKE Ray "
            "addon's KubeRay version is not published, so "
            "spec.upgradeStrategy (KubeRay >= 1.6) is not used: a change to the head or worker "
            "pod templates REPLACES the RayCluster (deleted, then created). That stops a live "
            "run (its driver runs on the head); its next attempt resumes from the checkpoints. "
            "With kuberay.operator=helm the pods are recreated in place instead.")


def worker_setup_script(set_nccl_env: str, tuner_file: str, *, multi_node: bool,
                        tries: int = GIB_WAIT_TRIES, sleep_seconds: int = GIB_WAIT_SLEEP_SECONDS) -> str:
    """The GPU worker's container args (run by KubeRay before `ray start`, see above).

    1. wait (bounded: tries x sleep_seconds) for the gIB plugin's set_nccl_env.sh, which
       Google's NCCL RDMA installer DaemonSet copies onto a fresh node; exit 1 if it never comes;
    2. source it (exit 1 if that fails): the plugin's own NCCL settings;
    3. multi-node runs force NCCL_NET=gIB, so NCCL can never fall back to TCP sockets silently;
    4. the tuner file: the one the script set, else this GPU's (never the B200 file on H200);
       it must exist, or exit 1.
    """
    script = shlex.quote(set_nccl_env)
    steps = [
        f"for attempt in $(seq {int(tries)}); do [ -f {script} ] && break; "
        f"echo 'waiting for the gIB NCCL plugin ({set_nccl_env})'; sleep {int(sleep_seconds)}; done",
        f"[ -f {script} ] || {{ echo 'FATAL: the gIB NCCL plugin ({set_nccl_env}) did not appear "
        f"within {int(tries) * int(sleep_seconds)}s: not starting Ray without RDMA' >&2; exit 1; }}",
        "unset NCCL_TUNER_CONFIG_PATH",
        f"source {script} || {{ echo 'FATAL: {set_nccl_env} failed: not starting Ray without "
        "RDMA' >&2; exit 1; }",
    ]
    if multi_node:
        steps.append("export NCCL_NET=gIB")
    steps += [
        f"export NCCL_TUNER_CONFIG_PATH=\"${{NCCL_TUNER_CONFIG_PATH:-{tuner_file}}}\"",
        "[ -f \"$NCCL_TUNER_CONFIG_PATH\" ] || { echo \"FATAL: NCCL tuner file "
        "$NCCL_TUNER_CONFIG_PATH does not exist\" >&2; exit 1; }",
    ]
    return "; ".join(steps)
