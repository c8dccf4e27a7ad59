"""SharedStorage under Pulumi mocks: Cloud Storage FUSE and Managed Lustre, on Autopilot and
Standard, in dev and prod.

Each config is built once (module cache) under ``pulumi.runtime.set_mocks`` with tools.mocks'
GrpoMocks and the preview's RecordingMonitor, which records every registration as the engine
receives it: inputs by wire name, parent, protect, dependencies and provider.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import kubernetes_validate
import pulumi
import pytest

from components.config import GcsStorage, load_stack_config, quantity_bytes
from components.storage import (
    DataLayout,
    SharedStorage,
    gcsfuse_mount_options,
    gcsfuse_sidecar_limits,
    parse_lustre_mount_point,
    shared_storage_args,
    workload_identity_member,
)
from tests.conftest import DELETE, stack_config
from tests.kubernetes_objects import schema_version, validate_strict
from tools.mocks import GrpoMocks, project_number
from tools.preview import Registration, _make_monitor_class, manifest_from_registration

P = "gke-grpo:"
COMPONENT = "gke-grpo:components:SharedStorage"
BUCKET = "gcp:storage/bucket:Bucket"
BUCKET_MEMBER = "gcp:storage/bucketIAMMember:BucketIAMMember"
ADDRESS = "gcp:compute/globalAddress:GlobalAddress"
CONNECTION = "gcp:servicenetworking/connection:Connection"
FIREWALL = "gcp:compute/firewall:Firewall"
LUSTRE = "gcp:lustre/instance:Instance"
PV = "kubernetes:core/v1:PersistentVolume"
PVC = "kubernetes:core/v1:PersistentVolumeClaim"
KSA = "kubernetes:core/v1:ServiceAccount"
AUTOPILOT_POOL_KEYS = {P + "gpu.minNodes": DELETE, P + "gpu.maxNodes": DELETE,
                       P + "gpu.compactPlacement": DELETE, P + "cluster.headPool": DELETE}

# storage kind x cluster mode, plus the variants whose rules differ.
CONFIGS: dict[str, tuple[str, dict[str, Any]]] = {
    "gcs-autopilot": ("dev", {}),
    "gcs-standard": ("dev", {P + "cluster.mode": "standard"}),
    "lustre-standard": ("prod", {}),
    "lustre-autopilot": ("prod", {P + "cluster.mode": "autopilot", **AUTOPILOT_POOL_KEYS}),
    "gcs-prod": ("prod", {P + "storage": {"kind": "gcs"}}),
    "gcs-flat-tuned": ("dev", {
        P + "storage.gcs.bucketName": "grpo-shared-data-1",
        P + "storage.gcs.hierarchicalNamespace": False,
        P + "storage.gcs.softDeleteRetentionDays": 0,
        P + "storage.gcs.skipBucketAccessCheck": True,
        P + "storage.gcs.fileCacheSizeGib": 0,
        P + "storage.gcs.metadataCacheTtlSeconds": 120,
        P + "storage.gcs.sidecarCpuLimit": "16",
        P + "storage.gcs.sidecarMemoryLimit": "64Gi",
        P + "storage.gcs.sidecarEphemeralStorageLimit": "100Gi",
    }),
    "lustre-legacy-port": ("prod", {P + "storage.lustre.legacyPort": True}),
    "lustre-dev-defaults": ("dev", {P + "storage": {"kind": "lustre"}}),
    # Deleting a data store on purpose: protection lifted for that update.
    "gcs-allow-data-loss": ("dev", {P + "storage.allowDataLoss": True}),
    "lustre-allow-data-loss": ("prod", {P + "storage.allowDataLoss": True}),
}
KIND_BY_MODE = ["gcs-autopilot", "gcs-standard", "lustre-standard", "lustre-autopilot"]
GCS = [k for k in CONFIGS if k.startswith("gcs")]
LUSTRES = [k for k in CONFIGS if k.startswith("lustre")]


@dataclass
class Built:
    config: Any
    storage: SharedStorage
    registrations: list[Registration]

    @property
    def component(self) -> Registration:
        [component] = [r for r in self.registrations if r.type == COMPONENT]
        return component

    @property
    def children(self) -> list[Registration]:
        return [r for r in self.registrations if r.parent == self.component.urn]

    def all(self, type_: str) -> list[Registration]:
        """Children of a type, the Ray head's own gcs volume and claim left out (head())."""
        return [r for r in self.children if r.type == type_ and not r.name.startswith("storage-head-")]

    def head(self, type_: str) -> Registration:
        [found] = [r for r in self.children if r.type == type_ and r.name.startswith("storage-head-")]
        return found

    def one(self, type_: str) -> Registration:
        [found] = self.all(type_)
        return found

    def urn(self, type_: str) -> str:
        return self.one(type_).urn


