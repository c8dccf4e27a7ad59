"""GkeCluster and GpuCapacity under mocks: what the tutorials' gcloud flags become, for every
cluster mode and provisioning model."""

from __future__ import annotations

import json
import re

import pytest

from tests.conftest import DELETE, preview_with

P = "gke-grpo:"
CLUSTER = "gcp:container/cluster:Cluster"
POOL = "gcp:container/nodePool:NodePool"
AUTOPILOT_POOL_KEYS = {P + "gpu.minNodes": DELETE, P + "gpu.maxNodes": DELETE,
                       P + "gpu.compactPlacement": DELETE, P + "cluster.headPool": DELETE}

# The other mode of each stack, and the models the stacks do not use.
VARIANTS = {
    "standard-h200-spot": ("dev", {P + "cluster.mode": "standard"}),
    "autopilot-b200-reservation": ("prod", {P + "cluster.mode": "autopilot", **AUTOPILOT_POOL_KEYS}),
    "standard-b200-flex-start": ("prod", {P + "gpu.provisioningModel": "flex-start",
                                          P + "gpu.reservation": DELETE,
                                          P + "gpu.maxRunDurationSeconds": 86400}),
}


@pytest.fixture(scope="module", params=list(VARIANTS))
def variant(request):
    stack, changes = VARIANTS[request.param]
    result = preview_with(stack, changes)
    assert result.error is None, result.error
    assert result.unknown_inputs == []
    return request.param, result


def _gpu_pool(result):
    [pool] = [r for r in result.by_type(POOL) if r.name == "gpu-pool"]
    return pool


def test_standard_cluster_flags(prod_preview):
    cluster = prod_preview.one(CLUSTER).inputs
    assert cluster["removeDefaultNodePool"] is True
    assert cluster["datapathProvider"] == "ADVANCED_DATAPATH"
    assert cluster["enableMultiNetworking"] is True
    assert cluster["workloadIdentityConfig"] == {"workloadPool": "my-grpo-prod.svc.id.goog"}
    assert cluster["networkingMode"] == "VPC_NATIVE"
    assert cluster["monitoringConfig"]["managedPrometheus"] == {"enabled": True}
    assert cluster["deletionProtection"] is True
    assert cluster["releaseChannel"] == {"channel": "REGULAR"}
    assert cluster["maintenancePolicy"]["recurringWindow"]["recurrence"] == "FREQ=WEEKLY;BYDAY=SA,SU"
    # prod runs KubeRay from Helm and Lustre: no Ray addon, the Lustre CSI addon on, FUSE off.
    addons = cluster["addonsConfig"]
    # Sent even when off: an omitted Optional+Computed block never turns the addon off.
    assert addons["rayOperatorConfigs"] == [{"enabled": False}]
    assert addons["lustreCsiDriverConfig"] == {"enabled": True, "enableLegacyLustrePort": False,
                                               "disableMultiNic": True}
    assert addons["gcsFuseCsiDriverConfig"] == {"enabled": False}


def test_autopilot_cluster_flags(dev_preview):
    cluster = dev_preview.one(CLUSTER).inputs
    assert cluster["enableAutopilot"] is True
    assert cluster["enableMultiNetworking"] is True
    assert cluster["deletionProtection"] is False
    assert "removeDefaultNodePool" not in cluster
    # Autopilot always runs Dataplane V2; Google's Terraform module dropped the field for it.
    assert "datapathProvider" not in cluster
    addons = cluster["addonsConfig"]
    assert addons["rayOperatorConfigs"][0]["enabled"] is True
    assert addons["gcsFuseCsiDriverConfig"] == {"enabled": True}
    assert dev_preview.by_type(POOL) == []


def test_legacy_lustre_port_reaches_the_cluster_addon():
    result = preview_with("prod", {P + "storage.lustre.legacyPort": True})
    addons = result.one(CLUSTER).inputs["addonsConfig"]
    assert addons["lustreCsiDriverConfig"]["enableLegacyLustrePort"] is True


