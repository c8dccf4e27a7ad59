"""The policy pack's real validation callbacks, driven as the engine drives them.

Both stacks' previews (tests/golden) pass every rule; for each rule, resources derived from a
real resource of a preview with one thing changed fail with a message naming the problem, at
the mandatory level, and only that rule fires.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import rules
from harness import (
    POLICY_DIR,
    ROOT,
    UNKNOWN_STRING,
    analyze_request,
    find,
    in_stack,
    load_golden,
    retype,
    serve_pack,
)
from pulumi.runtime import proto
from pulumi_policy import (
    EnforcementLevel,
    PolicyCustomTimeouts,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
)

RULE_NAMES = ["gpu-provisioning-model", "ray-head-not-exposed", "no-privileged-workloads",
              "no-floating-image-tags", "prod-data-stores-protected", "no-plaintext-secrets",
              "iam-bucket-scoped", "ray-autoscaler-rights-head-only"]

RAY_CLUSTER = "kubernetes:ray.io/v1:RayCluster"
RAY_JOB = "kubernetes:ray.io/v1:RayJob"
DAEMONSET = "kubernetes:apps/v1:DaemonSet"
NODE_POOL = "gcp:container/nodePool:NodePool"
HELM = "kubernetes:helm.sh/v3:Release"
BUCKET_MEMBER = "gcp:storage/bucketIAMMember:BucketIAMMember"

# Realistic-looking, fake credentials (never real ones).
HF_TOKEN = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz01234567"
GH_TOKEN = "ghp_" + "0123456789abcdefghijABCDEFGHIJ012345"
PRIVATE_KEY = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----\n"


DOCS = {stack: load_golden(stack) for stack in ("dev", "prod")}


# ------------------------------------------------------------------------------------------
# The pack itself
# ------------------------------------------------------------------------------------------


def test_main_builds_and_serves_the_pack(pack):
    info = pack.probe  # read over gRPC from the server policy/__main__.py started
    assert pack.port > 0
    assert info.name == "gke-grpo-guardrails"
    assert [p.name for p in info.policies] == RULE_NAMES
    for policy in info.policies:
        assert policy.enforcementLevel == proto.MANDATORY, policy.name
        assert policy.policy_type == proto.PolicyType.POLICY_TYPE_RESOURCE, policy.name
        assert policy.description


def test_a_violation_over_grpc_is_mandatory():
    """One Analyze call over the wire, to the server the pack's __main__ runs."""
    release = find(DOCS["prod"], HELM, "kuberay-operator")
    release["inputs"]["values"]["image"]["tag"] = "latest"
    served = serve_pack(lambda stub: stub.Analyze(analyze_request(release), timeout=30))
    found = [(d.policyName, d.enforcementLevel) for d in served.probe.diagnostics]
    assert found == [("no-floating-image-tags", proto.MANDATORY)]
    assert "values.image.tag is the floating tag 'latest'" in served.probe.diagnostics[0].message


def test_pack_file_declares_the_python_runtime_in_its_venv():
    import yaml

    document = yaml.safe_load((POLICY_DIR / "PulumiPolicy.yaml").read_text())
    assert document["runtime"] == {"name": "python", "options": {"virtualenv": "venv"}}
    assert document["description"]


def test_every_policy_object_is_mandatory():
    assert [p.name for p in rules.POLICIES] == RULE_NAMES
    for policy in rules.POLICIES:
        assert isinstance(policy, ResourceValidationPolicy)
        assert policy.enforcement_level == EnforcementLevel.MANDATORY


# ------------------------------------------------------------------------------------------
# Both stacks pass
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_stack_passes_every_rule(pack, stack):
    document = DOCS[stack]
    assert document["stack"] == stack
    found = []
    for resource in document["resources"]:
        assert rules.stack_of(resource["urn"]) == stack
        found += pack.analyze(resource)
    assert found == []
    # No stack-level policy: AnalyzeStack over the whole preview reports nothing either.
    assert pack.analyze_stack(document) == []


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_stack_passes_the_pure_checks(stack):
    for resource in DOCS[stack]["resources"]:
        assert rules.check_all(resource["type"], resource["inputs"], resource["urn"],
                               resource["name"], resource["protect"], stack) == {}, resource["urn"]