_BUILT: dict[str, Built] = {}


def built(key: str) -> Built:
    """The component for CONFIGS[key], built once: a fresh root stack, the project's mocks and a
    recording monitor; returns after every registration has reached the monitor."""
    if key in _BUILT:
        return _BUILT[key]
    import pulumi_gcp as gcp
    import pulumi_kubernetes as k8s
    from pulumi.runtime import settings as runtime_settings
    from pulumi.runtime.stack import run_pulumi_func
    from pulumi.runtime.sync_await import _sync_await

    stack, changes = CONFIGS[key]
    raw, secret_keys = stack_config(stack, changes)
    config = load_stack_config(raw, secret_keys, stack=stack)
    mocks = GrpoMocks(project=config.project, region=config.region)
    monitor = _make_monitor_class()(mocks)
    runtime_settings.ROOT.set(None)  # a new root stack for this build, not the previous one's
    pulumi.runtime.set_mocks(mocks, project="gke-grpo", stack=stack, preview=True, monitor=monitor)
    holder: dict[str, SharedStorage] = {}

    def program() -> None:
        # What GpuNetworks and GkeCluster hand over in __main__.py.
        network = gcp.compute.Network("networks-cluster", name=config.names.cluster_network,
                                      project=config.project, auto_create_subnetworks=False)
        provider = k8s.Provider("cluster-kubernetes", kubeconfig="{}")
        namespace = k8s.core.v1.Namespace(
            "cluster-workloads", metadata=k8s.meta.v1.ObjectMetaArgs(name=config.kuberay.namespace),
            opts=pulumi.ResourceOptions(provider=provider))
        holder["storage"] = SharedStorage("storage", shared_storage_args(
            config, cluster_network=network,
            namespace=namespace.metadata.apply(lambda metadata: metadata.name),
            kubernetes_provider=provider))

    _sync_await(run_pulumi_func(program))
    assert monitor.unknown_inputs == []
    _BUILT[key] = Built(config, holder["storage"], list(monitor.registrations))
    return _BUILT[key]


# ---- pure functions ----------------------------------------------------------------------


def test_lustre_mount_point_is_split_into_ip_and_filesystem():
    assert parse_lustre_mount_point("10.96.0.5@tcp:/lustrefs") == ("10.96.0.5", "lustrefs")
    assert parse_lustre_mount_point("172.16.4.2@tcp:/lfs12345/") == ("172.16.4.2", "lfs12345")
    for bad in ("", "10.96.0.5:/lustrefs", "10.96.0.5@tcp:/", "@tcp:/fs", "10.0.0.1@o2ib:/fs"):
        with pytest.raises(ValueError):
            parse_lustre_mount_point(bad)


def test_data_layout_paths_and_no_escape():
    layout = DataLayout()
    assert (layout.root, layout.models, layout.datasets, layout.hf_home, layout.checkpoints) == (
        "/data", "/data/models", "/data/datasets", "/data/huggingface_cache", "/data/checkpoints")
    assert layout.model_dir("Qwen/Qwen2.5-32B-Instruct") == "/data/models/Qwen/Qwen2.5-32B-Instruct"
    assert layout.dataset_dir("gsm8k") == "/data/datasets/gsm8k"
    assert layout.run_checkpoint_dir("qwen32b-gsm8k-prod") == "/data/checkpoints/qwen32b-gsm8k-prod"
    for bad in ("../etc", "/abs", "a//b", "", "a/../b"):
        with pytest.raises(ValueError):
            layout.run_checkpoint_dir(bad)


def test_quantities():
    assert quantity_bytes("32Gi") == 32 * 2**30
    assert quantity_bytes("64G") == 64 * 10**9
    assert quantity_bytes("0") == 0
    with pytest.raises(ValueError):
        quantity_bytes("lots")


