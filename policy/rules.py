"""The rules of the gke-grpo-guardrails policy pack: pure checks, then the SDK policies.

Every rule is a pure function

    check(resource_type, props, urn, name, protect, stack) -> list[str]

returning one message per problem (an empty list: the resource complies). `props` are the
resource's inputs under their engine wire names (camelCase), as a plain dict or as the
pulumi-policy SDK's read-only proxy (a Mapping whose nested lists are Sequences, and which
raises UnknownValueError on a value unknown during preview: the SDK then reports "can't run
policy during preview" instead of a violation). The checks therefore only use the Mapping and
Sequence interfaces. A thin adapter (`sdk_validate`) turns a check into the callback of a
`ResourceValidationPolicy`; every policy is MANDATORY.

This module runs in the policy pack's own virtualenv (policy/venv: pulumi, pulumi-policy),
which has none of the program's dependencies: it imports nothing from the program. The
credential rule (jobs/contract/credentials.py) and the pinned-image rule (jobs/plan/image_refs.py) are the
program's own, both standard library only, loaded by path so that each is one rule.

The rules:
 1. gpu-provisioning-model: GPU capacity names exactly one provisioning model (a specific
    reservation, Spot or flex-start), never plain on-demand.
 2. ray-head-not-exposed: no Ray head reachable from outside the cluster (LoadBalancer or
    NodePort).
 3. no-privileged-workloads: no privileged container and no added capability in workload pods,
    with ONE exception: Google's NCCL RDMA installer (see NCCL_RDMA_INSTALLER below).
 4. no-floating-image-tags: every image of every pod template, and every Helm release's image
    tag, is a pin (a version tag or a digest).
 5. prod-data-stores-protected: in the prod stack, buckets and Lustre instances are protected.
 6. no-plaintext-secrets: credentials reach containers through Secrets only, never as plain
    values in env or in a RayJob's entrypoint, runtime env or metadata.
 7. iam-bucket-scoped: no project-, folder- or organization-wide IAM grant, with ONE exception:
    the GKE nodes' own service account gets roles/container.defaultNodeServiceAccount on the
    project (see NODE_SERVICE_ACCOUNT_ROLES below).
 8. ray-autoscaler-rights-head-only: no Ray worker group runs under the service account KubeRay
    binds its autoscaler Role to (the head's).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml
from pulumi_policy import (
    EnforcementLevel,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
)

# The credential and pinned-image rules are the program's own, imported from the repository this
# pack runs in: the preview, preflight, the jobs CLI and this pack judge names, values and tags
# with one rule each. The pack runs in its own virtualenv with none of the program's dependencies,
# so it may take only standard-library modules of the program: exactly PROGRAM_MODULES, which
# policy/tests/test_program_modules.py checks (nothing else of jobs/ gets loaded).
_REPOSITORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _REPOSITORY not in sys.path:
    sys.path.insert(0, _REPOSITORY)
PROGRAM_MODULES = ("jobs.contract.credentials", "jobs.plan.image_refs")

from jobs.contract import credentials
from jobs.plan import image_refs

Check = Callable[[str, Mapping, str, str, bool, str], list]

# Resource types (engine tokens).
NODE_POOL = "gcp:container/nodePool:NodePool"
CLUSTER = "gcp:container/cluster:Cluster"
BUCKET = "gcp:storage/bucket:Bucket"
LUSTRE = "gcp:lustre/instance:Instance"
HELM_RELEASE = "kubernetes:helm.sh/v3:Release"

# The stacks whose data stores must be protected.
PROTECTED_STACKS = frozenset({"prod"})


# ------------------------------------------------------------------------------------------
# Reading props: the SDK proxy is a Mapping/Sequence, never a dict/list.
# ------------------------------------------------------------------------------------------


def _get(value: Any, *keys: str) -> Any:
    """value[k1][k2]..., or None as soon as a level is missing or not a mapping."""
    for key in keys:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def _items(value: Any) -> list:
    """The elements of a list-like value; [] for anything else (None, a string, a mapping)."""
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return list(value)
    return []


def _mapping(value: Any) -> Mapping:
    return value if isinstance(value, Mapping) else {}


def stack_of(urn: str) -> str:
    """The stack named by a URN (urn:pulumi:STACK::PROJECT::TYPE::NAME)."""
    head = urn.split("::", 1)[0]
    parts = head.split(":", 2)
    if len(parts) == 3 and parts[0] == "urn" and parts[1] == "pulumi" and parts[2]:
        return parts[2]
    return os.environ.get("PULUMI_STACK", "")


def _k8s_kind(resource_type: str) -> tuple[str | None, str | None]:
    """kubernetes:apps/v1:Deployment -> ("apps", "Deployment"); core -> ("core", ...).
    (None, None) for anything that is not a Kubernetes object. *Patch types count as their
    kind: a patch can set the same fields."""
    parts = resource_type.split(":")
    if len(parts) != 3 or parts[0] != "kubernetes":
        return None, None
    group = parts[1].rsplit("/", 1)[0]
    kind = parts[2].removesuffix("Patch")
    return group, kind


_TEMPLATE_KINDS = {"Deployment", "StatefulSet", "ReplicaSet", "DaemonSet", "Job",
                   "ReplicationController"}


def _ray_cluster_pods(cluster_spec: Any, path: str) -> Iterator[tuple[str, Mapping]]:
    head = _get(cluster_spec, "headGroupSpec", "template", "spec")
    if isinstance(head, Mapping):
        yield f"{path}.headGroupSpec.template.spec", head
    for i, group in enumerate(_items(_get(cluster_spec, "workerGroupSpecs"))):
        worker = _get(group, "template", "spec")
        if isinstance(worker, Mapping):
            yield f"{path}.workerGroupSpecs[{i}].template.spec", worker


def ray_cluster_specs(resource_type: str, props: Mapping) -> Iterator[tuple[str, Mapping]]:
    """The RayCluster specs a Ray custom resource carries: a RayCluster's own spec, the
    cluster a RayJob or RayService creates."""
    group, kind = _k8s_kind(resource_type)
    if group != "ray.io":
        return
    paths = {"RayCluster": ("spec",), "RayJob": ("spec", "rayClusterSpec"),
             "RayService": ("spec", "rayClusterConfig")}.get(kind or "")
    if paths:
        spec = _get(props, *paths)
        if isinstance(spec, Mapping):
            yield ".".join(paths), spec


def pod_specs(resource_type: str, props: Mapping) -> Iterator[tuple[str, Mapping]]:
    """Every pod spec a resource defines, with its path: Pods, pod templates of the workload
    kinds (Deployments, Jobs, DaemonSets, CronJobs, ...), RayCluster head and worker
    templates, a RayJob's submitter template and the cluster it may create."""
    group, kind = _k8s_kind(resource_type)
    if kind is None:
        return
    if group == "core" and kind == "Pod":
        candidates = [("spec", _get(props, "spec"))]
    elif group == "core" and kind == "PodTemplate":
        candidates = [("template.spec", _get(props, "template", "spec"))]
    elif kind in _TEMPLATE_KINDS:
        candidates = [("spec.template.spec", _get(props, "spec", "template", "spec"))]
    elif kind == "CronJob":
        candidates = [("spec.jobTemplate.spec.template.spec",
                       _get(props, "spec", "jobTemplate", "spec", "template", "spec"))]
    elif group == "ray.io":
        candidates = []
        for path, cluster_spec in ray_cluster_specs(resource_type, props):
            candidates.extend(_ray_cluster_pods(cluster_spec, path))
        if kind == "RayJob":
            candidates.append(("spec.submitterPodTemplate.spec",
                               _get(props, "spec", "submitterPodTemplate", "spec")))
    else:
        return
    for path, spec in candidates:
        if isinstance(spec, Mapping):
            yield path, spec


