"""A local stand-in for the Kubernetes API and KubeRay v1.7.0's worker reconcile, for Ray's own v2
autoscaler with its KubeRay cloud provider to scale a RayCluster exactly as the program renders it.

    <python of the Ray under test> -m tools.kuberay_standin run CONFIG.json

runs one cluster (``run_cluster``): the API stand-in, the head pod and its Ray node, KubeRay's
autoscaler sidecar command, the scenario's gang request, and a record of everything (``EVENTS``,
one JSON line each) that the tests read. It runs only inside a network, PID and mount namespace of
its own (``cluster_command`` makes one), with loopback alone: everything it starts listens on
127.0.0.1, and its tmpfs mounts (/tmp/ray, /run) are the namespace's. Standard library only, plus
the Ray of the version under test: it runs on that version's Python (``ray_python``).

What is Ray's, unmodified: the autoscaler process is KubeRay's sidecar command, `ray kuberay-
autoscaler --cluster-name NAME --cluster-namespace NS` (ray/autoscaler/_private/kuberay/
run_autoscaler.py: the v2 monitor with ray/autoscaler/v2/instance_manager/cloud_providers/kuberay/
cloud_provider.py, which reads and patches the RayCluster and lists its pods over HTTPS). The Ray
nodes are `ray start` as KubeRay generates it. The gang request is the program's own holder
(jobs/head/gpu_gang.py), started alone or by the program's run driver (``driver_plan``: `python3
-m jobs.run --plan`, as the RayJob starts it), which a scenario may SIGKILL, or whose holder it may
SIGKILL, once the trainer has started (``kill``).

What stands in for Kubernetes and KubeRay, each behaviour from KubeRay v1.7.0
(github.com/ray-project/kuberay, tag v1.7.0; paths below ray-operator/):
- How the autoscaler reaches the API: the sidecar's env (controllers/ray/common/pod.go
  BuildAutoscalerContainer: RAY_CLUSTER_NAME, RAY_CLUSTER_NAMESPACE, RAY_HEAD_POD_NAME,
  KUBERAY_CRD_VER=v1; mergeAutoscalerOverrides appends autoscalerOptions.env), plus what Kubernetes
  gives every pod: KUBERNETES_SERVICE_HOST / _PORT_HTTPS and the service-account token and CA at
  /var/run/secrets/kubernetes.io/serviceaccount (hard-coded in Ray's KubeRay provider,
  node_provider.py load_k8s_secrets): here 127.0.0.1, this server's port, and a tmpfs on /run.
- The API calls the provider makes (node_provider.py KubernetesHttpApiClient, cloud_provider.py):
  GET and JSON-patch (application/json-patch+json) of rayclusters/NAME under
  /apis/ray.io/v1/namespaces/NS, GET pods/NAME and GET pods?labelSelector=... under
  /api/v1/namespaces/NS, with a bearer token. A patch op "replace" on a member the object lacks
  adds it, as the API server's JSON patch does (the provider replaces
  workerGroupSpecs[i].scaleStrategy, which the rendered RayCluster does not carry).
- The RayCluster as the API server stores it: the CRD's defaults applied to each worker group
  (config/crd/bases/ray.io_rayclusters.yaml: replicas 0, minReplicas 0, maxReplicas 2147483647,
  numOfHosts 1, priority 0), and rayStartParams {} where absent (controllers/ray/
  raycluster_controller.go setDefaults).
- The worker reconcile (raycluster_controller.go reconcilePods, single-host groups): the desired
  count is replicas clamped to [minReplicas, maxReplicas] times numOfHosts
  (controllers/ray/utils/util.go GetWorkerGroupDesiredReplicas); worker pods in phase Failed or
  Succeeded are deleted first and nothing is created in that round (shouldDeletePod); every pod
  named in scaleStrategy.workersToDelete is deleted, whatever replicas says, and the field is NOT
  cleared by KubeRay (it empties only its own copy: the autoscaler clears it, cloud_provider.py
  worker_groups_without_pending_deletes); then the missing pods are created; with in-tree
  autoscaling on, surplus pods are never deleted at random (ENABLE_RANDOM_POD_DELETE unset).
  KubeRay reconciles on every change of the RayCluster or its pods (a watch): here after every
  patch and every pod change, and every RECONCILE_PERIOD besides.
- The pods KubeRay creates (controllers/ray/common/pod.go BuildPod, DefaultWorkerPodTemplate,
  DefaultHeadPodTemplate; utils/util.go PodName): name `<cluster>-<group>-worker-` plus 5
  characters (`<cluster>-head-` plus 5 for the head); labels ray.io/node-type, ray.io/group,
  ray.io/cluster, ray.io/is-ray-node, ray.io/identifier, app.kubernetes.io/name and /created-by
  (labelPod); restartPolicy Never under autoscaler v2; the Ray container's env RAY_CLOUD_INSTANCE_ID
  (the pod name: what the v2 autoscaler matches a Ray node to its pod by), RAY_NODE_TYPE_NAME (the
  group), RAY_CLUSTER_NAME, RAY_CLUSTER_NAMESPACE, FQ_RAY_IP, RAY_IP, RAY_PORT, RAY_ADDRESS,
  KUBERAY_GEN_RAY_START_CMD, RAY_USAGE_STATS_KUBERAY_IN_USE=1 (setContainerEnvVars); the head's
  RAY_enable_autoscaler_v2=true (setAutoscalerV2EnvVars) and no-monitor; the `ray start` command
  from the group's rayStartParams, with address, metrics-export-port 8080, block and
  dashboard-agent-listen-port 52365 added where missing (setMissingRayStartParams), num-cpus from
  the container's CPU limit, memory from its memory limit and num-gpus from its GPU limit where
  rayStartParams lack them (generateRayStartCommand, addWellKnownAcceleratorResources), joined
  after the container's args as `<args> && ulimit -n ...; ray start ...` (BuildPod).

What stands in for GKE (not KubeRay): a new worker pod is Pending (unschedulable, no container
status) for ``pending_seconds`` (the node's creation and the image pull), then Running (its Ray
container started), and its Ray node joins ``start_seconds`` later (the container's args before
`ray start`: the gIB wait); a deleted pod's processes get SIGTERM and, after the pod's grace
period (30 s, the Kubernetes default), SIGKILL; a pod never scheduled goes at once. The Ray node's
labels file is written with the labels of the node it "runs" on (the node-labels init container's
job, components/node_labels.py).

Loopback adaptations, none of them a time or a resource the autoscaler counts: every node gets
--node-ip-address=127.0.0.1 and the head's address 127.0.0.1:6379 instead of the head service's
name; the head runs no dashboard (the autoscaler and the gang request use none; four heads start
on two cores in half the time); each node gets its own metrics and
dashboard-agent ports (all nodes share one host) and its own labels file path; the object store is
100 MB; the head pod's template env and volumes (paths of the real image) are left out. Workers
run `ray start` one at a time, each after the previous one joined (or REGISTER_SECONDS): two at once
on one host, in one session directory, failed one of them every time (its registration with the
GCS timed out, 2026-12-06, both Ray versions), which separate pods do not share; the wait is a
few real seconds.

Time: every duration of the stand-in is divided by the scenario's ``factor``, as the tests divide
the program's and Ray's settings (tests/jobs/head/test_autoscaler_kuberay_ray.py says which).
"""

