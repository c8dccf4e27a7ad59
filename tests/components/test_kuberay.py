"""KubeRay under mocks: operator, multi-NIC objects, NCCL installer, secrets, NetworkPolicy and
the RayCluster, each validated the way the API server would and wired the way the GPUs need."""

from __future__ import annotations

import json

import jsonschema
import pytest

from components.config import MACHINE_SHAPES, load_stack_config
from components.kuberay_limits import SYSTEM_RESERVE_CPU, SYSTEM_RESERVE_MEMORY_GIB
from components.ray_pods import interfaces_annotation
from components.versions import load_versions
from jobs.contract.layout import HF_TOKEN_FILE
from jobs.plan.stack_file import SECRET_PLACEHOLDER
from tests.conftest import DELETE, preview_with, stack_config
from tests.crd_schemas import validate_custom_resource
from tests.kubernetes_objects import validate_strict
from tools.preview import manifest_from_registration, render_json

P = "gke-grpo:"
RAY_CLUSTER = "kubernetes:ray.io/v1:RayCluster"


def _kind(result, kind):
    return [r for r in result.resources if r.type.startswith("kubernetes:") and
            (r.inputs.get("kind") == kind or r.type.endswith(f":{kind}"))]


def _ray_cluster(result):
    [cluster] = _kind(result, "RayCluster")
    return cluster


def _config(stack, changes=None):
    return load_stack_config(*stack_config(stack, changes))


def _pod(template, name):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, **template.get("metadata", {})}, "spec": template["spec"]}


# ---- validation ---------------------------------------------------------------------------------

def test_ray_cluster_fits_the_kuberay_crd(stack_preview):
    validate_custom_resource(_ray_cluster(stack_preview).inputs)


def test_crd_validation_catches_a_wrong_field(dev_preview):
    manifest = json.loads(json.dumps(_ray_cluster(dev_preview).inputs))
    manifest["spec"]["workerGroupSpecs"][0]["replica"] = 2
    with pytest.raises(jsonschema.ValidationError, match="replica"):
        validate_custom_resource(manifest)


def test_head_and_worker_pods_are_valid_pod_specs(stack_preview):
    config = _config(stack_preview.stack)
    spec = _ray_cluster(stack_preview).inputs["spec"]
    validate_strict(_pod(spec["headGroupSpec"]["template"], "head"), config.kubernetes_minor)
    validate_strict(_pod(spec["workerGroupSpecs"][0]["template"], "worker"), config.kubernetes_minor)


def test_every_typed_kubernetes_object_is_valid(stack_preview):
    config = _config(stack_preview.stack)
    checked = 0
    for resource in stack_preview.resources:
        group = resource.type.split(":")[1].split("/")[0] if resource.type.startswith("kubernetes:") else ""
        # Custom resources (ray.io, networking.gke.io; monitoring.googleapis.com's PodMonitoring:
        # tests/components/test_monitoring.py) have their own checks; Helm and YAML groups are
        # not objects.
        if group in ("", "ray.io", "networking.gke.io", "monitoring.googleapis.com", "helm.sh", "yaml") \
                or "providers" in resource.type:
            continue
        # raw_inputs: the preview placeholder instead of "[secret]", so Secrets keep their shape.
        validate_strict(manifest_from_registration(resource.type, resource.raw_inputs), config.kubernetes_minor)
        checked += 1
    kinds = {r.type.rsplit(":", 1)[-1] for r in stack_preview.resources if r.type.startswith("kubernetes:")}
    assert {"DaemonSet", "Secret", "NetworkPolicy", "PersistentVolumeClaim"} <= kinds
    assert checked >= 6


# ---- multi-NIC wiring ----------------------------------------------------------------------------

def test_interfaces_annotation_is_json_naming_every_network(stack_preview):
    annotations = _ray_cluster(stack_preview).inputs["spec"]["workerGroupSpecs"][0]["template"]["metadata"]["annotations"]
    interfaces = json.loads(annotations["networking.gke.io/interfaces"])
    assert interfaces[0] == {"interfaceName": "eth0", "network": "default"}
    assert [i["network"] for i in interfaces[1:]] == ["gvnic-1"] + [f"rdma-{i}" for i in range(8)]
    assert [i["interfaceName"] for i in interfaces] == [f"eth{i}" for i in range(10)]
    assert annotations["networking.gke.io/default-interface"] == "eth0"
    networks = {r.inputs["metadata"]["name"] for r in _kind(stack_preview, "Network")}
    assert {i["network"] for i in interfaces[1:]} == networks