def test_older_nodes_get_no_streaming_writes_or_read_ahead():
    gcs = GcsStorage()
    limits = gcsfuse_sidecar_limits(gcs, autopilot=False)
    old = gcsfuse_mount_options(gcs, limits, "1.32.0-gke.1000")
    assert not any(o.startswith(("write:", "read_ahead_kb")) for o in old)
    new = gcsfuse_mount_options(gcs, limits, "1.33")
    assert "write:enable-streaming-writes:true" in new and "read_ahead_kb=1024" in new


def test_validate_strict_rejects_unknown_fields_and_picks_the_schema_version():
    pv = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "x"},
          "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteMany"],
                   "csi": {"driver": "d", "volumeHandle": "h"}}}
    assert validate_strict(pv, "1.34") == "1.34"
    with pytest.raises(kubernetes_validate.ValidationError):
        validate_strict({**pv, "spec": {**pv["spec"], "reclaimPolicy": "Retain"}}, "1.34")
    assert schema_version("1.99") == "1.37.0"  # newer than bundled: the newest bundled
    with pytest.raises(ValueError):
        schema_version("1.20")


# ---- Cloud Storage FUSE ------------------------------------------------------------------


@pytest.mark.parametrize("key", GCS)
def test_bucket(key):
    b = built(key)
    gcs = b.config.storage.gcs or GcsStorage()
    bucket = b.one(BUCKET)
    inputs = bucket.inputs
    expected_name = gcs.bucket_name or f"{b.config.cluster.name}-{b.config.project}"
    assert inputs["name"] == expected_name
    assert inputs["location"] == b.config.region
    assert inputs["uniformBucketLevelAccess"] is True
    assert inputs["hierarchicalNamespace"] == {"enabled": gcs.hierarchical_namespace}
    assert inputs["softDeletePolicy"] == {
        "retentionDurationSeconds": b.config.soft_delete_retention_days * 86400}
    assert inputs["publicAccessPrevention"] == "enforced"
    # Every stack: protected and never emptied by Pulumi unless storage.allowDataLoss.
    allow = b.config.storage.allow_data_loss
    assert bucket.protect is (not allow)
    assert inputs["forceDestroy"] is allow


def test_bucket_defaults_and_flat_variant():
    assert built("gcs-autopilot").one(BUCKET).inputs["hierarchicalNamespace"] == {"enabled": True}
    # Soft delete: off in the dev stack (rotated checkpoints are not billed for 7 more days),
    # 7 days by default in prod.
    assert built("gcs-autopilot").one(BUCKET).inputs["softDeletePolicy"] == {
        "retentionDurationSeconds": 0}
    assert built("gcs-prod").one(BUCKET).inputs["softDeletePolicy"] == {
        "retentionDurationSeconds": 7 * 86400}
    flat = built("gcs-flat-tuned").one(BUCKET).inputs
    assert flat["name"] == "grpo-shared-data-1"
    assert flat["hierarchicalNamespace"] == {"enabled": False}
    assert flat["softDeletePolicy"] == {"retentionDurationSeconds": 0}  # 0 turns soft delete off
    prod = built("gcs-prod").one(BUCKET)
    assert prod.protect is True and prod.inputs["forceDestroy"] is False
    assert prod.urn == ("urn:pulumi:prod::gke-grpo::gke-grpo:components:SharedStorage"
                        "$gcp:storage/bucket:Bucket::storage-bucket")  # the README's unprotect URN


@pytest.mark.parametrize("key", GCS)
def test_workload_identity_grant_is_on_the_bucket_only(key):
    b = built(key)
    number = project_number(b.config.project)
    # One grant per Ray pod account, head and GPU workers: each mounts the bucket.
    members = {m.name: m for m in b.registrations if m.type == BUCKET_MEMBER}
    assert set(members) == {"storage-bucket-object-user", "storage-bucket-object-user-gpu-workers"}
    for name, account in (("storage-bucket-object-user", "grpo-workload"),
                          ("storage-bucket-object-user-gpu-workers", "grpo-gpu-worker")):
        member = members[name]
        assert member.inputs["role"] == "roles/storage.objectUser"
        assert member.inputs["bucket"] == b.one(BUCKET).inputs["name"]
        assert member.inputs["member"] == (
            f"principal://iam.googleapis.com/projects/{number}/locations/global/workloadIdentityPools/"
            f"{b.config.project}.svc.id.goog/subject/ns/grpo/sa/{account}")
        assert member.inputs["member"] == workload_identity_member(number, b.config.project, "grpo", account)
        assert b.urn(BUCKET) in member.dependencies
    # Nothing project-wide: no other IAM resource of any kind anywhere in the build.
    iam = [r.type for r in b.registrations if "iam" in r.type.lower()]
    assert iam == [BUCKET_MEMBER, BUCKET_MEMBER]


