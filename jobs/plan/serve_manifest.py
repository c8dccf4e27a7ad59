"""The Kubernetes manifest of a vLLM OpenAI-compatible server on a run's export: a Deployment of
one pod on one GPU node of the stack's capacity, and a ClusterIP Service that `gke-grpo serve`
reaches through a port-forward, like the dashboard. Pure: built from the stack's RayCluster spec
(the live object `kubectl get raycluster -o json` returns, or the program's own), so the pod
lands where the run's workers land and reads the same /data.

    serve_manifests(ray_cluster_spec, ServeRequest(...)) -> [Deployment, Service]

Taken from the GPU worker template: the node selector (ComputeClass or GPU pool, accelerator
type and count, Spot), tolerations, service account (Workload Identity for Cloud Storage FUSE),
pod security context, the /data volume and the storage annotations (gcsfuse sidecar), /dev/shm,
the NVIDIA library mount and LD_LIBRARY_PATH. Left out: the RDMA NICs
(networking.gke.io/interfaces: a single server needs none), Ray's start script, its init
containers. From the head template: the jobs code archive (ConfigMap), so the pod checks the
export with the export's own rule before vLLM starts (jobs/head/serve_check.py): an incomplete
or missing export ends the pod with one clear line in its log.

The server: ``vllm serve <export> --served-model-name <run-id> --dtype bfloat16
--generation-config vllm --tensor-parallel-size T --max-model-len L --port 8000`` (vLLM 0.17.0 /
0.11.2 engine and frontend arguments: vllm/engine/arg_utils.py, vllm/entrypoints/openai/
cli_args.py; ``/health`` answers 200 once the engine is up, the probes use it). NeMo RL's image
has vLLM only in its worker venv (jobs/plan/after_training.py NEMO_RL_VLLM_PYTHON).
"""

from __future__ import annotations

import copy
import hashlib
import shlex
from dataclasses import dataclass
from typing import Any

from jobs.contract.exports import EXPORTS_ROOT
from jobs.contract.layout import MOUNT_PATH

SERVE_PORT = 8000
ROLE_LABEL = "gke-grpo/role"
ROLE = "vllm-serve"
RUN_LABEL = "gke-grpo/serve-run"
RUN_ANNOTATION = "gke-grpo/run-id"
# The model load (tens of GB from /data) bounds the start: 60 x 30 s = 30 minutes.
STARTUP_PERIOD_S, STARTUP_FAILURES = 30, 60
_KEPT_ENV = ("LD_LIBRARY_PATH", "HF_HOME")


@dataclass(frozen=True)
class ServeRequest:
    run_id: str
    step: int | None              # None: the newest complete export
    namespace: str
    image: str
    framework: str
    gpus: int                     # GPUs the pod asks for (the node's, on Autopilot)
    tensor_parallel_size: int
    max_model_len: int


def serve_name(run_id: str) -> str:
    """``grpo-serve-<8 hex of the run id>``: a DNS label whatever the run id's length."""
    return "grpo-serve-" + hashlib.sha256(run_id.encode()).hexdigest()[:8]


def vllm_command(request: ServeRequest) -> list[str]:
    from jobs.plan.after_training import NEMO_RL_VLLM_PYTHON

    vllm = (NEMO_RL_VLLM_PYTHON.rsplit("/", 1)[0] + "/vllm" if request.framework == "nemo-rl"
            else "vllm")
    return [vllm, "serve", "$MODEL_DIR", "--served-model-name", request.run_id,
            "--dtype", "bfloat16", "--generation-config", "vllm",
            "--tensor-parallel-size", str(request.tensor_parallel_size),
            "--max-model-len", str(request.max_model_len),
            "--host", "0.0.0.0", "--port", str(SERVE_PORT)]


def container_script(request: ServeRequest) -> str:
    check = ["python3", "-m", "jobs.head.serve_check", "--run-id", request.run_id,
             "--exports-root", EXPORTS_ROOT]
    if request.step is not None:
        check += ["--step", str(request.step)]
    serve = " ".join(a if a == "$MODEL_DIR" else shlex.quote(a) for a in vllm_command(request))
    serve = serve.replace("$MODEL_DIR", '"$MODEL_DIR"')
    return (f"set -eu\nMODEL_DIR=$({shlex.join(check)})\n"
            f'echo "[serve] vLLM on $MODEL_DIR"\nexec {serve}\n')


def _worker_template(ray_cluster_spec: dict[str, Any]) -> dict[str, Any]:
    groups = ray_cluster_spec.get("workerGroupSpecs") or []
    if not groups:
        raise ValueError("the RayCluster has no worker group: no GPU template to serve on")
    return copy.deepcopy(groups[0]["template"])