def test_maintenance_exclusion_for_a_long_run():
    result = preview_with("prod", {P + "cluster.maintenanceExclusions": [{
        "name": "grpo-run-december", "startTime": "2026-12-01T00:00:00Z",
        "endTime": "2026-12-20T00:00:00Z"}]})
    [exclusion] = result.one(CLUSTER).inputs["maintenancePolicy"]["maintenanceExclusions"]
    assert exclusion == {"exclusionName": "grpo-run-december", "startTime": "2026-12-01T00:00:00Z",
                         "endTime": "2026-12-20T00:00:00Z",
                         "exclusionOptions": {"scope": "NO_MINOR_OR_NODE_UPGRADES"}}


def test_head_pool_is_cpu_on_demand(prod_preview):
    [head] = [r for r in prod_preview.by_type(POOL) if r.name == "cluster-ray-head"]
    assert head.inputs["nodeConfig"]["spot"] is False
    assert head.inputs["nodeConfig"]["machineType"] == "c2-standard-16"
    assert "guestAccelerators" not in head.inputs["nodeConfig"]
    assert head.inputs["autoscaling"]["totalMinNodeCount"] >= 1
    assert {"nodeCount", "version", "initialNodeCount"} <= set(head.ignore_changes)


def test_reservation_pool(prod_preview):
    pool = _gpu_pool(prod_preview).inputs
    node = pool["nodeConfig"]
    assert node["machineType"] == "a4-highgpu-8g"
    assert node["guestAccelerators"] == [{"type": "nvidia-b200", "count": 8,
                                          "gpuDriverInstallationConfig": {"gpuDriverVersion": "DEFAULT"}}]
    assert node["reservationAffinity"] == {"consumeReservationType": "SPECIFIC_RESERVATION",
                                           "key": "compute.googleapis.com/reservation-name",
                                           "values": ["grpo-b200-reservation"]}
    assert node["spot"] is False and "flexStart" not in node
    # A reservation's pool holds its nodes: billed either way (docs/gpu-capacity.md).
    assert pool["autoscaling"] == {"totalMinNodeCount": 4, "totalMaxNodeCount": 4, "locationPolicy": "ANY"}
    assert pool["initialNodeCount"] == 4
    assert pool["nodeLocations"] == ["us-central1-b"]
    assert pool["upgradeSettings"] == {"strategy": "SURGE", "maxSurge": 0, "maxUnavailable": 1}


def test_reservation_block_and_shared_project():
    result = preview_with("prod", {P + "gpu.reservation": {"name": "r1", "block": "block-7",
                                                           "project": "capacity-owner"}})
    affinity = _gpu_pool(result).inputs["nodeConfig"]["reservationAffinity"]
    assert affinity["values"] == ["projects/capacity-owner/reservations/r1/reservationBlocks/block-7"]


def test_nine_additional_networks_in_nic_order(variant):
    name, result = variant
    if name.startswith("autopilot"):
        # No node pool: on Autopilot the NICs come from the pod's network annotation.
        assert result.by_type(POOL) == []
        return
    stack = result.stack
    networks = _gpu_pool(result).inputs["networkConfig"]["additionalNodeNetworkConfigs"]
    assert networks[0] == {"network": f"grpo-{stack}-gvnic-net", "subnetwork": f"grpo-{stack}-gvnic-sub"}
    assert networks[1:] == [{"network": f"grpo-{stack}-rdma-net", "subnetwork": f"grpo-{stack}-rdma-sub-{i}"}
                            for i in range(8)]


def test_provisioning_model_flags(variant):
    name, result = variant
    selector = json.loads(json.dumps(result.outputs["gpuPodNodeSelector"]))
    if name == "standard-h200-spot":
        node = _gpu_pool(result).inputs["nodeConfig"]
        assert node["spot"] is True
        assert node["reservationAffinity"] == {"consumeReservationType": "NO_RESERVATION"}
        assert node["machineType"] == "a3-ultragpu-8g"
        assert node["guestAccelerators"][0]["type"] == "nvidia-h200-141gb"
        assert _gpu_pool(result).inputs["initialNodeCount"] == 0
        assert selector["cloud.google.com/gke-spot"] == "true"
    elif name == "standard-b200-flex-start":
        pool = _gpu_pool(result).inputs
        assert pool["nodeConfig"]["flexStart"] is True
        assert pool["nodeConfig"]["maxRunDuration"] == "86400s"
        assert pool["management"]["autoRepair"] is False
        assert pool["initialNodeCount"] == 0
        assert "upgradeSettings" not in pool and "placementPolicy" not in pool
    else:
        assert result.by_type(POOL) == []
        assert selector == {
            "cloud.google.com/gke-accelerator": "nvidia-b200",
            "cloud.google.com/gke-accelerator-count": "8",
            "cloud.google.com/gke-ephemeral-storage-local-ssd": "true",
            "topology.kubernetes.io/zone": "us-central1-b",
            "cloud.google.com/compute-class": "Accelerator",
            "cloud.google.com/reservation-name": "grpo-b200-reservation",
            "cloud.google.com/reservation-affinity": "specific",
        }
    assert all(isinstance(value, str) for value in selector.values())


