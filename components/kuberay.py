"""KubeRay: the operator (GKE's Ray addon or the kuberay-operator Helm release), the multi-NIC
network objects, Google's NCCL RDMA installer, the credentials Secrets, and the RayCluster wired
to every GPU NIC with the gIB NCCL plugin, reachable only from inside the cluster.

Every Kubernetes object is typed here (nothing rendered from a remote manifest at program time),
so `pulumi preview` shows it, tests validate it and a reviewer diffs it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from components.gcsfuse import BUCKET_ROLE
from components.head_code import HEAD_CODE_CONFIGMAP, SUBMITTER_LABELS, head_code_mount
from components.kuberay_crds import crd_files
from components.node_labels import RBAC_NAME, cluster_role, cluster_role_binding
from components.ray_autoscaler import load_autoscaler_settings
from components.ray_cluster_updates import replacement_message, replacement_options
from components.ray_pods import (
    DASHBOARD_PORT,
    GIB_HOST_DIR,
    GVNIC_NETWORK,
    METRICS_PORT,
    NVIDIA_HOST_DIR,
    RayPodsArgs,
    WorkerPool,
    WorkerSizing,
    ray_cluster_spec,
    rdma_network,
    worker_resources,
)
from components.ray_ports import AUTOSCALER_METRICS_PORT
from components.ray_rbac import pod_accounts
from components.versions import ImageRow, load_versions, stack_row

if TYPE_CHECKING:
    from components.cluster import GkeCluster
    from components.config import StackConfig
    from components.gpu_capacity import GpuCapacity
    from components.networks import GpuNetworks
    from components.storage import SharedStorage

KUBERAY_HELM_REPOSITORY = "https://ray-project.github.io/kuberay-helm/"
HELM_OPERATOR_NAMESPACE = "kuberay-system"
# The CRDs of a KubeRay release, applied server-side (they exceed the 256 KiB client-side
# annotation limit) from the copies vendored in the repository (components/kuberay_crds.py):
# nothing is fetched at `pulumi up`. Helm installs CRDs only once and never upgrades them, so
# the Helm release skips them and these follow the chart version instead.

# Managed Prometheus's collectors run in gke-gmp-system on current GKE (not gmp-system).
MANAGED_PROMETHEUS_NAMESPACE = "gke-gmp-system"
# Token authentication: KubeRay >= 1.6.0 with rayVersion >= 2.52.0 (shared/reference/
# pulumi-and-kuberay.md; Ray docs "kuberay-auth", read 2026-12-01).
TOKEN_AUTH_MIN_KUBERAY = (1, 6, 0)
TOKEN_AUTH_MIN_RAY = (2, 52, 0)


def token_auth_support(operator: str, helm_chart_version: str | None, row: ImageRow) -> tuple[bool, str]:
    """Whether KubeRay token authentication can be on, and why (not)."""
    if operator == "addon":
        return False, ("KubeRay token authentication is off. The GKE Ray addon's KubeRay "
                       "version is not published, and authOptions needs KubeRay >= 1.6.0; use "
                       "kuberay.operator=helm to have it")
    assert helm_chart_version is not None, "the config sets a chart version whenever the operator is helm"
    chart = tuple(int(p) for p in helm_chart_version.split("."))
    if chart < TOKEN_AUTH_MIN_KUBERAY:
        return False, (f"KubeRay token authentication is off. kuberay-operator "
                       f"{helm_chart_version} < 1.6.0")
    if row.ray_tuple < TOKEN_AUTH_MIN_RAY:
        return False, (f"KubeRay token authentication is off. The image {row.image} has Ray "
                       f"{row.ray} and token authentication needs Ray >= 2.52.0; the dashboard "
                       "is reachable only inside the cluster (ClusterIP + NetworkPolicy)")
    return True, f"KubeRay token authentication is on (KubeRay {helm_chart_version}, Ray {row.ray})"


@dataclass(frozen=True)
class KubeRayArgs:
    operator: str                        # "addon" (GKE's Ray addon) or "helm"
    operator_namespace: str | None    # the addon operator's namespace, when known
    helm_chart_version: str | None    # helm only
    workload_namespace: str              # the namespace's name, for commands and URLs
    ray_cluster_name: str
    image_row: ImageRow                  # the framework image and its Ray version
    pods: RayPodsArgs                    # the head and GPU worker pod templates
    # From GkeCluster:
    kubernetes_provider: k8s.Provider
    namespace: pulumi.Output[str]
    # From GpuNetworks: one GKENetworkParamSet + Network per extra NIC.
    gvnic_network: gcp.compute.Network
    gvnic_subnet: gcp.compute.Subnetwork
    rdma_network: gcp.compute.Network
    rdma_subnets: list[gcp.compute.Subnetwork]
    # From GpuCapacity (Standard: the RayCluster waits for the pools and the waterfall's
    # ComputeClass) and SharedStorage:
    gpu_node_pool: pulumi.Resource | None
    storage_claims: list[pulumi.Resource]
    # Secrets and the head's code:
    hf_token: pulumi.Input[str]
    wandb_api_key: pulumi.Input[str] | None = None
    # The head's jobs ConfigMap as (data, binaryData): components/head_code.py head_code_files.
    head_code: tuple[dict[str, str], dict[str, str]] | None = None
    # The Ray pods' service accounts, head's and GPU workers' (SharedStorage creates them):
    # KubeRay's reconcile fails on a head serviceAccountName that does not exist
    # (ray-operator/controllers/ray/raycluster_controller.go @v1.7.0, "If users specify
    # ServiceAccountName for the head Pod, they need to create a ServiceAccount themselves"), and
    # a worker pod's creation on one that does not exist; the RayCluster waits for both.
    pod_service_accounts: list[pulumi.Resource] = dataclasses.field(default_factory=list)
    gpu_capacity_resources: list[pulumi.Resource] = dataclasses.field(default_factory=list)
    # Said on every preview: a configured allocate timeout that leaves a node's bring-up out.
    autoscaler_note: str | None = None
    # The ports managed Prometheus scrapes (components/monitoring.py): Ray's, the autoscaler's, the driver's.
    collector_ports: tuple[int, ...] = (METRICS_PORT,)


def allocate_timeout_note(allocate_timeout_seconds: int, gpu_wait_seconds: int) -> str | None:
    """A warning when the allocate timeout covers the GPU wait (the config refuses less) but not
    the wait plus a GPU node's bring-up: a worker granted late in the wait may be recycled."""
    settings = load_autoscaler_settings()
    needed = gpu_wait_seconds + settings.bring_up_seconds
    if allocate_timeout_seconds >= needed:
        return None
    return (f"kuberay.autoscaler.allocateTimeoutSeconds ({allocate_timeout_seconds}) is shorter than "
            f"job.gpuWaitSeconds + a GPU node's bring-up ({gpu_wait_seconds} + "
            f"{settings.bring_up_seconds} = {needed} s, data/ray-autoscaler-settings.yaml): a GPU "
            "worker whose node arrives late in the GPU wait may be deleted and recreated by the Ray "
            "autoscaler before it joins")