def containers(spec: Mapping) -> Iterator[tuple[str, int, Mapping]]:
    """(list name, index, container) for containers, initContainers and ephemeralContainers."""
    for field in ("initContainers", "containers", "ephemeralContainers"):
        for i, container in enumerate(_items(spec.get(field))):
            if isinstance(container, Mapping):
                yield field, i, container


def _container_label(path: str, field: str, index: int, container: Mapping) -> str:
    name = container.get("name")
    return f"{field[:-1]} {name!r} ({path}.{field}[{index}])" if name else f"{path}.{field}[{index}]"


def _what(resource_type: str, name: str) -> str:
    return f"{resource_type.rsplit(':', 1)[-1]} {name!r}"


# ------------------------------------------------------------------------------------------
# 1. GPU capacity names its provisioning model
# ------------------------------------------------------------------------------------------

_PROVISIONING_HINT = ("set exactly one of nodeConfig.reservationAffinity "
                      "(consumeReservationType SPECIFIC_RESERVATION with the reservation's name), "
                      "nodeConfig.spot=true or nodeConfig.flexStart=true")
_POD_PROVISIONING_HINT = ("select exactly one of cloud.google.com/gke-spot=\"true\", "
                          "cloud.google.com/reservation-name + "
                          "cloud.google.com/reservation-affinity=\"specific\", or "
                          "cloud.google.com/gke-flex-start=\"true\"")


