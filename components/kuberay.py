"""KubeRay: the operator (GKE's Ray addon or the kuberay-operator Helm release), the multi-NIC
network objects, Google's NCCL RDMA installer, the credentials Secrets, and the RayCluster wired
to every GPU NIC with the gIB NCCL plugin, reachable only from inside the cluster.

Every Kubernetes object is typed here (nothing rendered from a remote manifest at program time),
so `pulumi preview` shows it, tests validate it and a reviewer diffs it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Optional

import pulumi
import pulumi_kubernetes as k8s

from components.cluster import GkeCluster
from components.config import StackConfig
from components.gpu_capacity import GpuCapacity
from components.head_credentials import head_secret_env, hf_token_file_volume
from components.kuberay_crds import crd_files
from components.kuberay_limits import SYSTEM_RESERVE_CPU, SYSTEM_RESERVE_MEMORY_GIB
from components.networks import GpuNetworks
from components.ray_cluster_updates import (replacement_message, replacement_options,
                                             upgrade_strategy, worker_setup_script)
from components.storage import SharedStorage
from components.versions import ImageRow, load_versions

KUBERAY_HELM_REPOSITORY = "https://ray-project.github.io/kuberay-helm/"
HELM_OPERATOR_NAMESPACE = "kuberay-system"
# The CRDs of a KubeRay release, applied server-side (they exceed the 256 KiB client-side
# annotation limit) from the copies vendored in the repository (components/kuberay_crds.py):
# nothing is fetched at `pulumi up`. Helm installs CRDs only once and never upgrades them, so
# the Helm release skips them and these follow the chart version instead.

# Ray ports: GCS, dashboard (and Jobs API), client, metrics.
GCS_PORT, DASHBOARD_PORT, CLIENT_PORT, METRICS_PORT = 6379, 8265, 10001, 8080
# KubeRay's default name for the head's GCS port (ray-operator/controllers/ray/utils/
# constant.go GcsServerPortName @v1.7.0): the head service and clients look it up by name.
GCS_PORT_NAME = "gcs-server"
# The RayJob submitter pod's label (its template is built by the run-driver branch, issue 11;
# notes/INTERFACES.md "Labels"): the only pod besides the operator admitted to the dashboard.
SUBMITTER_LABELS = {"gke-grpo/role": "rayjob-submitter"}
# Managed Prometheus's collectors run in gke-gmp-system on current GKE (not gmp-system).
MANAGED_PROMETHEUS_NAMESPACE = "gke-gmp-system"
# Ray's scratch space: logs, object spilling, runtime-env installs (head and workers) and the
# workers' /tmp (vLLM and torch compile caches), on emptyDirs counted as ephemeral storage.
RAY_TMP, TMP = "/tmp/ray", "/tmp"
# Token authentication: KubeRay >= 1.6.0 with rayVersion >= 2.52.0 (shared/reference/
# pulumi-and-kuberay.md; Ray docs "kuberay-auth", read 2026-12-01).
TOKEN_AUTH_MIN_KUBERAY = (1, 6, 0)
TOKEN_AUTH_MIN_RAY = (2, 52, 0)

# The gIB plugin and the NVIDIA libraries as Google's installer leaves them on the node.
NVIDIA_HOST_DIR, GIB_HOST_DIR = "/home/kubernetes/bin/nvidia", "/home/kubernetes/bin/gib"
NVIDIA_MOUNT, GIB_MOUNT = "/usr/local/nvidia", "/usr/local/gib"
# Sourced before `ray start`: the plugin's own NCCL settings instead of a hard-coded copy.
SET_NCCL_ENV = f"{GIB_MOUNT}/scripts/set_nccl_env.sh"


GVNIC_NETWORK = "gvnic-1"


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
class WorkerResources:
    cpu: int
    memory_gib: int
    shm_gib: int


def worker_resources(config: StackConfig, sidecar_cpu: float = 0, sidecar_memory_gib: float = 0) -> WorkerResources:
    """The GPU worker's CPU and memory: configured, or the machine's allocatable minus the
    system reserve and the gcsfuse sidecar (the tutorial's fixed 2800Gi does not fit H200)."""
    shape = config.shape
    worker = config.kuberay.worker
    cpu = worker.cpu or math.floor(shape.allocatable_cpu - SYSTEM_RESERVE_CPU - sidecar_cpu)
    memory = worker.memory_gib or math.floor(
        shape.allocatable_memory_gib - SYSTEM_RESERVE_MEMORY_GIB - sidecar_memory_gib)
    if config.autopilot:
        cpu, memory = _fit_autopilot_pod(config, cpu, memory, sidecar_cpu, sidecar_memory_gib,
                                         explicit=(worker.cpu is not None, worker.memory_gib is not None))
    return WorkerResources(cpu=cpu, memory_gib=memory, shm_gib=worker.shm_gib)


def _fit_autopilot_pod(config: StackConfig, cpu: int, memory: int, sidecar_cpu: float,
                       sidecar_memory_gib: float, explicit: tuple[bool, bool]) -> tuple[int, int]:
    """Default worker sizes shrunk to Autopilot's per-pod maximum for the GPU shape, sidecar
    included (configured sizes above it are refused by the config rules instead)."""
    from components.autopilot_limits import pod_limit_for

    limit = pod_limit_for(config.gpu.type, config.gpus_per_node)
    if limit is None:
        return cpu, memory
    if not explicit[0]:
        cpu = min(cpu, math.floor(limit.cpu - sidecar_cpu))
    if not explicit[1]:
        memory = min(memory, math.floor(limit.memory_gib - sidecar_memory_gib))
    return cpu, memory


# Autopilot head: /tmp/ray on a generic ephemeral volume (a pd-balanced disk created and deleted
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


def sidecar_budget(storage: SharedStorage) -> tuple[float, float]:
    """CPU and GiB the gcsfuse sidecar takes from the GPU worker's node ("0": unlimited, which
    takes nothing up front)."""
    return (0.0, 0.0) if storage.sidecar_limits is None else storage.sidecar_limits.budget()


def token_auth_support(config: StackConfig, row: ImageRow) -> tuple[bool, str]:
    """Whether KubeRay token authentication can be on, and why (not)."""
    if config.kuberay.operator == "addon":
        return False, ("KubeRay token authentication is off: the GKE Ray addon's KubeRay "
                       "version is not published, and authOptions needs KubeRay >= 1.6.0; use "
                       "kuberay.operator=helm to have it")
    chart = tuple(int(p) for p in config.helm_chart_version.split("."))
    if chart < TOKEN_AUTH_MIN_KUBERAY:
        return False, (f"KubeRay token authentication is off: kuberay-operator "
                       f"{config.helm_chart_version} < 1.6.0")
    if row.ray_tuple < TOKEN_AUTH_MIN_RAY:
        return False, (f"KubeRay token authentication is off: the image {row.image} has Ray "
                       f"{row.ray} and token authentication needs Ray >= 2.52.0; the dashboard "
                       "is reachable only inside the cluster (ClusterIP + NetworkPolicy)")
    return True, f"KubeRay token authentication is on (KubeRay {config.helm_chart_version}, Ray {row.ray})"


def image_row(config: StackConfig) -> ImageRow:
    versions = load_versions()
    if config.kuberay.image:
        return versions.by_image(config.kuberay.image)
    return versions.for_framework(config.job.framework)


class KubeRay(pulumi.ComponentResource):
    operator: Optional[k8s.helm.v3.Release]
    ray_cluster: k8s.apiextensions.CustomResource
    ray_cluster_name: str
    namespace: pulumi.Output[str]
    head_service: str
    dashboard_url: str
    port_forward_command: str
    token_auth: bool
    token_auth_message: str
    hf_secret: k8s.core.v1.Secret
    wandb_secret: Optional[k8s.core.v1.Secret]

    def __init__(self, name: str, config: StackConfig, *, networks: GpuNetworks,
                 cluster: GkeCluster, capacity: GpuCapacity, storage: SharedStorage,
                 hf_token: pulumi.Input[str], wandb_api_key: Optional[pulumi.Input[str]] = None,
                 head_code: Optional[dict[str, str]] = None,
                 opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__("gke-grpo:components:KubeRay", name, None, opts)
        self._provider = cluster.provider
        self.provider = cluster.provider
        self.row = image_row(config)
        versions = load_versions()
        namespace = cluster.namespace_name
        self.namespace = namespace
        self.ray_cluster_name = config.kuberay.ray_cluster_name
        self.head_service = f"{self.ray_cluster_name}-head-svc"
        self.dashboard_url = f"http://{self.head_service}.{config.kuberay.namespace}.svc.cluster.local:{DASHBOARD_PORT}"
        self.port_forward_command = (
            f"kubectl port-forward -n {config.kuberay.namespace} "
            f"service/{self.head_service} {DASHBOARD_PORT}:{DASHBOARD_PORT}")
        self.token_auth, self.token_auth_message = token_auth_support(config, self.row)
        # Said on every preview/up: a reviewer sees whether the dashboard needs a token.
        (pulumi.log.info if self.token_auth else pulumi.log.warn)(self.token_auth_message, resource=self)
        for message in self.row.deploy_warnings():   # an image not confirmed pullable
            pulumi.log.warn(message, resource=self)

        # ---- the operator -------------------------------------------------------------------
        self.operator = None
        self.crds: list[k8s.yaml.v2.ConfigGroup] = []
        operator_ready: list[pulumi.Resource] = []
        if config.kuberay.operator == "helm":
            version = config.helm_chart_version
            operator_namespace = k8s.core.v1.Namespace(
                f"{name}-operator-namespace",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=HELM_OPERATOR_NAMESPACE),
                opts=self._k8s())
            crds = k8s.yaml.v2.ConfigGroup(
                f"{name}-crds",
                files=crd_files(version),
                opts=self._k8s())
            self.crds = [crds]
            self.operator = k8s.helm.v3.Release(
                f"{name}-operator",
                name="kuberay-operator",
                chart="kuberay-operator",
                version=version,
                namespace=HELM_OPERATOR_NAMESPACE,
                repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=KUBERAY_HELM_REPOSITORY),
                # CRDs come from `crds` above, at the chart's version: Helm never upgrades them.
                skip_crds=True,
                atomic=True,
                values={
                    # The chart's image.tag default is not the release on every branch: pin it.
                    "image": {"repository": versions.system_images["kuberay_operator"]["repository"],
                              "tag": f"v{version}"},
                    "singleNamespaceInstall": False,
                    "watchNamespace": [config.kuberay.namespace],
                },
                opts=self._k8s(depends_on=[operator_namespace, crds]))
            operator_ready = [self.operator, crds]

        # ---- multi-NIC network objects --------------------------------------------------------
        network_objects = self._network_objects(name, networks)

        # ---- NCCL RDMA installer ------------------------------------------------------------------
        installer = self._nccl_installer(name, config, versions)

        # ---- credentials ------------------------------------------------------------------------
        self.hf_secret = k8s.core.v1.Secret(
            f"{name}-hf-token",
            metadata=k8s.meta.v1.ObjectMetaArgs(name="hf-secret", namespace=namespace),
            type="Opaque",
            string_data={"hf_api_token": pulumi.Output.secret(hf_token)},
            opts=self._k8s())
        self.wandb_secret = None
        if wandb_api_key is not None:
            self.wandb_secret = k8s.core.v1.Secret(
                f"{name}-wandb-key",
                metadata=k8s.meta.v1.ObjectMetaArgs(name="wandb-secret", namespace=namespace),
                type="Opaque",
                string_data={"api_key": pulumi.Output.secret(wandb_api_key)},
                opts=self._k8s())

        # ---- the job code the head runs before training (no image rebuild) ---------------------
        head_volumes: list[dict] = []
        head_mounts: list[dict] = []
        head_env: list[dict] = []
        code_dependencies: list[pulumi.Resource] = []
        if head_code:
            from components.grpo_job import HEAD_CODE_CONFIGMAP, head_code_mount
            code = k8s.core.v1.ConfigMap(
                f"{name}-jobs-code",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=HEAD_CODE_CONFIGMAP, namespace=namespace),
                data=head_code,
                opts=self._k8s())
            head_volumes, head_mounts, head_env = head_code_mount()
            code_dependencies = [code]

        # ---- network policy ------------------------------------------------------------------------
        self.network_policy = k8s.networking.v1.NetworkPolicy(
            f"{name}-ray-ingress",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=f"{self.ray_cluster_name}-ray-ingress",
                                                namespace=namespace),
            spec=self._network_policy_spec(config),
            opts=self._k8s())

        # ---- the RayCluster -----------------------------------------------------------------------
        self.worker = worker_resources(config, *sidecar_budget(storage))
        spec = ray_cluster_spec(
            config, self.row, self.worker, capacity=capacity, cluster=cluster, storage=storage,
            token_auth=self.token_auth, has_wandb=wandb_api_key is not None,
            head_extra_volumes=head_volumes, head_extra_mounts=head_mounts,
            head_extra_env=head_env)
        self.ray_cluster = k8s.apiextensions.CustomResource(
            f"{name}-ray-cluster",
            api_version="ray.io/v1",
            kind="RayCluster",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=self.ray_cluster_name, namespace=namespace,
                labels={"app.kubernetes.io/part-of": "gke-grpo"}),
            spec=spec,
            opts=self._k8s(depends_on=[
                *operator_ready, *network_objects, installer, storage.persistent_volume_claim,
                *storage.head_claims,
                self.hf_secret, *([self.wandb_secret] if self.wandb_secret else []),
                self.network_policy, *code_dependencies,
                *([capacity.node_pool] if capacity.node_pool is not None else []),
            ], **replacement_options(config.kuberay.operator, config.helm_chart_version)))
        replacement = replacement_message(config.kuberay.operator, config.helm_chart_version,
                                          self.ray_cluster_name)
        if replacement:
            pulumi.log.warn(replacement, resource=self.ray_cluster)

        self.register_outputs({
            "ray_cluster_name": self.ray_cluster_name,
            "namespace": namespace,
            "head_service": self.head_service,
            "port_forward_command": self.port_forward_command,
        })

    # -------------------------------------------------------------------------------------------
    def _k8s(self, **kwargs) -> pulumi.ResourceOptions:
        return pulumi.ResourceOptions(parent=self, provider=self._provider, **kwargs)

    def _network_objects(self, name: str, networks: GpuNetworks) -> list[pulumi.Resource]:
        """GKENetworkParamSet + Network per extra NIC, named from the network component's
        outputs (no VPC or subnet name typed twice). They must exist before GPU pods schedule."""
        pairs = [(GVNIC_NETWORK, networks.gvnic_network, networks.gvnic_subnet, "NetDevice")]
        pairs += [(rdma_network(i), networks.rdma_network, subnet, "RDMA")
                  for i, subnet in enumerate(networks.rdma_subnets)]
        created: list[pulumi.Resource] = []
        for object_name, vpc, subnet, mode in pairs:
            params = k8s.apiextensions.CustomResource(
                f"{name}-{object_name}-params",
                api_version="networking.gke.io/v1", kind="GKENetworkParamSet",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=object_name),
                spec={"vpc": vpc.name, "vpcSubnet": subnet.name, "deviceMode": mode},
                opts=self._k8s())
            network = k8s.apiextensions.CustomResource(
                f"{name}-{object_name}-network",
                api_version="networking.gke.io/v1", kind="Network",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=object_name),
                spec={"type": "Device", "parametersRef": {
                    "group": "networking.gke.io", "kind": "GKENetworkParamSet", "name": object_name}},
                opts=self._k8s(depends_on=[params]))
            created += [params, network]
        return created

    def _nccl_installer(self, name: str, config: StackConfig, versions) -> pulumi.Resource:
        """Google's NCCL RDMA installer (container-engine-accelerators/gpudirect-rdma) as a typed
        DaemonSet. It copies the gIB NCCL plugin to /home/kubernetes/bin/gib on each GPU node.
        Its init container is privileged by necessity (it writes to the host); the Ray pods are
        not. Standard: kube-system with system-node-critical priority. Autopilot: its own
        namespace and no priority class, field for field as Google's Autopilot manifest (commit
        0920249d, read 2026-12-01), which Autopilot admits as a known system workload."""
        autopilot = config.autopilot
        image_key = "nccl_rdma_installer_autopilot" if autopilot else "nccl_rdma_installer"
        dependencies: list[pulumi.Resource] = []
        if autopilot:
            namespace_resource = k8s.core.v1.Namespace(
                f"{name}-rdma-system",
                metadata=k8s.meta.v1.ObjectMetaArgs(name="rdma-system", labels={"name": "rdma-system"}),
                opts=self._k8s())
            dependencies.append(namespace_resource)
            namespace = "rdma-system"
        else:
            namespace = "kube-system"
        labels = {"k8s-app": "nccl-rdma-installer"}
        host_volumes = [
            {"name": "library-dir-host",
             "hostPath": {"path": f"{NVIDIA_HOST_DIR}/lib64", "type": "DirectoryOrCreate"}},
            {"name": "gib", "hostPath": {"path": GIB_HOST_DIR}},
        ]
        pod_spec = {
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{
                    "key": "cloud.google.com/gke-accelerator", "operator": "In",
                    "values": ["nvidia-h200-141gb", "nvidia-b200"]}]}]}}},
            "tolerations": [{"operator": "Exists"}],
            "hostNetwork": True,
            "hostPID": True,
            "volumes": host_volumes,
            "initContainers": [{
                "name": "nccl-rdma-installer",
                "image": versions.system_image(image_key),
                "resources": {"requests": {"cpu": "150m"}},
                "securityContext": {"privileged": True},
                "volumeMounts": [
                    {"name": "library-dir-host", "mountPath": f"/usr/local{NVIDIA_HOST_DIR}/lib64"},
                    {"name": "gib", "mountPath": f"/usr/local{GIB_HOST_DIR}"},
                ],
                "command": ["/bin/sh", "-c"],
                "args": ["set -ex\n"
                         f"/scripts/container_entry.sh {installer_arguments(autopilot)}\n"
                         f"cp -r /var/lib/gib/lib64/. /usr/local{NVIDIA_HOST_DIR}/lib64\n"
                         f"cp -r /var/lib/gib/. /usr/local{GIB_HOST_DIR}\n"
                         "echo \"installation finishes\"\n"],
            }],
            "containers": [{"name": "pause", "image": versions.system_image("pause")}],
        }
        if not autopilot:
            pod_spec["priorityClassName"] = "system-node-critical"
            # Standard only (Autopilot keeps Google's manifest as published): the pause
            # container that keeps the DaemonSet alive needs nothing, so it gets nothing.
            pod_spec["automountServiceAccountToken"] = False
            pod_spec["securityContext"] = {"seccompProfile": {"type": "RuntimeDefault"}}
            pod_spec["containers"][0].update({
                "resources": {"requests": {"cpu": "10m", "memory": "16Mi"},
                              "limits": {"cpu": "10m", "memory": "16Mi"}},
                "securityContext": {
                    "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                    "runAsNonRoot": True, "runAsUser": 65535,
                    "capabilities": {"drop": ["ALL"]}},
            })
        return k8s.apps.v1.DaemonSet(
            f"{name}-nccl-rdma-installer",
            metadata=k8s.meta.v1.ObjectMetaArgs(name="nccl-rdma-installer", namespace=namespace,
                                                labels=labels),
            spec={
                "selector": {"matchLabels": labels},
                "updateStrategy": {"type": "RollingUpdate"},
                "template": {"metadata": {"labels": {"name": "nccl-rdma-installer", **labels}},
                             "spec": pod_spec},
            },
            opts=self._k8s(depends_on=dependencies))

    def _network_policy_spec(self, config: StackConfig) -> dict:
        """Admit traffic between this Ray cluster's pods (every Ray port), the dashboard port from
        the RayJob submitter (its own label) and from the KubeRay operator, and Ray's metrics
        port from managed Prometheus; nothing else. Other pods of the namespace are not admitted."""
        cluster_pods = {"podSelector": {"matchLabels": {"ray.io/cluster": self.ray_cluster_name}}}
        if config.kuberay.operator == "helm":
            operator_source = {"namespaceSelector": {"matchLabels": {
                "kubernetes.io/metadata.name": HELM_OPERATOR_NAMESPACE}}}
        elif config.kuberay.operator_namespace:
            operator_source = {"namespaceSelector": {"matchLabels": {
                "kubernetes.io/metadata.name": config.kuberay.operator_namespace}}}
        else:
            # GKE hosts the addon's operator itself: its calls may come from the control plane,
            # not from a pod. Admit the dashboard port from outside the pod network (control
            # plane, nodes: kubectl port-forward) but never from other pods; pods are matched
            # by identity, not by these CIDRs (Dataplane V2). kuberay.operatorNamespace, when
            # known, replaces this with that namespace.
            operator_source = {"ipBlock": {"cidr": "0.0.0.0/0", "except": [config.network.pod_cidr]}}
        dashboard = [{"port": DASHBOARD_PORT, "protocol": "TCP"}]
        return {
            "podSelector": {"matchLabels": {"ray.io/cluster": self.ray_cluster_name}},
            "policyTypes": ["Ingress"],
            "ingress": [
                {"from": [cluster_pods]},
                {"from": [{"podSelector": {"matchLabels": dict(SUBMITTER_LABELS)}}], "ports": dashboard},
                {"from": [operator_source], "ports": dashboard},
                # Managed Prometheus scrapes Ray's metrics (the addon's monitoring is on).
                {"from": [{"namespaceSelector": {"matchLabels": {
                    "kubernetes.io/metadata.name": MANAGED_PROMETHEUS_NAMESPACE}}}],
                 "ports": [{"port": METRICS_PORT, "protocol": "TCP"}]},
            ],
        }