def worker_pools(config: StackConfig, capacity: GpuCapacity) -> tuple[WorkerPool, ...]:
    """A split layout's pools as worker groups, each bound to its capacity source; () for the
    colocated layout."""
    return tuple(WorkerPool(name, nodes, *capacity.source_placement(index))
                 for name, nodes, index in config.pools)


def image_row(config: StackConfig) -> ImageRow:
    return stack_row(config.job.framework, config.job.release, config.kuberay.image)


def kuberay_args(config: StackConfig, *, networks: GpuNetworks, cluster: GkeCluster,
                 capacity: GpuCapacity, storage: SharedStorage, hf_token: pulumi.Input[str],
                 wandb_api_key: pulumi.Input[str] | None = None,
                 head_code: tuple[dict[str, str], dict[str, str]] | None = None) -> KubeRayArgs:
    row = image_row(config)
    sidecar_cpu, sidecar_memory_gib = storage.pods.sidecar_budget
    worker = worker_resources(config.shape, config.kuberay.worker, autopilot=config.autopilot,
                              gpu_type=config.gpu.type, gpus_per_node=config.gpus_per_node,
                              sidecar_cpu=sidecar_cpu, sidecar_memory_gib=sidecar_memory_gib)
    pods = RayPodsArgs(
        image=row.image, ray_version=row.ray, framework=config.job.framework,
        autopilot=config.autopilot, head=config.kuberay.head,
        head_ephemeral_storage_gib=config.head_ephemeral_storage_gib, worker=worker,
        worker_ephemeral_storage_gib=config.kuberay.worker.ephemeral_storage_gib,
        gpu_nodes=config.gpu.nodes, gpus_per_node=config.gpus_per_node,
        nccl_tuner_file=config.shape.nccl_tuner_file, rdma_nics=config.shape.rdma_nics,
        operator=config.kuberay.operator, helm_chart_version=config.helm_chart_version,
        autoscaler_allocate_timeout_seconds=config.autoscaler_allocate_timeout_seconds,
        head_node_selector=cluster.head_node_selector,
        gpu_node_selector=capacity.pod_node_selector, gpu_tolerations=capacity.pod_tolerations,
        storage=storage.pods, pools=worker_pools(config, capacity))
    return KubeRayArgs(
        operator=config.kuberay.operator, operator_namespace=config.kuberay.operator_namespace,
        helm_chart_version=config.helm_chart_version, workload_namespace=config.kuberay.namespace,
        ray_cluster_name=config.kuberay.ray_cluster_name, image_row=row,
        pods=pods, kubernetes_provider=cluster.provider,
        namespace=cluster.namespace_name, gvnic_network=networks.gvnic_network,
        gvnic_subnet=networks.gvnic_subnet, rdma_network=networks.rdma_network,
        rdma_subnets=list(networks.rdma_subnets), gpu_node_pool=capacity.node_pool,
        storage_claims=storage.pods.claims, hf_token=hf_token, wandb_api_key=wandb_api_key,
        head_code=head_code,
        pod_service_accounts=[storage.service_account, storage.worker_service_account],
        gpu_capacity_resources=capacity.placement_dependencies,
        autoscaler_note=allocate_timeout_note(config.autoscaler_allocate_timeout_seconds,
                                              config.job.gpu_wait_seconds),
        collector_ports=(METRICS_PORT, AUTOSCALER_METRICS_PORT, config.monitoring.driver_metrics_port))