from __future__ import annotations

import contextlib
import copy
import http.server
import json
import os
import random
import re
import secrets
import signal
import socket
import ssl
import string
import subprocess
import sys
import threading
import time
import urllib.parse
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SA_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
GCS_PORT = 6379
GCS = f"127.0.0.1:{GCS_PORT}"
HEAD_GROUP = "headgroup"                       # utils/constant.go RayNodeHeadGroupLabelValue
EVENTS = "events.jsonl"
RECONCILE_PERIOD = 0.2
# The CRD's defaults for a worker group (config/crd/bases/ray.io_rayclusters.yaml @v1.7.0).
WORKER_GROUP_DEFAULTS = {"replicas": 0, "minReplicas": 0, "maxReplicas": 2147483647, "numOfHosts": 1,
                         "priority": 0}
TERMINATION_GRACE_SECONDS = 30                 # Kubernetes' default terminationGracePeriodSeconds
DEFAULT_METRICS_PORT = 8080                    # utils/constant.go DefaultMetricsPort
DEFAULT_AGENT_PORT = 52365                     # utils/constant.go DefaultDashboardAgentListenPort
OBJECT_STORE_BYTES = 100_000_000
INSIDE_ENV = "GKE_GRPO_KUBERAY_STANDIN"        # set in the cluster's own namespace (main)
# Ray's own bound on a node's registration (ray/_private/node.py raylet_start_wait_time_s)
REGISTER_SECONDS = 30


# ---- quantities and the generated `ray start` ------------------------------------------------

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"m": 10**-3, "": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}


def quantity(text: str | int | float) -> float:
    """A Kubernetes quantity ("217", "500m", "3817Gi") as a number."""
    match = re.fullmatch(r"([0-9.]+)([A-Za-z]*)", str(text).strip())
    if not match:
        raise ValueError(f"not a quantity: {text!r}")
    number, suffix = float(match.group(1)), match.group(2)
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    if suffix in _DECIMAL:
        return number * _DECIMAL[suffix]
    raise ValueError(f"unknown quantity suffix: {text!r}")


def ray_start_params(group: dict, *, head: bool, head_address: str) -> dict[str, str]:
    """The group's rayStartParams as KubeRay completes them (pod.go setMissingRayStartParams,
    generateRayStartCommand, addWellKnownAcceleratorResources)."""
    params = {k: str(v) for k, v in (group.get("rayStartParams") or {}).items()}
    container = group["template"]["spec"]["containers"][0]
    limits = (container.get("resources") or {}).get("limits") or {}
    requests = (container.get("resources") or {}).get("requests") or {}
    if head:
        params.setdefault("dashboard-host", "0.0.0.0")
    else:
        params.setdefault("address", head_address)
    params.setdefault("metrics-export-port", str(DEFAULT_METRICS_PORT))
    params["block"] = "true"
    params.setdefault("dashboard-agent-listen-port", str(DEFAULT_AGENT_PORT))
    if "num-cpus" not in params:
        cpu = limits.get("cpu") or requests.get("cpu")
        if cpu is not None and quantity(cpu):
            params["num-cpus"] = str(int(quantity(cpu)))
    if "memory" not in params and limits.get("memory"):
        params["memory"] = str(int(quantity(limits["memory"])))
    if "num-gpus" not in params:
        for key in sorted(limits):
            if key.endswith("gpu") and quantity(limits[key]):
                params["num-gpus"] = str(int(quantity(limits[key])))
    return params


