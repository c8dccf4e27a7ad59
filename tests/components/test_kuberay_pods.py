"""Ray pods that schedule and survive: explicit ephemeral storage
and scratch emptyDirs, Autopilot's local-SSD and zone selectors, Autopilot's per-pod maximum,
the Standard pool selector, the head's cache-less gcsfuse claim and KubeRay's port names."""

from __future__ import annotations

import pytest

from components.autopilot_limits import load_pod_limits, pod_limit_for
from components.config import MACHINE_SHAPES, load_stack_config, quantity_bytes
from tests.conftest import DELETE, preview_with, stack_config
from tests.kubernetes_objects import validate_strict

P = "gke-grpo:"
AUTOPILOT_POOL_KEYS = {P + "gpu.minNodes": DELETE, P + "gpu.maxNodes": DELETE,
                       P + "gpu.compactPlacement": DELETE, P + "cluster.headPool": DELETE}
VARIANTS = {
    "dev": ("dev", {}),
    "prod": ("prod", {}),
    "standard-h200-gcs": ("dev", {P + "cluster.mode": "standard"}),
    "autopilot-b200-lustre": ("prod", {P + "cluster.mode": "autopilot", **AUTOPILOT_POOL_KEYS}),
}


@pytest.fixture(scope="module", params=list(VARIANTS))
def variant(request):
    stack, changes = VARIANTS[request.param]
    result = preview_with(stack, changes)
    assert result.error is None, result.error
    return load_stack_config(*stack_config(stack, changes)), result


def _spec(result):
    [cluster] = [r for r in result.resources if r.type == "kubernetes:ray.io/v1:RayCluster"]
    return cluster.inputs["spec"]


def _pods(result):
    spec = _spec(result)
    return spec["headGroupSpec"]["template"]["spec"], spec["workerGroupSpecs"][0]["template"]["spec"]


def _mounts(container):
    return {m["mountPath"]: m["name"] for m in container["volumeMounts"]}