def test_autopilot_spot_selectors_are_strings(dev_preview):
    selector = dev_preview.outputs["gpuPodNodeSelector"]
    assert selector["cloud.google.com/gke-accelerator-count"] == "8"
    assert selector["cloud.google.com/gke-spot"] == "true"
    assert selector["cloud.google.com/gke-accelerator"] == "nvidia-h200-141gb"


def test_gpu_pool_ignores_what_gke_changes(prod_preview):
    assert {"nodeCount", "version", "initialNodeCount"} <= set(_gpu_pool(prod_preview).ignore_changes)


def test_compact_placement_when_asked():
    result = preview_with("prod", {P + "gpu.compactPlacement": True})
    assert _gpu_pool(result).inputs["placementPolicy"] == {"type": "COMPACT"}


def test_dependency_edges(stack_preview):
    urns = {r.name: r.urn for r in stack_preview.resources}
    cluster = stack_preview.one(CLUSTER)
    assert urns["networks-cluster"] in cluster.dependencies
    assert {r.urn for r in stack_preview.resources if r.type.endswith("Subnetwork") and r.name == "networks-cluster"} \
        <= set(cluster.dependencies)
    for pool in stack_preview.by_type(POOL):
        assert cluster.urn in pool.dependencies
    if stack_preview.stack == "prod":
        gpu = _gpu_pool(stack_preview)
        for i in range(8):
            assert urns[f"networks-rdma-{i}"] in gpu.dependencies


def test_kubernetes_provider_is_built_from_the_cluster_and_secret(stack_preview):
    [provider] = stack_preview.by_type("pulumi:providers:kubernetes")
    assert provider.inputs["kubeconfig"] == "[secret]"
    assert stack_preview.one(CLUSTER).urn in provider.dependencies
    assert stack_preview.outputs["kubeconfig"] == "[secret]"
    kubeconfig = json.loads(provider.raw_inputs["kubeconfig"])
    assert kubeconfig["users"][0]["user"]["exec"]["command"] == "gke-gcloud-auth-plugin"
    # controlPlaneAccess "dns" (both stacks): the DNS-based endpoint, no pinned cluster CA.
    server = kubeconfig["clusters"][0]["cluster"]
    assert re.fullmatch(r"https://gke-[0-9a-f]{32}-\d{12}\.us-central1\.gke\.goog", server["server"])
    assert "certificate-authority-data" not in server
    kubernetes_objects = [r for r in stack_preview.resources if r.type.startswith("kubernetes:")]
    assert kubernetes_objects
    for resource in kubernetes_objects:
        # Every Kubernetes object goes through the stack's provider, never a default one.
        assert resource.provider.startswith(provider.urn + "::"), resource.name


# ---- private nodes, control-plane access, no drift ------------------------------------

def test_private_nodes_and_dns_endpoint_by_default(stack_preview):
    cluster = stack_preview.one(CLUSTER).inputs
    # Nodes have no external address (Cloud NAT gives egress); the IP endpoint is private and
    # the DNS-based endpoint takes traffic from outside, authorized by IAM.
    assert cluster["privateClusterConfig"] == {"enablePrivateNodes": True, "enablePrivateEndpoint": True}
    assert cluster["controlPlaneEndpointsConfig"]["dnsEndpointConfig"]["allowExternalTraffic"] is True
    assert cluster["masterAuthorizedNetworksConfig"] == {"cidrBlocks": [], "gcpPublicCidrsAccessEnabled": False}
    assert stack_preview.outputs["getCredentials"].endswith(" --dns-endpoint")
    assert stack_preview.outputs["clusterEndpoint"].endswith(".us-central1.gke.goog")


