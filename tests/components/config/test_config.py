"""The typed stack config: every invalid config is stopped before any resource, with every
problem named by its key."""

from __future__ import annotations

import pytest

from components.config import (
    MACHINE_SHAPES,
    ConfigError,
    load_stack_config,
    version_at_least,
)
from tests.conftest import DELETE, preview_with, stack_config

P = "gke-grpo:"
LONG_NAME = "g" + "x" * 40

# (id, stack, changes, exact set of keys the error must name)
INVALID = [
    ("machine-type-mismatch", "prod", {P + "gpu.machineType": "a3-ultragpu-8g"}, {P + "gpu.machineType"}),
    ("on-demand", "prod", {P + "gpu.provisioningModel": "on-demand", P + "gpu.reservation": DELETE},
     {P + "gpu.provisioningModel"}),
    ("reservation-missing", "prod", {P + "gpu.reservation": DELETE}, {P + "gpu.reservation"}),
    ("reservation-without-name", "prod", {P + "gpu.reservation": {"block": "block-1"}},
     {P + "gpu.reservation.name"}),
    ("reservation-block-on-autopilot", "prod", {P + "cluster.mode": "autopilot", P + "gpu.minNodes": DELETE,
     P + "gpu.maxNodes": DELETE, P + "gpu.compactPlacement": DELETE, P + "cluster.headPool": DELETE,
     P + "gpu.reservation.block": "block-1"}, {P + "gpu.reservation.block"}),
    ("reservation-with-spot", "dev", {P + "gpu.reservation": {"name": "r1"}}, {P + "gpu.reservation"}),
    ("flex-start-auto-repair", "prod", {P + "gpu.provisioningModel": "flex-start",
     P + "gpu.reservation": DELETE, P + "gpu.autoRepair": True}, {P + "gpu.autoRepair"}),
    # Flex-start with a minimum would hold (and bill) a granted node for up to 7 days.
    ("flex-start-min-nodes", "prod", {P + "gpu.provisioningModel": "flex-start",
     P + "gpu.reservation": DELETE, P + "gpu.minNodes": 1}, {P + "gpu.minNodes"}),
    ("flex-start-ends-before-a-checkpoint", "prod", {P + "gpu.provisioningModel": "flex-start",
     P + "gpu.reservation": DELETE, P + "gpu.maxRunDurationSeconds": 3600, P + "job.checkpointEverySteps": 60},
     {P + "gpu.maxRunDurationSeconds"}),
    ("reservation-end-time-not-a-time", "prod", {P + "gpu.reservation.endTime": "2027-13-01T00:00:00Z"},
     {P + "gpu.reservation.endTime"}),
    ("authorized-networks-without-any", "dev", {P + "cluster.controlPlaneAccess": "authorizedNetworks"},
     {P + "cluster.masterAuthorizedNetworks"}),
    ("authorized-network-is-the-internet", "dev", {P + "cluster.controlPlaneAccess": "authorizedNetworks",
     P + "cluster.masterAuthorizedNetworks": [{"cidrBlock": "0.0.0.0/0", "displayName": "all"}]},
     {P + "cluster.masterAuthorizedNetworks[0].cidrBlock"}),
    ("authorized-network-not-a-cidr", "dev", {P + "cluster.controlPlaneAccess": "authorizedNetworks",
     P + "cluster.masterAuthorizedNetworks": [{"cidrBlock": "office", "displayName": "office"}]},
     {P + "cluster.masterAuthorizedNetworks[0].cidrBlock"}),
    ("authorized-networks-with-dns", "dev", {P + "cluster.masterAuthorizedNetworks": [
     {"cidrBlock": "203.0.113.0/24", "displayName": "office"}]}, {P + "cluster.masterAuthorizedNetworks"}),
    ("control-plane-access-unknown", "dev", {P + "cluster.controlPlaneAccess": "public"},
     {P + "cluster.controlPlaneAccess"}),
    ("lustre-peering-overlaps-pods", "prod", {P + "network.lustrePeeringCidr": "10.6.0.0/20"},
     {P + "network.lustrePeeringCidr"}),
    ("lustre-peering-too-small", "prod", {P + "network.lustrePeeringCidr": "10.96.0.0/26"},
     {P + "network.lustrePeeringCidr"}),
    ("chart-version-not-vendored", "prod", {P + "kuberay.helmChartVersion": "1.6.0"},
     {P + "kuberay.helmChartVersion"}),
    # 12000 GiB + the gcsfuse sidecar's 550Gi exceed the H200 pod bound (local SSD total).
    ("autopilot-worker-pod-above-maximum", "dev", {P + "kuberay.worker.ephemeralStorageGib": 12000},
     {P + "kuberay.worker.ephemeralStorageGib"}),
    ("max-run-duration-with-spot", "dev", {P + "gpu.maxRunDurationSeconds": 3600},
     {P + "gpu.maxRunDurationSeconds"}),
    ("max-run-duration-over-7-days", "prod", {P + "gpu.provisioningModel": "flex-start",
     P + "gpu.reservation": DELETE, P + "gpu.maxRunDurationSeconds": 8 * 24 * 3600},
     {P + "gpu.maxRunDurationSeconds"}),
    ("flex-start-gke-too-old", "dev", {P + "gpu.provisioningModel": "flex-start",
     P + "cluster.minMasterVersion": "1.32.2-gke.1000000"},
     {P + "cluster.minMasterVersion"}),
    ("b200-gke-too-old", "prod", {P + "cluster.minMasterVersion": "1.31"}, {P + "cluster.minMasterVersion"}),
    ("zone-outside-region", "dev", {P + "cluster.zone": "europe-west4-a"}, {P + "cluster.zone"}),
    ("gvnic-overlaps-rdma", "dev", {P + "network.gvnicSubnetCidr": "192.168.1.0/24"},
     {P + "network.rdmaSubnetCidrs[0]"}),
    ("pods-overlap-subnet", "prod", {P + "network.podCidr": "10.0.0.0/14"}, {P + "network.podCidr"}),
    ("cidr-does-not-parse", "dev", {P + "network.serviceCidr": "10.8.0.0/33"}, {P + "network.serviceCidr"}),
    ("cidr-host-bits-set", "dev", {P + "network.clusterSubnetCidr": "10.0.0.1/20"},
     {P + "network.clusterSubnetCidr"}),
    ("seven-rdma-subnets", "prod", {P + "network.rdmaSubnetCidrs": [f"192.168.{i}.0/24" for i in range(1, 8)]},
     {P + "network.rdmaSubnetCidrs"}),
    ("zero-nodes", "dev", {P + "gpu.nodes": 0}, {P + "gpu.nodes"}),
    ("max-below-nodes", "prod", {P + "gpu.maxNodes": 2}, {P + "gpu.maxNodes"}),
    ("min-above-nodes", "prod", {P + "gpu.minNodes": 5, P + "gpu.maxNodes": 6}, {P + "gpu.minNodes"}),
    ("autopilot-pool-settings", "dev", {P + "gpu.compactPlacement": True, P + "gpu.diskSizeGb": 500,
     P + "gpu.autoRepair": True, P + "gpu.machineType": "a3-ultragpu-8g", P + "gpu.maxNodes": 3},
     {P + "gpu.compactPlacement", P + "gpu.diskSizeGb", P + "gpu.autoRepair", P + "gpu.machineType",
      P + "gpu.maxNodes"}),
    ("autopilot-head-pool", "dev", {P + "cluster.headPool": {"machineType": "c2-standard-16"}},
     {P + "cluster.headPool"}),
    ("cluster-name-uppercase", "dev", {P + "cluster.name": "GRPO_dev"}, {P + "cluster.name"}),
    ("cluster-name-too-long", "dev", {P + "cluster.name": LONG_NAME}, {P + "cluster.name"}),
    ("typo-inside-area", "prod", {P + "gpu.nodess": 4}, {P + "gpu.nodess"}),
    ("typo-top-level", "dev", {P + "gpus": '{"nodes": 2}'}, {P + "gpus"}),
    ("gcp-zone-instead-of-cluster-zone", "dev", {"gcp:zone": "us-central1-b"}, {"gcp:zone"}),
    ("bad-project-and-region", "dev", {"gcp:project": "My_Project", "gcp:region": "moon"},
     {"gcp:project", "gcp:region"}),
    ("environment-unknown", "prod", {P + "environment": "production"}, {P + "environment"}),
    ("hf-token-missing", "dev", {P + "hfToken": DELETE}, {P + "hfToken"}),
    ("storage-missing", "dev", {P + "storage": DELETE}, {P + "storage"}),
    ("storage-kind-unknown", "dev", {P + "storage.kind": "nfs"}, {P + "storage.kind"}),
    ("gcs-with-lustre-block", "dev", {P + "storage.lustre": {"capacityGib": 18000}}, {P + "storage.lustre"}),
    ("lustre-below-tier-minimum", "prod", {P + "storage.lustre.capacityGib": 9000},
     {P + "storage.lustre.capacityGib"}),
    ("lustre-unknown-tier", "prod", {P + "storage.lustre.throughputTier": 300},
     {P + "storage.lustre.throughputTier"}),
    ("lustre-off-step", "prod", {P + "storage.lustre.capacityGib": 20000}, {P + "storage.lustre.capacityGib"}),
    ("lustre-above-threshold-off-step", "prod", {P + "storage.lustre.capacityGib": 3_100_000},
     {P + "storage.lustre.capacityGib"}),
    ("lustre-bad-filesystem", "prod", {P + "storage.lustre.filesystem": "lustre_fs1"},
     {P + "storage.lustre.filesystem"}),
    ("lustre-prefix-out-of-range", "prod", {P + "storage.lustre.peeringPrefixLength": 28},
     {P + "storage.lustre.peeringPrefixLength"}),
    ("lustre-modern-port-on-old-gke", "prod", {P + "cluster.minMasterVersion": "1.33.1-gke.1000000"},
     {P + "storage.lustre.legacyPort"}),
    ("bucket-name-invalid", "dev", {P + "storage.gcs.bucketName": "Google-Bucket"}, {P + "storage.gcs.bucketName"}),
    ("soft-delete-out-of-range", "dev", {P + "storage.gcs.softDeleteRetentionDays": 3},
     {P + "storage.gcs.softDeleteRetentionDays"}),
    ("metadata-cache-off", "dev", {P + "storage.gcs.metadataCacheTtlSeconds": 0},
     {P + "storage.gcs.metadataCacheTtlSeconds"}),
    ("unlimited-sidecar-on-autopilot", "dev", {P + "storage.gcs.sidecarMemoryLimit": "0"},
     {P + "storage.gcs.sidecarMemoryLimit"}),
    ("sidecar-quantity-unreadable", "dev", {P + "storage.gcs.sidecarCpuLimit": "eight"},
     {P + "storage.gcs.sidecarCpuLimit"}),
    ("ephemeral-below-file-cache", "dev", {P + "storage.gcs.sidecarEphemeralStorageLimit": "100Gi"},
     {P + "storage.gcs.sidecarEphemeralStorageLimit"}),
    ("default-bucket-name-too-long", "dev", {P + "cluster.name": "g" * 36,
     "gcp:project": "a-long-project-name-of-30-char"}, {P + "cluster.name"}),
    ("image-not-in-versions-table", "dev", {P + "kuberay.image": "verlai/verl:vllm012.dev1"}, {P + "kuberay.image"}),
    ("image-floating-tag", "dev", {P + "kuberay.image": "verlai/verl:vllm011.latest"}, {P + "kuberay.image"}),
    ("image-of-the-other-framework", "dev", {P + "kuberay.image": "nvcr.io/nvidia/nemo-rl:v0.5.0"}, {P + "kuberay.image"}),
    ("worker-memory-above-allocatable", "dev", {P + "kuberay.worker.memoryGib": 2800}, {P + "kuberay.worker.memoryGib"}),
    ("worker-cpu-above-allocatable", "prod", {P + "kuberay.worker.cpu": 224}, {P + "kuberay.worker.cpu"}),
    ("shm-not-below-memory", "prod", {P + "kuberay.worker.memoryGib": 200, P + "kuberay.worker.shmGib": 250},
     {P + "kuberay.worker.shmGib"}),
    ("operator-namespace-with-helm", "prod", {P + "kuberay.operatorNamespace": "ray-system"},
     {P + "kuberay.operatorNamespace"}),
    ("head-too-big-for-its-pool", "prod", {P + "cluster.headPool.machineType": "e2-standard-4"},
     {P + "kuberay.head"}),
    ("head-pool-machine-unknown", "prod", {P + "cluster.headPool.machineType": "custom-8-32768"},
     {P + "cluster.headPool.machineType"}),
    ("max-run-duration-on-autopilot", "dev", {P + "gpu.provisioningModel": "flex-start",
     P + "gpu.maxRunDurationSeconds": 86400}, {P + "gpu.maxRunDurationSeconds"}),
    ("shared-reservation-on-autopilot", "prod", {P + "cluster.mode": "autopilot", P + "gpu.minNodes": DELETE,
     P + "gpu.maxNodes": DELETE, P + "gpu.compactPlacement": DELETE, P + "cluster.headPool": DELETE,
     P + "gpu.reservation.project": "capacity-owner"}, {P + "gpu.reservation.project"}),
    ("chart-version-unsupported", "prod", {P + "kuberay.helmChartVersion": "1.5.1"}, {P + "kuberay.helmChartVersion"}),
    ("maintenance-window-ends-before-it-starts", "prod", {P + "cluster.maintenanceWindow.endTime": "2025-01-04T01:00:00Z"},
     {P + "cluster.maintenanceWindow.endTime"}),
    ("addon-and-helm", "dev", {P + "kuberay.helmChartVersion": "1.7.0"}, {P + "kuberay.helmChartVersion"}),
    ("wrong-type", "prod", {P + "gpu.nodes": "four"}, {P + "gpu.nodes"}),
    ("bad-maintenance-time", "prod", {P + "cluster.maintenanceWindow.startTime": "saturday 2am"},
     {P + "cluster.maintenanceWindow.startTime"}),
    ("steps-and-epochs", "dev", {P + "job.totalSteps": 100}, {P + "job.totalSteps"}),
    ("negative-max-restarts", "dev", {P + "job.maxRestarts": -1}, {P + "job.maxRestarts"}),
    ("revisions-not-shas", "dev", {P + "job.modelRevision": "main",
     P + "job.datasetRevision": "740312ADD88F781978C0658806C59BC2815B9866"},
     {P + "job.modelRevision", P + "job.datasetRevision"}),
    # Preflight runs before any resource too: a TP that does not split the heads stops the run.
    ("rollout-tp-not-splitting-heads", "dev", {P + "job.rolloutTensorParallelSize": 8},
     {P + "job.rolloutTensorParallelSize"}),
    ("several-at-once", "prod", {
        P + "gpu.provisioningModel": "on-demand", P + "gpu.reservation": DELETE,
        P + "cluster.zone": "us-east5-a", P + "network.gvnicSubnetCidr": "10.0.0.0/24",
        P + "gpu.nodess": 1, P + "environment": "qa",
    }, {P + "gpu.provisioningModel", P + "cluster.zone", P + "network.gvnicSubnetCidr",
        P + "gpu.nodess", P + "environment"}),
]