def _node_config_problems(node_config: Any, what: str) -> list[str]:
    accelerators = [a for a in _items(_get(node_config, "guestAccelerators"))
                    if isinstance(a, Mapping)]
    if not accelerators:
        return []
    gpus = ", ".join(sorted({str(a.get("type")) for a in accelerators}))
    models = []
    affinity = _get(node_config, "reservationAffinity")
    if _get(affinity, "consumeReservationType") == "SPECIFIC_RESERVATION":
        if not _items(_get(affinity, "values")):
            return [f"{what} has GPUs ({gpus}) and a SPECIFIC_RESERVATION affinity that names "
                    f"no reservation: list the reservation in reservationAffinity.values"]
        models.append("a SPECIFIC_RESERVATION reservation affinity")
    if _get(node_config, "spot") is True:
        models.append("spot=true")
    if _get(node_config, "flexStart") is True:
        models.append("flexStart=true")
    if not models:
        return [f"{what} has GPUs ({gpus}) but names no provisioning model, so it would ask "
                f"for on-demand capacity (A4 and A3 Ultra have none): {_PROVISIONING_HINT}"]
    if len(models) > 1:
        return [f"{what} has GPUs ({gpus}) and names {len(models)} provisioning models "
                f"({', '.join(models)}): {_PROVISIONING_HINT}"]
    return []


def _pod_gpu_problems(spec: Mapping, path: str, what: str) -> list[str]:
    """A pod that picks GPUs by nodeSelector without naming a node pool gets its node from
    Autopilot or node auto-provisioning: the pod's selectors are its provisioning model. A
    pod pinned to a pool (cloud.google.com/gke-nodepool) gets the pool's, checked there."""
    selector = _mapping(spec.get("nodeSelector"))
    accelerator = selector.get("cloud.google.com/gke-accelerator")
    if not accelerator or selector.get("cloud.google.com/gke-nodepool"):
        return []
    models = []
    if selector.get("cloud.google.com/gke-spot") == "true":
        models.append("gke-spot")
    if (selector.get("cloud.google.com/reservation-name")
            and selector.get("cloud.google.com/reservation-affinity") == "specific"):
        models.append("a specific reservation")
    if selector.get("cloud.google.com/gke-flex-start") == "true":
        models.append("gke-flex-start")
    if not models:
        return [f"{what}: the pod template at {path} asks for GPUs ({accelerator}) outside a "
                f"node pool but names no provisioning model, so it would get on-demand "
                f"capacity: {_POD_PROVISIONING_HINT}"]
    if len(models) > 1:
        return [f"{what}: the pod template at {path} names {len(models)} provisioning models "
                f"({', '.join(models)}): {_POD_PROVISIONING_HINT}"]
    return []