def test_rules_see_what_they_guard():
    """The passes above are not vacuous: the previews hold what each rule inspects."""
    prod, dev = DOCS["prod"], DOCS["dev"]
    gpu_pool = find(prod, NODE_POOL, "gpu-pool")["inputs"]["nodeConfig"]
    assert gpu_pool["guestAccelerators"] and gpu_pool["reservationAffinity"]
    worker = find(dev, RAY_CLUSTER, "kuberay-ray-cluster")["inputs"]["spec"]["workerGroupSpecs"][0]
    assert "cloud.google.com/gke-accelerator" in worker["template"]["spec"]["nodeSelector"]
    installer = find(prod, DAEMONSET, "kuberay-nccl-rdma-installer")["inputs"]
    assert installer["spec"]["template"]["spec"]["initContainers"][0]["securityContext"]["privileged"]
    assert find(prod, "gcp:lustre/instance:Instance", "storage-lustre")["protect"] is True
    # Data stores are protected in every stack (storage.allowDataLoss lifts it for one update).
    assert find(dev, "gcp:storage/bucket:Bucket", "storage-bucket")["protect"] is True
    for stack, document in DOCS.items():
        paths = [p for r in document["resources"] for p, _ in rules.pod_specs(r["type"], r["inputs"])]
        assert len(paths) >= 3, stack   # head, workers, installer


# ------------------------------------------------------------------------------------------
# Crafted violations: a real resource with one thing changed
# ------------------------------------------------------------------------------------------


def _ray(stack: str) -> dict:
    return find(DOCS[stack], RAY_CLUSTER, "kuberay-ray-cluster")