@pytest.mark.parametrize("stack,changes,keys", [case[1:] for case in INVALID], ids=[c[0] for c in INVALID])
def test_invalid_config_names_every_key_and_registers_nothing(stack, changes, keys):
    result = preview_with(stack, changes)
    assert {problem.key for problem in result.problems} == keys, result.error
    assert result.register_calls == 0
    assert result.resources == []
    for key in keys:
        assert key in result.error


def test_the_table_is_large_enough():
    assert len(INVALID) >= 20


def test_plain_text_token_is_refused_without_echoing_it():
    raw, secrets = stack_config("dev", {P + "hfToken": "hf_ThisMustNeverBePrinted"})
    with pytest.raises(ConfigError, match=r"gke-grpo:hfToken: .*must be stored as a secret") as caught:
        load_stack_config(raw, secrets - {P + "hfToken"})
    assert "hf_ThisMustNeverBePrinted" not in str(caught.value)


def test_on_demand_message_says_which_models_exist():
    raw, secrets = stack_config("dev", {P + "gpu.provisioningModel": "on-demand"})
    with pytest.raises(ConfigError, match="a3-ultragpu-8g has no plain on-demand capacity; "
                       "one of reservation, spot, flex-start"):
        load_stack_config(raw, secrets)


def test_machine_type_is_derived_when_omitted():
    config = load_stack_config(*stack_config("prod"))
    assert config.gpu.machine_type is None
    assert config.machine_type == "a4-highgpu-8g"
    dev = load_stack_config(*stack_config("dev"))
    assert dev.machine_type == "a3-ultragpu-8g"


