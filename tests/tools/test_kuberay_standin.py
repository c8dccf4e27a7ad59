"""The KubeRay stand-in itself (tools/kuberay_standin.py): its reconcile against KubeRay
v1.7.0's rules, its API against Ray's own KubeRay cloud provider (the installed Ray's
ray/autoscaler/v2/instance_manager/cloud_providers/kuberay/cloud_provider.py over HTTPS on
127.0.0.1), and a test environment for every supported Ray version. No Ray process is started.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tools import kuberay_standin as ks

GROUP = "gpu-workers"


def rendered(stack: str) -> dict:
    preview = json.loads((ROOT / "tests" / "golden" / f"{stack}.json").read_text())
    return next(r["inputs"] for r in preview["resources"] if r["type"].endswith(":RayCluster"))


def standin(tmp_path: Path, stack: str = "prod", **config) -> ks.StandIn:
    return ks.StandIn({"raycluster": rendered(stack), "factor": 60, "workdir": str(tmp_path),
                       "pending_seconds": 600, "start_seconds": 60, **config}, ray_bin="/nonexistent/ray")


def patch(s: ks.StandIn, ops: list[dict]) -> tuple[int, dict]:
    path = f"/apis/ray.io/v1/namespaces/{s.namespace}/rayclusters/{s.name}"
    headers = {"authorization": f"Bearer {s.token}", "content-type": "application/json-patch+json"}
    return s.handle("PATCH", path, headers, json.dumps(ops).encode())


def workers(s: ks.StandIn) -> list[dict]:
    return [p for p in s.pods.values() if p["metadata"]["labels"]["ray.io/node-type"] == "worker"]


def test_the_stored_raycluster_carries_the_crd_defaults():
    stored = ks.stored_raycluster(rendered("prod"))
    group = stored["spec"]["workerGroupSpecs"][0]
    assert group["replicas"] == 0 and group["numOfHosts"] == 1 and group["minReplicas"] == 0
    assert group["maxReplicas"] == 4            # the program's, not the default
    schema_file = ROOT.parent / "shared" / "schemas" / "kuberay-v1.7.0" / "ray.io_rayclusters.yaml"
    if schema_file.exists():                    # the defaults are the CRD's own
        import yaml

        crd = yaml.safe_load(schema_file.read_text())
        v1 = next(v for v in crd["spec"]["versions"] if v["name"] == "v1")
        props = v1["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["workerGroupSpecs"]["items"]["properties"]
        defaults = {k: p["default"] for k, p in props.items() if "default" in p}
        assert defaults == ks.WORKER_GROUP_DEFAULTS


def test_json_patch_replaces_adds_and_removes():
    doc = {"spec": {"groups": [{"replicas": 0}]}}
    out = ks.json_patch(doc, [{"op": "replace", "path": "/spec/groups/0/replicas", "value": 2},
                              {"op": "replace", "path": "/spec/groups/0/scaleStrategy", "value": {"workersToDelete": ["a"]}},
                              {"op": "add", "path": "/spec/groups/-", "value": {"replicas": 1}}])
    assert out == {"spec": {"groups": [{"replicas": 2, "scaleStrategy": {"workersToDelete": ["a"]}}, {"replicas": 1}]}}
    assert doc == {"spec": {"groups": [{"replicas": 0}]}}          # a copy
    assert ks.json_patch(out, [{"op": "remove", "path": "/spec/groups/1"}])["spec"]["groups"] == out["spec"]["groups"][:1]
    with pytest.raises(KeyError):
        ks.json_patch(doc, [{"op": "replace", "path": "/spec/nothing/here", "value": 1}])


def test_the_generated_ray_start_is_kuberay_s_for_the_rendered_gpu_group():
    group = ks.stored_raycluster(rendered("prod"))["spec"]["workerGroupSpecs"][0]
    params = ks.ray_start_params(group, head=False, head_address="grpo-prod-head-svc.grpo.svc.cluster.local:6379")
    assert params == {"address": "grpo-prod-head-svc.grpo.svc.cluster.local:6379", "block": "true",
                      "dashboard-agent-listen-port": "52365", "labels-file": "/tmp/ray/gke-grpo-node-labels.yaml",
                      "memory": str(3817 * 2**30), "metrics-export-port": "8080", "num-cpus": "217", "num-gpus": "8"}
    assert ks.ray_start_command(params, head=False) == (
        "ray start --address=grpo-prod-head-svc.grpo.svc.cluster.local:6379 --block "
        "--dashboard-agent-listen-port=52365 --labels-file=/tmp/ray/gke-grpo-node-labels.yaml "
        f"--memory={3817 * 2**30} --metrics-export-port=8080 --num-cpus=217 --num-gpus=8")
    head = ks.ray_start_params(ks.stored_raycluster(rendered("prod"))["spec"]["headGroupSpec"], head=True, head_address="")
    assert head["dashboard-host"] == "0.0.0.0" and head["num-gpus"] == "0" and head["memory"] == str(48 * 2**30)


def test_replicas_make_pods_as_kuberay_builds_them(tmp_path):
    s = standin(tmp_path)
    code, _ = patch(s, [{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 2}])
    assert code == 200
    s.reconcile()
    pods = workers(s)
    assert len(pods) == 2
    for pod in pods:
        name = pod["metadata"]["name"]
        assert re.fullmatch(r"grpo-prod-gpu-workers-worker-[a-z0-9]{5}", name)
        assert pod["metadata"]["labels"]["ray.io/group"] == GROUP
        assert pod["metadata"]["labels"]["ray.io/cluster"] == "grpo-prod"
        env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
        assert env["RAY_CLOUD_INSTANCE_ID"] == name and env["RAY_NODE_TYPE_NAME"] == GROUP
        assert env["KUBERAY_GEN_RAY_START_CMD"].startswith("ray start --address=")
        assert pod["spec"]["restartPolicy"] == "Never"
        assert pod["spec"]["containers"][0]["args"][0].endswith(env["KUBERAY_GEN_RAY_START_CMD"])
        assert "ulimit -n" in pod["spec"]["containers"][0]["args"][0]
        assert pod["status"]["phase"] == "Pending" and "containerStatuses" not in pod["status"]
    s.reconcile()
    assert len(workers(s)) == 2                  # nothing more


def test_replicas_are_clamped_and_surplus_pods_are_never_deleted_at_random(tmp_path):
    s = standin(tmp_path)
    patch(s, [{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 9}])
    s.reconcile()
    assert len(workers(s)) == 4                  # maxReplicas
    patch(s, [{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 1}])
    s.reconcile()
    assert len(workers(s)) == 4                  # in-tree autoscaling: only the autoscaler deletes


def test_workers_to_delete_are_deleted_and_the_field_is_left_to_the_autoscaler(tmp_path):
    s = standin(tmp_path)
    patch(s, [{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 2}])
    s.reconcile()
    victim = workers(s)[0]["metadata"]["name"]
    patch(s, [{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 1},
              {"op": "replace", "path": "/spec/workerGroupSpecs/0/scaleStrategy", "value": {"workersToDelete": [victim]}}])
    s.reconcile()
    assert victim not in s.pods and len(workers(s)) == 1       # a Pending pod goes at once
    assert s.cluster["spec"]["workerGroupSpecs"][0]["scaleStrategy"]["workersToDelete"] == [victim]
    events = ks.read_cluster_events(tmp_path)
    assert [e["reason"] for e in events if e["event"] == "pod_deleting"] == ["workersToDelete"]


def test_a_failed_pod_is_deleted_first_and_replaced_in_a_later_round(tmp_path):
    s = standin(tmp_path)
    patch(s, [{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 1}])
    s.reconcile()
    [pod] = workers(s)
    pod["status"]["phase"] = "Failed"
    s.reconcile()
    assert workers(s) == []                      # deleted; nothing created in that round
    s.reconcile()
    assert len(workers(s)) == 1


def wait_until(predicate, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_a_ray_container_that_ends_fails_its_pod_which_kuberay_replaces(tmp_path):
    """`ray start --block` ending (restartPolicy Never) is the pod's end: Failed on a non-zero exit,
    then deleted and replaced as any failed pod."""
    s = standin(tmp_path)
    patch(s, [{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 1}])
    s.reconcile()
    [pod] = workers(s)
    name = pod["metadata"]["name"]
    s._set_running(pod)
    pod["_standin"]["started"] = 0.0
    s.procs[name] = subprocess.Popen([sys.executable, "-c", "raise SystemExit(1)"])
    kubelet = threading.Thread(target=s.kubelet, daemon=True)
    kubelet.start()
    try:
        wait_until(lambda: pod["status"]["phase"] == "Failed")
    finally:
        s.stopping.set()
        kubelet.join(timeout=5)
    [ended] = [e for e in ks.read_cluster_events(tmp_path) if e["event"] == "pod_container_ended"]
    assert ended["exit_code"] == 1 and ended["pod"] == name
    s.reconcile()                                 # deleted (after the grace period), none created
    wait_until(lambda: name not in s.pods)
    assert workers(s) == []
    s.reconcile()
    [replacement] = workers(s)
    assert replacement["metadata"]["name"] != name


def test_the_api_needs_the_token_and_json_patch(tmp_path):
    s = standin(tmp_path)
    path = f"/apis/ray.io/v1/namespaces/{s.namespace}/rayclusters/{s.name}"
    assert s.handle("GET", path, {}, b"")[0] == 401
    assert s.handle("GET", path, {"authorization": "Bearer nope"}, b"")[0] == 401
    code, _ = s.handle("PATCH", path, {"authorization": f"Bearer {s.token}",
                                          "content-type": "application/merge-patch+json"}, b"{}")
    assert code == 415
    assert s.handle("GET", f"/apis/ray.io/v1/namespaces/{s.namespace}/rayclusters/other",
                    {"authorization": f"Bearer {s.token}"}, b"")[0] == 404


def test_ray_s_own_kuberay_provider_scales_the_standin_over_https(tmp_path, monkeypatch):
    """The installed Ray's v2 KubeRay cloud provider, unmodified, against the stand-in served on
    127.0.0.1 with TLS: launch patches replicas and KubeRay's reconcile makes the pod; terminate
    names it in workersToDelete and it goes; the next request clears workersToDelete. Only the
    API address and the service-account files are given to it here (in the scenarios they come
    from the environment and the namespace's /var/run/secrets)."""
    pytest.importorskip("ray")
    from ray.autoscaler._private.kuberay import node_provider
    from ray.autoscaler.v2.instance_manager.cloud_providers.kuberay.cloud_provider import KubeRayProvider

    ca, cert, key = ks.make_tls(tmp_path)
    s = standin(tmp_path)
    port = s.serve(str(cert), str(key))
    reconciler = threading.Thread(target=s.reconcile_loop, daemon=True)
    reconciler.start()
    try:
        host = f"https://127.0.0.1:{port}"
        original = node_provider.url_from_resource
        monkeypatch.setattr(node_provider, "url_from_resource",
                            lambda **kw: original(**kw, kubernetes_host=host))
        monkeypatch.setattr(node_provider, "load_k8s_secrets",
                            lambda: ({"Authorization": f"Bearer {s.token}"}, str(ca)))
        monkeypatch.setattr(node_provider, "KUBERAY_CRD_VER", "v1")
        client = node_provider.KubernetesHttpApiClient(s.namespace, kuberay_crd_version="v1")
        provider = KubeRayProvider(s.name, {"namespace": s.namespace}, k8s_api_client=client)

        provider.launch({GROUP: 1}, "launch-1")
        assert provider.poll_errors() == []
        _wait(lambda: len(workers(s)) == 1)
        instances = provider.get_non_terminated()
        [pod_name] = [i for i, inst in instances.items() if inst.node_type == GROUP]
        assert not instances[pod_name].is_running                # Pending
        provider.terminate([pod_name], "terminate-1")
        assert provider.poll_errors() == []
        _wait(lambda: pod_name not in s.pods)
        assert s.cluster["spec"]["workerGroupSpecs"][0]["replicas"] == 0
        provider.launch({GROUP: 1}, "launch-2")                  # clears workersToDelete, adds one
        assert provider.poll_errors() == []
        _wait(lambda: len(workers(s)) == 1)
        assert s.cluster["spec"]["workerGroupSpecs"][0]["scaleStrategy"]["workersToDelete"] == []
    finally:
        s.stop()


def _wait(predicate, timeout: float = 10.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_every_supported_ray_version_has_a_test_environment():
    """./venv carries the verl row's Ray; every other supported version has its own pinned
    requirements file and a Makefile stamp that `make setup` and `make test` depend on."""
    from jobs.plan.versions import load_versions

    makefile = (ROOT / "Makefile").read_text()
    [suite_pin] = re.findall(r"^ray\[default\]==(\S+)$", (ROOT / "requirements-cli.txt").read_text(), flags=re.M)
    for version in {row.ray for row in load_versions().images} - {suite_pin}:
        requirements = ROOT / f"requirements-ray-{version}.txt"
        assert re.search(rf"^ray\[default\]=={re.escape(version)}$", requirements.read_text(), flags=re.M), version
        stamp = re.search(rf"^(\w+) := \.venv-ray-{re.escape(version)}/\.installed$", makefile, flags=re.M)
        assert stamp, version
        for target in ("setup", "test"):
            line = re.search(rf"^{target}: (.*)##", makefile, flags=re.M)
            assert line and f"$({stamp.group(1)})" in line.group(1), (target, version)