def ray_start_command(params: dict[str, str], *, head: bool) -> str:
    """pod.go convertParamMap: sorted, `--flag` for "true", dropped for "false" (but for the
    options that take an explicit boolean), `--flag=value` otherwise."""
    explicit_bool = ("log-color", "include-dashboard", "include-log-monitor")
    flags = []
    for key in sorted(params):
        value = params[key]
        if value.lower() in ("true", "false") and key not in explicit_bool:
            if value.lower() == "true":
                flags.append(f"--{key}")
        else:
            flags.append(f"--{key}={value}")
    return " ".join(["ray start", *(["--head"] if head else []), *flags])


def _suffix() -> str:
    return "".join(random.choices(string.ascii_lowercase + string.digits, k=5))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ---- JSON patch (RFC 6902, the ops the provider sends) ---------------------------------------

def _pointer(path: str) -> list[str]:
    if not path.startswith("/"):
        raise ValueError(f"bad JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def json_patch(doc: Any, ops: list[dict]) -> Any:
    doc = copy.deepcopy(doc)
    for op in ops:
        *parents, last = _pointer(op["path"])
        target = doc
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        kind = op["op"]
        if isinstance(target, list):
            index = len(target) if last == "-" else int(last)
            if kind == "add":
                target.insert(index, op["value"])
            elif kind == "replace":
                target[index] = op["value"]
            elif kind == "remove":
                del target[index]
            else:
                raise ValueError(f"unsupported op {kind}")
        elif kind in ("add", "replace"):
            target[last] = op["value"]
        elif kind == "remove":
            del target[last]
        else:
            raise ValueError(f"unsupported op {kind}")
    return doc


def stored_raycluster(rendered: dict) -> dict:
    """The RayCluster as the API server would hold it after `pulumi up` created it."""
    cluster = copy.deepcopy(rendered)
    for group in cluster["spec"].get("workerGroupSpecs", []):
        for key, value in WORKER_GROUP_DEFAULTS.items():
            group.setdefault(key, value)
        group.setdefault("rayStartParams", {})
    cluster["spec"]["headGroupSpec"].setdefault("rayStartParams", {})
    meta = cluster.setdefault("metadata", {})
    meta.update(uid=secrets.token_hex(8), generation=1, resourceVersion="1")
    return cluster


# ---- the stand-in --------------------------------------------------------------------------

class StandIn:
    """The API server's store, KubeRay's worker reconcile and the pods' lives (module docstring).
    ``config``: {"raycluster": {...}, "factor": F, "pending_seconds": s, "start_seconds": s,
    "node_labels": {...}, "workdir": path}; its seconds are real-world ones, divided by F here."""

    def __init__(self, config: dict, ray_bin: str):
        self.config = config
        self.factor = float(config["factor"])
        self.workdir = Path(config["workdir"])
        self.ray_bin = ray_bin
        self.cluster = stored_raycluster(config["raycluster"])
        self.name = self.cluster["metadata"]["name"]
        self.namespace = self.cluster["metadata"]["namespace"]
        self.pods: dict[str, dict] = {}
        self.procs: dict[str, subprocess.Popen] = {}
        self.version = 1
        self.lock = threading.RLock()
        self.wake = threading.Event()
        self.stopping = threading.Event()
        self.token = secrets.token_hex(16)
        self.requests_seen: list[str] = []
        self._events = open(self.workdir / EVENTS, "a", buffering=1)  # noqa: SIM115 (closed in stop)
        self._nodes_seen = 0

    def seconds(self, real: float) -> float:
        return real / self.factor

    def record(self, event: str, **fields: Any) -> None:
        with self.lock:
            if self._events.closed:            # a thread still finishing after stop()
                return
            self._events.write(json.dumps({"time": time.time(), "event": event, **fields}, sort_keys=True) + "\n")

    def _bump(self) -> str:
        self.version += 1
        return str(self.version)

    # -- pods (pod.go BuildPod)

    def _labels(self, group_name: str, kind: str, template_labels: dict) -> dict:
        labels = {"ray.io/is-ray-node": "yes", "ray.io/cluster": self.name, "ray.io/node-type": kind,
                  "ray.io/group": group_name, "ray.io/identifier": f"{self.name}-{kind}",
                  "app.kubernetes.io/name": "kuberay", "app.kubernetes.io/created-by": "kuberay-operator"}
        for key, value in (template_labels or {}).items():
            if key not in ("ray.io/node-type", "ray.io/group", "ray.io/cluster"):
                labels[key] = value
        return labels

    def _pod(self, group: dict, *, head: bool) -> dict:
        kind = "head" if head else "worker"
        group_name = HEAD_GROUP if head else group["groupName"]
        prefix = self.name if head else f"{self.name}-{group_name}"
        name = f"{prefix[:50]}-{kind}-{_suffix()}"
        template = copy.deepcopy(group["template"])
        spec = template["spec"]
        params = ray_start_params(group, head=head, head_address=f"{self.name}-head-svc.{self.namespace}.svc.cluster.local:{GCS_PORT}")
        if head and self.cluster["spec"].get("enableInTreeAutoscaling"):
            params["no-monitor"] = "true"
        start = ray_start_command(params, head=head)
        container = spec["containers"][0]
        args = " ".join(container.get("args") or [])
        container["command"] = ["/bin/bash", "-c", "--"]
        ulimit = "ulimit -n ${RAY_START_ULIMIT_OPEN_FILES:-65536}"
        container["args"] = [f"{args} && {ulimit}; {start}" if args else f"{ulimit}; {start}"]
        env = list(container.get("env") or [])
        env += [{"name": "RAY_CLUSTER_NAME", "value": self.name},
                {"name": "RAY_CLUSTER_NAMESPACE", "value": self.namespace},
                {"name": "RAY_CLOUD_INSTANCE_ID", "value": name},
                {"name": "RAY_NODE_TYPE_NAME", "value": group_name},
                {"name": "KUBERAY_GEN_RAY_START_CMD", "value": start},
                {"name": "RAY_PORT", "value": str(GCS_PORT)},
                {"name": "RAY_USAGE_STATS_KUBERAY_IN_USE", "value": "1"}]
        if head:
            env.append({"name": "RAY_enable_autoscaler_v2", "value": "true"})
        container["env"] = env
        if self.cluster["spec"].get("enableInTreeAutoscaling") and \
                (self.cluster["spec"].get("autoscalerOptions") or {}).get("version") == "v2":
            spec["restartPolicy"] = "Never"
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        return {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": self.namespace, "uid": secrets.token_hex(8),
                             "labels": self._labels(group_name, kind, template.get("metadata", {}).get("labels")),
                             "annotations": dict(template.get("metadata", {}).get("annotations") or {}),
                             "creationTimestamp": now, "resourceVersion": self._bump(),
                             "ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayCluster",
                                                  "name": self.name, "controller": True}]},
                "spec": spec,
                "status": {"phase": "Pending",
                           "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]},
                "_standin": {"created": time.monotonic(), "group": group_name, "params": params,
                             "joined": False, "head": head}}

    @staticmethod
    def _public(pod: dict) -> dict:
        return {k: v for k, v in pod.items() if k != "_standin"}

    # -- the API (node_provider.py KubernetesHttpApiClient)

    def handle(self, method: str, raw_path: str, headers: dict, body: bytes) -> tuple[int, Any]:
        self.requests_seen.append(f"{method} {raw_path}")
        if headers.get("authorization") != f"Bearer {self.token}":
            return 401, {"kind": "Status", "status": "Failure", "reason": "Unauthorized", "code": 401}
        parsed = urllib.parse.urlsplit(raw_path)
        query = urllib.parse.parse_qs(parsed.query)
        ns = re.escape(self.namespace)
        with self.lock:
            if re.fullmatch(rf"/apis/ray\.io/v1/namespaces/{ns}/rayclusters/{re.escape(self.name)}", parsed.path):
                if method == "GET":
                    return 200, copy.deepcopy(self.cluster)
                if method == "PATCH":
                    if headers.get("content-type") != "application/json-patch+json":
                        return 415, {"kind": "Status", "code": 415, "reason": "UnsupportedMediaType"}
                    ops = json.loads(body)
                    try:
                        patched = json_patch(self.cluster, ops)
                    except (KeyError, IndexError, ValueError) as exc:
                        return 422, {"kind": "Status", "code": 422, "message": f"patch: {exc}"}
                    patched["metadata"]["resourceVersion"] = self._bump()
                    patched["metadata"]["generation"] = self.cluster["metadata"]["generation"] + 1
                    self.cluster = patched
                    self.record("raycluster_patched", ops=ops)
                    self.wake.set()
                    return 200, copy.deepcopy(self.cluster)
            match = re.fullmatch(rf"/api/v1/namespaces/{ns}/pods(?:/([^/]+))?", parsed.path)
            if match and method == "GET":
                if match.group(1):
                    pod = self.pods.get(match.group(1))
                    return (200, self._public(pod)) if pod else (404, {"kind": "Status", "code": 404, "reason": "NotFound"})
                selector = dict(part.split("=", 1) for part in ",".join(query.get("labelSelector", [""])).split(",") if part)
                items = [self._public(p) for p in self.pods.values()
                         if all(p["metadata"]["labels"].get(k) == v for k, v in selector.items())]
                return 200, {"kind": "PodList", "apiVersion": "v1",
                             "metadata": {"resourceVersion": str(self.version)}, "items": items}
        return 404, {"kind": "Status", "code": 404, "reason": "NotFound", "message": raw_path}

    def serve(self, certfile: str, keyfile: str) -> int:
        standin = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _answer(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                headers = {k.lower(): v for k, v in self.headers.items()}
                code, payload = standin.handle(self.command, self.path, headers, body)
                data = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_PATCH = _answer

            def log_message(self, format: str, *args: Any) -> None:
                pass

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(certfile, keyfile)
        server.socket = context.wrap_socket(server.socket, server_side=True)
        server.daemon_threads = True
        self.server = server
        threading.Thread(target=server.serve_forever, name="api", daemon=True).start()
        return int(server.server_address[1])

    # -- KubeRay's worker reconcile (raycluster_controller.go reconcilePods)

    def reconcile(self) -> None:
        with self.lock:
            for group in self.cluster["spec"].get("workerGroupSpecs", []):
                self._reconcile_group(group)

    def _reconcile_group(self, group: dict) -> None:
        name = group["groupName"]
        replicas = group.get("replicas")
        low, high = group.get("minReplicas", 0), group.get("maxReplicas", 2**31 - 1)
        clamped = low if replicas is None or replicas < low else min(replicas, high)
        desired = (0 if group.get("suspend") else clamped) * group.get("numOfHosts", 1)
        pods = [p for p in self.pods.values() if p["metadata"]["labels"]["ray.io/group"] == name
                and "deletionTimestamp" not in p["metadata"]]
        unhealthy = [p for p in pods if p["status"]["phase"] in ("Failed", "Succeeded")]
        for pod in unhealthy:
            self.delete_pod(pod["metadata"]["name"], "unhealthy (shouldDeletePod)")
        if unhealthy:
            return
        deleted = set()
        for pod_name in (group.get("scaleStrategy") or {}).get("workersToDelete") or []:
            pod = self.pods.get(pod_name)
            if pod is not None and "deletionTimestamp" not in pod["metadata"]:
                self.delete_pod(pod_name, "workersToDelete")
                deleted.add(pod_name)
        running = [p for p in pods if p["metadata"]["name"] not in deleted]
        for _ in range(desired - len(running)):
            pod = self._pod(group, head=False)
            self.pods[pod["metadata"]["name"]] = pod
            self.record("pod_created", pod=pod["metadata"]["name"], group=name)
        # diff < 0 with in-tree autoscaling: KubeRay deletes nothing; the autoscaler names pods.

    # -- the pods' lives (GKE and the kubelet)

    def delete_pod(self, name: str, reason: str) -> None:
        with self.lock:
            pod = self.pods.get(name)
            if pod is None or "deletionTimestamp" in pod["metadata"]:
                return
            pod["metadata"]["deletionTimestamp"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            pod["metadata"]["resourceVersion"] = self._bump()
            state = pod["_standin"]
            state["deleted"] = time.monotonic()
            self.record("pod_deleting", pod=name, reason=reason, phase=pod["status"]["phase"],
                        joined=state["joined"])
        proc = self.procs.get(name)
        if proc is None:                   # never scheduled or never started: gone at once
            self._remove(name)
            return
        self._signal_pod(name, signal.SIGTERM)
        threading.Thread(target=self._kill_after_grace, args=(name,), daemon=True).start()

    def _kill_after_grace(self, name: str) -> None:
        proc = self.procs[name]
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=self.seconds(TERMINATION_GRACE_SECONDS))
        self._signal_pod(name, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
        self._remove(name)

    def _remove(self, name: str) -> None:
        with self.lock:
            pod = self.pods.pop(name, None)
            self._bump()
            if pod is not None:
                self.record("pod_deleted", pod=name, joined=pod["_standin"]["joined"])
        self.wake.set()

    @staticmethod
    def _pod_pids(name: str) -> list[int]:
        """The pod's processes: those carrying its RAY_CLOUD_INSTANCE_ID (what its container's
        cgroup would hold; this PID namespace is the cluster's alone)."""
        marker = f"RAY_CLOUD_INSTANCE_ID={name}".encode()
        pids = []
        for proc in Path("/proc").iterdir():
            if proc.name.isdigit():
                with contextlib.suppress(OSError):
                    if marker in (proc / "environ").read_bytes().split(b"\0"):
                        pids.append(int(proc.name))
        return pids

    def _signal_pod(self, name: str, sig: int) -> None:
        for pid in self._pod_pids(name):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)

    def kubelet(self) -> None:
        pending, start = self.seconds(self.config["pending_seconds"]), self.seconds(self.config["start_seconds"])
        while not self.stopping.wait(RECONCILE_PERIOD / 2):
            now = time.monotonic()
            with self.lock:
                pods = [p for p in self.pods.values() if not p["_standin"]["head"]
                        and "deletionTimestamp" not in p["metadata"]]
            for pod in pods:
                state, name = pod["_standin"], pod["metadata"]["name"]
                if pod["status"]["phase"] == "Pending" and now - state["created"] >= pending:
                    with self.lock:
                        self._set_running(pod)
                    self.record("pod_running", pod=name)
                    self.wake.set()
                elif pod["status"]["phase"] == "Running" and "started" not in state \
                        and now - state["created"] >= pending + start and not self._worker_registering():
                    state["started"] = time.monotonic()
                    self._start_worker_ray(pod)
                elif pod["status"]["phase"] == "Running" and (proc := self.procs.get(name)) is not None \
                        and proc.poll() is not None:
                    self._container_ended(pod, proc.returncode)

    def _worker_registering(self) -> bool:
        """A worker's `ray start` that has not yet joined (module docstring, loopback adaptations:
        one at a time), for at most REGISTER_SECONDS."""
        with self.lock:
            for pod in self.pods.values():
                state = pod["_standin"]
                proc = self.procs.get(pod["metadata"]["name"])
                if not state["head"] and "started" in state and not state["joined"] and "deleted" not in state \
                        and proc is not None and proc.poll() is None \
                        and time.monotonic() - state["started"] < REGISTER_SECONDS:
                    return True
        return False

    def _container_ended(self, pod: dict, code: int) -> None:
        """The Ray container's `ray start --block` ended (on this machine: a `ray start` that timed
        out registering with the GCS under load). With restartPolicy Never the pod's phase becomes
        Failed (Succeeded on exit 0), and KubeRay's next reconcile deletes it and creates another
        (raycluster_controller.go shouldDeletePod)."""
        with self.lock:
            pod["status"]["phase"] = "Succeeded" if code == 0 else "Failed"
            pod["metadata"]["resourceVersion"] = self._bump()
        self.record("pod_container_ended", pod=pod["metadata"]["name"], exit_code=code,
                    phase=pod["status"]["phase"])
        self.wake.set()

    def _set_running(self, pod: dict) -> None:
        started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        pod["status"] = {"phase": "Running", "podIP": "127.0.0.1",
                         "conditions": [{"type": "PodScheduled", "status": "True"}],
                         "containerStatuses": [{"name": pod["spec"]["containers"][0]["name"], "ready": False,
                                                "state": {"running": {"startedAt": started}}}]}
        pod["metadata"]["resourceVersion"] = self._bump()

    def _node_env(self, pod: dict) -> dict[str, str]:
        env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", RAY_memory_monitor_refresh_ms="0",
                   RAY_gcs_rpc_server_reconnect_timeout_s="180",
                   RAY_DASHBOARD_SUBPROCESS_MODULE_WAIT_READY_TIMEOUT="180")
        for item in pod["spec"]["containers"][0]["env"]:
            if item["name"].startswith(("RAY_", "KUBERAY_")) and "value" in item:
                env[item["name"]] = item["value"]
        env["RAY_ADDRESS"] = GCS
        env["PATH"] = f"{Path(self.ray_bin).parent}:{env.get('PATH', '')}"
        return env

    def _loopback_args(self, pod: dict, *, head: bool) -> list[str]:
        """The pod's `ray start` arguments, adapted to share one loopback (module docstring)."""
        params = dict(pod["_standin"]["params"])
        name = pod["metadata"]["name"]
        params["node-ip-address"] = "127.0.0.1"
        params["object-store-memory"] = str(OBJECT_STORE_BYTES)
        if head:
            params["dashboard-host"] = "127.0.0.1"
            params["include-dashboard"] = "false"    # the autoscaler needs none; a head starts faster
            params["port"] = str(GCS_PORT)
            params.pop("block", None)            # this process waits for the head to be up
        else:
            params["address"] = GCS
            params["metrics-export-port"] = str(free_port())
            params["dashboard-agent-listen-port"] = str(free_port())
            if "labels-file" in params:
                path = self.workdir / f"labels-{name}.yaml"
                labels = {**self.config.get("node_labels", {}), "gke-grpo/node-name": f"standin-node-{name[-5:]}"}
                # As the node-labels init container writes it (components/node_labels.py).
                path.write_text("".join(f"{json.dumps(k)}: {json.dumps(v)}\n" for k, v in sorted(labels.items())))
                params["labels-file"] = str(path)
        return ray_start_command(params, head=head).split()[2:]

    def _start_worker_ray(self, pod: dict) -> None:
        name = pod["metadata"]["name"]
        args = self._loopback_args(pod, head=False)
        log = open(self.workdir / f"ray-{name}.log", "w")  # noqa: SIM115 (the pod's log, kept open by the child)
        self.procs[name] = subprocess.Popen([self.ray_bin, "start", *args], stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, env=self._node_env(pod), start_new_session=True)
        self.record("ray_start", pod=name, args=args)

    def start_head(self) -> str:
        head_group = self.cluster["spec"]["headGroupSpec"]
        pod = self._pod(head_group, head=True)
        name = pod["metadata"]["name"]
        with self.lock:
            self._set_running(pod)
            self.pods[name] = pod
        args = self._loopback_args(pod, head=True)
        self.record("head_start", pod=name, args=args)
        done = subprocess.run([self.ray_bin, "start", *args], capture_output=True, text=True,
                              env=self._node_env(pod), timeout=300)
        (self.workdir / "ray-head.log").write_text(done.stdout + done.stderr)
        if done.returncode != 0:
            raise RuntimeError(f"the head's `ray start` exited {done.returncode}: {done.stderr[-3000:]}")
        pod["_standin"]["joined"] = True
        self.record("head_up", pod=name)
        return name

    @staticmethod
    def standing_request(client: Any) -> list[list]:
        """The cluster's resource request as the GCS holds it (ray/autoscaler/v2/sdk.py
        get_cluster_resource_state): [[bundle, count], ...], [] when none stands."""
        from ray.autoscaler.v2.sdk import get_cluster_resource_state

        state = get_cluster_resource_state(client)
        return [[dict(by_count.request.resources_bundle), int(by_count.count)]
                for constraint in state.cluster_resource_constraints
                for by_count in constraint.resource_requests]

    def watch_joins(self) -> None:
        """Which worker pods' Ray nodes have joined, from the GCS (their RAY_CLOUD_INSTANCE_ID),
        with the resources and labels they joined with; and each change of the standing resource
        request."""
        from ray._raylet import GcsClient

        client = GcsClient(address=GCS)
        request: list | None = None
        while not self.stopping.wait(RECONCILE_PERIOD):
            with contextlib.suppress(Exception):
                now = self.standing_request(client)
                if now != request:
                    request = now
                    self.record("request", standing=now)
            try:
                nodes = client.get_all_node_info(timeout=5)
            except Exception as exc:
                self.record("gcs_error", error=f"{type(exc).__name__}: {exc}")
                continue
            for info in nodes.values():
                instance = getattr(info, "instance_id", "")
                alive = getattr(info, "state", 0) == 0          # GcsNodeInfo.ALIVE
                with self.lock:
                    pod = self.pods.get(instance)
                    if pod is None or pod["_standin"]["head"] or pod["_standin"]["joined"] or not alive:
                        continue
                    pod["_standin"]["joined"] = True
                self.record("ray_node_joined", pod=instance, resources=dict(info.resources_total),
                            labels=dict(info.labels), node_type=getattr(info, "node_type_name", ""))

    def reconcile_loop(self) -> None:
        while not self.stopping.is_set():
            self.wake.wait(RECONCILE_PERIOD)
            self.wake.clear()
            self.reconcile()

    def stop(self) -> None:
        self.stopping.set()
        with self.lock:
            names = list(self.procs)
        for name in names:
            self._signal_pod(name, signal.SIGKILL)
        with contextlib.suppress(Exception):
            self.server.shutdown()
        with self.lock:
            self._events.close()