def installer_arguments(autopilot: bool) -> str:
    """container_entry.sh's arguments, as Google's manifests have them today
    (GoogleCloudPlatform/container-engine-accelerators gpudirect-rdma/): the Standard manifest
    dropped `--install-nccl` on 2026-05-06 (commit 2da1c92f "Removed --install-nccl from default
    and a4x installers"), so the trainer loads the libnccl bundled with its framework image
    (torch's nvidia-nccl wheel) and only the gIB net plugin comes from the node; the Autopilot
    manifest (nccl-rdma-installer-autopilot.yaml @992db812, 2026-06-09) still passes it."""
    return "install --install-nccl" if autopilot else "install"


def _secret_env(name: str, secret: str, key: str) -> dict:
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}


def ray_cluster_spec(config: StackConfig, row: ImageRow, worker: WorkerResources, *,
                     capacity: GpuCapacity, cluster: GkeCluster, storage: SharedStorage,
                     token_auth: bool, has_wandb: bool, head_extra_volumes: list[dict],
                     head_extra_mounts: list[dict], head_extra_env: list[dict]) -> dict:
    """The RayCluster spec (ray.io/v1), validated in tests against the KubeRay 1.7.0 CRD."""
    layout = storage.data_layout
    head = config.kuberay.head
    shape = config.shape
    secret_env = [_secret_env("HF_TOKEN", "hf-secret", "hf_api_token")]
    if has_wandb:
        secret_env.append(_secret_env("WANDB_API_KEY", "wandb-secret", "api_key"))
    common_env = [{"name": "HF_HOME", "value": layout.hf_home}, *secret_env]
    # Head and workers alike (components/head_credentials.py says why).
    library_path = {"name": "LD_LIBRARY_PATH", "value": f"{NVIDIA_MOUNT}/lib64:{GIB_MOUNT}/lib64"}
    token_volume, token_mount = hf_token_file_volume()
    head_env = [{"name": "HF_HOME", "value": layout.hf_home}, library_path,
                *head_secret_env(config.job.framework, has_wandb)]
    no_escalation = {"allowPrivilegeEscalation": False}
    # The container runtime's default seccomp filter: Autopilot applies it anyway.
    pod_security = {"seccompProfile": {"type": "RuntimeDefault"}}
    head_resources = {"cpu": str(head.cpu), "memory": f"{head.memory_gib}Gi"}
    head_scratch, head_scratch_mounts = ray_scratch_volumes(workers=False, on_disk=config.autopilot)
    worker_scratch, worker_scratch_mounts = ray_scratch_volumes(workers=True)
    head_container = {
        "name": "ray-head",
        "image": row.image,
        "ports": [{"containerPort": GCS_PORT, "name": GCS_PORT_NAME},
                  {"containerPort": DASHBOARD_PORT, "name": "dashboard"},
                  {"containerPort": CLIENT_PORT, "name": "client"},
                  {"containerPort": METRICS_PORT, "name": "metrics"}],
        "resources": {"requests": with_ephemeral_storage(head_resources, config.head_ephemeral_storage_gib),
                      "limits": head_resources},
        "env": [*head_env, *head_extra_env],
        "volumeMounts": [*storage.volume_mounts, *head_scratch_mounts, token_mount,
                         *head_extra_mounts],
        # The head serves Ray's control plane and runs the job driver: no Linux capability needed.
        "securityContext": {**no_escalation, "capabilities": {"drop": ["ALL"]}},
    }
    head_pod = {
        "securityContext": pod_security,
        "serviceAccountName": storage.service_account_name,
        "nodeSelector": dict(cluster.head_node_selector),
        "containers": [head_container],
        "volumes": [*storage.head_volumes, *head_scratch, token_volume, *head_extra_volumes],
    }
    gpu_env = [
        *common_env,
        library_path,
        {"name": "GLOO_SOCKET_IFNAME", "value": "eth0"},
    ]
    worker_limits = {"cpu": str(worker.cpu), "memory": f"{worker.memory_gib}Gi",
                     "nvidia.com/gpu": str(config.gpus_per_node)}
    worker_container = {
        "name": "ray-worker",
        "image": row.image,
        # No `command`: KubeRay runs `<args> && ulimit ...; ray start ...` in one shell, so the
        # plugin's exports reach Ray (pulumi-and-kuberay.md, "Running a setup script").
        # On a fresh node the installer DaemonSet may still be copying the plugin: wait for it
        # (bounded, 10 minutes), then fail closed: never `ray start` without RDMA. The tuner
        # file is the script's, else this GPU's (never the B200 file on H200, tutorial defect 3).
        "args": [worker_setup_script(SET_NCCL_ENV, shape.nccl_tuner_file,
                                     multi_node=config.gpu.nodes > 1)],
        "resources": {"requests": with_ephemeral_storage(
            worker_limits, config.kuberay.worker.ephemeral_storage_gib), "limits": worker_limits},
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
    worker_pod = {
        "securityContext": pod_security,
        "serviceAccountName": storage.service_account_name,
        "nodeSelector": dict(capacity.pod_node_selector),
        "tolerations": list(capacity.pod_tolerations),
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
    apply_to_worker_pod(worker_pod, row.image, config.gpus_per_node)
    worker_annotations = {
        **storage.pod_annotations,
        "networking.gke.io/default-interface": "eth0",
        "networking.gke.io/interfaces": interfaces_annotation(shape.rdma_nics),
    }
    spec = {
        "rayVersion": row.ray,
        "enableInTreeAutoscaling": False,
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
        "workerGroupSpecs": [{
            "groupName": "gpu-workers",
            # The one GPU node count (gke-grpo:gpu.nodes): one Ray worker per GPU node.
            "replicas": config.gpu.nodes,
            "minReplicas": config.gpu.nodes,
            "maxReplicas": config.gpu.nodes,
            "numOfHosts": 1,
            "rayStartParams": {"num-cpus": str(worker.cpu), "num-gpus": str(config.gpus_per_node)},
            "template": {"metadata": {"annotations": worker_annotations}, "spec": worker_pod},
        }],
    }
    if token_auth:
        spec["authOptions"] = {"mode": "token"}
    strategy = upgrade_strategy(config.kuberay.operator, config.helm_chart_version)
    if strategy:
        spec["upgradeStrategy"] = strategy
    return spec
