"""The Ray pods of the stack's RayCluster: head and GPU worker templates, their sizes, scratch
space and multi-NIC annotations. Pure (no resource is created here): the KubeRay component puts
the result in its RayCluster; tests validate it against the KubeRay 1.7.0 CRD.
"""

from __future__ import annotations

import copy
import json
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from components.head_credentials import head_secret_env, hf_token_file_volume
from components.kuberay_limits import (
    AUTOSCALER_CPU,
    AUTOSCALER_EPHEMERAL_GIB,
    AUTOSCALER_MEMORY_GIB,
    worker_size_limit,
)
from components.node_labels import LABELS_FILE, node_labels_init_container
from components.ray_autoscaler import sidecar_env
from components.ray_cluster_updates import upgrade_strategy, worker_setup_script
from components.ray_ports import CLIENT_PORT, DASHBOARD_PORT, GCS_PORT, METRICS_PORT
from jobs.contract.layouts import POOL_GROUPS, POOL_RESOURCES

if TYPE_CHECKING:   # annotations only: the config models import components' siblings
    from components.config import HeadResources, MachineShape
    from components.config import WorkerResources as WorkerConfig
    from components.storage import PodStorage

# KubeRay's default name for the head's GCS port (ray-operator/controllers/ray/utils/
# constant.go GcsServerPortName @v1.7.0): the head service and clients look it up by name.
GCS_PORT_NAME = "gcs-server"

# Ray's scratch space: logs, object spilling, runtime-env installs (head and workers) and the
# workers' /tmp (vLLM and torch compile caches), on emptyDirs counted as ephemeral storage.
RAY_TMP, TMP = "/tmp/ray", "/tmp"

# The gIB plugin and the NVIDIA libraries as Google's installer leaves them on the node.
NVIDIA_HOST_DIR, GIB_HOST_DIR = "/home/kubernetes/bin/nvidia", "/home/kubernetes/bin/gib"
NVIDIA_MOUNT, GIB_MOUNT = "/usr/local/nvidia", "/usr/local/gib"
# Sourced before `ray start`: the plugin's own NCCL settings instead of a hard-coded copy.
SET_NCCL_ENV = f"{GIB_MOUNT}/scripts/set_nccl_env.sh"

GVNIC_NETWORK = "gvnic-1"
GPU_GROUP = "gpu-workers"

# The Ray autoscaler, a sidecar of the head (KubeRay v1.7.0 ray-operator/controllers/ray/common/
# pod.go BuildAutoscalerContainer). v2, stated: with `version` unset KubeRay leaves it to Ray,
# and Ray 2.54 turns v2 on under KubeRay (ray/scripts/scripts.py) while KubeRay, not seeing the
# field, would not set the restartPolicy v2 expects. With v2 KubeRay sets restartPolicy Never on
# the head and worker pods (pod.go): a failed or preempted worker pod is not restarted in place;
# KubeRay deletes it and the autoscaler creates a new one while the driver's gang request still
# asks for it (jobs/head/gpu_wait.py), else the group simply shrinks.
AUTOSCALER_VERSION = "v2"
# Idle timeout of a GPU worker: how long an idle worker (no Ray task, actor or placement group
# on it) is kept when no gang request asks for it. A run's workers are held by the driver's
# request from the GPU wait to its end, restarts included, so this only counts after a run (or a
# failed attempt) ended. 60 s: an idle A3 Ultra/A4 node costs 30-90 USD an hour
# (data/prices.yaml), and a worker coming back soon after lands on the still-present node (GKE
# removes an empty node only about 10 minutes later), so a short timeout costs little time.
IDLE_TIMEOUT_SECONDS = 60


def rdma_network(index: int) -> str:
    return f"rdma-{index}"


def interfaces_annotation(rdma_nics: int) -> str:
    """networking.gke.io/interfaces: eth0 on the pod network, eth1 on the second gVNIC, and
    eth2.. on every RDMA NIC. Valid JSON (the NeMo RL tutorial's list had a trailing comma and
    only four RDMA NICs)."""
    interfaces = [{"interfaceName": "eth0", "network": "default"},
                  {"interfaceName": "eth1", "network": GVNIC_NETWORK}]
    interfaces += [{"interfaceName": f"eth{i + 2}", "network": rdma_network(i)}
                   for i in range(rdma_nics)]
    return json.dumps(interfaces, separators=(",", ":"))