def test_authorized_networks_open_the_ip_endpoint_to_those_networks_only():
    office = {"cidrBlock": "203.0.113.0/24", "displayName": "office"}
    result = preview_with("prod", {P + "cluster.controlPlaneAccess": "authorizedNetworks",
                                   P + "cluster.masterAuthorizedNetworks": [office]})
    assert result.error is None, result.error
    cluster = result.one(CLUSTER).inputs
    assert cluster["privateClusterConfig"] == {"enablePrivateNodes": True, "enablePrivateEndpoint": False}
    assert cluster["masterAuthorizedNetworksConfig"] == {"cidrBlocks": [office],
                                                         "gcpPublicCidrsAccessEnabled": False}
    assert cluster["controlPlaneEndpointsConfig"]["dnsEndpointConfig"]["allowExternalTraffic"] is False
    [provider] = result.by_type("pulumi:providers:kubernetes")
    server = json.loads(provider.raw_inputs["kubeconfig"])["clusters"][0]["cluster"]
    assert server["server"].startswith("https://34.118.0.") and server["certificate-authority-data"]
    assert "--dns-endpoint" not in result.outputs["getCredentials"]


def test_ray_addon_is_always_sent(stack_preview, variant):
    # Optional+Computed in the provider: omitted, it would never be turned off (item 5).
    for result in (stack_preview, variant[1]):
        [ray] = result.one(CLUSTER).inputs["addonsConfig"]["rayOperatorConfigs"]
        assert ray["enabled"] is (result.stack == "dev")


def test_lustre_multi_nic_off_only_with_lustre(stack_preview):
    lustre = stack_preview.one(CLUSTER).inputs["addonsConfig"]["lustreCsiDriverConfig"]
    assert lustre.get("disableMultiNic") is (True if stack_preview.stack == "prod" else None)


def test_default_monitoring_package_plus_dcgm(stack_preview):
    components = stack_preview.one(CLUSTER).inputs["monitoringConfig"]["enableComponents"]
    # GKE's defaults (kube-state, cAdvisor, kubelet) stay on next to DCGM (item 12).
    assert {"SYSTEM_COMPONENTS", "POD", "DEPLOYMENT", "STATEFULSET", "DAEMONSET", "STORAGE",
            "HPA", "CADVISOR", "KUBELET", "DCGM"} <= set(components)


def test_datapath_provider_on_standard_only(variant):
    name, result = variant
    cluster = result.one(CLUSTER).inputs
    assert ("datapathProvider" in cluster) is name.startswith("standard")


def test_both_stacks_on_a_current_gke_minor(stack_preview):
    assert stack_preview.one(CLUSTER).inputs["minMasterVersion"] == "1.35"


def test_gpu_pool_is_tainted_and_ignores_its_local_ssd_echo(variant):
    name, result = variant
    if name.startswith("autopilot"):
        return
    pool = _gpu_pool(result)
    # Explicit (item 7): GKE adds it only when a GPU pool joins a cluster with a CPU pool.
    assert pool.inputs["nodeConfig"]["taints"] == [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}]
    # ForceNew and echoed differently: a diff would rebuild a reserved pool mid-run (item 8).
    assert "nodeConfig.ephemeralStorageLocalSsdConfig" in pool.ignore_changes
    [head] = [r for r in result.by_type(POOL) if r.name == "cluster-ray-head"]
    assert "taints" not in head.inputs["nodeConfig"]


def test_compact_placement_with_flex_start_on_a3_ultra_and_a4():
    # Cluster Toolkit's precondition allows it on A3 Ultra and A4 (item 13).
    for stack in ("prod", "dev"):
        changes = {P + "gpu.provisioningModel": "flex-start", P + "gpu.reservation": DELETE,
                   P + "gpu.compactPlacement": True, P + "gpu.minNodes": 0}
        if stack == "dev":
            changes.update({P + "cluster.mode": "standard", P + "gpu.maxRunDurationSeconds": 86400})
        result = preview_with(stack, changes)
        assert result.error is None, result.error
        pool = _gpu_pool(result).inputs
        assert pool["placementPolicy"] == {"type": "COMPACT"} and pool["nodeConfig"]["flexStart"] is True
