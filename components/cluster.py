"""GkeCluster: the GKE cluster (Autopilot or Standard), the Ray head's CPU pool, the Kubernetes
provider every Kubernetes object of the program uses, and the workload namespace.

Standard: default pool removed, Dataplane V2, multi-networking, Workload Identity, the storage
CSI addon of the configured kind, the Ray addon when KubeRay comes from GKE, a maintenance
window (plus optional exclusions for long runs), DCGM metrics and managed Prometheus, and a
non-Spot CPU pool sized for the Ray head. Autopilot: the same addons and networking, no pools.

Both: private nodes (egress through the networks' Cloud NAT), nodes running as their own
least-privilege service account (never the Compute Engine default), and a control plane reached
through the DNS-based endpoint with IAM or through the IP endpoint limited to
masterAuthorizedNetworks (gke-grpo:cluster.controlPlaneAccess; docs/deploy.md).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

if TYPE_CHECKING:   # annotations only: the config models import components' siblings
    from components.config import ClusterConfig, HeadPool, LustreStorage, StackConfig
    from components.networks import GpuNetworks
    from components.node_service_account import NodeServiceAccount

HEAD_POOL_NAME = "ray-head"
# Fields GKE changes on an autoscaled, auto-upgraded pool; set on each pool (not a component).
AUTOSCALED_POOL_IGNORE_CHANGES = [
    "nodeCount",         # the cluster autoscaler owns it
    "initialNodeCount",  # changing it would replace the pool
    "version",           # auto-upgrade moves it with the release channel
]
ROLE_LABEL = "gke-grpo/role"
CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
# GKE's default monitoring package (system, kube-state, cAdvisor and kubelet metrics) plus DCGM
# for the GPUs: Cluster Toolkit's gke-cluster module default monitoring_components with its
# enable_dcgm_monitoring (modules/scheduler/gke-cluster/variables.tf and main.tf @104708037,
# 2026-06-25). Listing only SYSTEM_COMPONENTS and DCGM would turn the others off.
MONITORING_COMPONENTS = [
    "SYSTEM_COMPONENTS", "POD", "DAEMONSET", "DEPLOYMENT", "STATEFULSET", "STORAGE", "HPA",
    "CADVISOR", "KUBELET", "JOBSET", "DCGM",
]


def ray_operator_addon(enabled: bool) -> list:
    """The Ray addon block, always sent. The provider marks ray_operator_config Optional +
    Computed (google_container_cluster schema, as copied in GoogleCloudPlatform/
    terraform-google-conversion v7 pkg/.../container/resource_container_cluster: `Optional: true,
    Computed: true`; pulumi-gcp 10.2.0 bridges that provider): an omitted block keeps whatever
    the server has, so switching a stack from the addon to Helm would leave the addon running
    next to the Helm operator. `enabled: false` turns it off."""
    if not enabled:
        return [gcp.container.ClusterAddonsConfigRayOperatorConfigArgs(enabled=False)]
    return [gcp.container.ClusterAddonsConfigRayOperatorConfigArgs(
        enabled=True,
        ray_cluster_logging_config=gcp.container.ClusterAddonsConfigRayOperatorConfigRayClusterLoggingConfigArgs(enabled=True),
        ray_cluster_monitoring_config=gcp.container.ClusterAddonsConfigRayOperatorConfigRayClusterMonitoringConfigArgs(enabled=True),
    )]


def control_plane_access(cluster: ClusterConfig) -> dict:
    """Cluster arguments for the chosen control-plane access; never open to the internet.

    dns: the DNS-based endpoint accepts traffic from outside Google Cloud and IAM decides who
    connects (container.clusters.connect); the IP endpoint is private (nodes and the VPC only).
    authorizedNetworks: the public IP endpoint, limited to the listed CIDRs; no external DNS.
    Private nodes either way. Same shape as Cluster Toolkit's gke-cluster module
    (private_cluster_config, master_authorized_networks_config, control_plane_endpoints_config;
    main.tf @104708037)."""
    dns = cluster.control_plane_access == "dns"
    return dict(
        private_cluster_config=gcp.container.ClusterPrivateClusterConfigArgs(
            enable_private_nodes=True, enable_private_endpoint=dns),
        # The block's presence turns authorized networks on, even with no CIDR (the provider
        # schema: "the parent with no entries and omitting the parent entirely are
        # semantically different").
        master_authorized_networks_config=gcp.container.ClusterMasterAuthorizedNetworksConfigArgs(
            cidr_blocks=[gcp.container.ClusterMasterAuthorizedNetworksConfigCidrBlockArgs(
                cidr_block=n.cidr_block, display_name=n.display_name)
                for n in cluster.master_authorized_networks],
            gcp_public_cidrs_access_enabled=False),
        control_plane_endpoints_config=gcp.container.ClusterControlPlaneEndpointsConfigArgs(
            dns_endpoint_config=gcp.container.ClusterControlPlaneEndpointsConfigDnsEndpointConfigArgs(
                allow_external_traffic=dns)),
    )


def kubeconfig(name: str, endpoint: str, ca_certificate: str | None) -> str:
    """A kubeconfig that authenticates through gke-gcloud-auth-plugin (no static credential
    is ever written into state). ``ca_certificate`` None: the DNS-based endpoint, whose
    certificate is publicly trusted, so no cluster CA is pinned (as `gcloud container clusters
    get-credentials --dns-endpoint` writes it)."""
    user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": "gke-gcloud-auth-plugin",
            "installHint": "Install gke-gcloud-auth-plugin: "
                           "https://cloud.google.com/kubernetes-engine/docs/how-to/cluster-access-for-kubectl",
            "provideClusterInfo": True,
        }
    }
    return json.dumps({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {
            "server": f"https://{endpoint}",
            **({"certificate-authority-data": ca_certificate} if ca_certificate else {})}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
        "current-context": name,
        "users": [{"name": name, "user": user}],
    }, sort_keys=True)


@dataclass(frozen=True)
class GkeClusterArgs:
    project: str
    region: str
    zone: str
    stack: str
    environment: str
    autopilot: bool
    deletion_protection: bool
    cluster: ClusterConfig                 # gke-grpo:cluster (name, access, maintenance, version)
    head_pool: HeadPool | None    # Standard: the Ray head's CPU pool
    storage_kind: str                      # which storage CSI addon to turn on
    lustre: LustreStorage | None        # the Lustre settings when storage_kind is lustre
    ray_operator_addon: bool               # KubeRay from GKE's Ray addon (else Helm)
    workload_namespace: str                # the namespace the Ray cluster runs in
    # From GpuNetworks:
    cluster_network_id: pulumi.Input[str]
    cluster_subnet_id: pulumi.Input[str]
    pod_range_name: str
    service_range_name: str
    # From NodeServiceAccount (None: the nodes' default account, tests only):
    node_service_account_email: pulumi.Input[str] | None = None
    node_service_account_grants: Sequence[pulumi.Resource] = ()
    services: Sequence[pulumi.Resource] = ()   # the APIs (ProjectServices) the cluster needs first


def gke_cluster_args(config: StackConfig, networks: GpuNetworks,
                     node_service_account: NodeServiceAccount | None = None,
                     services: Sequence[pulumi.Resource] = ()) -> GkeClusterArgs:
    storage = config.storage
    return GkeClusterArgs(
        project=config.project, region=config.region, zone=config.zone, stack=config.stack,
        environment=config.environment, autopilot=config.autopilot,
        deletion_protection=config.deletion_protection, cluster=config.cluster,
        head_pool=config.head_pool, storage_kind=storage.kind,
        lustre=storage.lustre if storage.kind == "lustre" and storage.lustre else None,
        ray_operator_addon=config.kuberay.operator == "addon",
        workload_namespace=config.kuberay.namespace,
        cluster_network_id=networks.cluster_network.id, cluster_subnet_id=networks.cluster_subnet.id,
        pod_range_name=networks.pod_range_name, service_range_name=networks.service_range_name,
        node_service_account_email=node_service_account.email if node_service_account else None,
        node_service_account_grants=list(node_service_account.grants) if node_service_account else [],
        services=list(services))


class GkeCluster(pulumi.ComponentResource):
    cluster: gcp.container.Cluster
    head_pool: gcp.container.NodePool | None
    provider: k8s.Provider
    kubeconfig: pulumi.Output[str]
    namespace: k8s.core.v1.Namespace
    namespace_name: pulumi.Output[str]
    head_node_selector: dict[str, str]
    node_service_account_email: pulumi.Input[str] | None   # the GPU pools run as it too
    endpoint: pulumi.Output[str]

    def __init__(self, name: str, args: GkeClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gke-grpo:components:GkeCluster", name, None, opts)
        # container.googleapis.com first; nodes boot as their service account once its role is
        # granted (they write logs and metrics from the start).
        before = [*args.services, *args.node_service_account_grants]
        node_sa_email = args.node_service_account_email
        # GPU pools (GpuCapacity) run as the same account.
        self.node_service_account_email = node_sa_email
        cluster_config = args.cluster
        lustre = args.lustre

        addons = gcp.container.ClusterAddonsConfigArgs(
            gcs_fuse_csi_driver_config=gcp.container.ClusterAddonsConfigGcsFuseCsiDriverConfigArgs(
                enabled=args.storage_kind == "gcs"),
            lustre_csi_driver_config=gcp.container.ClusterAddonsConfigLustreCsiDriverConfigArgs(
                enabled=args.storage_kind == "lustre",
                # One validated choice (gke-grpo:storage.lustre.legacyPort) decides the cluster
                # port, the instance's gke_support_enabled and the firewall together.
                enable_legacy_lustre_port=bool(lustre and lustre.legacy_port),
                # From GKE 1.35.2-gke.1842000 the driver uses every NIC and needs them all in
                # one VPC; A3 Ultra / A4 nodes have their second gVNIC on another VPC.
                disable_multi_nic=True if lustre else None,
            ),
            # The GKE Ray addon and the kuberay-operator Helm release must never both run:
            # config validation refuses a Helm chart version next to the addon.
            ray_operator_configs=ray_operator_addon(args.ray_operator_addon),
        )
        window = cluster_config.maintenance_window
        maintenance = gcp.container.ClusterMaintenancePolicyArgs(
            recurring_window=gcp.container.ClusterMaintenancePolicyRecurringWindowArgs(
                start_time=window.start_time, end_time=window.end_time,
                recurrence=window.recurrence),
            # Exclusions keep upgrades away from a long run (GKE drains nodes to upgrade them).
            maintenance_exclusions=[
                gcp.container.ClusterMaintenancePolicyMaintenanceExclusionArgs(
                    exclusion_name=exclusion.name, start_time=exclusion.start_time,
                    end_time=exclusion.end_time,
                    exclusion_options=gcp.container.ClusterMaintenancePolicyMaintenanceExclusionExclusionOptionsArgs(
                        scope=exclusion.scope),
                ) for exclusion in cluster_config.maintenance_exclusions
            ] or None,
        )
        common = dict(
            name=cluster_config.name,
            project=args.project,
            # A regional control plane survives a zonal outage; GPU nodes stay in one zone.
            location=args.region,
            network=args.cluster_network_id,
            subnetwork=args.cluster_subnet_id,
            networking_mode="VPC_NATIVE",
            ip_allocation_policy=gcp.container.ClusterIpAllocationPolicyArgs(
                cluster_secondary_range_name=args.pod_range_name,
                services_secondary_range_name=args.service_range_name,
            ),
            enable_multi_networking=True,
            release_channel=gcp.container.ClusterReleaseChannelArgs(channel=cluster_config.release_channel),
            min_master_version=cluster_config.min_master_version,
            workload_identity_config=gcp.container.ClusterWorkloadIdentityConfigArgs(
                workload_pool=f"{args.project}.svc.id.goog"),
            addons_config=addons,
            maintenance_policy=maintenance,
            monitoring_config=gcp.container.ClusterMonitoringConfigArgs(
                enable_components=MONITORING_COMPONENTS,
                managed_prometheus=gcp.container.ClusterMonitoringConfigManagedPrometheusArgs(enabled=True),
            ),
            deletion_protection=args.deletion_protection,
            resource_labels={"gke-grpo-stack": args.stack, "gke-grpo-environment": args.environment},
            **control_plane_access(cluster_config),
        )
        if args.autopilot:
            self.cluster = gcp.container.Cluster(
                f"{name}", enable_autopilot=True, **common,
                # Autopilot's nodes run as this account (never the Compute Engine default).
                # No datapath_provider: Autopilot always runs Dataplane V2, and Google's own
                # Terraform module removed the field from its Autopilot modules
                # (terraform-google-modules/terraform-google-kubernetes-engine ea012f5c5,
                # 2023-02-03, "fix: remove datapath provider from Autopilot modules (#1556)").
                cluster_autoscaling=gcp.container.ClusterClusterAutoscalingArgs(
                    auto_provisioning_defaults=gcp.container.ClusterClusterAutoscalingAutoProvisioningDefaultsArgs(
                        service_account=node_sa_email, oauth_scopes=[CLOUD_PLATFORM_SCOPE]),
                ) if node_sa_email is not None else None,
                opts=pulumi.ResourceOptions(parent=self, depends_on=before),
            )
        else:
            self.cluster = gcp.container.Cluster(
                f"{name}",
                # The default pool is created then removed: every pool is explicit.
                remove_default_node_pool=True,
                initial_node_count=1,
                datapath_provider="ADVANCED_DATAPATH",
                # The short-lived default pool too runs as the nodes' account, not the Compute
                # Engine default (which an organisation policy may have disabled).
                node_config=gcp.container.ClusterNodeConfigArgs(
                    service_account=node_sa_email, oauth_scopes=[CLOUD_PLATFORM_SCOPE],
                ) if node_sa_email is not None else None,
                **common,
                opts=pulumi.ResourceOptions(
                    parent=self, depends_on=before,
                    ignore_changes=[
                        # Describes the removed default pool; diffs on it are noise.
                        "nodeConfig",
                        "initialNodeCount",
                    ],
                ),
            )

        self.head_pool = None
        self.head_node_selector = {}
        head = args.head_pool
        if head is not None:
            self.head_pool = gcp.container.NodePool(
                f"{name}-{HEAD_POOL_NAME}",
                name=HEAD_POOL_NAME,
                project=args.project,
                location=args.region,
                cluster=self.cluster.name,
                node_locations=[args.zone],
                initial_node_count=head.min_nodes,
                autoscaling=gcp.container.NodePoolAutoscalingArgs(
                    total_min_node_count=head.min_nodes, total_max_node_count=head.max_nodes,
                    location_policy="BALANCED"),
                management=gcp.container.NodePoolManagementArgs(auto_repair=True, auto_upgrade=True),
                node_config=gcp.container.NodePoolNodeConfigArgs(
                    machine_type=head.machine_type,
                    disk_size_gb=head.disk_size_gb,
                    # The Ray head holds the GCS and the driver: never Spot (tutorial defect 2).
                    spot=False,
                    gvnic=gcp.container.NodePoolNodeConfigGvnicArgs(enabled=True),
                    labels={ROLE_LABEL: "ray-head"},
                    service_account=node_sa_email,
                    oauth_scopes=[CLOUD_PLATFORM_SCOPE],
                    workload_metadata_config=gcp.container.NodePoolNodeConfigWorkloadMetadataConfigArgs(
                        mode="GKE_METADATA"),
                ),
                opts=pulumi.ResourceOptions(parent=self, ignore_changes=AUTOSCALED_POOL_IGNORE_CHANGES),
            )
            self.head_node_selector = {"cloud.google.com/gke-nodepool": HEAD_POOL_NAME}

        if cluster_config.control_plane_access == "dns":
            # The IP endpoint is private: Pulumi, kubectl and reviewers use the DNS endpoint.
            endpoint = self.cluster.control_plane_endpoints_config.apply(
                lambda endpoints: endpoints.dns_endpoint_config.endpoint)
            ca_certificate = pulumi.Output.from_input(None)
        else:
            endpoint = self.cluster.endpoint
            ca_certificate = self.cluster.master_auth.apply(lambda auth: auth.cluster_ca_certificate)
        self.endpoint = endpoint
        self.kubeconfig = pulumi.Output.secret(pulumi.Output.all(
            self.cluster.name, endpoint, ca_certificate,
        ).apply(lambda parts: kubeconfig(f"gke_{args.project}_{args.region}_{parts[0]}", parts[1], parts[2])))
        self.provider = k8s.Provider(
            f"{name}-kubernetes",
            kubeconfig=self.kubeconfig,
            # A provider per stack: never fall back to a local kubeconfig's current context.
            enable_server_side_apply=True,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[p for p in [self.head_pool] if p]),
        )
        self.namespace = k8s.core.v1.Namespace(
            f"{name}-workloads",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=args.workload_namespace,
                labels={"app.kubernetes.io/part-of": "gke-grpo"},
            ),
            opts=pulumi.ResourceOptions(parent=self, provider=self.provider),
        )
        self.namespace_name = self.namespace.metadata.apply(lambda metadata: metadata.name)

        self.register_outputs({
            "cluster_name": self.cluster.name,
            "endpoint": self.endpoint,
            "kubeconfig": self.kubeconfig,
            "namespace": self.namespace_name,
        })