@dataclass(frozen=True)
class WorkerSizing:
    cpu: int
    memory_gib: int
    shm_gib: int


def worker_resources(shape: MachineShape, worker: WorkerConfig, *, autopilot: bool, gpu_type: str,
                     gpus_per_node: int, sidecar_cpu: float = 0,
                     sidecar_memory_gib: float = 0) -> WorkerSizing:
    """The GPU worker's CPU and memory: configured, or the machine's allocatable minus the
    system reserve and the gcsfuse sidecar (the tutorial's fixed 2800Gi does not fit H200)."""
    max_cpu, max_memory = worker_size_limit(shape.allocatable_cpu, shape.allocatable_memory_gib,
                                            sidecar_cpu, sidecar_memory_gib)
    cpu = worker.cpu or max_cpu
    memory = worker.memory_gib or max_memory
    if autopilot:
        cpu, memory = _fit_autopilot_pod(gpu_type, gpus_per_node, cpu, memory, sidecar_cpu=sidecar_cpu,
                                         sidecar_memory_gib=sidecar_memory_gib,
                                         explicit=(worker.cpu is not None, worker.memory_gib is not None))
    return WorkerSizing(cpu=cpu, memory_gib=memory, shm_gib=worker.shm_gib)


def _fit_autopilot_pod(gpu_type: str, gpus_per_node: int, cpu: int, memory: int, *, sidecar_cpu: float,
                       sidecar_memory_gib: float, explicit: tuple[bool, bool]) -> tuple[int, int]:
    """Default worker sizes shrunk to Autopilot's per-pod maximum for the GPU shape, sidecar
    included (configured sizes above it are refused by the config rules instead)."""
    from components.autopilot_limits import pod_limit_for

    limit = pod_limit_for(gpu_type, gpus_per_node)
    if limit is None:
        return cpu, memory
    if not explicit[0]:
        cpu = min(cpu, math.floor(limit.cpu - sidecar_cpu))
    if not explicit[1]:
        memory = min(memory, math.floor(limit.memory_gib - sidecar_memory_gib))
    return cpu, memory


# with the pod) instead of node ephemeral storage, which Autopilot caps at 10 GiB per pod there.
HEAD_RAY_TMP_DISK_GIB = 100
HEAD_RAY_TMP_STORAGE_CLASS = "standard-rwo"


def ray_scratch_volumes(workers: bool, on_disk: bool = False) -> tuple[list[dict], list[dict]]:
    """Ray's scratch space: /tmp/ray on head and workers, /tmp on workers; emptyDirs, or for
    ``on_disk`` a generic ephemeral volume at /tmp/ray."""
    volumes = [{"name": "ray-tmp", "emptyDir": {}}]
    if on_disk:
        volumes = [{"name": "ray-tmp", "ephemeral": {"volumeClaimTemplate": {
            "metadata": {"labels": {"app.kubernetes.io/part-of": "gke-grpo"}},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": HEAD_RAY_TMP_STORAGE_CLASS,
                     "resources": {"requests": {"storage": f"{HEAD_RAY_TMP_DISK_GIB}Gi"}}}}}}]
    mounts = [{"name": "ray-tmp", "mountPath": RAY_TMP}]
    if workers:
        volumes.append({"name": "tmp", "emptyDir": {}})
        mounts.insert(0, {"name": "tmp", "mountPath": TMP})
    return volumes, mounts


def with_ephemeral_storage(requests: dict, gib: int) -> dict:
    """Requests plus explicit ephemeral storage (Autopilot's default is 1 GiB per container:
    GKE "Resource requests in Autopilot", read 2026-12-01). Requested, not limited: on Standard
    a limit would evict a long run whose spill files grow past it."""
    return {**requests, "ephemeral-storage": f"{gib}Gi"}


@dataclass(frozen=True)
class WorkerPool:
    """A split layout's pool as a worker group: its name (jobs/contract/layouts.py), its nodes
    and what binds its pods to its capacity source (GpuCapacity.source_placement)."""
    name: str
    nodes: int
    node_selector: dict[str, str]
    tolerations: list[dict]