def check_gpu_provisioning_model(resource_type: str, props: Mapping, urn: str, name: str,
                                 protect: bool, stack: str) -> list[str]:
    what = _what(resource_type, name)
    if resource_type == NODE_POOL:
        return _node_config_problems(_get(props, "nodeConfig"), f"node pool {name!r}")
    if resource_type == CLUSTER:
        problems = _node_config_problems(_get(props, "nodeConfig"),
                                         f"cluster {name!r} (default node pool)")
        for i, pool in enumerate(_items(_get(props, "nodePools"))):
            problems += _node_config_problems(_get(pool, "nodeConfig"),
                                              f"cluster {name!r} nodePools[{i}]")
        return problems
    problems = []
    for path, spec in pod_specs(resource_type, props):
        problems += _pod_gpu_problems(spec, path, what)
    return problems


# ------------------------------------------------------------------------------------------
# 2. No Ray head service of type LoadBalancer or NodePort
# ------------------------------------------------------------------------------------------

_EXPOSED_SERVICE_TYPES = ("LoadBalancer", "NodePort")
_RAY_HEAD_WHY = ("the Ray head serves the dashboard and job API (8265), the client (10001) "
                 "and GCS (6379) without authentication, so whoever reaches it runs code on the "
                 "cluster: keep it ClusterIP and use `kubectl port-forward`")


def _selects_ray_pods(selector: Mapping) -> bool:
    return any(str(k).startswith("ray.io/") for k in selector) or \
        selector.get("app.kubernetes.io/created-by") == "kuberay-operator"


def check_ray_head_not_exposed(resource_type: str, props: Mapping, urn: str, name: str,
                               protect: bool, stack: str) -> list[str]:
    what = _what(resource_type, name)
    problems = []
    for path, cluster_spec in ray_cluster_specs(resource_type, props):
        service_type = _get(cluster_spec, "headGroupSpec", "serviceType")
        if service_type is not None and service_type != "ClusterIP":
            problems.append(f"{what}: {path}.headGroupSpec.serviceType is {service_type!r}, "
                            f"not ClusterIP: {_RAY_HEAD_WHY}")
        head_service_type = _get(cluster_spec, "headGroupSpec", "headService", "spec", "type")
        if head_service_type in _EXPOSED_SERVICE_TYPES:
            problems.append(f"{what}: {path}.headGroupSpec.headService.spec.type is "
                            f"{head_service_type!r}: {_RAY_HEAD_WHY}")
    group, kind = _k8s_kind(resource_type)
    if group == "core" and kind == "Service":
        selector = _mapping(_get(props, "spec", "selector"))
        service_type = _get(props, "spec", "type")
        if service_type in _EXPOSED_SERVICE_TYPES and _selects_ray_pods(selector):
            labels = ", ".join(f"{k}={v}" for k, v in sorted(selector.items()))
            problems.append(f"{what} selects Ray pods ({labels}) and is of type "
                            f"{service_type!r}: {_RAY_HEAD_WHY}")
    return problems


# ------------------------------------------------------------------------------------------
# 3. No privileged pods or added capabilities, but for Google's NCCL RDMA installer
# ------------------------------------------------------------------------------------------

# THE documented exception. Google's NCCL RDMA installer DaemonSet (GKE docs, "gpudirect-rdma"
# / nccl-rdma-installer.yaml) runs one privileged init container that copies the gIB NCCL
# plugin and NCCL libraries onto the node (/home/kubernetes/bin/gib and .../nvidia/lib64):
# writing to the host is its whole job and cannot be done unprivileged. The exception is as
# narrow as we can make it: a DaemonSet of exactly this name, in kube-system or rdma-system,
# its init container of this name running Google's gIB image, and only `privileged: true`
# (no added capability). Its long-running container, and anything else, gets no exception.
NCCL_RDMA_INSTALLER = "nccl-rdma-installer"
NCCL_RDMA_INSTALLER_NAMESPACES = frozenset({"kube-system", "rdma-system"})
NCCL_RDMA_INSTALLER_IMAGE = "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib"