def test_defaults_of_node_counts_come_from_nodes():
    config = load_stack_config(*stack_config("prod", {P + "gpu.maxNodes": DELETE, P + "gpu.minNodes": DELETE}))
    assert (config.gpu_min_nodes, config.gpu.nodes, config.gpu_max_nodes) == (0, 4, 4)


def test_flex_start_turns_auto_repair_off_by_default():
    config = load_stack_config(*stack_config("prod", {
        P + "gpu.provisioningModel": "flex-start", P + "gpu.reservation": DELETE}))
    assert config.gpu_auto_repair is False


def test_standard_always_has_a_head_pool():
    config = load_stack_config(*stack_config("prod", {P + "cluster.headPool": DELETE}))
    assert config.head_pool is not None and config.head_pool.min_nodes >= 1
    assert load_stack_config(*stack_config("dev")).head_pool is None


def test_rdma_profile_is_the_zones_roce_profile():
    config = load_stack_config(*stack_config("dev"))
    assert config.rdma_network_profile == "projects/my-grpo-dev/global/networkProfiles/us-central1-b-vpc-roce"


def test_every_derived_gcp_name_is_valid_for_the_longest_cluster_name():
    config = load_stack_config(*stack_config("dev", {P + "cluster.name": "g" * 40}))
    for name in config.names.all_rfc1035():
        assert len(name) <= 63