@pytest.mark.parametrize("key", GCS)
def test_gcsfuse_volume_and_claim(key):
    b = built(key)
    pv, pvc = b.one(PV).inputs, b.one(PVC).inputs
    spec = pv["spec"]
    assert spec["csi"]["driver"] == "gcsfuse.csi.storage.gke.io"
    assert spec["csi"]["volumeHandle"] == b.one(BUCKET).inputs["name"]
    assert spec["accessModes"] == ["ReadWriteMany"]
    assert spec["persistentVolumeReclaimPolicy"] == "Retain"
    assert spec["storageClassName"] == ""
    assert spec["claimRef"] == {"namespace": "grpo", "name": "shared-data"}
    assert pvc["metadata"]["name"] == "shared-data" and pvc["metadata"]["namespace"] == "grpo"
    assert pvc["spec"]["storageClassName"] == ""
    assert pvc["spec"]["volumeName"] == pv["metadata"]["name"]
    assert pvc["spec"]["resources"]["requests"]["storage"] == spec["capacity"]["storage"]
    # The PV waits for the bucket and the grant; the claim for the PV.
    # Each volume waits for the grant of the account that mounts it: the GPU workers' for this
    # one, the head's for the head's own.
    grants = {r.name: r.urn for r in b.all(BUCKET_MEMBER)}
    assert {b.urn(BUCKET), grants["storage-bucket-object-user-gpu-workers"]} <= set(b.one(PV).dependencies)
    assert grants["storage-bucket-object-user"] in b.head(PV).dependencies
    assert b.urn(PV) in b.one(PVC).dependencies


def test_mount_options_default():
    options = built("gcs-autopilot").one(PV).inputs["spec"]["mountOptions"]
    assert options == [
        "implicit-dirs",
        "metadata-cache:ttl-secs:600",
        "metadata-cache:negative-ttl-secs:0",
        "metadata-cache:stat-cache-max-size-mb:1024",
        "metadata-cache:type-cache-max-size-mb:128",
        "file-cache:max-size-mb:512000",
        "file-cache:cache-file-for-range-read:true",
        "file-cache:enable-parallel-downloads:true",
        "write:enable-streaming-writes:true",
        "write:global-max-blocks:512",  # half of the 32Gi Autopilot sidecar in 32 MiB blocks
        "read_ahead_kb=1024",
    ]
    assert "volumeAttributes" not in built("gcs-autopilot").one(PV).inputs["spec"]["csi"]


@pytest.mark.parametrize("key", GCS)
def test_mount_options_never_disable_the_metadata_cache(key):
    options = built(key).one(PV).inputs["spec"]["mountOptions"]
    assert "metadata-cache:ttl-secs:0" not in options
    assert any(o.startswith("metadata-cache:ttl-secs:") for o in options)
    assert not any(o.startswith("profile") for o in options)  # GKE refuses gcsfuse profiles
    hns = (built(key).config.storage.gcs or GcsStorage()).hierarchical_namespace
    assert ("file-system:rename-dir-limit:200000" in options) is (not hns)


def test_mount_options_follow_config():
    b = built("gcs-flat-tuned")
    spec = b.one(PV).inputs["spec"]
    options = spec["mountOptions"]
    assert "metadata-cache:ttl-secs:120" in options
    # No file cache: no cache options and no parallel downloads (GKE refuses them alone).
    assert not any(o.startswith("file-cache:") for o in options)
    assert "write:global-max-blocks:1024" in options  # half of 64Gi
    assert "file-system:rename-dir-limit:200000" in options
    assert spec["csi"]["volumeAttributes"] == {"skipCSIBucketAccessCheck": "true"}
    standard = built("gcs-standard").one(PV).inputs["spec"]["mountOptions"]
    assert "write:global-max-blocks:1600" in standard  # unlimited sidecar memory


@pytest.mark.parametrize("key", GCS)
def test_sidecar_ephemeral_storage_exceeds_the_file_cache(key):
    b = built(key)
    gcs = b.config.storage.gcs or GcsStorage()
    limit = b.storage.pod_annotations["gke-gcsfuse/ephemeral-storage-limit"]
    assert quantity_bytes(limit) > gcs.file_cache_size_gib * 2**30


