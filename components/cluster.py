"""GkeCluster: the GKE cluster (Autopilot or Standard), the Ray head's CPU pool, the Kubernetes
provider every Kubernetes object of the program uses, and the workload namespace.

Standard: default pool removed, Dataplane V2, multi-networking, Workload Identity, the storage
CSI addon of the configured kind, the Ray addon when KubeRay comes from GKE, a maintenance
window (plus optional exclusions for long runs), DCGM metrics and managed Prometheus, and a
non-Spot CPU pool sized for the Ray head. Autopilot: the same addons and networking, no pools.
"""

from __future__ import annotations

import json

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from components.config import StackConfig
from components.networks import GpuNetworks

HEAD_POOL_NAME = "ray-head"
# Fields GKE changes on an autoscaled, auto-upgraded pool; set on each pool (not a component).
AUTOSCALED_POOL_IGNORE_CHANGES = [
    "nodeCount",         # the cluster autoscaler owns it
    "initialNodeCount",  # changing it would replace the pool
    "version",           # auto-upgrade moves it with the release channel
]
ROLE_LABEL = "gke-grpo/role"


def kubeconfig(name: str, endpoint: str, ca_certificate: str) -> str:
    """A kubeconfig that authenticates through gke-gcloud-auth-plugin (no static credential
    is ever written into state)."""
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
            "server": f"https://{endpoint}", "certificate-authority-data": ca_certificate}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
        "current-context": name,
        "users": [{"name": name, "user": user}],
    }, sort_keys=True)


class GkeCluster(pulumi.ComponentResource):
    cluster: gcp.container.Cluster
    head_pool: gcp.container.NodePool | None
    provider: k8s.Provider
    kubeconfig: pulumi.Output[str]
    namespace: k8s.core.v1.Namespace
    namespace_name: pulumi.Output[str]
    head_node_selector: dict[str, str]

    def __init__(self, name: str, config: StackConfig, networks: GpuNetworks,
                 opts: pulumi.ResourceOptions | None = None):
        super().__init__("gke-grpo:components:GkeCluster", name, None, opts)
        cluster_config = config.cluster
        storage = config.storage
        lustre = storage.lustre if storage.kind == "lustre" and storage.lustre else None

        addons = gcp.container.ClusterAddonsConfigArgs(
            gcs_fuse_csi_driver_config=gcp.container.ClusterAddonsConfigGcsFuseCsiDriverConfigArgs(
                enabled=storage.kind == "gcs"),
            lustre_csi_driver_config=gcp.container.ClusterAddonsConfigLustreCsiDriverConfigArgs(
                enabled=storage.kind == "lustre",
                # One validated choice (gke-grpo:storage.lustre.legacyPort) decides the cluster
                # port, the instance's gke_support_enabled and the firewall together.
                enable_legacy_lustre_port=bool(lustre and lustre.legacy_port),
            ),
            # The GKE Ray addon and the kuberay-operator Helm release must never both run:
            # config validation refuses a Helm chart version next to the addon.
            ray_operator_configs=[gcp.container.ClusterAddonsConfigRayOperatorConfigArgs(
                enabled=True,
                ray_cluster_logging_config=gcp.container.ClusterAddonsConfigRayOperatorConfigRayClusterLoggingConfigArgs(enabled=True),
                ray_cluster_monitoring_config=gcp.container.ClusterAddonsConfigRayOperatorConfigRayClusterMonitoringConfigArgs(enabled=True),
            )] if config.kuberay.operator == "addon" else None,
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
            project=config.project,
            # A regional control plane survives a zonal outage; GPU nodes stay in one zone.
            location=config.region,
            network=networks.cluster_network.id,
            subnetwork=networks.cluster_subnet.id,
            networking_mode="VPC_NATIVE",
            ip_allocation_policy=gcp.container.ClusterIpAllocationPolicyArgs(
                cluster_secondary_range_name=networks.pod_range_name,
                services_secondary_range_name=networks.service_range_name,
            ),
            datapath_provider="ADVANCED_DATAPATH",
            enable_multi_networking=True,
            release_channel=gcp.container.ClusterReleaseChannelArgs(channel=cluster_config.release_channel),
            min_master_version=cluster_config.min_master_version,
            workload_identity_config=gcp.container.ClusterWorkloadIdentityConfigArgs(
                workload_pool=f"{config.project}.svc.id.goog"),
            addons_config=addons,
            maintenance_policy=maintenance,
            monitoring_config=gcp.container.ClusterMonitoringConfigArgs(
                enable_components=["SYSTEM_COMPONENTS", "DCGM"],
                managed_prometheus=gcp.container.ClusterMonitoringConfigManagedPrometheusArgs(enabled=True),
            ),
            deletion_protection=config.deletion_protection,
            resource_labels={"gke-grpo-stack": config.stack, "gke-grpo-environment": config.environment},
        )
        if config.autopilot:
            self.cluster = gcp.container.Cluster(
                f"{name}", enable_autopilot=True, **common,
                opts=pulumi.ResourceOptions(parent=self),
            )
        else:
            self.cluster = gcp.container.Cluster(
                f"{name}",
                # The default pool is created then removed: every pool is explicit.
                remove_default_node_pool=True,
                initial_node_count=1,
                **common,
                opts=pulumi.ResourceOptions(
                    parent=self,
                    ignore_changes=[
                        # Describes the removed default pool; diffs on it are noise.
                        "nodeConfig",
                        "initialNodeCount",
                    ],
                ),
            )

        self.head_pool = None
        self.head_node_selector = {}
        head = config.head_pool
        if head is not None:
            self.head_pool = gcp.container.NodePool(
                f"{name}-{HEAD_POOL_NAME}",
                name=HEAD_POOL_NAME,
                project=config.project,
                location=config.region,
                cluster=self.cluster.name,
                node_locations=[config.zone],
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
                    oauth_scopes=["https://www.googleapis.com/auth/cloud-platform"],
                    workload_metadata_config=gcp.container.NodePoolNodeConfigWorkloadMetadataConfigArgs(
                        mode="GKE_METADATA"),
                ),
                opts=pulumi.ResourceOptions(parent=self, ignore_changes=AUTOSCALED_POOL_IGNORE_CHANGES),
            )
            self.head_node_selector = {"cloud.google.com/gke-nodepool": HEAD_POOL_NAME}

        ca_certificate = self.cluster.master_auth.apply(lambda auth: auth.cluster_ca_certificate)
        self.kubeconfig = pulumi.Output.secret(pulumi.Output.all(
            self.cluster.name, self.cluster.endpoint, ca_certificate,
        ).apply(lambda parts: kubeconfig(f"gke_{config.project}_{config.region}_{parts[0]}", parts[1], parts[2])))
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
                name=config.kuberay.namespace,
                labels={"app.kubernetes.io/part-of": "gke-grpo"},
            ),
            opts=pulumi.ResourceOptions(parent=self, provider=self.provider),
        )
        self.namespace_name = self.namespace.metadata.apply(lambda metadata: metadata.name)

        self.register_outputs({
            "cluster_name": self.cluster.name,
            "endpoint": self.cluster.endpoint,
            "kubeconfig": self.kubeconfig,
            "namespace": self.namespace_name,
        })