# ---- one cluster, in its own namespace ------------------------------------------------------

def write_service_account(token: str, ca_pem: bytes, namespace: str) -> None:
    """The files Kubernetes mounts into every pod, where Ray's provider reads them (a tmpfs on /run
    of this mount namespace: /var/run is /run)."""
    assert os.environ.get(INSIDE_ENV) == "1", "only inside the cluster's own mount namespace"
    SA_DIR.mkdir(parents=True, exist_ok=True)
    (SA_DIR / "token").write_text(token)
    (SA_DIR / "ca.crt").write_bytes(ca_pem)
    (SA_DIR / "namespace").write_text(namespace)


def autoscaler_env(standin: StandIn, api_port: int, head_pod: str, ray_defaults: dict[str, str]) -> dict[str, str]:
    """KubeRay's autoscaler container env (pod.go BuildAutoscalerContainer), the in-cluster API
    address, ``ray_defaults`` (Ray's own time settings as the scenario scales them: a default can
    only be divided by setting it), then autoscalerOptions.env on top, appended last as
    mergeAutoscalerOverrides does."""
    env = dict(os.environ, RAY_CLUSTER_NAME=standin.name, RAY_CLUSTER_NAMESPACE=standin.namespace,
               RAY_HEAD_POD_NAME=head_pod, KUBERAY_CRD_VER="v1",
               KUBERAY_GEN_AUTOSCALER_START_CMD="ray kuberay-autoscaler --cluster-name $(RAY_CLUSTER_NAME) "
                                                "--cluster-namespace $(RAY_CLUSTER_NAMESPACE)",
               KUBERNETES_SERVICE_HOST="127.0.0.1", KUBERNETES_SERVICE_PORT=str(api_port),
               KUBERNETES_SERVICE_PORT_HTTPS=str(api_port), RAY_USAGE_STATS_ENABLED="0",
               PATH=f"{Path(standin.ray_bin).parent}:{os.environ.get('PATH', '')}")
    env.update(ray_defaults)
    for item in (standin.cluster["spec"].get("autoscalerOptions") or {}).get("env") or []:
        env[item["name"]] = item["value"]
    return env