def test_ray_scratch_space_is_requested_and_on_emptydirs(variant):
    config, result = variant
    head, worker = _pods(result)
    head_c, worker_c = head["containers"][0], worker["containers"][0]
    # Autopilot's default is 1 GiB of ephemeral storage per container: asked explicitly.
    assert head_c["resources"]["requests"]["ephemeral-storage"] == ("5Gi" if config.autopilot else "50Gi")
    assert worker_c["resources"]["requests"]["ephemeral-storage"] == "1000Gi"
    assert _mounts(head_c)["/tmp/ray"] == "ray-tmp" and "/tmp" not in _mounts(head_c)
    assert _mounts(worker_c)["/tmp/ray"] == "ray-tmp" and _mounts(worker_c)["/tmp"] == "tmp"
    assert {v["name"]: v for v in worker["volumes"]}["ray-tmp"] == {"name": "ray-tmp", "emptyDir": {}}
    head_tmp = {v["name"]: v for v in head["volumes"]}["ray-tmp"]
    if config.autopilot:
        # Autopilot caps a pod without local SSD at 10 GiB: the head's /tmp/ray is a disk.
        claim = head_tmp["ephemeral"]["volumeClaimTemplate"]["spec"]
        assert claim["resources"]["requests"]["storage"] == "100Gi"
        assert claim["storageClassName"] == "standard-rwo" and claim["accessModes"] == ["ReadWriteOnce"]
        totals = _pod_requests(head, _spec(result)["headGroupSpec"]["template"]["metadata"]["annotations"])
        assert totals["ephemeral-storage"] <= 10
    else:
        assert head_tmp == {"name": "ray-tmp", "emptyDir": {}}
    assert {v["name"] for v in worker["volumes"]} >= {"tmp", "ray-tmp"}
    for name, pod in (("head", head), ("worker", worker)):
        validate_strict({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": pod},
                        config.kubernetes_minor)


def test_gpu_workers_select_what_their_cluster_mode_provides(variant):
    config, result = variant
    selector = _pods(result)[1]["nodeSelector"]
    if config.autopilot:
        assert selector["cloud.google.com/gke-ephemeral-storage-local-ssd"] == "true"
        assert selector["topology.kubernetes.io/zone"] == config.zone
        assert selector["cloud.google.com/gke-accelerator-count"] == "8"
    else:
        # The pool, not an Autopilot provisioning label (item 18).
        assert selector["cloud.google.com/gke-nodepool"] == config.capacity.sources[0].pool_name
        assert "cloud.google.com/gke-accelerator-count" not in selector
        assert "cloud.google.com/gke-ephemeral-storage-local-ssd" not in selector


def _pod_requests(pod, annotations):
    totals = {"cpu": 0.0, "memory": 0.0, "ephemeral-storage": 0.0}
    for container in pod["containers"]:
        for key in totals:
            value = container["resources"]["requests"].get(key)
            if value is None:
                continue
            totals[key] += float(value) if key == "cpu" else quantity_bytes(value) / 2**30
    # The gcsfuse sidecar the webhook injects: its request copies its limit.
    if annotations.get("gke-gcsfuse/volumes") == "true":
        totals["cpu"] += float(annotations["gke-gcsfuse/cpu-limit"])
        totals["memory"] += quantity_bytes(annotations["gke-gcsfuse/memory-limit"]) / 2**30
        totals["ephemeral-storage"] += quantity_bytes(annotations["gke-gcsfuse/ephemeral-storage-limit"]) / 2**30
    return totals


def test_autopilot_gpu_worker_pod_fits_the_per_pod_maximum(variant):
    config, result = variant
    if not config.autopilot:
        return
    group = _spec(result)["workerGroupSpecs"][0]
    totals = _pod_requests(group["template"]["spec"], group["template"]["metadata"]["annotations"])
    limit = pod_limit_for(config.gpu.type, config.gpus_per_node)
    print(f"{config.gpu.type}: worker pod asks {totals} of {limit}")
    assert totals["cpu"] <= limit.cpu
    assert totals["memory"] <= limit.memory_gib
    assert totals["ephemeral-storage"] <= limit.ephemeral_storage_gib


def test_the_limits_table_covers_every_shape_and_never_exceeds_the_machine():
    limits = load_pod_limits()
    for shape in MACHINE_SHAPES.values():
        limit = limits[(shape.gpu_type, shape.gpus)]
        assert limit.cpu <= shape.vcpus and limit.memory_gib <= shape.memory_gib
        assert limit.ephemeral_storage_gib <= shape.local_ssd_gib
        if not limit.confirmed:
            assert "unconfirmed" in limit.source


def test_default_worker_is_shrunk_to_an_autopilot_maximum(monkeypatch):
    """A smaller published row sizes the default worker down instead of being rejected."""
    import components.autopilot_limits as limits_module
    from components.autopilot_limits import PodLimit

    small = PodLimit("nvidia-h200-141gb", 8, cpu=200, memory_gib=2000, ephemeral_storage_gib=6000,
                     confirmed=True)
    monkeypatch.setattr(limits_module, "pod_limit_for", lambda gpu_type, gpus: small)
    result = preview_with("dev")
    assert result.error is None, result.error
    group = _spec(result)["workerGroupSpecs"][0]
    totals = _pod_requests(group["template"]["spec"], group["template"]["metadata"]["annotations"])
    # 8 CPUs and 32Gi of it are the gcsfuse sidecar's (Autopilot budget).
    assert totals["cpu"] == 200 and totals["memory"] == 2000


def test_head_reads_the_bucket_without_a_file_cache(dev_preview):
    head, worker = _pods(dev_preview)
    claims = {v["persistentVolumeClaim"]["claimName"] for v in head["volumes"] if "persistentVolumeClaim" in v}
    assert claims == {"shared-data-head"}
    assert {v["persistentVolumeClaim"]["claimName"] for v in worker["volumes"]
            if "persistentVolumeClaim" in v} == {"shared-data"}
    pvs = {r.inputs["metadata"]["name"]: r.inputs["spec"] for r in dev_preview.by_type("kubernetes:core/v1:PersistentVolume")}
    head_options, worker_options = pvs["grpo-dev-shared-data-head"]["mountOptions"], pvs["grpo-dev-shared-data"]["mountOptions"]
    assert not any(o.startswith("file-cache:") for o in head_options)
    assert any(o.startswith("file-cache:max-size-mb:") for o in worker_options)
    assert pvs["grpo-dev-shared-data-head"]["csi"]["volumeHandle"] == pvs["grpo-dev-shared-data"]["csi"]["volumeHandle"]
    # Same volume name on both pods, so /data mounts read the same.
    assert {"name": "shared-data", "mountPath": "/data"} in head["containers"][0]["volumeMounts"]
    [ray] = [r for r in dev_preview.resources if r.type == "kubernetes:ray.io/v1:RayCluster"]
    [head_claim] = [r for r in dev_preview.by_type("kubernetes:core/v1:PersistentVolumeClaim")
                    if r.inputs["metadata"]["name"] == "shared-data-head"]
    assert head_claim.urn in ray.dependencies


def test_lustre_head_shares_the_workers_claim(prod_preview):
    head, worker = _pods(prod_preview)
    assert [v for v in head["volumes"] if "persistentVolumeClaim" in v] == \
        [v for v in worker["volumes"] if "persistentVolumeClaim" in v]


def test_head_ports_carry_kuberays_default_names(stack_preview):
    ports = {p["name"]: p["containerPort"] for p in _pods(stack_preview)[0]["containers"][0]["ports"]}
    # KubeRay v1.7.0 utils/constant.go: GcsServerPortName = "gcs-server".
    assert ports["gcs-server"] == 6379 and "gcs" not in ports


def test_a_stated_worker_size_above_the_autopilot_maximum_is_refused(monkeypatch):
    import components.autopilot_limits as limits_module
    from components.autopilot_limits import PodLimit

    small = PodLimit("nvidia-h200-141gb", 8, cpu=200, memory_gib=2000, ephemeral_storage_gib=6000,
                     confirmed=True)
    monkeypatch.setattr(limits_module, "pod_limit_for", lambda gpu_type, gpus: small)
    result = preview_with("dev", {P + "kuberay.worker.cpu": 195, P + "kuberay.worker.memoryGib": 1990})
    # 195 + 8 sidecar CPUs > 200; 1990 + 32 GiB > 2000: Autopilot would reject the pod.
    assert {p.key for p in result.problems} == {P + "kuberay.worker.cpu", P + "kuberay.worker.memoryGib"}
    assert result.resources == []


def test_autopilot_head_ephemeral_storage_above_the_pod_maximum_is_refused():
    result = preview_with("dev", {P + "kuberay.head.ephemeralStorageGib": 6})
    # 6 + the gcsfuse sidecar's 4 GiB + the Ray autoscaler's 1 GiB > Autopilot's 10 GiB for a
    # pod without local SSD.
    assert {p.key for p in result.problems} == {P + "kuberay.head.ephemeralStorageGib"}
    assert "the Ray autoscaler 1" in result.error
    assert preview_with("dev", {P + "kuberay.head.ephemeralStorageGib": 5}).error is None
    assert preview_with("prod", {P + "kuberay.head.ephemeralStorageGib": 120}).error is None