def test_sidecar_annotations_per_mode_and_config():
    assert built("gcs-autopilot").storage.pod_annotations == {
        "gke-gcsfuse/volumes": "true", "gke-gcsfuse/cpu-limit": "8",
        "gke-gcsfuse/memory-limit": "32Gi", "gke-gcsfuse/ephemeral-storage-limit": "550Gi"}
    # "0" (no limit) is Standard-only.
    assert built("gcs-standard").storage.pod_annotations == {
        "gke-gcsfuse/volumes": "true", "gke-gcsfuse/cpu-limit": "0",
        "gke-gcsfuse/memory-limit": "0", "gke-gcsfuse/ephemeral-storage-limit": "550Gi"}
    assert built("gcs-flat-tuned").storage.pod_annotations == {
        "gke-gcsfuse/volumes": "true", "gke-gcsfuse/cpu-limit": "16",
        "gke-gcsfuse/memory-limit": "64Gi", "gke-gcsfuse/ephemeral-storage-limit": "100Gi"}


# ---- Managed Lustre ----------------------------------------------------------------------


@pytest.mark.parametrize("key", LUSTRES)
def test_lustre_network_path(key):
    b = built(key)
    prefix = b.config.lustre_peering_prefix_length
    address = b.one(ADDRESS).inputs
    assert address["purpose"] == "VPC_PEERING" and address["addressType"] == "INTERNAL"
    # The explicit network.lustrePeeringCidr , not a range GCP picks.
    assert f"{address['address']}/{address['prefixLength']}" == b.config.network.lustre_peering_cidr
    assert address["prefixLength"] == prefix
    network_id = f"projects/{b.config.project}/global/networks/{b.config.names.cluster_network}"
    assert address["network"] == network_id
    connection = b.one(CONNECTION).inputs
    assert connection["service"] == "servicenetworking.googleapis.com"
    assert connection["reservedPeeringRanges"] == [address["name"]]
    assert connection["network"] == network_id
    assert connection["deletionPolicy"] == "REMOVE_PEERING"  # never ABANDON
    firewall = b.one(FIREWALL).inputs
    assert firewall["network"] == network_id and firewall["direction"] == "INGRESS"
    assert firewall["sourceRanges"] == [f"10.96.0.0/{prefix}"]  # the mocked range's address
    lustre = b.config.storage.lustre
    legacy = bool(lustre and lustre.legacy_port)
    assert firewall["allows"] == [{"protocol": "tcp", "ports": ["6988" if legacy else "988"]}]


@pytest.mark.parametrize("key", LUSTRES)
def test_lustre_instance(key):
    b = built(key)
    instance = b.one(LUSTRE)
    inputs = instance.inputs
    lustre = b.config.storage.lustre
    assert inputs["instanceId"] == (lustre.instance_id if lustre and lustre.instance_id
                                    else f"{b.config.cluster.name}-lustre")
    assert inputs["location"] == b.config.zone
    assert inputs["capacityGib"] == "18000" and isinstance(inputs["capacityGib"], str)
    assert inputs["perUnitStorageThroughput"] == "500"
    assert inputs["filesystem"] == "lustrefs"
    assert inputs["network"] == b.one(ADDRESS).inputs["network"]
    assert inputs["gkeSupportEnabled"] is bool(lustre and lustre.legacy_port)
    assert instance.protect is (not b.config.storage.allow_data_loss)
    # Lustre after the peering after the address range (DESIGN.md "Lifecycle").
    assert b.urn(CONNECTION) in instance.dependencies
    assert b.urn(ADDRESS) in b.one(CONNECTION).dependencies
    assert b.urn(ADDRESS) in b.one(FIREWALL).dependencies


