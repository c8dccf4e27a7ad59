"""SharedStorage: the shared /data volume every Ray pod mounts, on Cloud Storage FUSE or Lustre.

Owns, for ``gke-grpo:storage.kind: gcs``: the Cloud Storage bucket, the Kubernetes service
account the Ray pods run as, the bucket-scoped IAM grant to that service account (Workload
Identity Federation, no Google service account), and a static PersistentVolume/Claim on the
Cloud Storage FUSE CSI driver with mount options chosen for GRPO (model loads, checkpoints).

For ``kind: lustre``: the private-services-access range on the cluster VPC, the service
networking peering, the firewall rule for Lustre's LNet port, the Managed Lustre instance, the
same service account, and a static PersistentVolume/Claim on the Lustre CSI driver.

Both kinds expose the same attributes (claim name, namespace, mount path, pod annotations,
volumes and volume mounts ready for a pod template, service account, data layout), so the Ray
cluster and the job never ask which kind they run on. The cluster side (CSI addons, the legacy
Lustre port) belongs to GkeCluster.

Facts relied on, all looked up 2026-12-01 (collected in the project's storage research notes):
  [PERF]   docs.cloud.google.com/kubernetes-engine/docs/how-to/cloud-storage-fuse-csi-driver-perf
           (page "Last updated 2026-04-10")
  [PARAMS] GoogleCloudPlatform/gcsfuse cfg/params.yaml (defaults, machine-based optimizations)
  [TRBL]   GoogleCloudPlatform/gcs-fuse-csi-driver docs/troubleshooting.md (sidecar "0" values)
  [WHCFG]  GoogleCloudPlatform/gcs-fuse-csi-driver pkg/webhook/config.go (sidecar annotations)
  [REL]    GoogleCloudPlatform/gcs-fuse-csi-driver docs/releases.md (feature -> GKE version)
  [LCSI]   GoogleCloudPlatform/lustre-csi-driver examples/pre-prov/preprov-pvc-pv.yaml and
           cloud.google.com/managed-lustre/docs/lustre-csi-driver-reference (static PV shape)
  [PGCP]   pulumi-gcp 10.2.0 docstrings (lustre.Instance, servicenetworking.Connection, Bucket)
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from components.config import GcsStorage, LustreStorage, StackConfig
from components.config.sidecar import (
    HEAD_SIDECAR_AUTOPILOT,
    HEAD_SIDECAR_STANDARD,
    SidecarLimits,
    gcsfuse_sidecar_limits,
)
from components.gcsfuse import (  # Cloud Storage FUSE: pure functions of the storage config
    BUCKET_ROLE,
    GCS_NOMINAL_CAPACITY,
    GCSFUSE_DRIVER,
    gcsfuse_mount_options,
    gcsfuse_pod_annotations,
)
from jobs.contract.layout import DATA_LAYOUT, MOUNT_PATH, DataLayout

# --------------------------------------------------------------------------------------------
# What pods see: one volume, one mount path, one layout under it.
# --------------------------------------------------------------------------------------------

# The layout under the mount lives in jobs/contract/layout.py: the job code that runs on the Ray head
# reads it there without importing Pulumi.
# The pod volume and the PVC share a name: a reader of a pod spec finds the claim at once.
VOLUME_NAME = "shared-data"
CLAIM_NAME = "shared-data"
HEAD_CLAIM_NAME = "shared-data-head"
# The Kubernetes service accounts the Ray pods run as, for both kinds: on gcs each is an identity
# a bucket grant names; on lustre they only keep the pods off the namespace's `default` account.
# Two, so that only the head carries the Ray autoscaler's rights: KubeRay binds its autoscaler
# Role (pods get/list/watch/patch, pods/resize, rayclusters get/patch) to the head's service
# account (ray-operator/controllers/ray/common/rbac.go BuildRoleBinding @v1.7.0), and a GPU
# worker sharing it could patch the RayCluster and its pods from trainer code. The head keeps the
# account Ray pods ran as before: KubeRay creates that RoleBinding once and never updates its
# subject (raycluster_controller.go reconcileAutoscalerRoleBinding), so a deployed stack's binding
# stays on the head; the GPU workers move to an account of their own.
SERVICE_ACCOUNT_NAME = "grpo-workload"
WORKER_SERVICE_ACCOUNT_NAME = "grpo-gpu-worker"


def workload_identity_member(project_number: str, project: str, namespace: str, ksa: str) -> str:
    """The principal of a Kubernetes service account under Workload Identity Federation for GKE
    (no Google service account to impersonate); shared/reference/tutorials.md §3."""
    return (f"principal://iam.googleapis.com/projects/{project_number}/locations/global/"
            f"workloadIdentityPools/{project}.svc.id.goog/subject/ns/{namespace}/sa/{ksa}")


# --------------------------------------------------------------------------------------------
# Managed Lustre
# --------------------------------------------------------------------------------------------

LUSTRE_DRIVER = "lustre.csi.storage.gke.io"
# LNet listens on 988; the legacy port 6988 avoids gke-metadata-server's 988 on old nodes and is
# what instances created with gke_support_enabled use (LustreCsiDriverConfig API reference).
LUSTRE_PORT = 988
LUSTRE_LEGACY_PORT = 6988


def parse_lustre_mount_point(mount_point: str) -> tuple[str, str]:
    """``"10.96.0.5@tcp:/lustrefs"`` -> ``("10.96.0.5", "lustrefs")``: the instance's
    ``mount_point`` output has the form ``IP@tcp:/FILESYSTEM`` [PGCP]; the CSI driver wants the
    two parts as the ``ip`` and ``filesystem`` volume attributes [LCSI]."""
    match = re.fullmatch(r"([^@\s]+)@tcp:/([A-Za-z0-9]+)/?", mount_point or "")
    if not match:
        raise ValueError(f"Lustre mount point {mount_point!r}: expected IP@tcp:/FILESYSTEM")
    return match.group(1), match.group(2)


# --------------------------------------------------------------------------------------------
# The component
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PodStorage:
    """What a Ray pod template takes from the shared storage: its volumes and mounts, the
    gcsfuse sidecar's annotations (empty on Lustre), the head's and the GPU workers' service
    accounts, and the claims the pods must wait for. ``sidecar_budget``: CPU and GiB the gcsfuse
    sidecar takes from a GPU worker's node ("0": unlimited, which takes nothing up front)."""
    head_service_account_name: str
    worker_service_account_name: str
    volumes: list[dict]
    volume_mounts: list[dict]
    head_volumes: list[dict]
    pod_annotations: dict[str, str]
    head_pod_annotations: dict[str, str]
    hf_home: str
    sidecar_budget: tuple[float, float]
    claims: list[pulumi.Resource]
    # The accounts granted BUCKET_ROLE on the bucket through Workload Identity (none on Lustre).
    bucket_accounts: tuple[str, ...] = ()