_EXCEPTION = (f"Google's NCCL RDMA installer: the init container {NCCL_RDMA_INSTALLER!r} "
              f"running {NCCL_RDMA_INSTALLER_IMAGE} in the DaemonSet {NCCL_RDMA_INSTALLER!r} "
              f"of kube-system or rdma-system")


def is_nccl_rdma_installer(resource_type: str, props: Mapping, field: str,
                           container: Mapping) -> bool:
    group, kind = _k8s_kind(resource_type)
    image = container.get("image")
    return (group == "apps" and kind == "DaemonSet"
            and _get(props, "metadata", "name") == NCCL_RDMA_INSTALLER
            and _get(props, "metadata", "namespace") in NCCL_RDMA_INSTALLER_NAMESPACES
            and field == "initContainers"
            and container.get("name") == NCCL_RDMA_INSTALLER
            and isinstance(image, str)
            and image.startswith((NCCL_RDMA_INSTALLER_IMAGE + ":", NCCL_RDMA_INSTALLER_IMAGE + "@")))


def check_no_privileged_workloads(resource_type: str, props: Mapping, urn: str, name: str,
                                  protect: bool, stack: str) -> list[str]:
    what = _what(resource_type, name)
    problems = []
    for path, spec in pod_specs(resource_type, props):
        for field, i, container in containers(spec):
            security = container.get("securityContext")
            privileged = _get(security, "privileged") is True
            added = [str(c) for c in _items(_get(security, "capabilities", "add"))]
            label = _container_label(path, field, i, container)
            if privileged and not is_nccl_rdma_installer(resource_type, props, field, container):
                problems.append(f"{what}: {label} is privileged (securityContext.privileged: "
                                f"true); the one exception is {_EXCEPTION}")
            if added:
                problems.append(f"{what}: {label} adds capabilities {added} "
                                f"(securityContext.capabilities.add): drop them")
    return problems


# ------------------------------------------------------------------------------------------
# 4. No floating image tags
# ------------------------------------------------------------------------------------------

def _helm_image_problems(values: Any, path: str) -> Iterator[str]:
    """Images in Helm values: `image: {repository, tag[, digest]}` or `image: "ref"`, at any
    depth (sub-charts nest them)."""
    if isinstance(values, Mapping):
        for key, value in values.items():
            here = f"{path}.{key}"
            if key == "image" and isinstance(value, Mapping):
                tag = value.get("tag")
                if value.get("digest") or tag in (None, ""):
                    pass  # a digest, or the chart's own appVersion (pinned by the chart version)
                elif image_refs.FLOATING_TAGS.match(str(tag)):
                    yield f"{here}.tag is the floating tag {str(tag)!r}: pin a version tag or a digest"
            elif key == "image" and isinstance(value, str) and value:
                problem = image_refs.image_reference_problem(value)
                if problem:
                    yield f"{here} {value!r} {problem}"
            yield from _helm_image_problems(value, here)
    elif isinstance(values, Sequence) and not isinstance(values, (str, bytes)):
        for i, value in enumerate(values):
            yield from _helm_image_problems(value, f"{path}[{i}]")


def check_no_floating_image_tags(resource_type: str, props: Mapping, urn: str, name: str,
                                 protect: bool, stack: str) -> list[str]:
    what = _what(resource_type, name)
    problems = []
    for path, spec in pod_specs(resource_type, props):
        for field, i, container in containers(spec):
            image = container.get("image")
            label = _container_label(path, field, i, container)
            if not isinstance(image, str) or not image:
                continue  # required by Kubernetes; absent only from a patch
            problem = image_refs.image_reference_problem(image)
            if problem:
                problems.append(f"{what}: {label} image {image!r} {problem}")
    group, _ = _k8s_kind(resource_type)
    if group == "helm.sh":
        problems += [f"{what}: {p}" for p in _helm_image_problems(_get(props, "values"), "values")]
    return problems


# ------------------------------------------------------------------------------------------
# 5. Prod data stores are protected
# ------------------------------------------------------------------------------------------

_DATA_STORES = {BUCKET: "bucket", LUSTRE: "Managed Lustre instance"}


