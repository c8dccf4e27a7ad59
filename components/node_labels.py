"""Where a GPU worker's node came from, told to Ray: the capacity-source labels GKE sets on the
node become Ray node labels, so the run driver on the head reads them with ``ray.nodes()``
(jobs/head/gpu_wait.py, jobs/contract/capacity.py) and records them at every trainer start.

How. A pod cannot read its node's labels through the Downward API (it exposes the pod's own
labels and ``spec.nodeName`` only). So an init container of the GPU worker pod, running the
worker's own image (python3, standard library), reads its node object from the Kubernetes API
with the pod's service-account token, and writes the labels below to a YAML file on the Ray
scratch volume; ``ray start --labels-file`` makes them the node's labels (a YAML map, merged with
--labels: ray/scripts/scripts.py and ray/_private/label_utils.py
``parse_node_labels_from_yaml_file``, alike in the Ray 2.54 and 2.49.2 wheels, the Ray of the
verl and NeMo RL images). The pod's service account may ``get`` nodes and
nothing more (a ClusterRole, since nodes are cluster-scoped; no list, no watch, no write).

Besides the labels, the node's creation time (``gke-grpo/node-created``, epoch seconds): the run
driver works a flex-start node's end out from it.

A failure to read the node never stops a GPU worker: the file then says
``gke-grpo/node-labels: unreadable`` and the init container's log says why; the run records the
source as unknown.
"""

from __future__ import annotations

from jobs.contract.capacity import NODE_CREATED_LABEL

# Written by the init container on the worker's Ray scratch volume (ray_pods.RAY_TMP), read by
# `ray start --labels-file=...` in the Ray container.
LABELS_FILE = "/tmp/ray/gke-grpo-node-labels.yaml"
INIT_CONTAINER_NAME = "node-labels"
NODE_NAME_ENV = "GKE_GRPO_NODE_NAME"
# The node labels passed on. GKE sets these on nodes of each capacity source (GKE docs, read
# 2026-12-01: "GKE automatically adds the cloud.google.com/gke-spot=true label" (About cluster
# autoscaling); reservation-name/-affinity are system labels a pod may select (About custom
# ComputeClasses); cloud.google.com/gke-flex-start "true" selects flex-start nodes (Run a small
# batch workload with GPUs and flex-start VMs)); the pool and the ComputeClass come from the
# pool's own labels (components/gpu_capacity.py).
PASSED_LABELS = (
    "cloud.google.com/gke-spot",
    "cloud.google.com/reservation-name",
    "cloud.google.com/reservation-affinity",
    "cloud.google.com/gke-flex-start",
    "cloud.google.com/gke-provisioning",
    "cloud.google.com/gke-nodepool",
    "cloud.google.com/compute-class",
)
NODE_NAME_LABEL = "gke-grpo/node-name"
# NODE_CREATED_LABEL (jobs/contract/capacity.py): the Node's metadata.creationTimestamp as epoch
# seconds (a Ray label value cannot hold ':'), when a flex-start node's run duration began, near
# enough; the driver tells the trainer when the node's maxRunDurationSeconds ends
# (jobs/contract/capacity_end.py). The API server writes it in UTC, whole seconds, "Z"
# (k8s.io/apimachinery pkg/apis/meta/v1/time.go: Time.MarshalJSON, RFC3339 of t.UTC()).
# Where Kubernetes mounts a pod's service-account token and the cluster CA.
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
UNREADABLE_LABEL = "gke-grpo/node-labels"
RBAC_NAME = "gke-grpo-gpu-node-reader"

# Standard library only: it runs in the framework image before Ray. Ray label values follow
# Kubernetes' (at most 63 characters of [A-Za-z0-9._-], alphanumeric at both ends: Ray 2.54
# ray/_private/label_utils.py validate_label_value); a value that is not is left out.
_SCRIPT = '''
import calendar, json, os, re, ssl, sys, time, urllib.request
SA = "{sa_dir}"
out, node = sys.argv[1], os.environ.get("{node_env}", "")
wanted = {wanted}
valid = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
labels = {{}}
try:
    host = os.environ["KUBERNETES_SERVICE_HOST"]
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    token = open(SA + "/token").read().strip()
    request = urllib.request.Request(
        "https://[%s]:%s/api/v1/nodes/%s" % (host, port, node) if ":" in host
        else "https://%s:%s/api/v1/nodes/%s" % (host, port, node),
        headers={{"Authorization": "Bearer " + token, "Accept": "application/json"}})
    context = ssl.create_default_context(cafile=SA + "/ca.crt")
    with urllib.request.urlopen(request, context=context, timeout=20) as response:
        metadata = json.load(response).get("metadata", {{}}) or {{}}
    found = metadata.get("labels", {{}}) or {{}}
    labels = {{k: v for k, v in found.items() if k in wanted and valid.match(v) and len(v) <= 63}}
    labels["{node_label}"] = node if valid.match(node) and len(node) <= 63 else "too-long"
    try:
        created = calendar.timegm(time.strptime(metadata.get("creationTimestamp", ""), "%Y-%m-%dT%H:%M:%SZ"))
        labels["{created_label}"] = str(created)
    except (TypeError, ValueError) as exc:
        print("node-labels: node %s: no creation time: %s" % (node, exc))
    print("node-labels: node %s: %s" % (node, json.dumps(labels, sort_keys=True)))
except Exception as exc:
    labels = {{"{unreadable}": "unreadable"}}
    print("node-labels: cannot read node %r: %s: %s" % (node, type(exc).__name__, exc))
with open(out, "w") as f:
    for key in sorted(labels):
        f.write("%s: %s\\n" % (json.dumps(key), json.dumps(labels[key])))
'''


def labels_script() -> str:
    """The init container's python3 program (argv[1]: the labels file)."""
    return _SCRIPT.format(node_env=NODE_NAME_ENV, wanted=repr(tuple(sorted(PASSED_LABELS))),
                          node_label=NODE_NAME_LABEL, created_label=NODE_CREATED_LABEL,
                          unreadable=UNREADABLE_LABEL,
                          sa_dir=SERVICE_ACCOUNT_DIR).lstrip()


def node_labels_init_container(image: str, scratch_mount: dict) -> dict:
    """The worker pod's init container: the Ray image, the Ray scratch volume (where the file
    goes), nothing else: no capability, read-only root, a token to read its own node."""
    resources = {"cpu": "100m", "memory": "128Mi"}
    return {
        "name": INIT_CONTAINER_NAME,
        "image": image,
        "command": ["python3", "-c", labels_script(), LABELS_FILE],
        "env": [{"name": NODE_NAME_ENV, "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
        "resources": {"requests": resources, "limits": resources},
        "volumeMounts": [dict(scratch_mount)],
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "capabilities": {"drop": ["ALL"]}},
    }


def cluster_role() -> dict:
    """Read one node object by name: get only (no list/watch: a pod learns only what it asks
    for, and it asks for its own node)."""
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": RBAC_NAME, "labels": {"app.kubernetes.io/part-of": "gke-grpo"}},
            "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]}


def cluster_role_binding(service_account: str, namespace: str) -> dict:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": f"{RBAC_NAME}-{namespace}",
                         "labels": {"app.kubernetes.io/part-of": "gke-grpo"}},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": RBAC_NAME},
            "subjects": [{"kind": "ServiceAccount", "name": service_account,
                          "namespace": namespace}]}