@pytest.mark.parametrize("key", LUSTRES)
def test_lustre_volume_and_claim(key):
    b = built(key)
    pv = b.one(PV)
    spec = pv.inputs["spec"]
    instance = b.one(LUSTRE).inputs
    assert spec["csi"]["driver"] == "lustre.csi.storage.gke.io"
    assert spec["csi"]["volumeHandle"] == (
        f"{b.config.project}/{b.config.zone}/{instance['instanceId']}")
    assert spec["csi"]["volumeAttributes"] == {"ip": "10.96.0.5", "filesystem": "lustrefs"}
    assert spec["accessModes"] == ["ReadWriteMany"]
    assert spec["persistentVolumeReclaimPolicy"] == "Retain"
    assert spec["storageClassName"] == ""
    assert spec["capacity"] == {"storage": "18000Gi"}
    assert "mountOptions" not in spec
    pvc = b.one(PVC).inputs
    assert pvc["spec"]["volumeName"] == pv.inputs["metadata"]["name"]
    assert pvc["spec"]["storageClassName"] == ""
    assert {b.urn(LUSTRE), b.urn(FIREWALL)} <= set(pv.dependencies)
    assert b.urn(PV) in b.one(PVC).dependencies
    assert b.storage.pod_annotations == {}
    assert b.all(BUCKET) == [] and b.all(BUCKET_MEMBER) == []


def test_lustre_prod_urn_for_the_readme():
    assert built("lustre-standard").urn(LUSTRE) == (
        "urn:pulumi:prod::gke-grpo::gke-grpo:components:SharedStorage"
        "$gcp:lustre/instance:Instance::storage-lustre")


# ---- both kinds --------------------------------------------------------------------------


@pytest.mark.parametrize("key", list(CONFIGS))
def test_kubernetes_objects_validate_strictly(key):
    b = built(key)
    objects = [r for r in b.children if r.type.startswith("kubernetes:")]
    head = [PV, PVC] if b.config.storage.kind == "gcs" else []  # the head's cache-less claim
    assert sorted(r.type for r in objects) == sorted([PV, PVC, KSA, KSA, *head])   # head's, workers' accounts
    for r in objects:
        manifest = manifest_from_registration(r.type, r.raw_inputs)
        assert validate_strict(manifest, b.config.kubernetes_minor) == b.config.kubernetes_minor


@pytest.mark.parametrize("key", KIND_BY_MODE)
def test_children_are_parented_and_use_the_clusters_provider(key):
    b = built(key)
    [provider] = [r for r in b.registrations if r.type == "pulumi:providers:kubernetes"]
    assert b.children and all(r.parent == b.component.urn for r in b.children)
    for r in b.children:
        if r.type.startswith("kubernetes:"):
            assert r.provider.startswith(provider.urn + "::")
    labels = {"app.kubernetes.io/part-of": "gke-grpo", "app.kubernetes.io/component": "shared-storage"}
    # The head's account and the GPU workers' own (components/storage.py says why two).
    assert sorted((r.inputs["metadata"] for r in b.registrations if r.type == KSA),
                  key=lambda m: m["name"]) == [
        {"name": "grpo-gpu-worker", "namespace": "grpo", "labels": labels},
        {"name": "grpo-workload", "namespace": "grpo", "labels": labels}]


@pytest.mark.parametrize("key", KIND_BY_MODE)
@pulumi.runtime.test
def test_outputs_are_the_same_shape_for_both_kinds(key):
    storage = built(key).storage
    assert storage.claim_name == "shared-data"
    assert storage.mount_path == "/data"
    assert storage.service_account_name == "grpo-workload"
    assert storage.worker_service_account_name == "grpo-gpu-worker"
    assert storage.volumes == [{"name": "shared-data",
                                "persistentVolumeClaim": {"claimName": "shared-data"}}]
    assert storage.volume_mounts == [{"name": "shared-data", "mountPath": "/data"}]
    assert storage.data_layout == DataLayout()
    assert all(isinstance(v, str) for v in storage.pod_annotations.values())

    def check(values):
        namespace, claim = values
        assert namespace == "grpo"
        assert claim == {"name": "shared-data", "namespace": "grpo"}

    return pulumi.Output.all(
        storage.namespace,
        storage.persistent_volume_claim.metadata.apply(
            lambda metadata: {"name": metadata.name, "namespace": metadata.namespace}),
    ).apply(check)


@pytest.mark.parametrize("key", ["lustre-standard", "lustre-legacy-port"])
@pulumi.runtime.test
def test_lustre_volume_attributes_come_from_the_instance_mount_point(key):
    storage = built(key).storage

    def check(values):
        mount_point, attributes = values
        assert mount_point == "10.96.0.5@tcp:/lustrefs"
        assert attributes == {"ip": "10.96.0.5", "filesystem": "lustrefs"}

    return pulumi.Output.all(
        storage.lustre_instance.mount_point,
        storage.persistent_volume.spec.apply(lambda spec: dict(spec.csi.volume_attributes)),
    ).apply(check)