def _head(resource: dict) -> dict:
    return resource["inputs"]["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]


def _worker_spec(resource: dict) -> dict:
    return resource["inputs"]["spec"]["workerGroupSpecs"][0]["template"]["spec"]


def _worker(resource: dict) -> dict:
    return _worker_spec(resource)["containers"][0]


def _installer(stack: str) -> dict:
    return find(DOCS[stack], DAEMONSET, "kuberay-nccl-rdma-installer")


def _installer_init(resource: dict) -> dict:
    return resource["inputs"]["spec"]["template"]["spec"]["initContainers"][0]


def _gpu_pool() -> dict:
    return find(DOCS["prod"], NODE_POOL, "gpu-pool")


def _job(stack: str) -> dict:
    return find(DOCS[stack], RAY_JOB, "job-rayjob")


def _with(resource: dict, change: Callable[[dict], Any]) -> dict:
    change(resource)
    return resource


def _ray_service(service_type: str) -> dict:
    """A Service in front of the dev Ray head: namespace and selector taken from the preview's
    RayCluster (its name is the ray.io/cluster label) - the preview itself has no Service."""
    cluster = _ray("dev")
    meta = cluster["inputs"]["metadata"]
    service = retype(cluster, "kubernetes:core/v1:Service", "kuberay-ray-head-svc")
    service["inputs"] = {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": f"{meta['name']}-head-svc", "namespace": meta["namespace"]},
        "spec": {"type": service_type,
                 "selector": {"ray.io/cluster": meta["name"], "ray.io/node-type": "head"},
                 "ports": [{"name": "dashboard", "port": 8265, "targetPort": 8265}]},
    }
    return service


def _submitter(stack: str, change: Callable[[dict], Any]) -> dict:
    """The RayJob with a submitter pod template made from the RayCluster's head template."""
    job = _job(stack)
    template = copy.deepcopy(_ray(stack)["inputs"]["spec"]["headGroupSpec"]["template"])
    template["spec"]["containers"][0]["name"] = "ray-job-submitter"
    template["spec"]["restartPolicy"] = "Never"
    job["inputs"]["spec"]["submitterPodTemplate"] = template
    change(template["spec"]["containers"][0])
    return job


def _set(path: list, value: Any) -> Callable[[dict], None]:
    def change(obj: dict) -> None:
        for key in path[:-1]:
            obj = obj[key]
        obj[path[-1]] = value
    return change


def _drop(path: list) -> Callable[[dict], None]:
    def change(obj: dict) -> None:
        for key in path[:-1]:
            obj = obj[key]
        del obj[path[-1]]
    return change


def _env(container: dict, name: str, **entry: Any) -> None:
    container["env"] = [e for e in container.get("env", []) if e["name"] != name]
    container["env"].append({"name": name, **entry})


def _node_grant(stack: str) -> dict:
    return find(DOCS[stack], "gcp:projects/iAMMember:IAMMember", "node-sa-container-defaultnodeserviceaccount")


def _iam(new_type: str, **inputs: Any) -> dict:
    member = find(DOCS["dev"], BUCKET_MEMBER, "storage-bucket-object-user")
    granted = retype(member, new_type)
    granted["inputs"] = {k: v for k, v in granted["inputs"].items() if k != "bucket"}
    granted["inputs"].update(inputs)
    return granted


# (id, rule expected to fire, phrase its message must contain, resource)
BAD: list[tuple[str, str, str, Callable[[], dict]]] = [
    # 1. GPU provisioning model
    ("pool-on-demand", "gpu-provisioning-model", "names no provisioning model",
     lambda: _with(_gpu_pool(), _drop(["inputs", "nodeConfig", "reservationAffinity"]))),
    ("pool-any-reservation", "gpu-provisioning-model", "names no provisioning model",
     lambda: _with(_gpu_pool(), _set(["inputs", "nodeConfig", "reservationAffinity",
                                      "consumeReservationType"], "ANY_RESERVATION"))),
    ("pool-reservation-and-spot", "gpu-provisioning-model", "names 2 provisioning models",
     lambda: _with(_gpu_pool(), _set(["inputs", "nodeConfig", "spot"], True))),
    ("pool-reservation-and-flex", "gpu-provisioning-model", "names 2 provisioning models",
     lambda: _with(_gpu_pool(), _set(["inputs", "nodeConfig", "flexStart"], True))),
    ("pool-reservation-unnamed", "gpu-provisioning-model", "names no reservation",
     lambda: _with(_gpu_pool(), _set(["inputs", "nodeConfig", "reservationAffinity", "values"], []))),
    ("autopilot-pods-on-demand", "gpu-provisioning-model", "names no provisioning model",
     lambda: _with(_ray("dev"), lambda r: _worker_spec(r)["nodeSelector"].pop(
         "cloud.google.com/gke-spot"))),
    # 2. Ray head not exposed
    ("head-loadbalancer", "ray-head-not-exposed", "serviceType is 'LoadBalancer', not ClusterIP",
     lambda: _with(_ray("dev"), _set(["inputs", "spec", "headGroupSpec", "serviceType"],
                                     "LoadBalancer"))),
    ("head-nodeport", "ray-head-not-exposed", "serviceType is 'NodePort', not ClusterIP",
     lambda: _with(_ray("prod"), _set(["inputs", "spec", "headGroupSpec", "serviceType"],
                                      "NodePort"))),
    ("service-loadbalancer", "ray-head-not-exposed", "selects Ray pods",
     lambda: _ray_service("LoadBalancer")),
    ("service-nodeport", "ray-head-not-exposed", "of type 'NodePort'",
     lambda: _ray_service("NodePort")),
    # 3. No privileged workloads (and the narrow installer exception)
    ("worker-privileged", "no-privileged-workloads", "container 'ray-worker'",
     lambda: _with(_ray("dev"), lambda r: _worker(r)["securityContext"].update(privileged=True))),
    ("head-capabilities", "no-privileged-workloads", "adds capabilities ['NET_ADMIN']",
     lambda: _with(_ray("prod"), lambda r: _head(r)["securityContext"].update(
         capabilities={"add": ["NET_ADMIN"]}))),
    ("submitter-privileged", "no-privileged-workloads", "spec.submitterPodTemplate.spec",
     lambda: _submitter("prod", lambda c: c["securityContext"].update(privileged=True))),
    ("installer-renamed", "no-privileged-workloads", "is privileged",
     lambda: _with(_installer("prod"), _set(["inputs", "metadata", "name"], "gib-installer"))),
    ("installer-other-namespace", "no-privileged-workloads", "is privileged",
     lambda: _with(_installer("dev"), _set(["inputs", "metadata", "namespace"], "grpo"))),
    ("installer-main-container", "no-privileged-workloads", "container 'pause'",
     lambda: _with(_installer("prod"), lambda r: r["inputs"]["spec"]["template"]["spec"][
         "containers"][0].update(securityContext={"privileged": True}))),
    ("installer-other-image", "no-privileged-workloads", "initContainer 'nccl-rdma-installer'",
     lambda: _with(_installer("dev"), lambda r: _installer_init(r).update(
         image="docker.io/someone/nccl-plugin-gib:v1.1.1"))),
    ("installer-capabilities", "no-privileged-workloads", "adds capabilities ['SYS_ADMIN']",
     lambda: _with(_installer("prod"), lambda r: _installer_init(r)["securityContext"].update(
         capabilities={"add": ["SYS_ADMIN"]}))),
    ("installer-as-deployment", "no-privileged-workloads", "is privileged",
     lambda: retype(_installer("prod"), "kubernetes:apps/v1:Deployment")),
    # 4. No floating image tags
    ("worker-latest", "no-floating-image-tags", "uses the floating tag 'latest'",
     lambda: _with(_ray("dev"), lambda r: _worker(r).update(image="verlai/verl:latest"))),
    ("head-untagged", "no-floating-image-tags", "has no tag",
     lambda: _with(_ray("prod"), lambda r: _head(r).update(image="nvcr.io/nvidia/nemo-rl"))),
    ("head-dot-latest", "no-floating-image-tags", "uses the floating tag 'vllm017.latest'",
     lambda: _with(_ray("dev"), lambda r: _head(r).update(image="verlai/verl:vllm017.latest"))),
    ("installer-nightly", "no-floating-image-tags", "uses the floating tag 'nightly'",
     lambda: _with(_installer("dev"), lambda r: _installer_init(r).update(
         image="us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib:nightly"))),
    ("pause-stable", "no-floating-image-tags", "uses the floating tag 'stable'",
     lambda: _with(_installer("prod"), lambda r: r["inputs"]["spec"]["template"]["spec"][
         "containers"][0].update(image="gke.gcr.io/pause:stable"))),
    ("submitter-main", "no-floating-image-tags", "uses the floating tag 'main'",
     lambda: _submitter("dev", lambda c: c.update(image="rayproject/ray:main"))),
    ("helm-master", "no-floating-image-tags", "values.image.tag is the floating tag 'master'",
     lambda: _with(find(DOCS["prod"], HELM, "kuberay-operator"),
                   _set(["inputs", "values", "image", "tag"], "master"))),
    # 5. Prod data stores protected
    ("prod-lustre-unprotected", "prod-data-stores-protected",
     "Managed Lustre instance 'storage-lustre' in stack 'prod' is not protected",
     lambda: _with(find(DOCS["prod"], "gcp:lustre/instance:Instance", "storage-lustre"),
                   _set(["protect"], False))),
    ("prod-bucket-unprotected", "prod-data-stores-protected",
     "bucket 'storage-bucket' in stack 'prod' is not protected",
     lambda: in_stack(_with(find(DOCS["dev"], "gcp:storage/bucket:Bucket", "storage-bucket"),
                            _set(["protect"], False)), "prod")),
    # 6. No plain-text secrets
    ("env-token-value", "no-plaintext-secrets", "env HF_TOKEN is a credential set as a plain-text value",
     lambda: _with(_ray("dev"), lambda r: _env(_worker(r), "HF_TOKEN", value=HF_TOKEN))),
    ("env-config-map", "no-plaintext-secrets", "WANDB_API_KEY is a credential read from configMapKeyRef",
     lambda: _with(_ray("prod"), lambda r: _env(_head(r), "WANDB_API_KEY", valueFrom={
         "configMapKeyRef": {"name": "grpo-settings", "key": "wandb"}}))),
    ("env-token-looking-value", "no-plaintext-secrets", "looks like a GitHub token",
     lambda: _with(_ray("dev"), lambda r: _env(_worker(r), "HF_HOME", value=GH_TOKEN))),
    ("rayjob-runtime-env", "no-plaintext-secrets", "runtimeEnvYAML env_vars.HF_TOKEN",
     lambda: _with(_job("prod"), lambda r: r["inputs"]["spec"].update(
         runtimeEnvYAML=r["inputs"]["spec"]["runtimeEnvYAML"].replace(
             "env_vars:\n", f"env_vars:\n  HF_TOKEN: {HF_TOKEN}\n")))),
    ("rayjob-entrypoint", "no-plaintext-secrets", "sets the credential WANDB_API_KEY in plain text",
     lambda: _with(_job("dev"), lambda r: r["inputs"]["spec"].update(
         entrypoint="WANDB_API_KEY=0123456789abcdef0123456789abcdef01234567 "
                    + r["inputs"]["spec"]["entrypoint"]))),
    ("rayjob-metadata", "no-plaintext-secrets", "spec.metadata.note contains what looks like a private key",
     lambda: _with(_job("prod"), lambda r: r["inputs"]["spec"]["metadata"].update(note=PRIVATE_KEY))),
    # 7. IAM scoped to the bucket
    ("project-iam-member", "iam-bucket-scoped", "grants roles/storage.objectUser on the whole project 'my-grpo-dev'",
     lambda: _iam("gcp:projects/iAMMember:IAMMember", project="my-grpo-dev")),
    ("project-iam-binding", "iam-bucket-scoped", "on the whole project",
     lambda: _with(_iam("gcp:projects/iAMBinding:IAMBinding", project="my-grpo-dev"),
                   lambda r: r["inputs"].update(members=[r["inputs"].pop("member")]))),
    ("project-iam-policy", "iam-bucket-scoped", "sets the IAM policy on the whole project",
     lambda: _with(_iam("gcp:projects/iAMPolicy:IAMPolicy", project="my-grpo-dev"),
                   lambda r: r["inputs"].update(policyData='{"bindings": []}', role=None))),
    # The node-role exception is narrow: any other role, the Compute Engine default account,
    # another project's account, or a Binding (which would take the role from others) fail.
    ("node-sa-other-role", "iam-bucket-scoped", "grants roles/editor on the whole project",
     lambda: _with(_node_grant("dev"), _set(["inputs", "role"], "roles/editor"))),
    ("node-role-to-compute-default", "iam-bucket-scoped", "grants roles/container.defaultNodeServiceAccount",
     lambda: _with(_node_grant("dev"), _set(["inputs", "member"],
                                            "serviceAccount:123456789012-compute@developer.gserviceaccount.com"))),
    ("node-role-to-another-project", "iam-bucket-scoped", "on the whole project",
     lambda: _with(_node_grant("dev"), _set(["inputs", "member"],
                                            "serviceAccount:nodes@other-project.iam.gserviceaccount.com"))),
    ("node-role-as-binding", "iam-bucket-scoped", "on the whole project",
     lambda: retype(_node_grant("dev"), "gcp:projects/iAMBinding:IAMBinding")),
    ("org-iam-member", "iam-bucket-scoped", "on the whole organization",
     lambda: _iam("gcp:organizations/iAMMember:IAMMember", orgId="123456789012")),
    # 8. The autoscaler's rights stay on the head: KubeRay v1.7.0 binds its autoscaler Role to the
    # head template's serviceAccountName, else the RayCluster's name (common/rbac.go
    # BuildRoleBinding, utils/util.go GetHeadGroupServiceAccountName).
    ("worker-shares-the-heads-account", "ray-autoscaler-rights-head-only",
     "worker group 'gpu-workers' (spec.workerGroupSpecs[0].template.spec.serviceAccountName) runs as "
     "'grpo-workload', the account bound to the autoscaler's Role",
     lambda: _with(_ray("prod"), lambda r: _worker_spec(r).update(serviceAccountName="grpo-workload"))),
    ("worker-runs-as-the-clusters-name", "ray-autoscaler-rights-head-only", "runs as 'grpo-dev'",
     lambda: _with(_with(_ray("dev"), _drop(["inputs", "spec", "headGroupSpec", "template", "spec",
                                             "serviceAccountName"])),
                   lambda r: _worker_spec(r).update(serviceAccountName="grpo-dev"))),
]


@pytest.mark.parametrize("rule,phrase,make", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_crafted_violation_fails_its_rule(pack, rule, phrase, make):
    resource = make()
    found = pack.analyze(resource)
    assert {d.policy for d in found} == {rule}, found
    assert all(d.mandatory for d in found), found
    assert any(phrase in d.message for d in found), [d.message for d in found]
    # The pure check agrees with what the SDK reported.
    pure = rules.check_all(resource["type"], resource["inputs"], resource["urn"],
                           resource["name"], resource["protect"], rules.stack_of(resource["urn"]))
    assert set(pure) == {rule}
    assert sorted(pure[rule]) == sorted(d.message.split("\n", 1)[1] for d in found)


def test_every_rule_has_crafted_violations():
    assert {b[1] for b in BAD} == set(RULE_NAMES)


def test_messages_never_repeat_the_secret(pack):
    for id_, rule, _, make in BAD:
        if rule == "no-plaintext-secrets":
            for d in pack.analyze(make()):
                for secret in (HF_TOKEN, GH_TOKEN, "BEGIN PRIVATE KEY", "0123456789abcdef0123"):
                    assert secret not in d.message, id_


# ------------------------------------------------------------------------------------------
# What must still pass: the other provisioning models, private services, the exception, ...
# ------------------------------------------------------------------------------------------

def _autopilot_model(selectors: dict) -> dict:
    """The dev GPU workers (Autopilot) with another provisioning model instead of Spot."""
    cluster = _ray("dev")
    selector = _worker_spec(cluster)["nodeSelector"]
    del selector["cloud.google.com/gke-spot"]
    selector.update(selectors)
    return cluster


GOOD: list[tuple[str, Callable[[], dict]]] = [
    ("pool-spot", lambda: _with(_with(_gpu_pool(), _drop(["inputs", "nodeConfig", "reservationAffinity"])),
                                _set(["inputs", "nodeConfig", "spot"], True))),
    ("pool-flex-start", lambda: _with(_with(_gpu_pool(), _drop(["inputs", "nodeConfig", "reservationAffinity"])),
                                      _set(["inputs", "nodeConfig", "flexStart"], True))),
    ("cpu-pool-on-demand", lambda: find(DOCS["prod"], NODE_POOL, "cluster-ray-head")),
    ("autopilot-pods-flex-start", lambda: _autopilot_model({"cloud.google.com/gke-flex-start": "true"})),
    ("autopilot-pods-reservation", lambda: _autopilot_model({
        "cloud.google.com/reservation-name": "grpo-h200",
        "cloud.google.com/reservation-affinity": "specific"})),
    ("head-service-type-absent", lambda: _with(_ray("dev"), _drop(["inputs", "spec", "headGroupSpec", "serviceType"]))),
    ("service-clusterip", lambda: _ray_service("ClusterIP")),
    ("installer-in-kube-system", lambda: _with(_installer("dev"), _set(["inputs", "metadata", "namespace"], "kube-system"))),
    ("tokenizers-parallelism", lambda: _with(_ray("dev"), lambda r: _env(_worker(r), "TOKENIZERS_PARALLELISM", value="false"))),
    ("token-path", lambda: _with(_ray("dev"), lambda r: _env(_worker(r), "HF_TOKEN_PATH", value="/var/run/hf/token"))),
    ("entrypoint-env-reference", lambda: _with(_job("dev"), lambda r: r["inputs"]["spec"].update(
        entrypoint="HF_TOKEN=$HF_TOKEN " + r["inputs"]["spec"]["entrypoint"]))),
    ("submitter-pinned", lambda: _submitter("prod", lambda c: None)),
    # Without in-tree autoscaling KubeRay binds nothing: one account for all pods is allowed.
    ("shared-account-without-autoscaler", lambda: _with(
        _with(_ray("prod"), lambda r: _worker_spec(r).update(serviceAccountName="grpo-workload")),
        _set(["inputs", "spec", "enableInTreeAutoscaling"], False))),
    ("helm-digest", lambda: _with(find(DOCS["prod"], HELM, "kuberay-operator"), lambda r: r["inputs"]["values"]["image"].update(
        tag="latest", digest="sha256:" + "0" * 64))),
    ("prod-bucket-protected", lambda: _with(in_stack(find(DOCS["dev"], "gcp:storage/bucket:Bucket", "storage-bucket"), "prod"),
                                            _set(["protect"], True))),
    ("node-service-account-role", lambda: _node_grant("prod")),
    ("service-account-iam", lambda: _iam("gcp:serviceaccount/iAMMember:IAMMember",
                                         serviceAccountId="projects/my-grpo-dev/serviceAccounts/x@y")),
]


@pytest.mark.parametrize("make", [g[1] for g in GOOD], ids=[g[0] for g in GOOD])
def test_compliant_variant_passes(pack, make):
    assert pack.analyze(make()) == []


# ------------------------------------------------------------------------------------------
# The SDK adapter, called directly with the SDK's own argument classes
# ------------------------------------------------------------------------------------------


def _args(resource: dict, protect: bool) -> ResourceValidationArgs:
    options = PolicyResourceOptions(protect=protect, ignore_changes=[], delete_before_replace=None,
                                    aliases=[], custom_timeouts=PolicyCustomTimeouts(0, 0, 0),
                                    additional_secret_outputs=[], parent=resource["parent"])
    return ResourceValidationArgs(resource["type"], resource["inputs"], resource["urn"],
                                  resource["name"], options, None)


@pytest.mark.parametrize("protect,expected", [(False, 1), (True, 0)])
def test_adapter_reads_protect_from_the_resource_options(protect, expected):
    policy = next(p for p in rules.POLICIES if p.name == "prod-data-stores-protected")
    lustre = find(DOCS["prod"], "gcp:lustre/instance:Instance", "storage-lustre")
    reported: list[tuple[str, Any]] = []
    assert policy.validate(_args(lustre, protect), lambda m, urn=None: reported.append((m, urn))) is None
    assert len(reported) == expected
    if expected:
        assert "is not protected" in reported[0][0] and reported[0][1] is None


def test_unknown_values_are_not_violations(pack):
    """During preview an image may be unknown: the SDK's proxy raises, and the SDK reports an
    advisory "can't run policy during preview", never a mandatory violation."""
    cluster = _with(_ray("dev"), lambda r: _worker(r).update(image=UNKNOWN_STRING))
    found = pack.analyze(cluster)
    assert [d.policy for d in found] == ["no-floating-image-tags"]
    assert not found[0].mandatory and "can't be known during preview" in found[0].message


def test_stack_of_reads_the_urn():
    assert rules.stack_of("urn:pulumi:prod::gke-grpo::gcp:lustre/instance:Instance::x") == "prod"
    assert rules.stack_of("urn:pulumi:dev::gke-grpo::a$b::x") == "dev"


@pytest.mark.parametrize("name,expected", [
    ("HF_TOKEN", True), ("WANDB_API_KEY", True), ("AWS_SECRET_ACCESS_KEY", True),
    ("DB_PASSWORD", True), ("wandbApiKey", True), ("TOKENIZERS_PARALLELISM", False),
    ("MAX_TOKENS", False), ("HF_TOKEN_PATH", False), ("GOOGLE_APPLICATION_CREDENTIALS", False),
    ("HF_HOME", False), ("CACHE_KEY", False),
])
def test_credential_names(name, expected):
    assert rules.credential_name(name) is expected


def test_the_pinned_image_rule_is_the_programs_own_module():
    """The pack imports jobs/plan/image_refs.py (one rule, no twin to keep in step)."""
    assert Path(rules.image_refs.__file__).resolve() == ROOT / "jobs" / "plan" / "image_refs.py"
    problem = rules.image_refs.image_reference_problem
    assert problem("rayproject/ray:latest") == "uses the floating tag 'latest': pin a version tag or a digest"
    assert problem("rayproject/ray") == "has no tag: pin a version tag or a digest"
    assert problem("rayproject/ray:2.54.0") is None and problem("ray@sha256:" + "0" * 64) is None