def test_objects_arrive_as_json_strings_or_parsed():
    raw, secrets = stack_config("dev")
    import json
    parsed = {k: (json.loads(v) if isinstance(v, str) and v.startswith("{") else v) for k, v in raw.items()}
    assert load_stack_config(raw, secrets) == load_stack_config(parsed, secrets)


def test_object_that_is_not_json_is_reported():
    raw, secrets = stack_config("dev")
    raw[P + "gpu"] = "{not json"
    with pytest.raises(ConfigError, match=r"gke-grpo:gpu: given .*must be an object"):
        load_stack_config(raw, secrets)


@pytest.mark.parametrize("tier,capacity,ok", [
    (500, 18_000, True), (500, 36_000, True), (500, 27_000, False),
    (500, 3_060_000, True), (500, 3_204_000, True), (500, 3_078_000, False),
    (1000, 9_000, True), (125, 144_000, True), (125, 100_000, False), (250, 18_000, False),
])
def test_lustre_capacity_steps(tier, capacity, ok):
    from components.config import LUSTRE_TIERS
    assert (LUSTRE_TIERS[tier].capacity_problem(capacity) is None) is ok


@pytest.mark.parametrize("version,minimum,expected", [
    ("1.33", "1.32.2-gke.1652000", True),
    ("1.32", "1.32.2-gke.1652000", False),
    ("1.32.2-gke.1652000", "1.32.2-gke.1652000", True),
    ("1.31.4-gke.1183000", "1.32.2-gke.1422000", False),
])
def test_version_at_least(version, minimum, expected):
    assert version_at_least(version, minimum) is expected