def serve_manifests(ray_cluster_spec: dict[str, Any], request: ServeRequest) -> list[dict[str, Any]]:
    worker = _worker_template(ray_cluster_spec)
    head = ray_cluster_spec["headGroupSpec"]["template"]
    w_spec, w_container = worker["spec"], worker["spec"]["containers"][0]
    name = serve_name(request.run_id)
    labels = {"app.kubernetes.io/part-of": "gke-grpo", ROLE_LABEL: ROLE, RUN_LABEL: name[len("grpo-serve-"):]}
    data_mounts = [m for m in w_container.get("volumeMounts", [])
                   if m["mountPath"] == MOUNT_PATH or m["mountPath"].startswith(("/dev/shm", "/usr/local/nvidia"))]
    code_mounts = [m for m in head["spec"]["containers"][0].get("volumeMounts", [])
                   if m["name"] == "jobs-code"]
    wanted = {m["name"] for m in data_mounts}
    volumes = [v for v in w_spec.get("volumes", []) if v["name"] in wanted]
    volumes += [v for v in head["spec"].get("volumes", []) if v["name"] == "jobs-code"]
    env = [e for e in w_container.get("env", []) if e.get("name") in _KEPT_ENV]
    env += [e for e in head["spec"]["containers"][0].get("env", []) if e.get("name") == "PYTHONPATH"]
    limits = w_container["resources"]["limits"]
    share = request.gpus / max(int(limits.get("nvidia.com/gpu", request.gpus)), 1)
    cpu = max(int(int(limits["cpu"]) * share), 1)
    memory = max(int(int(str(limits["memory"]).removesuffix("Gi")) * share), 8)
    resources = {"cpu": str(cpu), "memory": f"{memory}Gi", "nvidia.com/gpu": str(request.gpus)}
    annotations = {k: v for k, v in (worker.get("metadata", {}).get("annotations") or {}).items()
                   if not k.startswith("networking.gke.io/")}
    annotations[RUN_ANNOTATION] = request.run_id
    probe = {"httpGet": {"path": "/health", "port": SERVE_PORT}}
    container = {
        "name": "vllm",
        "image": request.image,
        "command": ["bash", "-c", container_script(request)],
        "ports": [{"name": "http", "containerPort": SERVE_PORT}],
        "env": env,
        "resources": {"requests": dict(resources), "limits": dict(resources)},
        "volumeMounts": [*data_mounts, *code_mounts],
        "startupProbe": {**probe, "periodSeconds": STARTUP_PERIOD_S, "failureThreshold": STARTUP_FAILURES},
        "readinessProbe": {**probe, "periodSeconds": 10},
        "livenessProbe": {**probe, "periodSeconds": 30, "failureThreshold": 4},
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
    }
    pod_spec: dict[str, Any] = {
        "serviceAccountName": w_spec.get("serviceAccountName"),
        "nodeSelector": w_spec.get("nodeSelector", {}),
        "tolerations": w_spec.get("tolerations", []),
        "securityContext": w_spec.get("securityContext", {}),
        "containers": [container],
        "volumes": volumes,
    }
    pod_spec = {k: v for k, v in pod_spec.items() if v not in (None, {}, [])}
    metadata = {"name": name, "namespace": request.namespace, "labels": labels,
                "annotations": {RUN_ANNOTATION: request.run_id}}
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": metadata,
        "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                 # One GPU node: the old pod goes before a new one asks for another node.
                 "strategy": {"type": "Recreate"},
                 "template": {"metadata": {"labels": labels, "annotations": annotations},
                              "spec": pod_spec}},
    }
    service = {
        "apiVersion": "v1", "kind": "Service", "metadata": copy.deepcopy(metadata),
        "spec": {"type": "ClusterIP", "selector": labels,
                 "ports": [{"name": "http", "port": SERVE_PORT, "targetPort": SERVE_PORT}]},
    }
    return [deployment, service]


def serve_tensor_parallel_size(attention_heads: int | None, kv_heads: int | None, gpus: int) -> int:
    """The largest tensor-parallel size up to ``gpus`` that splits the heads as vLLM needs
    (heads % TP == 0; KV heads % TP == 0, or TP a multiple of them); 1 when unknown."""
    if not attention_heads or not kv_heads:
        return 1
    best = 1
    for tp in range(1, gpus + 1):
        kv_ok = kv_heads % tp == 0 if kv_heads >= tp else tp % kv_heads == 0
        if attention_heads % tp == 0 and kv_ok and gpus % tp == 0:
            best = tp
    return best