@dataclass(frozen=True)
class SharedStorageArgs:
    project: str
    region: str
    zone: str
    stack: str
    environment: str
    autopilot: bool
    # gke-grpo:storage.allowDataLoss: the bucket or instance is protected (and never
    # force-destroyed) unless an update deletes or replaces it on purpose.
    allow_data_loss: bool
    cluster_name: str              # names the PVs (cluster-scoped objects)
    gke_version: str               # gates gcsfuse mount options
    kind: str                      # "gcs" or "lustre"
    gcs: GcsStorage | None
    lustre: LustreStorage | None
    bucket_name: str | None                   # gcs only
    soft_delete_retention_days: int              # gcs only
    lustre_instance_id: str | None            # lustre only, as are the four below
    lustre_peering_address: str | None
    lustre_peering_prefix_length: int | None
    lustre_range_name: str
    lustre_firewall_name: str
    # From GpuNetworks and GkeCluster:
    cluster_network: gcp.compute.Network
    namespace: pulumi.Input[str]
    kubernetes_provider: k8s.Provider
    services: Sequence[pulumi.Resource] = ()   # the APIs (ProjectServices) the storage needs first


def shared_storage_args(config: StackConfig, *, cluster_network: gcp.compute.Network,
                        namespace: pulumi.Input[str], kubernetes_provider: k8s.Provider,
                        services: Sequence[pulumi.Resource] = ()) -> SharedStorageArgs:
    lustre = config.storage.kind == "lustre"
    return SharedStorageArgs(
        project=config.project, region=config.region, zone=config.zone, stack=config.stack,
        environment=config.environment, autopilot=config.autopilot,
        allow_data_loss=config.storage.allow_data_loss,
        cluster_name=config.cluster.name, gke_version=config.cluster.min_master_version,
        kind=config.storage.kind, gcs=config.storage.gcs, lustre=config.storage.lustre,
        bucket_name=config.bucket_name, soft_delete_retention_days=config.soft_delete_retention_days,
        lustre_instance_id=config.lustre_instance_id,
        lustre_peering_address=config.lustre_peering_address if lustre else None,
        lustre_peering_prefix_length=config.lustre_peering_prefix_length if lustre else None,
        lustre_range_name=config.names.lustre_range, lustre_firewall_name=config.names.lustre_firewall,
        cluster_network=cluster_network, namespace=namespace,
        kubernetes_provider=kubernetes_provider, services=list(services))