@pytest.mark.parametrize("shape", MACHINE_SHAPES.values(), ids=lambda s: s.machine_type)
def test_allocatable_matches_the_reference_figures(shape):
    # shared/reference/pulumi-and-kuberay.md: ~223.37 CPU; ~2,886 GiB (A3 Ultra), ~3,882 GiB (A4)
    assert shape.allocatable_cpu == pytest.approx(223.37, abs=0.01)
    expected = {"a3-ultragpu-8g": 2886, "a4-highgpu-8g": 3882}[shape.machine_type]
    assert shape.allocatable_memory_gib == pytest.approx(expected, abs=15)


# ---- a current GKE minor, every version gate rechecked -----------------------

def test_the_default_minor_clears_every_version_gate():
    from components.config import (
        DEFAULT_GKE_MINOR,
        FLEX_START_MIN_GKE_VERSION,
        LUSTRE_CSI_MIN_GKE_VERSION,
        LUSTRE_MODERN_PORT_MIN_GKE_VERSION,
        ClusterConfig,
        version_at_least,
    )
    from components.gcsfuse import READ_AHEAD_MIN_GKE, STREAMING_WRITES_MIN_GKE
    from tests.kubernetes_objects import schema_version

    assert ClusterConfig.model_fields["min_master_version"].default == DEFAULT_GKE_MINOR == "1.35"
    gates = [FLEX_START_MIN_GKE_VERSION, LUSTRE_CSI_MIN_GKE_VERSION, LUSTRE_MODERN_PORT_MIN_GKE_VERSION,
             READ_AHEAD_MIN_GKE, STREAMING_WRITES_MIN_GKE,
             *(shape.min_gke_version for shape in MACHINE_SHAPES.values())]
    for gate in gates:
        assert version_at_least(DEFAULT_GKE_MINOR, gate), gate
    # Manifests are validated against that very minor's schema, not an older one.
    assert schema_version(DEFAULT_GKE_MINOR) == "1.35.0"
    for stack in ("dev", "prod"):
        assert load_stack_config(*stack_config(stack)).cluster.min_master_version == DEFAULT_GKE_MINOR