def pool_start_resources(name: str) -> str:
    """rayStartParams.resources of a pool's group: one unit of the pool's custom resource per node,
    as a single-quoted JSON object, the form KubeRay writes itself (v1.7.0 ray-operator/
    controllers/ray/common/pod.go addWellKnownAcceleratorResources: `fmt.Sprintf("'%s'", ...)`;
    getResourcesMap trims the quotes and parses the JSON; convertParamMap passes it to `ray start
    --resources=` through the shell). Ray's KubeRay translation reads it the same way
    (ray/autoscaler/_private/kuberay/autoscaling_config.py _get_custom_resources strips the outer
    quotes: Ray 2.49.2, 2.54.0, 2.55.1), so the autoscaler plans the group with the resource and
    scales it for requests that name it (jobs/head/gpu_gang.py)."""
    return "'" + json.dumps({POOL_RESOURCES[name]: 1}) + "'"


@dataclass(frozen=True)
class RayPodsArgs:
    """What the head and GPU worker pod templates are made of."""
    image: str
    ray_version: str
    framework: str                   # which head secret env the trainer reads
    autopilot: bool
    head: HeadResources              # gke-grpo:kuberay.head (cpu, memoryGib)
    head_ephemeral_storage_gib: int
    worker: WorkerSizing          # sized by worker_resources
    worker_ephemeral_storage_gib: int
    gpu_nodes: int                   # the run's nodes: the GPU group's maxReplicas
    gpus_per_node: int
    nccl_tuner_file: str
    rdma_nics: int
    operator: str                    # "addon" or "helm": decides the upgrade strategy
    helm_chart_version: str | None
    # RAY_AUTOSCALER_RECONCILE_ALLOCATE_STATUS_TIMEOUT_S for the autoscaler sidecar
    # (StackConfig.autoscaler_allocate_timeout_seconds).
    autoscaler_allocate_timeout_seconds: int
    # From GkeCluster, GpuCapacity and SharedStorage:
    head_node_selector: dict[str, str]
    gpu_node_selector: dict[str, str]
    gpu_tolerations: list[dict]
    storage: PodStorage
    # gke-grpo:job.layout split: one worker group per pool instead of the one GPU group.
    pools: tuple[WorkerPool, ...] = ()


def _secret_env(name: str, secret: str, key: str) -> dict:
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}