def check_prod_data_stores_protected(resource_type: str, props: Mapping, urn: str, name: str,
                                     protect: bool, stack: str) -> list[str]:
    if resource_type not in _DATA_STORES or stack not in PROTECTED_STACKS or protect:
        return []
    return [f"{_DATA_STORES[resource_type]} {name!r} in stack {stack!r} is not protected "
            f"(protect=false): it holds the checkpoints and data; create it with "
            f"ResourceOptions(protect=True) so that `pulumi destroy` stops at it, and "
            f"unprotect it on purpose (`pulumi state unprotect`) when it really must go"]


# ------------------------------------------------------------------------------------------
# 6. No plain-text secrets
# ------------------------------------------------------------------------------------------

# NAME=value in a shell command line (a RayJob entrypoint).
_ASSIGNMENT = re.compile(r"(?:^|[\s;&|(])(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(\S*)")


def credential_name(name: str) -> bool:
    """Whether an env var name says it holds a credential (jobs/contract/credentials.py)."""
    return credentials.looks_like_secret_name(name)


def secret_looking(value: str) -> str | None:
    """What kind of credential a string contains, or None (jobs/contract/credentials.py)."""
    return credentials.secret_value_kind(value)


def _env_problems(what: str, label: str, env: Any) -> list[str]:
    problems = []
    for var in _items(env):
        if not isinstance(var, Mapping):
            continue
        var_name = str(var.get("name") or "")
        value = var.get("value")
        value_from = var.get("valueFrom")
        if credential_name(var_name):
            if value not in (None, ""):
                problems.append(f"{what}: {label} env {var_name} is a credential set as a "
                                f"plain-text value: take it from a Secret "
                                f"(valueFrom.secretKeyRef)")
            elif isinstance(value_from, Mapping) and not value_from.get("secretKeyRef"):
                source = ", ".join(sorted(str(k) for k in value_from)) or "nothing"
                problems.append(f"{what}: {label} env {var_name} is a credential read from "
                                f"{source}, not from a Secret: use valueFrom.secretKeyRef")
        if isinstance(value, str):
            kind = secret_looking(value)
            if kind:
                problems.append(f"{what}: {label} env {var_name} holds what looks like {kind} "
                                f"in plain text: put it in a Secret and use "
                                f"valueFrom.secretKeyRef")
    return problems


def _ray_job_problems(what: str, spec: Any) -> list[str]:
    problems = []
    entrypoint = _get(spec, "entrypoint")
    if isinstance(entrypoint, str):
        kind = secret_looking(entrypoint)
        if kind:
            problems.append(f"{what}: spec.entrypoint contains what looks like {kind}")
        for var_name, value in _ASSIGNMENT.findall(entrypoint):
            if credential_name(var_name) and value and not value.startswith(("$", "\"$", "'$")):
                problems.append(f"{what}: spec.entrypoint sets the credential {var_name} in "
                                f"plain text: read it from the pod's env (a Secret) instead")
    runtime_env = _get(spec, "runtimeEnvYAML")
    if isinstance(runtime_env, str):
        kind = secret_looking(runtime_env)
        if kind:
            problems.append(f"{what}: spec.runtimeEnvYAML contains what looks like {kind}")
        try:
            document = yaml.safe_load(runtime_env)
        except yaml.YAMLError:
            document = None
        for var_name, value in _mapping(_get(document, "env_vars")).items():
            if credential_name(str(var_name)) and value not in (None, ""):
                problems.append(f"{what}: spec.runtimeEnvYAML env_vars.{var_name} is a "
                                f"credential in plain text (the RayJob object and Ray's "
                                f"dashboard show it): give the Ray pods the Secret "
                                f"(valueFrom.secretKeyRef) instead")
    for key, value in _mapping(_get(spec, "metadata")).items():
        kind = secret_looking(str(value))
        if kind:
            problems.append(f"{what}: spec.metadata.{key} contains what looks like {kind}")
        elif credential_name(str(key)) and value not in (None, ""):
            problems.append(f"{what}: spec.metadata.{key} is a credential in plain text")
    return problems