def test_network_objects_come_from_the_network_component(prod_preview):
    params = {r.inputs["metadata"]["name"]: r.inputs["spec"] for r in _kind(prod_preview, "GKENetworkParamSet")}
    assert params["gvnic-1"] == {"vpc": "grpo-prod-gvnic-net", "vpcSubnet": "grpo-prod-gvnic-sub",
                                 "deviceMode": "NetDevice"}
    for i in range(8):
        assert params[f"rdma-{i}"] == {"vpc": "grpo-prod-rdma-net", "vpcSubnet": f"grpo-prod-rdma-sub-{i}",
                                       "deviceMode": "RDMA"}
    for network in _kind(prod_preview, "Network"):
        name = network.inputs["metadata"]["name"]
        assert network.inputs["spec"] == {"type": "Device", "parametersRef": {
            "group": "networking.gke.io", "kind": "GKENetworkParamSet", "name": name}}


@pytest.mark.parametrize("stack,tuner", [("dev", "tuner_config_a3u.txtpb"), ("prod", "tuner_config_a4.txtpb")])
def test_tuner_file_matches_the_gpu(stack, tuner, request):
    result = request.getfixturevalue(f"{stack}_preview")
    container = _ray_cluster(result).inputs["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert "NCCL_TUNER_CONFIG_PATH" not in env      # one owner: the setup script (fallback below)
    [args] = container["args"]
    assert args.startswith("for attempt in $(seq 60); do [ -f /usr/local/gib/scripts/set_nccl_env.sh ] && break;")
    assert f'export NCCL_TUNER_CONFIG_PATH="${{NCCL_TUNER_CONFIG_PATH:-/usr/local/gib/configs/{tuner}}}"' in args
    assert "export NCCL_NET=gIB" in args            # both stacks run on 2+ GPU nodes
    assert "command" not in container
    assert env["LD_LIBRARY_PATH"].split(":") == ["/usr/local/nvidia/lib64", "/usr/local/gib/lib64"]


def test_worker_mounts_host_libraries_read_only_and_shm(stack_preview):
    template = _ray_cluster(stack_preview).inputs["spec"]["workerGroupSpecs"][0]["template"]["spec"]
    mounts = {m["mountPath"]: m for m in template["containers"][0]["volumeMounts"]}
    assert mounts["/usr/local/nvidia"]["readOnly"] is True and mounts["/usr/local/gib"]["readOnly"] is True
    assert "/data" in mounts and "/dev/shm" in mounts
    volumes = {v["name"]: v for v in template["volumes"]}
    assert volumes["nvidia"]["hostPath"]["path"] == "/home/kubernetes/bin/nvidia"
    assert volumes["gib"]["hostPath"]["path"] == "/home/kubernetes/bin/gib"
    assert volumes["dshm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "250Gi"}


# ---- placement and sizing ---------------------------------------------------------------------------

def test_gpu_workers_scale_from_zero_to_the_runs_nodes_under_the_ray_autoscaler(stack_preview):
    config = _config(stack_preview.stack)
    ray_cluster = _ray_cluster(stack_preview)
    spec = ray_cluster.inputs["spec"]
    [group] = spec["workerGroupSpecs"]
    assert (group["minReplicas"], group["maxReplicas"]) == (0, config.gpu.nodes)
    # The autoscaler owns replicas: the program never sends it (Server-Side Apply leaves the
    # field to the autoscaler), and does not list it in ignore_changes either (Pulumi would
    # re-send the old state's value, replicas = nodes, on every update of an upgraded stack).
    assert "replicas" not in group and "scaleStrategy" not in group
    assert not any("replicas" in path for path in ray_cluster.ignore_changes)
    # What the autoscaler plans with comes from rayStartParams (Ray 2.54 kuberay/
    # autoscaling_config.py), with the node's capacity labels.
    assert group["rayStartParams"]["num-gpus"] == "8"
    assert int(group["rayStartParams"]["num-cpus"]) >= 1
    assert group["rayStartParams"]["labels-file"] == "/tmp/ray/gke-grpo-node-labels.yaml"
    assert spec["enableInTreeAutoscaling"] is True
    options = spec["autoscalerOptions"]
    assert (options["version"], options["idleTimeoutSeconds"], options["upscalingMode"]) == ("v2", 60, "Default")
    assert options["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    # The head runs no monitor of its own (KubeRay sets no-monitor) and its CPUs stay for the
    # driver's CPU work; it advertises no GPU, so GPU demand goes to the group.
    assert spec["headGroupSpec"]["rayStartParams"]["num-gpus"] == "0"
    # v2 wants restartPolicy Never or unset: the workers say Never (a failed worker pod is
    # replaced, never restarted in place), the head leaves it to KubeRay.
    assert group["template"]["spec"]["restartPolicy"] == "Never"
    assert "restartPolicy" not in spec["headGroupSpec"]["template"]["spec"]


def test_gpu_workers_tell_ray_their_nodes_capacity_source(stack_preview):
    spec = _ray_cluster(stack_preview).inputs["spec"]
    pod = spec["workerGroupSpecs"][0]["template"]["spec"]
    init = {c["name"]: c for c in pod["initContainers"]}["node-labels"]
    assert init["command"][:2] == ["python3", "-c"]
    assert init["command"][-1] == "/tmp/ray/gke-grpo-node-labels.yaml"
    assert init["env"] == [{"name": "GKE_GRPO_NODE_NAME",
                            "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]
    assert init["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert {m["mountPath"] for m in init["volumeMounts"]} == {"/tmp/ray"}
    # Read-only RBAC: get one node; bound to the GPU workers' service account alone.
    [role] = [r for r in stack_preview.resources if r.type == "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole"]
    assert role.inputs["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]
    [binding] = [r for r in stack_preview.resources
                 if r.type == "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding"]
    assert binding.inputs["subjects"] == [{"kind": "ServiceAccount", "name": pod["serviceAccountName"],
                                           "namespace": "grpo"}]
    config = _config(stack_preview.stack)
    for obj in (role, binding):
        validate_strict({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": obj.inputs["kind"],
                         **{k: v for k, v in obj.inputs.items() if k not in ("apiVersion", "kind")}},
                        config.kubernetes_minor)
    ray_cluster = _ray_cluster(stack_preview)
    assert role.urn in ray_cluster.dependencies and binding.urn in ray_cluster.dependencies


def test_the_ray_pods_service_accounts_exist_before_the_ray_cluster(stack_preview):
    """KubeRay's reconcile fails on a head serviceAccountName that does not exist (v1.7.0
    raycluster_controller.go): the program creates both accounts, and the RayCluster waits."""
    ray_cluster = _ray_cluster(stack_preview)
    spec = ray_cluster.inputs["spec"]
    names = [spec["headGroupSpec"]["template"]["spec"]["serviceAccountName"],
             spec["workerGroupSpecs"][0]["template"]["spec"]["serviceAccountName"]]
    for name in names:
        [account] = [r for r in stack_preview.resources if r.type == "kubernetes:core/v1:ServiceAccount"
                     and r.inputs["metadata"]["name"] == name]
        assert account.urn in ray_cluster.dependencies


def test_addon_stacks_say_in_tree_autoscaling_is_unconfirmed(caplog):
    """No Google statement either way was found for the GKE Ray addon: its previews say so; the
    Helm operator (KubeRay 1.7.0) needs no such warning."""
    import logging

    from components.kuberay import ADDON_AUTOSCALING_MESSAGE

    seen = {}
    for stack in ("dev", "prod"):       # dev: the addon; prod: Helm
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="gke-grpo.preview"):
            assert preview_with(stack).error is None
        seen[stack] = [r.getMessage() for r in caplog.records]
    assert any(ADDON_AUTOSCALING_MESSAGE in m for m in seen["dev"])
    assert not any(ADDON_AUTOSCALING_MESSAGE in m for m in seen["prod"])


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_worker_requests_fit_the_machine(stack, request):
    result = request.getfixturevalue(f"{stack}_preview")
    config = _config(stack)
    shape = MACHINE_SHAPES[config.gpu.type]
    resources = _ray_cluster(result).inputs["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["resources"]
    cpu, memory = int(resources["requests"]["cpu"]), int(resources["requests"]["memory"].removesuffix("Gi"))
    assert resources["requests"]["nvidia.com/gpu"] == "8"
    assert cpu <= shape.allocatable_cpu - SYSTEM_RESERVE_CPU
    assert memory <= shape.allocatable_memory_gib - SYSTEM_RESERVE_MEMORY_GIB
    if stack == "dev":  # H200 on Autopilot with the gcsfuse sidecar's 32Gi taken out
        assert memory < 2800 and memory == int(shape.allocatable_memory_gib - SYSTEM_RESERVE_MEMORY_GIB - 32)


def test_head_never_lands_on_spot_or_gpus(stack_preview):
    head = _ray_cluster(stack_preview).inputs["spec"]["headGroupSpec"]
    selector = head["template"]["spec"].get("nodeSelector", {})
    assert "cloud.google.com/gke-spot" not in selector
    assert not head["template"]["spec"].get("tolerations")
    assert head["serviceType"] == "ClusterIP"
    assert int(head["rayStartParams"]["num-cpus"]) >= 1  # room for verl's TaskRunner
    if stack_preview.stack == "prod":
        assert selector == {"cloud.google.com/gke-nodepool": "ray-head"}


def test_gpu_workers_carry_the_capacity_selectors(dev_preview):
    spec = _ray_cluster(dev_preview).inputs["spec"]["workerGroupSpecs"][0]["template"]["spec"]
    assert spec["nodeSelector"] == dev_preview.outputs["gpuPodNodeSelector"]
    assert all(isinstance(v, str) for v in spec["nodeSelector"].values())
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]


def test_no_privileged_ray_container_and_no_added_capabilities(stack_preview):
    spec = _ray_cluster(stack_preview).inputs["spec"]
    for template in [spec["headGroupSpec"]["template"], *[g["template"] for g in spec["workerGroupSpecs"]]]:
        for container in template["spec"]["containers"]:
            context = container.get("securityContext", {})
            assert not context.get("privileged") and "add" not in context.get("capabilities", {})
            assert context.get("allowPrivilegeEscalation") is False
            assert "NET_RAW" in context["capabilities"]["drop"] or context["capabilities"]["drop"] == ["ALL"]
        assert template["spec"]["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}


# ---- secrets -----------------------------------------------------------------------------------------

def test_tokens_reach_pods_only_through_secret_refs(stack_preview):
    secrets = [r for r in stack_preview.resources if r.type == "kubernetes:core/v1:Secret"]
    assert {s.inputs["metadata"]["name"] for s in secrets} == {"hf-secret"}
    # The whole map is secret on the wire: neither key nor value shows in state diffs.
    assert secrets[0].inputs["stringData"] == "[secret]"
    assert set(secrets[0].raw_inputs["stringData"]) == {"hf_api_token"}
    spec = _ray_cluster(stack_preview).inputs["spec"]
    worker = spec["workerGroupSpecs"][0]["template"]["spec"]
    env = {e["name"]: e for e in worker["containers"][0]["env"]}
    assert env["HF_TOKEN"] == {"name": "HF_TOKEN", "valueFrom": {
        "secretKeyRef": {"name": "hf-secret", "key": "hf_api_token"}}}
    assert env["HF_HOME"]["value"] == "/data/huggingface_cache"
    # The head: no credential in its environment (NeMo RL copies the driver's environment into
    # the job's runtime env); the token is a read-only file from the same Secret, where
    # jobs.prepare reads it.
    head = spec["headGroupSpec"]["template"]["spec"]
    head_env = {e["name"]: e for e in head["containers"][0]["env"]}
    assert "HF_TOKEN" not in head_env and "WANDB_API_KEY" not in head_env
    assert not any("secretKeyRef" in str(e) for e in head_env.values())
    assert head_env["HF_HOME"]["value"] == "/data/huggingface_cache"
    volumes = {v["name"]: v for v in head["volumes"]}
    assert volumes["hf-token"] == {"name": "hf-token", "secret": {
        "secretName": "hf-secret", "items": [{"key": "hf_api_token", "path": "hf_api_token"}]}}
    mounts = {m["name"]: m for m in head["containers"][0]["volumeMounts"]}
    assert mounts["hf-token"] == {"name": "hf-token", "mountPath": "/var/run/secrets/gke-grpo/hf",
                                  "readOnly": True}
    assert f"{mounts['hf-token']['mountPath']}/hf_api_token" == HF_TOKEN_FILE
    assert SECRET_PLACEHOLDER not in render_json(stack_preview)


def test_head_has_the_workers_library_path(stack_preview):
    """Under NeMo RL the head's environment replaces the workers' on every actor: a head
    LD_LIBRARY_PATH without /usr/local/gib/lib64 would hide the gIB NCCL plugin."""
    spec = _ray_cluster(stack_preview).inputs["spec"]
    head = {e["name"]: e.get("value") for e in
            spec["headGroupSpec"]["template"]["spec"]["containers"][0]["env"]}
    worker = {e["name"]: e.get("value") for e in
              spec["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["env"]}
    assert head["LD_LIBRARY_PATH"] == worker["LD_LIBRARY_PATH"] == \
        "/usr/local/nvidia/lib64:/usr/local/gib/lib64"


def test_wandb_key_adds_its_own_secret():
    raw, secrets = stack_config("dev", {P + "wandbApiKey": "offline-preview-placeholder"})
    from tools.preview import run_with_config
    result = run_with_config("dev", raw, secrets | {P + "wandbApiKey"})
    assert result.error is None, result.error
    names = {r.inputs["metadata"]["name"] for r in result.resources if r.type == "kubernetes:core/v1:Secret"}
    assert names == {"hf-secret", "wandb-secret"}
    spec = _ray_cluster(result).inputs["spec"]
    env = {e["name"]: e for e in spec["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["env"]}
    assert env["WANDB_API_KEY"]["valueFrom"]["secretKeyRef"] == {"name": "wandb-secret", "key": "api_key"}
    # verl logs to W&B from its TaskRunner on the head: the head keeps the key there (verl does
    # not copy the driver's environment into the runtime env).
    head = {e["name"]: e for e in spec["headGroupSpec"]["template"]["spec"]["containers"][0]["env"]}
    assert head["WANDB_API_KEY"]["valueFrom"]["secretKeyRef"] == {"name": "wandb-secret", "key": "api_key"}
    assert "HF_TOKEN" not in head
    assert SECRET_PLACEHOLDER not in render_json(result)


def test_nemo_rl_head_never_holds_the_wandb_key():
    raw, secrets = stack_config("prod", {P + "wandbApiKey": "offline-preview-placeholder"})
    from tools.preview import run_with_config
    result = run_with_config("prod", raw, secrets | {P + "wandbApiKey"})
    assert result.error is None, result.error
    spec = _ray_cluster(result).inputs["spec"]
    head = {e["name"] for e in spec["headGroupSpec"]["template"]["spec"]["containers"][0]["env"]}
    assert not head & {"HF_TOKEN", "WANDB_API_KEY"}
    worker = {e["name"] for e in spec["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["env"]}
    assert {"HF_TOKEN", "WANDB_API_KEY"} <= worker
    assert SECRET_PLACEHOLDER not in render_json(result)


# ---- network policy ---------------------------------------------------------------------------------------

def test_network_policy_admits_only_the_ray_cluster_and_the_operator(prod_preview):
    [policy] = [r for r in prod_preview.resources if r.type == "kubernetes:networking.k8s.io/v1:NetworkPolicy"]
    spec = policy.inputs["spec"]
    assert spec["podSelector"] == {"matchLabels": {"ray.io/cluster": "grpo-prod"}}
    assert spec["policyTypes"] == ["Ingress"]
    all_ports, submitter, operator, metrics = spec["ingress"]
    # Ray's metrics export port, Ray's autoscaler and the run driver (components/monitoring.py).
    assert metrics["ports"] == [{"port": p, "protocol": "TCP"} for p in (8080, 44217, 9464)]
    # Managed Prometheus's collectors run in gke-gmp-system.
    assert metrics["from"] == [{"namespaceSelector": {"matchLabels": {
        "kubernetes.io/metadata.name": "gke-gmp-system"}}}]
    assert all_ports == {"from": [{"podSelector": {"matchLabels": {"ray.io/cluster": "grpo-prod"}}}]}
    assert submitter["ports"] == operator["ports"] == [{"port": 8265, "protocol": "TCP"}]
    # Only the RayJob submitter (components/head_code.py SUBMITTER_LABELS), never every pod of the namespace.
    assert submitter["from"] == [{"podSelector": {"matchLabels": {"gke-grpo/role": "rayjob-submitter"}}}]
    assert operator["from"] == [{"namespaceSelector": {"matchLabels": {
        "kubernetes.io/metadata.name": "kuberay-system"}}}]
    for rule in spec["ingress"]:
        assert {"podSelector": {}} not in rule["from"]


# ---- operator --------------------------------------------------------------------------------------------

def test_helm_operator_pins_chart_image_and_brings_its_crds(prod_preview):
    [release] = [r for r in prod_preview.resources if r.type == "kubernetes:helm.sh/v3:Release"]
    assert release.inputs["chart"] == "kuberay-operator" and release.inputs["version"] == "1.7.0"
    assert release.inputs["skipCrds"] is True
    assert release.inputs["repositoryOpts"] == {"repo": "https://ray-project.github.io/kuberay-helm/"}
    assert release.inputs["values"]["image"] == {"repository": "quay.io/kuberay/operator", "tag": "v1.7.0"}
    [crds] = [r for r in prod_preview.resources if r.type == "kubernetes:yaml/v2:ConfigGroup"]
    # Vendored files, never a URL: nothing is fetched at `pulumi up`.
    assert crds.inputs["files"] == [f"data/kuberay-crds/v1.7.0/ray.io_{plural}.yaml" for plural in
                                    ("rayclusters", "raycronjobs", "rayjobs", "rayservices")]
    assert crds.urn in release.dependencies


def test_a_chart_version_without_vendored_crds_is_refused():
    result = preview_with("prod", {P + "kuberay.helmChartVersion": "1.7.1"})
    assert result.error is not None and result.resources == []
    assert any(p.key == P + "kuberay.helmChartVersion" and "vendored" in p.allowed for p in result.problems)


def test_addon_stack_installs_no_operator(dev_preview):
    assert not [r for r in dev_preview.resources if "helm" in r.type or "ConfigGroup" in r.type]


# ---- installer -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("stack,namespace", [("dev", "rdma-system"), ("prod", "kube-system")])
def test_nccl_installer_per_cluster_mode(stack, namespace, request):
    result = request.getfixturevalue(f"{stack}_preview")
    [installer] = [r for r in result.resources if r.type == "kubernetes:apps/v1:DaemonSet"]
    assert installer.inputs["metadata"]["namespace"] == namespace
    pod = installer.inputs["spec"]["template"]["spec"]
    assert ("priorityClassName" in pod) is (stack == "prod")
    [init] = pod["initContainers"]
    assert init["image"].startswith("us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib:v1.1")
    # Google's Standard manifest dropped --install-nccl on 2026-05-06 (container-engine-
    # accelerators 2da1c92f); the Autopilot manifest still passes it.
    script = init["args"][0].splitlines()
    expected = ("/scripts/container_entry.sh install --install-nccl" if stack == "dev"
                else "/scripts/container_entry.sh install")
    assert expected in script
    assert {v["hostPath"]["path"] for v in pod["volumes"]} == {"/home/kubernetes/bin/nvidia/lib64", "/home/kubernetes/bin/gib"}
    assert pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0][
        "matchExpressions"][0]["values"] == ["nvidia-h200-141gb", "nvidia-b200"]


# ---- dependency edges --------------------------------------------------------------------------------

def test_ray_cluster_waits_for_networks_installer_claim_and_secrets(stack_preview):
    cluster = _ray_cluster(stack_preview)
    needed = [r for r in stack_preview.resources if r.inputs.get("kind") in ("Network", "GKENetworkParamSet")
              or r.type in ("kubernetes:apps/v1:DaemonSet", "kubernetes:core/v1:PersistentVolumeClaim",
                            "kubernetes:core/v1:Secret")]
    assert len(needed) >= 21
    for resource in needed:
        assert resource.urn in cluster.dependencies, resource.name


# ---- versions and token auth --------------------------------------------------------------------------------

def test_ray_version_comes_from_the_versions_table(stack_preview):
    config = _config(stack_preview.stack)
    row = load_versions().for_framework(config.job.framework)
    spec = _ray_cluster(stack_preview).inputs["spec"]
    assert spec["rayVersion"] == row.ray
    images = {c["image"] for t in [spec["headGroupSpec"]["template"], spec["workerGroupSpecs"][0]["template"]]
              for c in t["spec"]["containers"]}
    assert images == {row.image}


def test_token_auth_on_when_operator_and_ray_support_it(prod_preview):
    """prod: the Helm operator 1.7.0 and NeMo RL v0.7.0's Ray 2.55.1 both support it; a verl
    release on the same stack too."""
    for result in (prod_preview, preview_with("prod", {
            P + "job.framework": "verl", P + "job.release": "verl-0.7.1", P + "job.miniBatchSize": 32,
            P + "job.trainingTensorParallelSize": 1})):
        assert result.error is None, result.error
        assert _ray_cluster(result).inputs["spec"]["authOptions"] == {"mode": "token"}
        assert "is on" in result.outputs["rayTokenAuthentication"]


@pytest.mark.parametrize("stack,changes,reason", [
    ("dev", {}, "GKE Ray addon"),
    ("prod", {P + "job.release": "nemo-rl-0.5.0", P + "job.logProbMicroBatchSizePerGpu": 2}, "Ray 2.49.2"),
])
def test_token_auth_off_says_why(stack, changes, reason):
    result = preview_with(stack, changes)
    assert result.error is None, result.error
    assert "authOptions" not in _ray_cluster(result).inputs["spec"]
    assert reason in result.outputs["rayTokenAuthentication"]


def test_interfaces_annotation_helper_is_valid_json():
    assert len(json.loads(interfaces_annotation(8))) == 10


KONNECTIVITY = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
                "podSelector": {"matchLabels": {"k8s-app": "konnectivity-agent"}}}
SUBMITTER = {"podSelector": {"matchLabels": {"gke-grpo/role": "rayjob-submitter"}}}


def _network_policy(result):
    [policy] = [r for r in result.resources if r.type == "kubernetes:networking.k8s.io/v1:NetworkPolicy"]
    return policy.inputs["spec"]


# Every operator path: (stack, changes, the one operator source the dashboard port admits).
OPERATOR_PATHS = [
    ("addon-hosted", "dev", {}, KONNECTIVITY),
    ("addon-named-namespace", "dev", {P + "kuberay.operatorNamespace": "gke-ray-system"},
     {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "gke-ray-system"}}}),
    ("helm", "prod", {}, {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kuberay-system"}}}),
    ("addon-on-standard", "prod", {P + "kuberay.operator": "addon", P + "kuberay.helmChartVersion": DELETE},
     KONNECTIVITY),
    ("helm-on-autopilot", "dev", {P + "kuberay.operator": "helm"},
     {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kuberay-system"}}}),
]


@pytest.mark.parametrize("name,stack,changes,operator", OPERATOR_PATHS, ids=[p[0] for p in OPERATOR_PATHS])
def test_dashboard_admits_only_the_submitter_and_the_operator_on_every_path(name, stack, changes, operator):
    result = preview_with(stack, changes)
    assert result.error is None, result.error
    spec = _network_policy(result)
    dashboard = [rule for rule in spec["ingress"] if {"port": 8265, "protocol": "TCP"} in rule.get("ports", [])]
    sources = [peer for rule in dashboard for peer in rule["from"]]
    assert sources == [SUBMITTER, operator], sources
    for rule in spec["ingress"]:
        for peer in rule["from"]:
            assert "ipBlock" not in peer                       # no address range, on any port
            assert peer.get("namespaceSelector", {"x": 1}) != {}   # never "every namespace"
            assert peer.get("podSelector", {"x": 1}) != {} or "namespaceSelector" in peer
    # The one rule without ports admits the Ray cluster's own pods, nothing else.
    [unrestricted] = [rule for rule in spec["ingress"] if "ports" not in rule]
    assert unrestricted["from"] == [{"podSelector": {"matchLabels": {"ray.io/cluster": result.outputs["rayClusterName"]}}}]


def test_the_hosted_operators_path_is_said_in_the_preview(dev_preview, caplog):
    from components.kuberay import ADDON_OPERATOR_SOURCE_NOTE

    assert "Unconfirmed" in ADDON_OPERATOR_SOURCE_NOTE and "operatorNamespace" in ADDON_OPERATOR_SOURCE_NOTE
    with caplog.at_level("WARNING"):
        preview_with("dev")
    assert ADDON_OPERATOR_SOURCE_NOTE in caplog.text


def test_head_sidecar_budget_fits_the_head(dev_preview):
    head = _ray_cluster(dev_preview).inputs["spec"]["headGroupSpec"]["template"]["metadata"]["annotations"]
    worker = _ray_cluster(dev_preview).inputs["spec"]["workerGroupSpecs"][0]["template"]["metadata"]["annotations"]
    # Autopilot caps a pod without local SSD at 10 GiB of ephemeral storage, sidecar included.
    assert head["gke-gcsfuse/ephemeral-storage-limit"] == "4Gi"
    assert head["gke-gcsfuse/memory-limit"] == "4Gi" and head["gke-gcsfuse/cpu-limit"] == "1"
    assert worker["gke-gcsfuse/ephemeral-storage-limit"] == "550Gi"


def test_prod_ray_cluster_recreates_its_pods_on_change(prod_preview):
    cluster = _ray_cluster(prod_preview)
    assert cluster.inputs["spec"]["upgradeStrategy"] == {"type": "Recreate"}
    assert cluster.delete_before_replace is False


def test_addon_ray_cluster_is_replaced_when_its_pod_templates_change(dev_preview):
    cluster = _ray_cluster(dev_preview)
    assert "upgradeStrategy" not in cluster.inputs["spec"]   # the addon's KubeRay version is unknown
    assert cluster.delete_before_replace is True


def test_unconfirmed_verl_image_is_a_preview_warning(caplog):
    """data/versions.yaml cannot confirm the verl image is on Docker Hub: every preview of a verl
    stack says what to check before the first deploy (and the same text, run after run)."""
    import logging

    messages = []
    for _ in range(2):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="gke-grpo.preview"):
            assert preview_with("dev", fresh=True).error is None     # two real runs, not the cache
        messages.append([r.getMessage() for r in caplog.records if "verlai/verl" in r.getMessage()])
    assert messages[0] == messages[1] and len(messages[0]) == 1
    [warning] = messages[0]
    assert "verlai/verl:vllm024.dev2 is not confirmed to be on Docker Hub" in warning
    assert "docker manifest inspect docker.io/verlai/verl:vllm024.dev2" in warning
    # its Ray, and the two packages the Dockerfile pins below what verl 0.9.1 asks for
    assert "set `ray` to what it prints" in warning and "TransferQueue 0.1.8" in warning
    assert warning == load_versions().for_framework("verl").deploy_warnings()[0]
    # NeMo RL v0.7.0's image is named by its tag's docs, without a digest: a warning too; v0.5.0's
    # is confirmed (NVIDIA's release page names it): none.
    assert "nvcr.io/nvidia/nemo-rl:v0.7.0" in load_versions().for_framework("nemo-rl").deploy_warnings()[0]
    assert load_versions().by_id("nemo-rl-0.5.0").deploy_warnings() == []


# ---- built from its own args (no stack config) ------------------------------------------------

def _kuberay_from_args():
    import pulumi
    import pulumi_gcp as gcp
    import pulumi_kubernetes as k8s

    from components.config import HeadResources
    from components.kuberay import KubeRay, KubeRayArgs
    from components.ray_pods import RayPodsArgs, WorkerSizing
    from components.storage import PodStorage
    from tests.components.harness import build

    row = load_versions().for_framework("verl")

    def program():
        provider = k8s.Provider("k8s", kubeconfig="{}")
        namespace = k8s.core.v1.Namespace("ns", metadata=k8s.meta.v1.ObjectMetaArgs(name="unit-ns"),
                                          opts=pulumi.ResourceOptions(provider=provider))
        gvnic = gcp.compute.Network("gvnic", name="u-gvnic", auto_create_subnetworks=False)
        gvnic_subnet = gcp.compute.Subnetwork("gvnic-sub", name="u-gvnic-sub", network=gvnic.id,
                                              ip_cidr_range="192.168.0.0/24")
        rdma = gcp.compute.Network("rdma", name="u-rdma", auto_create_subnetworks=False)
        subnets = [gcp.compute.Subnetwork(f"rdma-{i}", name=f"u-rdma-{i}", network=rdma.id,
                                          ip_cidr_range=f"192.168.{i + 1}.0/24") for i in range(2)]
        volume = {"name": "shared-data", "persistentVolumeClaim": {"claimName": "unit-claim"}}
        storage = PodStorage(
            head_service_account_name="unit-head-sa", worker_service_account_name="unit-worker-sa",
            volumes=[volume],
            volume_mounts=[{"name": "shared-data", "mountPath": "/data"}], head_volumes=[volume],
            pod_annotations={"unit/worker": "yes"}, head_pod_annotations={"unit/head": "yes"},
            hf_home="/data/hf", sidecar_budget=(0.0, 0.0), claims=[])
        pods = RayPodsArgs(
            image=row.image, ray_version=row.ray, framework="verl", autopilot=False,
            head=HeadResources.model_validate({"cpu": 4, "memoryGib": 16}),
            head_ephemeral_storage_gib=20, worker=WorkerSizing(cpu=100, memory_gib=1000, shm_gib=64),
            worker_ephemeral_storage_gib=500, gpu_nodes=2, gpus_per_node=8,
            nccl_tuner_file="/usr/local/gib/configs/unit.txtpb", rdma_nics=2, operator="helm",
            helm_chart_version="1.7.0", autoscaler_allocate_timeout_seconds=4321,
            head_node_selector={"unit/pool": "head"},
            gpu_node_selector={"unit/pool": "gpu"}, gpu_tolerations=[], storage=storage)
        return KubeRay("kuberay", KubeRayArgs(
            operator="helm", operator_namespace=None, helm_chart_version="1.7.0",
            workload_namespace="unit-ns", ray_cluster_name="unit-ray", image_row=row,
            pods=pods, kubernetes_provider=provider,
            namespace=namespace.metadata.apply(lambda metadata: metadata.name),
            gvnic_network=gvnic, gvnic_subnet=gvnic_subnet, rdma_network=rdma, rdma_subnets=subnets,
            gpu_node_pool=None, storage_claims=[], hf_token=pulumi.Output.secret("unit-token")))

    return build(program)


def test_kuberay_is_built_from_its_own_args_alone():
    built = _kuberay_from_args()
    cluster = built.one(RAY_CLUSTER).inputs
    validate_custom_resource(cluster)
    assert (cluster["metadata"]["name"], cluster["metadata"]["namespace"]) == ("unit-ray", "unit-ns")
    spec = cluster["spec"]
    group = spec["workerGroupSpecs"][0]
    assert group["maxReplicas"] == 2 and group["rayStartParams"]["num-cpus"] == "100"
    worker = group["template"]["spec"]["containers"][0]
    assert worker["resources"]["limits"] == {"cpu": "100", "memory": "1000Gi", "nvidia.com/gpu": "8"}
    annotations = group["template"]["metadata"]["annotations"]
    assert annotations["unit/worker"] == "yes"
    assert annotations["networking.gke.io/interfaces"] == interfaces_annotation(2)
    head = spec["headGroupSpec"]["template"]
    assert head["metadata"]["annotations"] == {"unit/head": "yes"}
    assert head["spec"]["nodeSelector"] == {"unit/pool": "head"}
    assert head["spec"]["serviceAccountName"] == "unit-head-sa"
    assert group["template"]["spec"]["serviceAccountName"] == "unit-worker-sa"
    # One GKENetworkParamSet and one Network per extra NIC: the gVNIC and the two RDMA subnets.
    params = built.of_type("kubernetes:networking.gke.io/v1:GKENetworkParamSet")
    assert sorted(p.inputs["spec"]["vpcSubnet"] for p in params) == ["u-gvnic-sub", "u-rdma-0", "u-rdma-1"]
    assert len(built.of_type("kubernetes:networking.gke.io/v1:Network")) == 3
    # Helm operator, no W&B key, no head code.
    assert built.one("kubernetes:helm.sh/v3:Release").inputs["version"] == "1.7.0"
    assert [s.inputs["metadata"]["name"] for s in built.of_type("kubernetes:core/v1:Secret")] == ["hf-secret"]
    assert built.of_type("kubernetes:core/v1:ConfigMap") == []
    assert built.value.port_forward_command.startswith("kubectl port-forward -n unit-ns service/unit-ray-head-svc")