def ray_cluster_spec(pods: RayPodsArgs, *, token_auth: bool, has_wandb: bool,
                     head_extra_volumes: list[dict], head_extra_mounts: list[dict],
                     head_extra_env: list[dict]) -> dict:
    """The RayCluster spec (ray.io/v1), validated in tests against the KubeRay 1.7.0 CRD."""
    storage = pods.storage
    head = pods.head
    worker = pods.worker
    secret_env = [_secret_env("HF_TOKEN", "hf-secret", "hf_api_token")]
    if has_wandb:
        secret_env.append(_secret_env("WANDB_API_KEY", "wandb-secret", "api_key"))
    common_env = [{"name": "HF_HOME", "value": storage.hf_home}, *secret_env]
    # Head and workers alike (components/head_credentials.py says why).
    library_path = {"name": "LD_LIBRARY_PATH", "value": f"{NVIDIA_MOUNT}/lib64:{GIB_MOUNT}/lib64"}
    token_volume, token_mount = hf_token_file_volume()
    head_env = [{"name": "HF_HOME", "value": storage.hf_home}, library_path,
                *head_secret_env(pods.framework, has_wandb)]
    no_escalation = {"allowPrivilegeEscalation": False}
    # The container runtime's default seccomp filter: Autopilot applies it anyway.
    pod_security = {"seccompProfile": {"type": "RuntimeDefault"}}
    head_resources = {"cpu": str(head.cpu), "memory": f"{head.memory_gib}Gi"}
    head_scratch, head_scratch_mounts = ray_scratch_volumes(workers=False, on_disk=pods.autopilot)
    worker_scratch, worker_scratch_mounts = ray_scratch_volumes(workers=True)
    head_container = {
        "name": "ray-head",
        "image": pods.image,
        "ports": [{"containerPort": GCS_PORT, "name": GCS_PORT_NAME},
                  {"containerPort": DASHBOARD_PORT, "name": "dashboard"},
                  {"containerPort": CLIENT_PORT, "name": "client"},
                  {"containerPort": METRICS_PORT, "name": "metrics"}],
        "resources": {"requests": with_ephemeral_storage(head_resources, pods.head_ephemeral_storage_gib),
                      "limits": head_resources},
        "env": [*head_env, *head_extra_env],
        "volumeMounts": [*storage.volume_mounts, *head_scratch_mounts, token_mount,
                         *head_extra_mounts],
        # The head serves Ray's control plane and runs the job driver: no Linux capability needed.
        "securityContext": {**no_escalation, "capabilities": {"drop": ["ALL"]}},
    }
    head_pod = {
        "securityContext": pod_security,
        # The only account KubeRay binds to its autoscaler Role (common/rbac.go @v1.7.0).
        "serviceAccountName": storage.head_service_account_name,
        "nodeSelector": dict(pods.head_node_selector),
        "containers": [head_container],
        "volumes": [*storage.head_volumes, *head_scratch, token_volume, *head_extra_volumes],
    }
    gpu_env = [
        *common_env,
        library_path,
        {"name": "GLOO_SOCKET_IFNAME", "value": "eth0"},
    ]
    worker_limits = {"cpu": str(worker.cpu), "memory": f"{worker.memory_gib}Gi",
                     "nvidia.com/gpu": str(pods.gpus_per_node)}
    worker_container: dict = {
        "name": "ray-worker",
        "image": pods.image,
        # No `command`: KubeRay runs `<args> && ulimit ...; ray start ...` in one shell, so the
        # plugin's exports reach Ray (pulumi-and-kuberay.md, "Running a setup script").
        # On a fresh node the installer DaemonSet may still be copying the plugin: wait for it
        # (bounded, 10 minutes), then fail closed: never `ray start` without RDMA. The tuner
        # file is the script's, else this GPU's (never the B200 file on H200, tutorial defect 3).
        "args": [worker_setup_script(SET_NCCL_ENV, pods.nccl_tuner_file,
                                     multi_node=pods.gpu_nodes > 1)],
        "resources": {"requests": with_ephemeral_storage(
            worker_limits, pods.worker_ephemeral_storage_gib), "limits": worker_limits},
        "env": gpu_env,
        "volumeMounts": [
            *storage.volume_mounts,
            *worker_scratch_mounts,
            {"name": "dshm", "mountPath": "/dev/shm"},
            {"name": "nvidia", "mountPath": NVIDIA_MOUNT, "readOnly": True},
            {"name": "gib", "mountPath": GIB_MOUNT, "readOnly": True},
        ],
        # NET_RAW is not needed by NCCL/RDMA (verbs go through the RDMA devices, not raw
        # sockets); the rest stay until a run on RDMA nodes confirms drop ALL is safe.
        "securityContext": {**no_escalation, "capabilities": {"drop": ["NET_RAW"]}},
    }
    worker_pod: dict = {
        "securityContext": pod_security,
        # Its own account: the shared volume's grant and the node-label read, none of the
        # autoscaler's rights (components/storage.py says why two).
        "serviceAccountName": storage.worker_service_account_name,
        "nodeSelector": dict(pods.gpu_node_selector),
        "tolerations": list(pods.gpu_tolerations),
        "containers": [worker_container],
        "volumes": [
            *storage.volumes,
            *worker_scratch,
            # Kubernetes gives /dev/shm 64 MB otherwise; NCCL and vLLM need far more.
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": f"{worker.shm_gib}Gi"}},
            {"name": "nvidia", "hostPath": {"path": NVIDIA_HOST_DIR}},
            {"name": "gib", "hostPath": {"path": GIB_HOST_DIR}},
        ],
    }
    # GPU health (count, uncorrected ECC, driver libraries) before `ray start`.
    from components.gpu_health import apply_to_worker_pod
    apply_to_worker_pod(worker_pod, pods.image, pods.gpus_per_node)
    # Then the node's capacity-source labels, for `ray start --labels-file`.
    ray_tmp_mount = next(m for m in worker_scratch_mounts if m["mountPath"] == RAY_TMP)
    worker_pod["initContainers"].append(node_labels_init_container(pods.image, ray_tmp_mount))
    worker_annotations = {
        **storage.pod_annotations,
        "networking.gke.io/default-interface": "eth0",
        "networking.gke.io/interfaces": interfaces_annotation(pods.rdma_nics),
    }
    gpu_group = {
        "groupName": GPU_GROUP,
        # 0 .. the run's nodes (gke-grpo:gpu.nodes), one Ray worker per GPU node. No
        # `replicas`: the autoscaler owns it (it patches replicas and
        # scaleStrategy.workersToDelete; Ray 2.54 ray/autoscaler/v2/instance_manager/
        # cloud_providers/kuberay/cloud_provider.py). Left out of the inputs, Pulumi never
        # owns the field (the CRD defaults it to 0), so an update cannot reset it; see
        # components/kuberay.py for why it is not an ignore_changes path instead.
        "minReplicas": 0,
        "maxReplicas": pods.gpu_nodes,
        "numOfHosts": 1,
        # What the autoscaler plans with (Ray 2.54 ray/autoscaler/_private/kuberay/
        # autoscaling_config.py reads rayStartParams before container limits), and the
        # node's capacity-source labels (components/node_labels.py).
        "rayStartParams": {"num-cpus": str(worker.cpu), "num-gpus": str(pods.gpus_per_node),
                           "labels-file": LABELS_FILE},
        "template": {"metadata": {"annotations": worker_annotations}, "spec": worker_pod},
    }
    head_tmp_mount = next(m for m in head_scratch_mounts if m["mountPath"] == RAY_TMP)
    spec = {
        "rayVersion": pods.ray_version,
        "enableInTreeAutoscaling": True,
        "autoscalerOptions": autoscaler_options(head_tmp_mount, pods.autoscaler_allocate_timeout_seconds),
        "headGroupSpec": {
            "serviceType": "ClusterIP",
            "rayStartParams": {
                "dashboard-host": "0.0.0.0",
                # The head's CPUs stay schedulable: verl's TaskRunner actor needs one.
                "num-cpus": str(head.cpu),
                "num-gpus": "0",
            },
            "template": {"metadata": {"annotations": dict(storage.head_pod_annotations)},
                         "spec": head_pod},
        },
        "workerGroupSpecs": worker_groups(gpu_group, pods.pools),
    }
    if token_auth:
        spec["authOptions"] = {"mode": "token"}
    strategy = upgrade_strategy(pods.operator, pods.helm_chart_version)
    if strategy:
        spec["upgradeStrategy"] = strategy
    return spec


