"""Who may do what inside the RayCluster: the Ray head's and the GPU workers' Kubernetes service
accounts, and the rights each ends up with, including those KubeRay grants itself.

Pure (no resource here). KubeRay v1.7.0, with in-tree autoscaling on, creates a Role named after
the RayCluster (ray-operator/controllers/ray/common/rbac.go BuildRole: the rules below) and a
RoleBinding of it to the head group's service account (BuildRoleBinding, subject
utils.GetHeadGroupServiceAccountName: the head template's serviceAccountName, else the RayCluster's
name; ray-operator/controllers/ray/utils/util.go). Those two objects are KubeRay's, not the
program's, so the preview cannot show them as resources: the stack output ``rayPodAccounts``
(``pod_accounts``) states them next to what the program binds, and the golden previews carry it.
"""

from __future__ import annotations

# common/rbac.go BuildRole @v1.7.0.
AUTOSCALER_ROLE_RULES = (
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "patch"]},
    {"apiGroups": [""], "resources": ["pods/resize"], "verbs": ["patch"]},
    {"apiGroups": ["ray.io"], "resources": ["rayclusters"], "verbs": ["get", "patch"]},
)


def autoscaler_role_subject(cluster_spec: dict, cluster_name: str) -> str:
    """The service account KubeRay binds its autoscaler Role to (utils.GetHeadGroupServiceAccountName)."""
    head = cluster_spec.get("headGroupSpec", {}).get("template", {}).get("spec", {})
    return head.get("serviceAccountName") or cluster_name


def _rules_text(rules) -> str:
    return "; ".join(f"{','.join(r['resources'])} {'/'.join(r['verbs'])}" for r in rules)


def effective_account(cluster_spec: dict, cluster_name: str, group: str | None) -> str:
    """The service account a Ray pod runs as: its template's, else for the head the one KubeRay
    sets (the RayCluster's name, common/pod.go DefaultHeadPodTemplate), for a worker `default`.
    ``group`` None: the head."""
    if group is None:
        return autoscaler_role_subject(cluster_spec, cluster_name)
    [worker] = [g for g in cluster_spec["workerGroupSpecs"] if g["groupName"] == group]
    return worker["template"]["spec"].get("serviceAccountName") or "default"


def pod_accounts(cluster_spec: dict, cluster_name: str, *, node_reader_role: str,
                 node_reader_subject: str, bucket_role: str | None, bucket_accounts: tuple[str, ...]) -> dict:
    """The rayPodAccounts output: per Ray pod group, its service account and every right bound to
    it, as rendered (the RayCluster's templates, the node reader's binding, the bucket grants)
    and as KubeRay binds its autoscaler Role."""
    bound = autoscaler_role_subject(cluster_spec, cluster_name)
    groups: dict[str, str] = {"head": effective_account(cluster_spec, cluster_name, None)}
    for group in cluster_spec["workerGroupSpecs"]:
        groups[group["groupName"]] = effective_account(cluster_spec, cluster_name, group["groupName"])
    out = {}
    for group, account in groups.items():
        rights = []
        if account == bound:
            rights.append(f"Role {cluster_name} (created and bound by KubeRay for its autoscaler): "
                          + _rules_text(AUTOSCALER_ROLE_RULES))
        if account == node_reader_subject:
            rights.append(f"ClusterRole {node_reader_role}: nodes get")
        if bucket_role and account in bucket_accounts:
            rights.append(f"{bucket_role} on the shared bucket (Workload Identity, for Cloud Storage FUSE)")
        out[group] = {"serviceAccount": account, "rights": rights}
    return out