def non_loopback_listeners() -> list[str]:
    bad = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(FileNotFoundError):
            for row in Path(table).read_text().splitlines()[1:]:
                local, state = row.split()[1], row.split()[3]
                addr = local.split(":")[0]
                if state == "0A" and not ((len(addr) == 8 and addr.endswith("7F"))
                                          or addr == "00000000000000000000000001000000"
                                          or (addr.startswith("0000000000000000FFFF0000") and addr.endswith("7F"))):
                    bad.append(f"{table} {local}")
    return bad


def _stop_condition(config: dict, standin: StandIn, started: float) -> str | None:
    """Why the scenario is over (None while it runs): config["until"] is "recycled" (a worker pod
    deleted before its Ray node joined, and another created for it), "joined" (every wanted
    worker joined, then ``settle_seconds`` more) or "released" (the driver has exited, no resource
    request stands and every worker pod is gone), bounded by ``max_seconds`` (all real-world,
    divided by the factor)."""
    events = [json.loads(line) for line in (standin.workdir / EVENTS).read_text().splitlines()]
    now = time.monotonic()
    if now - started > standin.seconds(config["max_seconds"]):
        return "max_seconds"
    if config["until"] == "recycled":
        # Ray 2.49.2 deletes the pod, then creates another; 2.54.0 creates the other first.
        gone = [e for e in events if e["event"] == "pod_deleting" and not e["joined"]]
        if gone and len([e for e in events if e["event"] == "pod_created"]) >= 2:
            return "recycled"
    if config["until"] == "joined":
        joins = [e for e in events if e["event"] == "ray_node_joined"]
        if len(joins) >= config["nodes"] and time.time() - joins[-1]["time"] > standin.seconds(config["settle_seconds"]):
            return "joined"
    if config["until"] == "released":
        # The driver is gone, no request stands and no worker pod is left.
        requests = [e for e in events if e["event"] == "request"]
        with standin.lock:
            workers = [p for p in standin.pods.values() if not p["_standin"]["head"]]
        if any(e["event"] == "driver_exit" for e in events) and requests and requests[-1]["standing"] == [] \
                and not workers and any(e["event"] == "pod_deleted" for e in events):
            return "released"
    return None