class KubeRay(pulumi.ComponentResource):
    operator: k8s.helm.v3.Release | None
    ray_cluster: k8s.apiextensions.CustomResource
    ray_cluster_name: str
    namespace: pulumi.Output[str]
    head_service: str
    dashboard_url: str
    port_forward_command: str
    token_auth: bool
    token_auth_message: str
    hf_secret: k8s.core.v1.Secret
    wandb_secret: k8s.core.v1.Secret | None
    provider: k8s.Provider               # GrpoJob's RayJob uses the same provider
    row: ImageRow                        # the framework image the Ray pods run
    worker: WorkerSizing              # the GPU worker's size, as the RayCluster asks for it
    crds: list[k8s.yaml.v2.ConfigGroup]  # helm only: the vendored CRDs
    network_policy: k8s.networking.v1.NetworkPolicy
    node_reader: list[pulumi.Resource]   # the GPU workers' read-only node RBAC
    # Each Ray pod group's service account and its rights, KubeRay's autoscaler Role included
    # (the rayPodAccounts output, components/ray_rbac.py).
    pod_accounts: dict

    def __init__(self, name: str, args: KubeRayArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gke-grpo:components:KubeRay", name, None, opts)
        self._provider = args.kubernetes_provider
        self.provider = args.kubernetes_provider
        self.row = args.image_row
        versions = load_versions()
        namespace = args.namespace
        self.namespace = namespace
        self.ray_cluster_name = args.ray_cluster_name
        self.head_service = f"{self.ray_cluster_name}-head-svc"
        self.dashboard_url = f"http://{self.head_service}.{args.workload_namespace}.svc.cluster.local:{DASHBOARD_PORT}"
        self.port_forward_command = (
            f"kubectl port-forward -n {args.workload_namespace} "
            f"service/{self.head_service} {DASHBOARD_PORT}:{DASHBOARD_PORT}")
        self.token_auth, self.token_auth_message = token_auth_support(args.operator, args.helm_chart_version, self.row)
        # Said on every preview/up: a reviewer sees whether the dashboard needs a token.
        (pulumi.log.info if self.token_auth else pulumi.log.warn)(self.token_auth_message, resource=self)
        if args.operator == "addon":
            pulumi.log.warn(ADDON_AUTOSCALING_MESSAGE, resource=self)
        for message in self.row.deploy_warnings():   # an image not confirmed pullable
            pulumi.log.warn(message, resource=self)
        if args.autoscaler_note:
            pulumi.log.warn(args.autoscaler_note, resource=self)

        # ---- the operator -------------------------------------------------------------------
        self.operator = None
        self.crds = []
        operator_ready: list[pulumi.Resource] = []
        if args.operator == "helm":
            version = args.helm_chart_version
            assert version is not None, "the config sets a chart version whenever the operator is helm"
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
                    "watchNamespace": [args.workload_namespace],
                },
                opts=self._k8s(depends_on=[operator_namespace, crds]))
            operator_ready = [self.operator, crds]

        # ---- multi-NIC network objects --------------------------------------------------------
        network_objects = self._network_objects(name, args)

        # ---- NCCL RDMA installer ------------------------------------------------------------------
        installer = self._nccl_installer(name, args.pods.autopilot, versions)

        # ---- credentials ------------------------------------------------------------------------
        self.hf_secret = k8s.core.v1.Secret(
            f"{name}-hf-token",
            metadata=k8s.meta.v1.ObjectMetaArgs(name="hf-secret", namespace=namespace),
            type="Opaque",
            string_data={"hf_api_token": pulumi.Output.secret(args.hf_token)},
            opts=self._k8s())
        self.wandb_secret = None
        if args.wandb_api_key is not None:
            self.wandb_secret = k8s.core.v1.Secret(
                f"{name}-wandb-key",
                metadata=k8s.meta.v1.ObjectMetaArgs(name="wandb-secret", namespace=namespace),
                type="Opaque",
                string_data={"api_key": pulumi.Output.secret(args.wandb_api_key)},
                opts=self._k8s())

        # ---- the job code the head runs before training (no image rebuild) ---------------------
        head_volumes: list[dict] = []
        head_mounts: list[dict] = []
        head_env: list[dict] = []
        code_dependencies: list[pulumi.Resource] = []
        if args.head_code:
            code = k8s.core.v1.ConfigMap(
                f"{name}-jobs-code",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=HEAD_CODE_CONFIGMAP, namespace=namespace),
                data=args.head_code[0],
                binary_data=args.head_code[1],
                opts=self._k8s())
            head_volumes, head_mounts, head_env = head_code_mount()
            code_dependencies = [code]

        # ---- network policy ------------------------------------------------------------------------
        if args.operator == "addon" and not args.operator_namespace:
            pulumi.log.warn(ADDON_OPERATOR_SOURCE_NOTE, resource=self)
        self.network_policy = k8s.networking.v1.NetworkPolicy(
            f"{name}-ray-ingress",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=f"{self.ray_cluster_name}-ray-ingress",
                                                namespace=namespace),
            spec=self._network_policy_spec(args),
            opts=self._k8s())

        # ---- what the GPU workers read of their node (components/node_labels.py) ---------------
        self.node_reader = self._node_reader(name, args)

        # ---- the RayCluster -----------------------------------------------------------------------
        self.worker = args.pods.worker
        spec = ray_cluster_spec(
            args.pods, token_auth=self.token_auth, has_wandb=args.wandb_api_key is not None,
            head_extra_volumes=head_volumes, head_extra_mounts=head_mounts,
            head_extra_env=head_env)
        storage = args.pods.storage
        self.pod_accounts = pod_accounts(
            spec, self.ray_cluster_name, node_reader_role=RBAC_NAME,
            node_reader_subject=storage.worker_service_account_name,
            bucket_role=BUCKET_ROLE if storage.bucket_accounts else None,
            bucket_accounts=storage.bucket_accounts)
        self.ray_cluster = k8s.apiextensions.CustomResource(
            f"{name}-ray-cluster",
            api_version="ray.io/v1",
            kind="RayCluster",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=self.ray_cluster_name, namespace=namespace,
                labels={"app.kubernetes.io/part-of": "gke-grpo"}),
            spec=spec,
            opts=self._k8s(depends_on=[
                *operator_ready, *network_objects, installer, *args.storage_claims,
                self.hf_secret, *([self.wandb_secret] if self.wandb_secret else []),
                self.network_policy, *code_dependencies,
                *([args.gpu_node_pool] if args.gpu_node_pool is not None else []),
                *args.gpu_capacity_resources, *self.node_reader,
                *args.pod_service_accounts,
            ],
            # No ignore_changes on spec.workerGroupSpecs[*].replicas: the program never sends
            # replicas (components/ray_pods.py), so Server-Side Apply leaves the field to its
            # one writer, the Ray autoscaler. ignore_changes would harm: Pulumi replaces an
            # ignored input with the value in its state, so a stack deployed with the fixed
            # group (replicas = nodes) would re-send that value, and start every GPU worker, on
            # each update.
            **replacement_options(args.operator, args.helm_chart_version)))
        replacement = replacement_message(args.operator, args.helm_chart_version,
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

    def _node_reader(self, name: str, args: KubeRayArgs) -> list[pulumi.Resource]:
        """`get` on nodes for the Ray pods' service account, so a GPU worker's init container
        can read its own node's capacity-source labels (components/node_labels.py)."""
        role = cluster_role()
        cluster_role_resource = k8s.rbac.v1.ClusterRole(
            f"{name}-gpu-node-reader", metadata=role["metadata"], rules=role["rules"],
            opts=self._k8s())
        # The GPU workers' account alone: their init container reads the node; the head never does.
        binding = cluster_role_binding(args.pods.storage.worker_service_account_name, args.workload_namespace)
        binding_resource = k8s.rbac.v1.ClusterRoleBinding(
            f"{name}-gpu-node-reader", metadata=binding["metadata"], role_ref=binding["roleRef"],
            subjects=binding["subjects"], opts=self._k8s(depends_on=[cluster_role_resource]))
        return [cluster_role_resource, binding_resource]

    def _network_objects(self, name: str, args: KubeRayArgs) -> list[pulumi.Resource]:
        """GKENetworkParamSet + Network per extra NIC, named from the network component's
        outputs (no VPC or subnet name typed twice). They must exist before GPU pods schedule."""
        pairs = [(GVNIC_NETWORK, args.gvnic_network, args.gvnic_subnet, "NetDevice")]
        pairs += [(rdma_network(i), args.rdma_network, subnet, "RDMA")
                  for i, subnet in enumerate(args.rdma_subnets)]
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

    def _nccl_installer(self, name: str, autopilot: bool, versions) -> pulumi.Resource:
        """Google's NCCL RDMA installer (container-engine-accelerators/gpudirect-rdma) as a typed
        DaemonSet. It copies the gIB NCCL plugin to /home/kubernetes/bin/gib on each GPU node.
        Its init container is privileged by necessity (it writes to the host); the Ray pods are
        not. Standard: kube-system with system-node-critical priority. Autopilot: its own
        namespace and no priority class, field for field as Google's Autopilot manifest (commit
        0920249d, read 2026-12-01), which Autopilot admits as a known system workload."""
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
        core = k8s.core.v1
        host_volumes = [
            core.VolumeArgs(name="library-dir-host", host_path=core.HostPathVolumeSourceArgs(
                path=f"{NVIDIA_HOST_DIR}/lib64", type="DirectoryOrCreate")),
            core.VolumeArgs(name="gib", host_path=core.HostPathVolumeSourceArgs(path=GIB_HOST_DIR)),
        ]
        installer = core.ContainerArgs(
            name="nccl-rdma-installer",
            image=versions.system_image(image_key),
            resources=core.ResourceRequirementsArgs(requests={"cpu": "150m"}),
            security_context=core.SecurityContextArgs(privileged=True),
            volume_mounts=[
                core.VolumeMountArgs(name="library-dir-host", mount_path=f"/usr/local{NVIDIA_HOST_DIR}/lib64"),
                core.VolumeMountArgs(name="gib", mount_path=f"/usr/local{GIB_HOST_DIR}"),
            ],
            command=["/bin/sh", "-c"],
            args=["set -ex\n"
                  f"/scripts/container_entry.sh {installer_arguments(autopilot)}\n"
                  f"cp -r /var/lib/gib/lib64/. /usr/local{NVIDIA_HOST_DIR}/lib64\n"
                  f"cp -r /var/lib/gib/. /usr/local{GIB_HOST_DIR}\n"
                  "echo \"installation finishes\"\n"],
        )
        pause_image = versions.system_image("pause")
        if autopilot:
            # Google's Autopilot manifest as published.
            pause = core.ContainerArgs(name="pause", image=pause_image)
        else:
            # Standard only: the pause container that keeps the DaemonSet alive needs nothing,
            # so it gets nothing.
            pause = core.ContainerArgs(
                name="pause", image=pause_image,
                resources=core.ResourceRequirementsArgs(
                    requests={"cpu": "10m", "memory": "16Mi"}, limits={"cpu": "10m", "memory": "16Mi"}),
                security_context=core.SecurityContextArgs(
                    allow_privilege_escalation=False, read_only_root_filesystem=True,
                    run_as_non_root=True, run_as_user=65535,
                    capabilities=core.CapabilitiesArgs(drop=["ALL"])))
        pod_spec = core.PodSpecArgs(
            affinity=core.AffinityArgs(node_affinity=core.NodeAffinityArgs(
                required_during_scheduling_ignored_during_execution=core.NodeSelectorArgs(
                    node_selector_terms=[core.NodeSelectorTermArgs(match_expressions=[
                        core.NodeSelectorRequirementArgs(
                            key="cloud.google.com/gke-accelerator", operator="In",
                            values=["nvidia-h200-141gb", "nvidia-b200"])])]))),
            tolerations=[core.TolerationArgs(operator="Exists")],
            host_network=True,
            host_pid=True,
            volumes=host_volumes,
            init_containers=[installer],
            containers=[pause],
            # Standard only (None: left out, as in Google's Autopilot manifest).
            priority_class_name=None if autopilot else "system-node-critical",
            automount_service_account_token=None if autopilot else False,
            security_context=None if autopilot else core.PodSecurityContextArgs(
                seccomp_profile=core.SeccompProfileArgs(type="RuntimeDefault")),
        )
        return k8s.apps.v1.DaemonSet(
            f"{name}-nccl-rdma-installer",
            metadata=k8s.meta.v1.ObjectMetaArgs(name="nccl-rdma-installer", namespace=namespace,
                                                labels=labels),
            spec=k8s.apps.v1.DaemonSetSpecArgs(
                selector=k8s.meta.v1.LabelSelectorArgs(match_labels=labels),
                update_strategy=k8s.apps.v1.DaemonSetUpdateStrategyArgs(type="RollingUpdate"),
                template=core.PodTemplateSpecArgs(
                    metadata=k8s.meta.v1.ObjectMetaArgs(labels={"name": "nccl-rdma-installer", **labels}),
                    spec=pod_spec),
            ),
            opts=self._k8s(depends_on=dependencies))

    def _network_policy_spec(self, args: KubeRayArgs) -> k8s.networking.v1.NetworkPolicySpecArgs:
        """Admit traffic between this Ray cluster's pods (every Ray port), the dashboard port from
        the RayJob submitter (its own label) and from the KubeRay operator (Helm: its namespace;
        addon: kuberay.operatorNamespace, else the Konnectivity agents the hosted operator's
        calls come through), and Ray's metrics port from managed Prometheus; nothing else: no
        address block, no other pod of the namespace. `kubectl port-forward` is not affected (the
        kubelet connects inside the pod's own network namespace)."""
        net = k8s.networking.v1

        def namespace(name: str) -> k8s.networking.v1.NetworkPolicyPeerArgs:
            return net.NetworkPolicyPeerArgs(namespace_selector=k8s.meta.v1.LabelSelectorArgs(
                match_labels={"kubernetes.io/metadata.name": name}))

        def pods(labels: dict[str, str]) -> k8s.networking.v1.NetworkPolicyPeerArgs:
            return net.NetworkPolicyPeerArgs(pod_selector=k8s.meta.v1.LabelSelectorArgs(match_labels=labels))

        cluster_labels = {"ray.io/cluster": self.ray_cluster_name}
        if args.operator == "helm":
            operator_source = namespace(HELM_OPERATOR_NAMESPACE)
        elif args.operator_namespace:
            operator_source = namespace(args.operator_namespace)
        else:
            operator_source = addon_operator_source()
        dashboard = [net.NetworkPolicyPortArgs(port=DASHBOARD_PORT, protocol="TCP")]
        return net.NetworkPolicySpecArgs(
            pod_selector=k8s.meta.v1.LabelSelectorArgs(match_labels=dict(cluster_labels)),
            policy_types=["Ingress"],
            ingress=[
                net.NetworkPolicyIngressRuleArgs(from_=[pods(dict(cluster_labels))]),
                net.NetworkPolicyIngressRuleArgs(from_=[pods(dict(SUBMITTER_LABELS))], ports=dashboard),
                net.NetworkPolicyIngressRuleArgs(from_=[operator_source], ports=dashboard),
                # Managed Prometheus scrapes Ray's, its autoscaler's and the driver's metrics.
                net.NetworkPolicyIngressRuleArgs(
                    from_=[namespace(MANAGED_PROMETHEUS_NAMESPACE)],
                    ports=[net.NetworkPolicyPortArgs(port=p, protocol="TCP") for p in args.collector_ports]),
            ],
        )


# GKE hosts the Ray addon's KubeRay operator itself ("GKE automatically installs and hosts the
# KubeRay operator": cloud.google.com/kubernetes-engine/docs/add-on/ray-on-gke/concepts/overview,
# read 2026-12-01), and GKE's control plane reaches pods through the Konnectivity tunnel: its
# calls arrive from the konnectivity-agent pods in kube-system, never from the control plane's
# range (reported from a live GKE cluster for the API server's webhook calls: "On GKE the API
# server does not connect to in-cluster webhooks directly. It tunnels through konnectivity-agent
# pods in kube-system"; the agent's label is the one of Kubernetes' own Konnectivity manifests,
# kubernetes.io docs "Set up Konnectivity service", admin/konnectivity/konnectivity-agent.yaml).
# UNCONFIRMED that the hosted Ray operator's dashboard calls take that path: if they do not, the
# RayJob's status stops updating (the run itself is unaffected: the submitter pod and the driver
# are admitted); kuberay.operatorNamespace, or kuberay.operator "helm", names the source exactly.
KONNECTIVITY_NAMESPACE = "kube-system"
KONNECTIVITY_AGENT_LABELS = {"k8s-app": "konnectivity-agent"}
ADDON_OPERATOR_SOURCE_NOTE = (
    "The dashboard's NetworkPolicy admits the Ray addon's hosted operator through Konnectivity "
    "(unconfirmed). The GKE Ray addon hosts its KubeRay operator outside the cluster; the "
    "dashboard port (8265) admits it through the control plane's Konnectivity agents "
    "(kube-system, k8s-app=konnectivity-agent), besides the RayJob submitter and the Ray pods, "
    "and nothing else. Unconfirmed that the hosted operator uses that path: set "
    "kuberay.operatorNamespace if it runs in a namespace of the cluster, or use "
    "kuberay.operator=helm (token authentication too)")


def addon_operator_source() -> k8s.networking.v1.NetworkPolicyPeerArgs:
    """The GKE-hosted operator's source: Konnectivity agent pods in kube-system. One peer with
    both selectors (both must match); two peers would admit every pod of kube-system, or every
    pod labelled so in any namespace."""
    return k8s.networking.v1.NetworkPolicyPeerArgs(
        namespace_selector=k8s.meta.v1.LabelSelectorArgs(
            match_labels={"kubernetes.io/metadata.name": KONNECTIVITY_NAMESPACE}),
        pod_selector=k8s.meta.v1.LabelSelectorArgs(match_labels=dict(KONNECTIVITY_AGENT_LABELS)))

# In-tree autoscaling under GKE's Ray addon: no Google statement either way was found (the addon
# pages, updated 2026-04-10, list no limitation; Google's ray-kueue-dws tutorial, same date, runs
# enableInTreeAutoscaling on an addon cluster). The addon ships KubeRay v1.5 on GKE 1.35 and v1.4
# on 1.34; autoscalerOptions.version needs KubeRay >= 1.4 (its validation message).
ADDON_AUTOSCALING_MESSAGE = (
    "The Ray autoscaler under GKE's Ray addon is unconfirmed: check the head pod's `autoscaler` "
    "container after `pulumi up`. GPU workers scale with the Ray autoscaler "
    "(enableInTreeAutoscaling, autoscalerOptions.version v2); Google documents no limitation and "
    "no support (its ray-kueue-dws tutorial uses in-tree autoscaling with the addon), and the "
    "addon's KubeRay is v1.5 on GKE 1.35 (v1.4 on 1.34; autoscalerOptions.version needs >= 1.4). "
    "After `pulumi up`, check that the head pod has an `autoscaler` container; "
    "kuberay.operator=helm pins KubeRay 1.7.0.")


def installer_arguments(autopilot: bool) -> str:
    """container_entry.sh's arguments, as Google's manifests have them today
    (GoogleCloudPlatform/container-engine-accelerators gpudirect-rdma/): the Standard manifest
    dropped `--install-nccl` on 2026-05-06 (commit 2da1c92f "Removed --install-nccl from default
    and a4x installers"), so the trainer loads the libnccl bundled with its framework image
    (torch's nvidia-nccl wheel) and only the gIB net plugin comes from the node; the Autopilot
    manifest (nccl-rdma-installer-autopilot.yaml @992db812, 2026-06-09) still passes it."""
    return "install --install-nccl" if autopilot else "install"

