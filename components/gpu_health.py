"""GPU health on every GPU worker before `ray start`: an init container of the worker pod that
checks the driver libraries are mounted, the expected number of GPUs is visible and none has an
uncorrected ECC error, and otherwise fails the pod with a one-line reason.

The check follows Cluster Toolkit's `gpu-healthcheck` init container
(GoogleCloudPlatform/cluster-toolkit examples/gke-a4/nccl-jobset-example.yaml @1047080375, read
2026-12-01): the GPU count from `nvidia-smi --query-gpu=...`, and
`ecc.errors.uncorrected.volatile.total` per GPU, where a value that is not a number ("[N/A]")
fails too. Unlike that example it is not privileged: it asks for the node's GPUs
(`nvidia.com/gpu`), which the kubelet then hands on to the Ray container (devices of init
containers are reusable by the pod's containers: kubelet devicemanager `devicesToReuse`, and a
pod's device request is the max of its init and app containers, `resource.PodLimits`), and it
drops every capability.

A failed init container fails the pod only when the pod does not restart in place: the worker
template sets `restartPolicy: Never`, so the pod ends Failed and KubeRay deletes and recreates it
(ray-project/kuberay v1.7.0 ray-operator/controllers/ray/raycluster_controller.go
`shouldDeletePod`: a Pod in phase Failed "will not restart and we can safely delete it"; with
`Always` the kubelet would only restart the init container on the same pod). The reason is the
container's termination message (`kubectl describe pod`, `kubectl get pod -o yaml`).
"""

from __future__ import annotations

# Where the worker pod mounts the node's driver (components/ray_pods.py NVIDIA_MOUNT; a test
# keeps them equal: importing ray_pods here would be circular).
NVIDIA_MOUNT = "/usr/local/nvidia"
INIT_CONTAINER_NAME = "gpu-health"
# The query fields, as `nvidia-smi --help-query-gpu` names them.
QUERY_FIELDS = "index,uuid,ecc.errors.uncorrected.volatile.total"
# The worker's Kubernetes node, for the fabric gate's messages (jobs/head/fabric_gate.py node_label).
NODE_NAME_ENV = "GKE_GRPO_NODE_NAME"
TERMINATION_LOG = "/dev/termination-log"


def check_script(expected_gpus: int, nvidia_root: str = NVIDIA_MOUNT,
                 termination_log: str = TERMINATION_LOG) -> str:
    """The bash script of the init container. One line on stdout when healthy; one line on
    stderr and in the termination message, and exit 1, when not. (The paths are parameters so
    the script can be run against another driver directory.)"""
    lib = f"{nvidia_root}/lib64"
    nvidia_smi = f"{nvidia_root}/bin/nvidia-smi"
    return "\n".join([
        "set -u",
        f"fail() {{ echo \"gpu-health: $*\" >&2; echo \"gpu-health: $*\" > {termination_log} 2>/dev/null; exit 1; }}",
        f"[ -x {nvidia_smi} ] || fail \"{nvidia_smi} is missing: the node's NVIDIA driver is not "
        f"mounted at {nvidia_root} (hostPath /home/kubernetes/bin/nvidia)\"",
        "for lib in libcuda.so libnvidia-ml.so; do",
        f"  ls {lib}/$lib.* >/dev/null 2>&1 || fail \"$lib is missing under {lib}: the driver "
        "libraries are not installed on this node\"",
        "done",
        f"out=$({nvidia_smi} --query-gpu={QUERY_FIELDS} --format=csv,noheader,nounits 2>&1) || "
        "fail \"nvidia-smi failed: $(printf '%s' \"$out\" | head -n 1)\"",
        "count=$(printf '%s\\n' \"$out\" | grep -c .)",
        f"[ \"$count\" -eq {expected_gpus} ] || fail \"expected {expected_gpus} GPUs, nvidia-smi "
        "sees $count\"",
        "bad=\"\"",
        "while IFS=', ' read -r index uuid ecc; do",
        "  case \"$ecc\" in",
        "    0) ;;",
        "    ''|*[!0-9]*) bad=\"$bad GPU $index ($uuid) uncorrected ECC $ecc;\" ;;",
        "    *) bad=\"$bad GPU $index ($uuid) $ecc uncorrected ECC errors;\" ;;",
        "  esac",
        # Process substitution, not a here-document: bash may write those to a temp file, and
        # the root filesystem is read-only.
        "done < <(printf '%s\\n' \"$out\")",
        "[ -z \"$bad\" ] || fail \"uncorrected ECC errors (volatile):$bad\"",
        "echo \"gpu-health: $count GPUs visible, no uncorrected ECC errors\"",
    ]) + "\n"


def init_container(image: str, expected_gpus: int) -> dict:
    """The worker's GPU health init container: the Ray image (already on the node for the Ray
    container), the driver mount read-only, the node's GPUs, no capability, read-only root."""
    resources = {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(expected_gpus)}
    return {
        "name": INIT_CONTAINER_NAME,
        "image": image,
        "command": ["/bin/bash", "-c", check_script(expected_gpus)],
        "env": [{"name": "LD_LIBRARY_PATH", "value": f"{NVIDIA_MOUNT}/lib64"}],
        "resources": {"requests": resources, "limits": resources},
        "volumeMounts": [{"name": "nvidia", "mountPath": NVIDIA_MOUNT, "readOnly": True}],
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "capabilities": {"drop": ["ALL"]}},
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }


def apply_to_worker_pod(worker_pod: dict, image: str, expected_gpus: int) -> dict:
    """Add the GPU health check to the GPU worker's pod spec (in place; returned for chaining):
    the init container first, restartPolicy Never (a failed check fails the pod, KubeRay
    replaces it), and the node name for the gate's messages."""
    worker_pod.setdefault("initContainers", []).insert(0, init_container(image, expected_gpus))
    worker_pod["restartPolicy"] = "Never"
    ray_container = worker_pod["containers"][0]
    ray_container.setdefault("env", []).append(
        {"name": NODE_NAME_ENV, "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}})
    return worker_pod

