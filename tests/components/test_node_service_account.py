"""NodeServiceAccount: nodes run as their own least-privilege account on every Standard pool and
on Autopilot's auto-provisioning defaults, never the Compute Engine default
(CIS GKE 5.2.1)."""

from __future__ import annotations

import pytest

from components.config import ResourceNames
from tests.conftest import DELETE, preview_with

P = "gke-grpo:"
ACCOUNT = "gcp:serviceaccount/account:Account"
MEMBER = "gcp:projects/iAMMember:IAMMember"
CLUSTER = "gcp:container/cluster:Cluster"
POOL = "gcp:container/nodePool:NodePool"


def _email(result):
    return result.one(ACCOUNT).inputs["accountId"] + f"@my-grpo-{result.stack}.iam.gserviceaccount.com"


def test_one_account_with_the_default_node_role_only(stack_preview):
    account = stack_preview.one(ACCOUNT)
    assert account.inputs["accountId"] == f"grpo-{stack_preview.stack}-nodes"
    [grant] = stack_preview.by_type(MEMBER)
    assert grant.inputs["role"] == "roles/container.defaultNodeServiceAccount"
    assert grant.inputs["member"] == f"serviceAccount:{_email(stack_preview)}"
    assert account.urn in grant.dependencies
    assert stack_preview.outputs["nodeServiceAccount"] == _email(stack_preview)


def test_every_standard_pool_runs_as_the_node_account(prod_preview):
    email = _email(prod_preview)
    pools = prod_preview.by_type(POOL)
    assert len(pools) == 2
    grant = prod_preview.one(MEMBER).urn
    for pool in pools:
        node = pool.inputs["nodeConfig"]
        assert node["serviceAccount"] == email, pool.name
        assert "compute@developer.gserviceaccount.com" not in str(node)
    cluster = prod_preview.one(CLUSTER)
    # The short-lived default pool too, and the nodes boot only once the role is granted.
    assert cluster.inputs["nodeConfig"]["serviceAccount"] == email
    assert grant in cluster.dependencies


def test_autopilot_nodes_run_as_the_node_account(dev_preview):
    cluster = dev_preview.one(CLUSTER)
    defaults = cluster.inputs["clusterAutoscaling"]["autoProvisioningDefaults"]
    assert defaults == {"serviceAccount": _email(dev_preview),
                        "oauthScopes": ["https://www.googleapis.com/auth/cloud-platform"]}
    assert dev_preview.one(MEMBER).urn in cluster.dependencies


@pytest.mark.parametrize("name", ["g", "grpo-a-very-long-cluster-name-of-forty-c", "abcdefghijklmnopqrstuv-xyz"])
def test_account_id_fits_iam_rules_for_any_cluster_name(name):
    import re
    account_id = ResourceNames(name, 8).node_service_account
    assert re.fullmatch(r"[a-z][-a-z0-9]{4,28}[a-z0-9]", account_id), account_id


def test_standard_variant_of_the_dev_stack_uses_it_too():
    result = preview_with("dev", {P + "cluster.mode": "standard", P + "gpu.minNodes": DELETE})
    assert result.error is None, result.error
    for pool in result.by_type(POOL):
        assert pool.inputs["nodeConfig"]["serviceAccount"] == _email(result)


def test_built_from_its_own_args_alone():
    from components.node_service_account import NodeServiceAccount, NodeServiceAccountArgs
    from tests.components.harness import build

    built = build(lambda: NodeServiceAccount("node-sa", NodeServiceAccountArgs(
        project="p-1", account_id="unit-nodes", display_name="unit nodes", services=[])))
    account = built.one(ACCOUNT)
    assert (account.inputs["accountId"], account.inputs["project"], account.inputs["displayName"]) == \
        ("unit-nodes", "p-1", "unit nodes")
    [grant] = built.of_type(MEMBER)
    assert grant.inputs["role"] == "roles/container.defaultNodeServiceAccount"
    assert grant.inputs["project"] == "p-1"