# ---- single-field rules as pydantic types (components/config/types.py) ---------------

SAME_WORDS = {
    "kuberay.namespace": ("Bad_NS", "a Kubernetes namespace name: lowercase letters, digits and "
                          "hyphens, at most 63 characters"),
    "kuberay.rayClusterName": ("9grpo", "lowercase letters, digits and hyphens, starting with a "
                               "letter, at most 40 characters (KubeRay derives service names from it)"),
    "job.modelRevision": ("main", "a Hugging Face Hub commit sha: 40 lower-case hex characters "
                          "(the model or dataset page, 'Files and versions', History)"),
    "cluster.minMasterVersion": ("latest", 'a GKE version or prefix such as "1.33" or '
                                 '"1.33.5-gke.1308000"'),
}


@pytest.mark.parametrize("key", sorted(SAME_WORDS))
def test_a_typed_field_reports_the_words_of_the_former_rule(key):
    value, allowed = SAME_WORDS[key]
    with pytest.raises(ConfigError) as err:
        load_stack_config(*stack_config("prod", {P + key: value}))
    assert [str(p) for p in err.value.problems] == [f"{P}{key}: given {value!r}; {allowed}".replace(
        f"{value!r}", f'"{value}"')]


def test_a_malformed_version_with_flex_start_is_a_problem_not_a_traceback():
    # Before the version became a type, flex-start compared the malformed version and crashed.
    with pytest.raises(ConfigError) as err:
        load_stack_config(*stack_config("dev", {P + "cluster.minMasterVersion": "latest",
                                                P + "gpu.provisioningModel": "flex-start"}))
    assert [p.key for p in err.value.problems] == [P + "cluster.minMasterVersion"]


def test_typed_fields_and_rules_are_reported_together():
    with pytest.raises(ConfigError) as err:
        load_stack_config(*stack_config("prod", {P + "kuberay.namespace": "Bad_NS",
                                                 P + "kuberay.operatorNamespace": "ray-system",
                                                 P + "cluster.zone": "mars-1"}))
    assert {p.key for p in err.value.problems} == {
        P + "kuberay.namespace", P + "kuberay.operatorNamespace", P + "cluster.zone"}