class SharedStorage(pulumi.ComponentResource):
    claim_name: str
    namespace: pulumi.Output[str]
    mount_path: str
    pod_annotations: dict[str, str]
    volumes: list[dict]
    volume_mounts: list[dict]
    service_account_name: str            # the Ray head's
    worker_service_account_name: str     # the GPU workers'
    data_layout: DataLayout
    # For dependants: the RayCluster must wait for the claim and both accounts (DESIGN.md
    # "Lifecycle"; KubeRay's reconcile fails on a head serviceAccountName that does not exist).
    service_account: k8s.core.v1.ServiceAccount
    worker_service_account: k8s.core.v1.ServiceAccount
    persistent_volume: k8s.core.v1.PersistentVolume
    persistent_volume_claim: k8s.core.v1.PersistentVolumeClaim
    # gcs only (None on lustre): the sidecar's limits (on Autopilot they are taken from the
    # pod's share of the node), the bucket and its grant.
    sidecar_limits: SidecarLimits | None
    bucket: gcp.storage.Bucket | None
    bucket_iam_member: gcp.storage.BucketIAMMember | None
    worker_bucket_iam_member: gcp.storage.BucketIAMMember | None
    # lustre only (None on gcs).
    lustre_range: gcp.compute.GlobalAddress | None
    lustre_peering: gcp.servicenetworking.Connection | None
    lustre_firewall: gcp.compute.Firewall | None
    lustre_instance: gcp.lustre.Instance | None
    # What the Ray head's pod gets: on gcs a claim of its own and a smaller sidecar.
    head_volumes: list[dict]
    head_claims: list[k8s.core.v1.PersistentVolumeClaim]
    head_sidecar_limits: SidecarLimits | None
    head_pod_annotations: dict[str, str]
    head_persistent_volume: k8s.core.v1.PersistentVolume | None
    # Everything a Ray pod template needs from this component, in one value (KubeRayArgs).
    pods: PodStorage

    def __init__(self, name: str, args: SharedStorageArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gke-grpo:components:SharedStorage", name, None, opts)
        self._name = name
        # storage / lustre / servicenetworking / cloudresourcemanager enabled first.
        self._services = list(args.services)
        self._args = args
        self._provider = args.kubernetes_provider
        self.namespace = pulumi.Output.from_input(args.namespace)
        self.claim_name = CLAIM_NAME
        self.mount_path = MOUNT_PATH
        self.service_account_name = SERVICE_ACCOUNT_NAME
        self.worker_service_account_name = WORKER_SERVICE_ACCOUNT_NAME
        self.data_layout = DATA_LAYOUT
        self.volumes = [{"name": VOLUME_NAME, "persistentVolumeClaim": {"claimName": CLAIM_NAME}}]
        self.volume_mounts = [{"name": VOLUME_NAME, "mountPath": MOUNT_PATH}]
        # The Ray head's volume: the same claim on Lustre; on gcs a claim of its own without
        # the file cache (see _head_gcs_claim). Same volume name, so mounts read the same.
        self.head_volumes = self.volumes
        self.head_claims = []
        self.head_persistent_volume = None
        self.bucket = self.bucket_iam_member = self.worker_bucket_iam_member = None
        self.lustre_range = self.lustre_peering = self.lustre_firewall = self.lustre_instance = None
        self._labels = {"app.kubernetes.io/part-of": "gke-grpo",
                        "app.kubernetes.io/component": "shared-storage"}

        # Same identities on both kinds, so pod templates never depend on the storage kind.
        self.service_account = k8s.core.v1.ServiceAccount(
            f"{name}-ksa",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=SERVICE_ACCOUNT_NAME, namespace=self.namespace, labels=self._labels),
            opts=self._k8s_opts(),
        )
        self.worker_service_account = k8s.core.v1.ServiceAccount(
            f"{name}-worker-ksa",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=WORKER_SERVICE_ACCOUNT_NAME, namespace=self.namespace, labels=self._labels),
            opts=self._k8s_opts(),
        )

        if args.kind == "gcs":
            self._gcs(args.gcs or GcsStorage())
        else:
            self._lustre(args.lustre or LustreStorage(), args.cluster_network)

        self.pods = PodStorage(
            head_service_account_name=self.service_account_name,
            worker_service_account_name=self.worker_service_account_name, volumes=self.volumes,
            volume_mounts=self.volume_mounts, head_volumes=self.head_volumes,
            pod_annotations=self.pod_annotations, head_pod_annotations=self.head_pod_annotations,
            hf_home=self.data_layout.hf_home,
            sidecar_budget=(0.0, 0.0) if self.sidecar_limits is None else self.sidecar_limits.budget(),
            claims=[self.persistent_volume_claim, *self.head_claims],
            bucket_accounts=() if self.bucket is None else (self.service_account_name,
                                                            self.worker_service_account_name))

        self.register_outputs({
            "claim_name": self.claim_name,
            "namespace": self.namespace,
            "mount_path": self.mount_path,
            "service_account_name": self.service_account_name,
            "worker_service_account_name": self.worker_service_account_name,
            "pod_annotations": self.pod_annotations,
            "bucket": self.bucket.name if self.bucket else None,
            "lustre_mount_point": self.lustre_instance.mount_point if self.lustre_instance else None,
        })

    def _k8s_opts(self, **kwargs) -> pulumi.ResourceOptions:
        return pulumi.ResourceOptions(parent=self, provider=self._provider, **kwargs)

    # ---- Cloud Storage FUSE -----------------------------------------------------------------
    def _gcs(self, gcs: GcsStorage) -> None:
        name, args = self._name, self._args
        labels = {"gke-grpo-stack": args.stack, "gke-grpo-environment": args.environment}
        self.bucket = gcp.storage.Bucket(
            f"{name}-bucket",
            name=args.bucket_name,
            project=args.project,
            # Same region as the GPU nodes: no cross-region egress, lowest latency.
            location=args.region,
            uniform_bucket_level_access=True,
            # HNS: atomic folder renames for checkpoint directories [PERF]; needs uniform access.
            hierarchical_namespace=gcp.storage.BucketHierarchicalNamespaceArgs(
                enabled=gcs.hierarchical_namespace),
            # Stated even when 0 (off): an omitted block keeps whatever the server has [PGCP].
            # Off by default in dev: verl and NeMo RL rotate checkpoints, and every deleted
            # step would stay billed for the retention period (README "Soft delete").
            soft_delete_policy=gcp.storage.BucketSoftDeletePolicyArgs(
                retention_duration_seconds=args.soft_delete_retention_days * 86400),
            public_access_prevention="enforced",
            # Objects go with the bucket only when deleting it was asked for (storage.allowDataLoss);
            # soft delete keeps them restorable for the retention period even then.
            force_destroy=args.allow_data_loss,
            labels=labels,
            # Protected in every stack: replacing or deleting it stops here (and is refused at
            # validation already, components/replacements.py) unless storage.allowDataLoss.
            opts=pulumi.ResourceOptions(parent=self, protect=not args.allow_data_loss,
                                        depends_on=self._services),
        )

        # The project number comes from the API, never from config: a typo there would grant
        # access to another project's identity.
        project_number = gcp.organizations.get_project_output(
            project_id=args.project,
            opts=pulumi.InvokeOutputOptions(parent=self, depends_on=self._services)).number
        def member(account: k8s.core.v1.ServiceAccount) -> pulumi.Output[str]:
            ksa_name = account.metadata.apply(lambda metadata: metadata.name)
            return pulumi.Output.all(project_number, self.namespace, ksa_name).apply(
                lambda parts: workload_identity_member(parts[0], args.project, parts[1], parts[2]))

        # On this bucket only: the pods get nothing project-wide. One grant per account: the
        # head and the GPU workers both mount the bucket (Cloud Storage FUSE authenticates as
        # the pod's Kubernetes service account), and that is all the workers' account may do.
        self.bucket_iam_member = gcp.storage.BucketIAMMember(
            f"{name}-bucket-object-user",
            bucket=self.bucket.name,
            role=BUCKET_ROLE,
            member=member(self.service_account),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.worker_bucket_iam_member = gcp.storage.BucketIAMMember(
            f"{name}-bucket-object-user-gpu-workers",
            bucket=self.bucket.name,
            role=BUCKET_ROLE,
            member=member(self.worker_service_account),
            opts=pulumi.ResourceOptions(parent=self),
        )

        limits = gcsfuse_sidecar_limits(gcs, args.autopilot)
        self.sidecar_limits = limits
        self.pod_annotations = gcsfuse_pod_annotations(limits)
        head_limits = HEAD_SIDECAR_AUTOPILOT if args.autopilot else HEAD_SIDECAR_STANDARD
        self.head_sidecar_limits = head_limits
        self.head_pod_annotations = gcsfuse_pod_annotations(head_limits)
        volume_attributes = {}
        if gcs.skip_bucket_access_check:
            # Off by default: skipping hides IAM mistakes until the first read (tutorial defect 6).
            volume_attributes["skipCSIBucketAccessCheck"] = "true"

        self.persistent_volume = k8s.core.v1.PersistentVolume(
            f"{name}-pv",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=f"{args.cluster_name}-{VOLUME_NAME}", labels=self._labels),
            spec=k8s.core.v1.PersistentVolumeSpecArgs(
                access_modes=["ReadWriteMany"],
                capacity={"storage": GCS_NOMINAL_CAPACITY},
                # Retain: deleting the PV (or the stack's Kubernetes side) never touches data.
                persistent_volume_reclaim_policy="Retain",
                # "" = no class, no dynamic provisioning; no dummy StorageClass to maintain.
                storage_class_name="",
                mount_options=gcsfuse_mount_options(gcs, limits, args.gke_version),
                # Reserved for our claim: no other PVC in the cluster can bind it first.
                claim_ref=k8s.core.v1.ObjectReferenceArgs(
                    namespace=self.namespace, name=CLAIM_NAME),
                csi=k8s.core.v1.CSIPersistentVolumeSourceArgs(
                    driver=GCSFUSE_DRIVER,
                    volume_handle=self.bucket.name,
                    volume_attributes=volume_attributes or None,
                ),
            ),
            # The grant first: a pod mounting before it exists fails the driver's access check.
            # This volume is the GPU workers' (the head has its own, below).
            opts=self._k8s_opts(depends_on=[self.bucket, self.worker_bucket_iam_member]),
        )
        self._claim(GCS_NOMINAL_CAPACITY)
        self._head_gcs_claim(gcs, volume_attributes)

    def _head_gcs_claim(self, gcs: GcsStorage, volume_attributes: dict) -> None:
        """The head's own PV/PVC on the same bucket, without a file cache: the head reads a
        65 GB model once (data preparation), and a file cache in its small sidecar budget
        (HEAD_SIDECAR_*: 50Gi or, on Autopilot, 4Gi of ephemeral storage) would fill it and get
        the head evicted.
        Two PVs may name the same bucket: the head and the GPU workers never share a node."""
        args = self._args
        head_limits = self.head_sidecar_limits
        assert head_limits is not None, "set for gcs storage before the head's volume is built"
        bucket = self.bucket
        assert bucket is not None, "created by _gcs before the head's volume is built"
        no_cache = gcs.model_copy(update={"file_cache_size_gib": 0})
        pv = k8s.core.v1.PersistentVolume(
            f"{self._name}-head-pv",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=f"{args.cluster_name}-{HEAD_CLAIM_NAME}", labels=self._labels),
            spec=k8s.core.v1.PersistentVolumeSpecArgs(
                access_modes=["ReadWriteMany"],
                capacity={"storage": GCS_NOMINAL_CAPACITY},
                persistent_volume_reclaim_policy="Retain",
                storage_class_name="",
                mount_options=gcsfuse_mount_options(
                    no_cache, head_limits, args.gke_version),
                claim_ref=k8s.core.v1.ObjectReferenceArgs(
                    namespace=self.namespace, name=HEAD_CLAIM_NAME),
                csi=k8s.core.v1.CSIPersistentVolumeSourceArgs(
                    driver=GCSFUSE_DRIVER,
                    volume_handle=bucket.name,
                    volume_attributes=volume_attributes or None,
                ),
            ),
            opts=self._k8s_opts(depends_on=[bucket, self.bucket_iam_member]),
        )
        claim = k8s.core.v1.PersistentVolumeClaim(
            f"{self._name}-head-pvc",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=HEAD_CLAIM_NAME, namespace=self.namespace, labels=self._labels),
            spec=k8s.core.v1.PersistentVolumeClaimSpecArgs(
                access_modes=["ReadWriteMany"],
                storage_class_name="",
                volume_name=pv.metadata.apply(lambda metadata: metadata.name),
                resources=k8s.core.v1.VolumeResourceRequirementsArgs(
                    requests={"storage": GCS_NOMINAL_CAPACITY}),
            ),
            opts=self._k8s_opts(),
        )
        self.head_persistent_volume = pv
        self.head_claims = [claim]
        self.head_volumes = [{"name": VOLUME_NAME, "persistentVolumeClaim": {"claimName": HEAD_CLAIM_NAME}}]

    # ---- Managed Lustre ----------------------------------------------------------------------
    def _lustre(self, lustre: LustreStorage, cluster_network: gcp.compute.Network) -> None:
        name, args = self._name, self._args
        cluster_name = args.cluster_name
        self.sidecar_limits = None
        self.pod_annotations = {}
        self.head_sidecar_limits = None
        self.head_pod_annotations = {}

        # Private services access: Lustre lives in a Google-managed VPC peered to ours and
        # takes its addresses from this range (a /24 per instance).
        self.lustre_range = gcp.compute.GlobalAddress(
            f"{name}-lustre-range",
            name=args.lustre_range_name,
            project=args.project,
            purpose="VPC_PEERING",
            address_type="INTERNAL",
            # network.lustrePeeringCidr, checked disjoint from every other range by the config.
            address=args.lustre_peering_address,
            prefix_length=args.lustre_peering_prefix_length,
            network=cluster_network.id,
            opts=pulumi.ResourceOptions(parent=self, depends_on=self._services),
        )
        self.lustre_peering = gcp.servicenetworking.Connection(
            f"{name}-lustre-peering",
            network=cluster_network.id,
            service="servicenetworking.googleapis.com",
            reserved_peering_ranges=[self.lustre_range.name],
            # REMOVE_PEERING: delete the connection, and if the API refuses because the producer
            # has not released it yet (it lags the instance's deletion), remove the peering so
            # the network can still be deleted [PGCP]. ABANDON would leave the peering and block
            # deleting the VPC; plain DELETE leaves a destroy stuck on that refusal. The VPC is
            # this stack's own, so no other service's peering can be cut.
            deletion_policy="REMOVE_PEERING",
            opts=pulumi.ResourceOptions(parent=self, depends_on=self._services),
        )
        port = LUSTRE_LEGACY_PORT if lustre.legacy_port else LUSTRE_PORT
        # Lustre servers talk back to their clients over LNet: allow it in from the PSA range
        # only, on the one port the cluster's CSI driver uses (Cluster Toolkit opens 988).
        self.lustre_firewall = gcp.compute.Firewall(
            f"{name}-lustre-lnet",
            name=args.lustre_firewall_name,
            project=args.project,
            network=cluster_network.id,
            direction="INGRESS",
            source_ranges=[pulumi.Output.concat(
                self.lustre_range.address, "/", str(args.lustre_peering_prefix_length))],
            allows=[gcp.compute.FirewallAllowArgs(protocol="tcp", ports=[str(port)])],
            opts=pulumi.ResourceOptions(parent=self, depends_on=self._services),
        )
        instance_id = args.lustre_instance_id
        self.lustre_instance = gcp.lustre.Instance(
            f"{name}-lustre",
            instance_id=instance_id,
            project=args.project,
            location=args.zone,
            filesystem=lustre.filesystem,
            # int64 fields travel as strings in this API [PGCP].
            capacity_gib=str(lustre.capacity_gib),
            per_unit_storage_throughput=str(lustre.throughput_tier),
            network=cluster_network.id,
            # One choice with the cluster's legacy port: such instances need port 6988.
            gke_support_enabled=lustre.legacy_port,
            description=f"gke-grpo shared data for {cluster_name}",
            labels={"gke-grpo-stack": args.stack, "gke-grpo-environment": args.environment},
            opts=pulumi.ResourceOptions(
                parent=self, protect=not args.allow_data_loss,
                # The instance needs the peering up to get an address; on destroy it goes first.
                depends_on=[self.lustre_peering]),
        )

        endpoint = self.lustre_instance.mount_point.apply(parse_lustre_mount_point)
        capacity = f"{lustre.capacity_gib}Gi"
        self.persistent_volume = k8s.core.v1.PersistentVolume(
            f"{name}-pv",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=f"{cluster_name}-{VOLUME_NAME}", labels=self._labels),
            spec=k8s.core.v1.PersistentVolumeSpecArgs(
                access_modes=["ReadWriteMany"],
                capacity={"storage": capacity},
                persistent_volume_reclaim_policy="Retain",
                storage_class_name="",
                claim_ref=k8s.core.v1.ObjectReferenceArgs(
                    namespace=self.namespace, name=CLAIM_NAME),
                csi=k8s.core.v1.CSIPersistentVolumeSourceArgs(
                    driver=LUSTRE_DRIVER,
                    # <project>/<location>/<instance> [LCSI].
                    volume_handle=f"{args.project}/{args.zone}/{instance_id}",
                    volume_attributes={
                        "ip": endpoint.apply(lambda parts: parts[0]),
                        "filesystem": endpoint.apply(lambda parts: parts[1]),
                    },
                ),
            ),
            # Pods mount as soon as the claim binds: the LNet port must be open by then.
            opts=self._k8s_opts(depends_on=[self.lustre_instance, self.lustre_firewall]),
        )
        self._claim(capacity)

    # ---- the claim, same on both kinds -------------------------------------------------------
    def _claim(self, storage: str) -> None:
        self.persistent_volume_claim = k8s.core.v1.PersistentVolumeClaim(
            f"{self._name}-pvc",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=CLAIM_NAME, namespace=self.namespace, labels=self._labels),
            spec=k8s.core.v1.PersistentVolumeClaimSpecArgs(
                access_modes=["ReadWriteMany"],
                # Explicit "": omitted, the default StorageClass would be filled in and GKE
                # would provision a new disk instead of binding our volume.
                storage_class_name="",
                volume_name=self.persistent_volume.metadata.apply(lambda metadata: metadata.name),
                resources=k8s.core.v1.VolumeResourceRequirementsArgs(
                    requests={"storage": storage}),
            ),
            opts=self._k8s_opts(),
        )
