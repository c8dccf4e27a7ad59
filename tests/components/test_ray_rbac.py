"""Least privilege inside the RayCluster: only the Ray head's service account carries KubeRay's
autoscaler Role; the GPU workers run under an account of their own that holds what the shared
volume needs (Workload Identity on the bucket, for Cloud Storage FUSE) and the read of its own
node (components/node_labels.py), nothing else.

Upstream read (ray-project/kuberay v1.7.0, 2026-12-06): ray-operator/controllers/ray/common/rbac.go
(BuildRole: pods get/list/watch/patch, pods/resize patch, rayclusters get/patch; BuildRoleBinding:
subject utils.GetHeadGroupServiceAccountName, the head template's serviceAccountName else the
RayCluster's name, utils/util.go); raycluster_controller.go reconcileAutoscalerRoleBinding (creates
the binding when it is missing, never updates its subject).
"""

from __future__ import annotations

import pytest

from components.node_labels import RBAC_NAME
from components.ray_rbac import AUTOSCALER_ROLE_RULES, autoscaler_role_subject, effective_account, pod_accounts
from components.storage import SERVICE_ACCOUNT_NAME, WORKER_SERVICE_ACCOUNT_NAME

RAY_CLUSTER = "kubernetes:ray.io/v1:RayCluster"
BINDING_TYPES = ("kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding",
                 "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding")
BUCKET_MEMBER = "gcp:storage/bucketIAMMember:BucketIAMMember"


def _cluster(result):
    [cluster] = result.by_type(RAY_CLUSTER)
    return cluster.inputs["metadata"]["name"], cluster.inputs["spec"]


def _bound_accounts(result) -> dict[str, list[str]]:
    """Account -> what the program binds it to (RBAC bindings, bucket grants)."""
    found: dict[str, list[str]] = {}
    for r in result.resources:
        if r.type in BINDING_TYPES:
            for subject in r.inputs["subjects"]:
                found.setdefault(subject["name"], []).append(f"{r.inputs['roleRef']['kind']} "
                                                             f"{r.inputs['roleRef']['name']}")
        if r.type == BUCKET_MEMBER:
            account = r.inputs["member"].rsplit("/sa/", 1)[-1]
            found.setdefault(account, []).append(r.inputs["role"])
    return found


def test_only_the_heads_account_is_bound_to_the_autoscaler_role(stack_preview):
    name, spec = _cluster(stack_preview)
    head = effective_account(spec, name, None)
    bound = autoscaler_role_subject(spec, name)
    assert head == bound == SERVICE_ACCOUNT_NAME
    for group in spec["workerGroupSpecs"]:
        worker = effective_account(spec, name, group["groupName"])
        assert worker == WORKER_SERVICE_ACCOUNT_NAME != bound, group["groupName"]
    # The program binds nothing of the autoscaler's Role itself (KubeRay does, to the head).
    assert not any(f"Role {name}" in what for bindings in _bound_accounts(stack_preview).values()
                   for what in bindings)


def test_the_workers_keep_the_shared_volume_and_their_node_read_only(stack_preview):
    _, spec = _cluster(stack_preview)
    bound = _bound_accounts(stack_preview)
    gcs = bool(stack_preview.by_type(BUCKET_MEMBER))
    assert sorted(bound[WORKER_SERVICE_ACCOUNT_NAME]) == sorted(
        [f"ClusterRole {RBAC_NAME}", *(["roles/storage.objectUser"] if gcs else [])])
    # The head reads no node; it mounts the bucket too (its own claim) on gcs.
    assert bound.get(SERVICE_ACCOUNT_NAME, []) == (["roles/storage.objectUser"] if gcs else [])
    # The workers' pods mount the token (their init container reads the node) and nothing
    # grants it more: every binding naming the account was listed above.
    worker_pod = spec["workerGroupSpecs"][0]["template"]["spec"]
    assert worker_pod.get("automountServiceAccountToken", True) is True


def test_the_output_states_every_accounts_rights_as_rendered(stack_preview):
    name, spec = _cluster(stack_preview)
    gcs = bool(stack_preview.by_type(BUCKET_MEMBER))
    expected = pod_accounts(spec, name, node_reader_role=RBAC_NAME,
                            node_reader_subject=WORKER_SERVICE_ACCOUNT_NAME,
                            bucket_role="roles/storage.objectUser" if gcs else None,
                            bucket_accounts=(SERVICE_ACCOUNT_NAME, WORKER_SERVICE_ACCOUNT_NAME))
    out = stack_preview.outputs["rayPodAccounts"]
    assert out == expected
    assert [r for r in out["head"]["rights"] if r.startswith(f"Role {name}")] == [
        f"Role {name} (created and bound by KubeRay for its autoscaler): pods get/list/watch/patch; "
        "pods/resize patch; rayclusters get/patch"]
    assert not any(r.startswith("Role ") for r in out["gpu-workers"]["rights"])


@pytest.mark.parametrize("head_account,worker_account,worker_bound", [
    ("", "grpo", True),                    # KubeRay binds the RayCluster's name when the head says none
    ("shared", "shared", True),            # one account for both: the workers get the Role
    ("head", "", False),                   # a worker without one runs as `default`
    ("head", "workers", False),
])
def test_kuberays_subject_follows_its_own_rule(head_account, worker_account, worker_bound):
    spec = {"headGroupSpec": {"template": {"spec": {"serviceAccountName": head_account}}},
            "workerGroupSpecs": [{"groupName": "g", "template": {"spec": {"serviceAccountName": worker_account}}}]}
    out = pod_accounts(spec, "grpo", node_reader_role=RBAC_NAME, node_reader_subject="workers",
                       bucket_role=None, bucket_accounts=())
    assert any(r.startswith("Role grpo") for r in out["head"]["rights"])
    assert any(r.startswith("Role grpo") for r in out["g"]["rights"]) is worker_bound


def test_the_role_is_kuberays():
    # common/rbac.go BuildRole @v1.7.0, rule for rule.
    assert AUTOSCALER_ROLE_RULES == (
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "patch"]},
        {"apiGroups": [""], "resources": ["pods/resize"], "verbs": ["patch"]},
        {"apiGroups": ["ray.io"], "resources": ["rayclusters"], "verbs": ["get", "patch"]})


def test_a_deployed_stacks_binding_stays_on_the_head():
    """KubeRay creates the autoscaler RoleBinding once and never updates its subject
    (reconcileAutoscalerRoleBinding): a stack deployed when head and workers shared
    `grpo-workload` keeps that account bound. So the head keeps it, and the workers move."""
    assert SERVICE_ACCOUNT_NAME == "grpo-workload" and WORKER_SERVICE_ACCOUNT_NAME != SERVICE_ACCOUNT_NAME