def check_no_plaintext_secrets(resource_type: str, props: Mapping, urn: str, name: str,
                               protect: bool, stack: str) -> list[str]:
    what = _what(resource_type, name)
    problems = []
    for path, spec in pod_specs(resource_type, props):
        for field, i, container in containers(spec):
            problems += _env_problems(what, _container_label(path, field, i, container),
                                      container.get("env"))
    group, kind = _k8s_kind(resource_type)
    if group == "ray.io" and kind == "RayJob":
        problems += _ray_job_problems(what, _get(props, "spec"))
    return problems


# ------------------------------------------------------------------------------------------
# 7. IAM grants scoped to the bucket, never project-wide
# ------------------------------------------------------------------------------------------

_BROAD_IAM = re.compile(r"^gcp:(projects|folder|organizations)/iAM(Member|Binding|Policy):"
                        r"IAM(Member|Binding|Policy)$")
_SCOPES = {"projects": ("project", "project"), "folder": ("folder", "folder"),
           "organizations": ("organization", "orgId")}


# The one project-wide grant allowed: GKE's node role, which exists only at project level, to a
# user-managed service account of the same project (the stack's NodeServiceAccount) with an
# IAMMember (additive; never a Binding or Policy, which would take the role from others). GKE
# "Use least privilege IAM service accounts" / CIS GKE 5.2.1: nodes run as such an account,
# never as the Compute Engine default one. Read 2026-12-01.
NODE_SERVICE_ACCOUNT_ROLES = frozenset({"roles/container.defaultNodeServiceAccount"})
_COMPUTE_DEFAULT_ACCOUNT = "-compute@developer.gserviceaccount.com"


def _is_node_service_account_grant(resource_type: str, props: Mapping) -> bool:
    if resource_type != "gcp:projects/iAMMember:IAMMember":
        return False
    role, member, project = _get(props, "role"), _get(props, "member"), _get(props, "project")
    if role not in NODE_SERVICE_ACCOUNT_ROLES or not isinstance(member, str) or not project:
        return False
    return (member.startswith("serviceAccount:") and not member.endswith(_COMPUTE_DEFAULT_ACCOUNT)
            and member.endswith(f"@{project}.iam.gserviceaccount.com"))


def check_iam_bucket_scoped(resource_type: str, props: Mapping, urn: str, name: str,
                            protect: bool, stack: str) -> list[str]:
    match = _BROAD_IAM.match(resource_type)
    if not match or _is_node_service_account_grant(resource_type, props):
        return []
    scope, key = _SCOPES[match.group(1)]
    target = _get(props, key)
    role = _get(props, "role")
    grant = f"grants {role}" if role else "sets the IAM policy"
    on = f"on the whole {scope}" + (f" {target!r}" if target else "")
    return [f"{_what(resource_type, name)} {grant} {on}: grants must be scoped to the resource "
            f"they are for, e.g. gcp.storage.BucketIAMMember on the bucket (project-wide "
            f"roles reach every bucket, secret and cluster of the project)"]


# ------------------------------------------------------------------------------------------
# 8. Only the Ray head holds the autoscaler's rights
# ------------------------------------------------------------------------------------------

# With in-tree autoscaling KubeRay creates a Role (pods get/list/watch/patch, pods/resize patch,
# rayclusters get/patch) and binds it to the head group's service account: the head template's
# serviceAccountName, else the RayCluster's name (ray-operator/controllers/ray/common/rbac.go
# BuildRoleBinding, utils/util.go GetHeadGroupServiceAccountName, KubeRay v1.7.0). A worker group
# under that account gets the same rights: trainer or model code on a GPU worker could patch the
# RayCluster and its pods.
_AUTOSCALER_RIGHTS_WHY = ("KubeRay binds its autoscaler Role (pods get/list/watch/patch, "
                          "pods/resize, rayclusters get/patch) to the head's service account, so "
                          "code on these workers could patch the RayCluster and its pods: give the "
                          "worker group a service account of its own")