def _children(parent: int) -> list[tuple[int, str]]:
    """(pid, command line) of ``parent``'s children, from /proc (this PID namespace is the
    cluster's alone)."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                stat = (proc / "stat").read_text()
                if int(stat.rsplit(")", 1)[1].split()[1]) == parent:
                    found.append((int(proc.name), (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()))
    return found


def _driver_events(config: dict) -> list[dict]:
    path = Path(config["run_dir"]) / "events.jsonl"
    if not path.exists():
        return []
    events = []
    for line in path.read_text().splitlines():
        with contextlib.suppress(ValueError):
            events.append(json.loads(line))
    return events


def start_driver(config: dict, standin: StandIn) -> subprocess.Popen:
    """The program's run driver (`python3 -m jobs.run --plan`) on the head, as the RayJob starts
    it (a Ray job: RAY_ADDRESS set; its data root is the scenario's directory), with a thread that
    records its exit and carries out the scenario's ``kill`` ("holder": SIGKILL the driver's gang
    holder, "driver": SIGKILL the driver) ``kill_after_seconds`` after the trainer started."""
    from jobs.contract.run_plan import DATA_ROOT_ENV

    log = open(standin.workdir / "driver.log", "w")  # noqa: SIM115 (the driver's log, kept open by the child)
    driver = subprocess.Popen([sys.executable, "-m", "jobs.run", "--plan", config["driver_plan"]],
                              stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=ROOT,
                              env=dict(os.environ, PYTHONPATH=str(ROOT), RAY_ADDRESS=GCS,
                                       # `python3` is the image's Python, the one with its Ray
                                       PATH=f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
                                       **{DATA_ROOT_ENV: config["data_root"]}))
    standin.record("driver_started", pid=driver.pid)

    def watch() -> None:
        kill, killed = config.get("kill"), False
        while driver.poll() is None:
            started = [e for e in _driver_events(config) if e.get("event") == "trainer_start"]
            if kill and not killed and started and \
                    time.time() - started[0]["time"] >= standin.seconds(config.get("kill_after_seconds", 0)):
                killed = True
                holders = [pid for pid, cmd in _children(driver.pid) if "jobs.head.gpu_gang hold" in cmd]
                if kill == "driver":
                    driver.kill()
                    standin.record("driver_killed", pid=driver.pid, holders=holders)
                else:
                    for pid in holders:
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(pid, signal.SIGKILL)
                    standin.record("holder_killed", pids=holders)
            time.sleep(0.1)
        standin.record("driver_exit", code=driver.returncode)

    threading.Thread(target=watch, daemon=True).start()
    return driver


def run_cluster(config_path: str) -> int:
    """One scenario on one cluster (module docstring); the events go to workdir/EVENTS."""
    config = json.loads(Path(config_path).read_text())
    ray_bin = str(Path(sys.executable).with_name("ray"))
    standin = StandIn(config, ray_bin)
    workdir = standin.workdir
    write_service_account(standin.token, Path(config["ca_file"]).read_bytes(), standin.namespace)
    port = standin.serve(config["cert_file"], config["key_file"])
    standin.record("api_up", port=port, ray=_ray_version())
    holder = autoscaler = None
    try:
        head_pod = standin.start_head()
        for target in (standin.reconcile_loop, standin.kubelet, standin.watch_joins):
            threading.Thread(target=target, daemon=True).start()
        autoscaler_log = open(workdir / "autoscaler.log", "w")  # noqa: SIM115 (the sidecar's log)
        autoscaler = subprocess.Popen(
            [ray_bin, "kuberay-autoscaler", "--cluster-name", standin.name, "--cluster-namespace", standin.namespace],
            env=autoscaler_env(standin, port, head_pod, config.get("ray_defaults", {})),
            stdout=autoscaler_log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        standin.record("autoscaler_started", ray_defaults=config.get("ray_defaults", {}),
                       options_env=(standin.cluster["spec"].get("autoscalerOptions") or {}).get("env"))
        if config.get("driver_plan"):
            holder = start_driver(config, standin)
        else:
            holder = subprocess.Popen(
                [sys.executable, "-m", "jobs.head.gpu_gang", "hold", "--nodes", str(config["nodes"]),
                 "--gpus-per-node", str(config["gpus_per_node"]), "--address", GCS],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
            said = ""                         # its HELD or RELEASED line (Ray may log before it)
            while holder.stdout and not said.startswith("[gpu_gang]") and (line := holder.stdout.readline()):
                said = line.strip()
            standin.record("gang_requested", holder_said=said)
        started = time.monotonic()
        while (why := _stop_condition(config, standin, started)) is None:
            time.sleep(0.2)
        standin.record("scenario_end", why=why, listeners=non_loopback_listeners(),
                       api_requests=len(standin.requests_seen))
        return 0
    finally:
        for proc in (holder, autoscaler):
            if proc is not None and proc.poll() is None:
                proc.kill()
        standin.stop()
        subprocess.run([ray_bin, "stop", "--force"], capture_output=True, timeout=60)


def _ray_version() -> str:
    import ray

    return str(ray.__version__)


# ---- for the tests (the main venv's side) ---------------------------------------------------


def cluster_command(python: str, config_path: Path) -> list[str]:
    """``run CONFIG`` on ``python`` as the only thing in a new network, PID and mount namespace:
    loopback up, tmpfs on /tmp/ray (Ray's sessions) and on /run (the service-account files). PID 1
    is an init that reaps orphans (tools/loopback_namespace.py), not the cluster itself: the gang
    holder takes a parent of PID 1 for a dead driver (jobs/head/gpu_gang.py)."""
    inner = " ".join([
        "ip link set lo up",
        "&& mkdir -p /tmp/ray && mount -t tmpfs -o size=1g tmpfs /tmp/ray",
        "&& mount -t tmpfs -o size=16m tmpfs /run",
        f"&& exec {python} -m tools.kuberay_standin init {python} -m tools.kuberay_standin run {config_path}",
    ])
    return ["unshare", "--net", "--pid", "--fork", "--kill-child", "--mount-proc", "sh", "-c", inner]


def make_tls(workdir: Path) -> tuple[Path, Path, Path]:
    """A CA and a server certificate for 127.0.0.1 signed by it (cryptography, of the main venv):
    the CA is what the provider verifies against (ca.crt)."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kuberay-standin-ca")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kubernetes")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                                                        x509.DNSName("kubernetes.default")]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    paths = workdir / "ca.crt", workdir / "server.crt", workdir / "server.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return paths


def read_cluster_events(workdir: Path) -> list[dict]:
    path = Path(workdir) / EVENTS
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def main(argv: list[str]) -> int:
    if argv[:1] == ["init"]:
        from tools.loopback_namespace import namespace_init

        return namespace_init(argv[1:])
    if argv[:1] == ["run"] and len(argv) == 2:
        os.environ[INSIDE_ENV] = "1"
        return run_cluster(argv[1])
    print("usage: python -m tools.kuberay_standin run CONFIG.json", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