def worker_groups(gpu_group: dict, pools: tuple[WorkerPool, ...]) -> list[dict]:
    """The one GPU group, or a split layout's group per pool: the same pod, bound to the pool's
    source, sized to the pool's nodes, advertising the pool's custom resource."""
    if not pools:
        return [gpu_group]
    groups = []
    for pool in pools:
        group = copy.deepcopy(gpu_group)
        group["groupName"] = POOL_GROUPS[pool.name]
        group["maxReplicas"] = pool.nodes
        group["rayStartParams"]["resources"] = pool_start_resources(pool.name)
        group["template"]["spec"]["nodeSelector"] = dict(pool.node_selector)
        group["template"]["spec"]["tolerations"] = list(pool.tolerations)
        groups.append(group)
    return groups


def autoscaler_options(ray_tmp_mount: dict, allocate_timeout_seconds: int) -> dict:
    """spec.autoscalerOptions: v2, the idle timeout, the sidecar's size and environment; it writes
    its logs to the head's Ray scratch volume (`kubectl logs -c autoscaler` has them too).

    The environment sets the allocate timeout on every Ray version: its default is 300 s in Ray
    2.49.2 and 3600 s in 2.54.0, and a GPU worker whose node, image pull and gIB wait take longer
    would be deleted and recreated while it starts (data/ray-autoscaler-settings.yaml)."""
    resources = {"cpu": f"{int(AUTOSCALER_CPU * 1000)}m",
                 "memory": f"{int(AUTOSCALER_MEMORY_GIB * 1024)}Mi"}
    return {
        "version": AUTOSCALER_VERSION,
        "idleTimeoutSeconds": IDLE_TIMEOUT_SECONDS,
        # Default: no rate limit; the gang is asked for at once anyway.
        "upscalingMode": "Default",
        "resources": {"requests": {**resources, "ephemeral-storage": f"{AUTOSCALER_EPHEMERAL_GIB}Gi"},
                      "limits": resources},
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": [dict(ray_tmp_mount)],
        "env": sidecar_env(allocate_timeout_seconds),
    }