def check_ray_autoscaler_rights_head_only(resource_type: str, props: Mapping, urn: str, name: str,
                                          protect: bool, stack: str) -> list[str]:
    what = _what(resource_type, name)
    problems = []
    for path, cluster_spec in ray_cluster_specs(resource_type, props):
        if _get(cluster_spec, "enableInTreeAutoscaling") is not True:
            continue
        cluster_name = _get(props, "metadata", "name") if path == "spec" else None
        head_account = _get(cluster_spec, "headGroupSpec", "template", "spec", "serviceAccountName")
        bound = head_account or cluster_name
        if not bound:
            continue     # an autonamed cluster without a head account: the name is not known yet
        for i, group in enumerate(_items(_get(cluster_spec, "workerGroupSpecs"))):
            account = _get(group, "template", "spec", "serviceAccountName")
            if account == bound:
                label = _get(group, "groupName") or f"workerGroupSpecs[{i}]"
                problems.append(f"{what}: worker group {label!r} ({path}.workerGroupSpecs[{i}]."
                                f"template.spec.serviceAccountName) runs as {account!r}, the "
                                f"account bound to the autoscaler's Role: {_AUTOSCALER_RIGHTS_WHY}")
    return problems


# ------------------------------------------------------------------------------------------
# The policies
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rule:
    name: str
    description: str
    check: Check


RULES: tuple[Rule, ...] = (
    Rule("gpu-provisioning-model",
         "GPU capacity names exactly one provisioning model (specific reservation, Spot or "
         "flex-start), never on-demand.", check_gpu_provisioning_model),
    Rule("ray-head-not-exposed",
         "No Ray head service of type LoadBalancer or NodePort.", check_ray_head_not_exposed),
    Rule("no-privileged-workloads",
         "No privileged container or added capability in workload pods (one documented "
         "exception: Google's NCCL RDMA installer init container).",
         check_no_privileged_workloads),
    Rule("no-floating-image-tags",
         "Every container image and Helm image tag is pinned (a version tag or a digest, "
         "never latest, nightly, stable, main, master or untagged).",
         check_no_floating_image_tags),
    Rule("prod-data-stores-protected",
         "In the prod stack, buckets and Managed Lustre instances are protected.",
         check_prod_data_stores_protected),
    Rule("no-plaintext-secrets",
         "Credentials reach containers from Secrets only: no plain-text credential in "
         "container env or in a RayJob's entrypoint, runtime env or metadata.",
         check_no_plaintext_secrets),
    Rule("iam-bucket-scoped",
         "IAM grants are scoped to the bucket, never project-, folder- or organization-wide "
         "(one documented exception: the GKE nodes' own account gets "
         "roles/container.defaultNodeServiceAccount).",
         check_iam_bucket_scoped),
    Rule("ray-autoscaler-rights-head-only",
         "No Ray worker group runs under the service account KubeRay binds its autoscaler Role "
         "to (the head's).", check_ray_autoscaler_rights_head_only),
)


def check_all(resource_type: str, props: Mapping, urn: str, name: str, protect: bool,
              stack: str) -> dict[str, list[str]]:
    """Every rule's problems with a resource, by rule name (rules without any left out)."""
    found = {}
    for rule in RULES:
        problems = rule.check(resource_type, props, urn, name, protect, stack)
        if problems:
            found[rule.name] = problems
    return found


def sdk_validate(check: Check) -> Callable[[ResourceValidationArgs, ReportViolation], None]:
    """The ResourceValidationPolicy callback of a pure check: the stack comes from the URN,
    `protect` from the resource options the engine sends."""
    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        protect = bool(getattr(args.opts, "protect", False))
        for message in check(args.resource_type, args.props, args.urn, args.name, protect,
                             stack_of(args.urn)):
            report_violation(message, None)
    validate.__name__ = f"validate_{check.__name__}"
    return validate


POLICIES: list[ResourceValidationPolicy] = [
    ResourceValidationPolicy(
        name=rule.name,
        description=rule.description,
        validate=sdk_validate(rule.check),
        enforcement_level=EnforcementLevel.MANDATORY,
    )
    for rule in RULES
]
