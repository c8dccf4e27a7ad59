"""The change-effect table (components/change_effects.py): every config key says what changing it
does, derived from one source (data/change-effects.yaml for what a key sets, data/provider-force-new.yaml
for what the provider replaces, generated from google-beta v7.45.0's schema), checked against the
pinned provider SDK (pulumi_gcp 10.2.0) and against what the components really register."""

from __future__ import annotations

import importlib
import inspect
import re
from typing import Any

import pytest

from components.change_effects import JOB_WILDCARD, Feed, load_change_effects
from tests.conftest import DELETE, preview_with
from tests.test_readme import typed_keys
from tools.config_reference import reference_rows
from tools.provider_schema import RESOURCES

P = "gke-grpo:"
EFFECTS = load_change_effects()
WORDS = re.compile(r"^(in place|replaces |removes |recreates |creates |swaps |by key; at worst: )")


def test_every_key_says_what_changing_it_does():
    for key, _, _ in reference_rows():
        effect = EFFECTS.effect_of(key)
        assert WORDS.match(effect), (key, effect)
        for phrase in effect.split("; "):
            if phrase.startswith(("replaces", "removes")):
                assert phrase.endswith((": deletes its data", ": deletes their data", ": stops a live run",
                                        "(data kept)")), (key, phrase)


def test_every_entry_names_a_real_key():
    typed = typed_keys()
    for key in EFFECTS.keys:
        assert key in typed or key == JOB_WILDCARD, key


@pytest.mark.parametrize("key,effect", [
    (P + "storage.gcs.hierarchicalNamespace", "replaces the Cloud Storage bucket: deletes its data"),
    (P + "storage.gcs.bucketName", "replaces the Cloud Storage bucket: deletes its data"),
    (P + "storage.lustre.throughputTier", "replaces the Managed Lustre instance: deletes its data"),
    (P + "storage.lustre.filesystem", "replaces the Managed Lustre instance: deletes its data"),
    (P + "storage.lustre.capacityGib", "replaces the RayJob with a new run"),      # the instance: in place
    (P + "gpu.driverVersion", "replaces the GPU node pool: stops a live run"),
    (P + "gpu.reservation.name", "replaces the GPU node pool: stops a live run"),
    (P + "gpu.maxRunDurationSeconds", "replaces the GPU node pool: stops a live run"),
    (P + "gpu.compactPlacement", "replaces the GPU node pool: stops a live run"),
    (P + "gpu.maxNodes", "in place"),
    (P + "cluster.zone", "replaces the Managed Lustre instance: deletes its data; replaces the RDMA VPC"),
    (P + "cluster.mode", "replaces the GKE cluster: stops a live run"),
    (P + "network.rdmaMtu", "in place"),
    (P + "network.rdmaSubnetCidrs", "replaces an RDMA subnet (with the GPU pool on it) unless the new range "
                                    "contains the old one"),
    (P + "kuberay.worker.cpu", "recreates the Ray head and worker pods: stops a live run"),
    (P + "job.maxRestarts", "in place (the run plan ConfigMap"),
    (P + "job.learningRate", "replaces the RayJob with a new run"),
])
def test_known_effects(key, effect):
    assert EFFECTS.effect_of(key).startswith(effect), EFFECTS.effect_of(key)


# ---- the provider snapshot against the provider's source and the pinned SDK ---------------------------

@pytest.mark.parametrize("type_,path,force_new,line", [
    # Lines of google-beta v7.45.0, as the research notes quote them.
    ("gcp:storage/bucket:Bucket", "name", True, "services/storage/resource_storage_bucket.go:L132"),
    ("gcp:storage/bucket:Bucket", "hierarchicalNamespace.enabled", True, "services/storage/resource_storage_bucket.go:L633"),
    ("gcp:storage/bucket:Bucket", "softDeletePolicy.retentionDurationSeconds", False, None),
    ("gcp:lustre/instance:Instance", "perUnitStorageThroughput", True, "services/lustre/resource_lustre_instance.go:L528"),
    ("gcp:lustre/instance:Instance", "capacityGib", False, "services/lustre/resource_lustre_instance.go:L145"),
    ("gcp:compute/network:Network", "networkProfile", True, "services/compute/resource_compute_network.go:L206"),
    ("gcp:compute/network:Network", "mtu", False, "services/compute/resource_compute_network.go:L189"),
    ("gcp:container/nodePool:NodePool", "nodeConfig.spot", True, "services/container/node_config.go:L635"),
    ("gcp:container/nodePool:NodePool", "nodeConfig.machineType", False, "services/container/node_config.go:L555"),
    ("gcp:container/nodePool:NodePool", "nodeConfig.maxRunDuration", True, "services/container/node_config.go:L1458"),
    ("gcp:container/nodePool:NodePool", "nodeConfig.flexStart", True, "services/container/node_config.go:L1464"),
    ("gcp:container/nodePool:NodePool", "placementPolicy", True, None),
    ("gcp:container/cluster:Cluster", "enableAutopilot", True, "services/container/resource_container_cluster.go:L1190"),
    ("gcp:compute/routerNat:RouterNat", "enableDynamicPortAllocation", False, None),
])
def test_the_snapshot_reads_the_providers_schema(type_, path, force_new, line):
    field = EFFECTS.provider[type_][path]
    assert field.force_new is force_new
    if line:
        assert field.line == line


def _sdk_args(type_: str) -> type:
    module, kind = type_.split(":")[1].split("/", maxsplit=1)[0], type_.split(":")[2]
    return getattr(importlib.import_module(f"pulumi_gcp.{module}"), f"{kind}Args")


def _snake(wire: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", wire).lower()


def _nested_args(cls: type, parameter: str) -> type | None:
    annotation = str(inspect.signature(cls.__init__).parameters[parameter].annotation)
    match = re.search(r"ForwardRef\('(\w+Args)'\)", annotation)
    if not match:
        return None
    module = importlib.import_module(cls.__module__.rsplit(".", 1)[0] + "._inputs")
    return getattr(module, match.group(1))


def test_every_snapshot_field_exists_in_the_pinned_sdk():
    """pulumi_gcp 10.2.0 (requirements.txt) has every field, by the wire name the snapshot uses."""
    from importlib.metadata import version

    assert version("pulumi_gcp") == "10.2.0"
    for type_, fields in EFFECTS.provider.items():
        for path in fields:
            cls: type | None = _sdk_args(type_)
            for part in path.replace("[]", "").split("."):
                assert cls is not None, (type_, path)
                parameter = _snake(part)
                assert parameter in inspect.signature(cls.__init__).parameters, (type_, path, cls.__name__)
                cls = _nested_args(cls, parameter)


def test_every_resource_type_of_the_table_is_one_the_tool_reads():
    assert {r.type for r in EFFECTS.resources.values()} <= set(RESOURCES)


def test_every_feed_and_fixed_field_is_in_the_snapshot():
    feeds = [f for entry in EFFECTS.keys.values() for f in entry.feeds] + list(EFFECTS.fixed)
    for feed in feeds:
        assert feed.resource in EFFECTS.resources, feed
        assert EFFECTS.field(feed) is not None, f"{feed}: not in data/provider-force-new.yaml"


# ---- against what the components register --------------------------------------------------------------

VARIANTS = {
    "dev": ("dev", {}),
    "prod": ("prod", {}),
    "prod-flex": ("prod", {P + "gpu.provisioningModel": "flex-start", P + "gpu.reservation": DELETE,
                           P + "gpu.maxRunDurationSeconds": 3600, P + "gpu.compactPlacement": True}),
    "prod-block": ("prod", {P + "gpu.reservation.block": "b1", P + "gpu.reservation.project": "other-proj-1"}),
    "dev-lustre": ("dev", {P + "storage": {"kind": "lustre"}}),
    "prod-gcs": ("prod", {P + "storage": {"kind": "gcs"}}),
    "dev-networks": ("dev", {P + "cluster.controlPlaneAccess": "authorizedNetworks",
                             P + "cluster.masterAuthorizedNetworks": [{"cidrBlock": "203.0.113.0/24", "displayName": "o"}],
                             P + "cluster.maintenanceExclusions": [{"name": "x", "startTime": "2026-01-01T00:00:00Z",
                                                                    "endTime": "2026-01-02T00:00:00Z"}]}),
}
def _preview(name: str):
    result = preview_with(*VARIANTS[name])          # once per variant: the run's preview cache
    assert result.error is None, result.error
    return result


def _leaves(value: Any, path: str = "") -> dict[str, Any]:
    """Wire paths -> values; the items of a list of blocks as ``a[].b#<index>``."""
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for key, inner in value.items():
            out.update(_leaves(inner, f"{path}.{key}" if path else key))
        return out
    if isinstance(value, list) and value and isinstance(value[0], dict):
        out = {}
        for i, item in enumerate(value):
            out.update({f"{key}#{i}": inner for key, inner in _leaves(item, f"{path}[]").items()})
        return out
    return {path: value}


def _known_path(type_: str, path: str) -> str | None:
    """The snapshot path a registered leaf belongs to (a map key belongs to its map field)."""
    fields = EFFECTS.provider.get(type_, {})
    path = path.split("#", maxsplit=1)[0]
    while path:
        if path in fields:
            return path
        path = path.rsplit(".", 1)[0] if "." in path else ""
    return None


def _role(reg):
    return next((r for r in EFFECTS.resources.values() if r.matches(reg.type, reg.name)), None)


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_no_component_sets_a_field_the_table_does_not_know(variant):
    """Every provider field a component sets is in the snapshot, and every one that replaces its
    resource is owned by a key (or listed as fixed): a component that starts setting a ForceNew
    field fails here until the table says which key changes it."""
    owned = {(f.resource, f.field) for entry in EFFECTS.keys.values() for f in entry.feeds}
    owned |= {(f.resource, f.field) for f in EFFECTS.fixed}
    for reg in _preview(variant).resources:
        if not reg.type.startswith("gcp:"):
            continue
        role = _role(reg)
        assert role is not None, f"{reg.type} {reg.name}: no row in data/change-effects.yaml resources"
        for leaf in _leaves(reg.inputs):
            path = _known_path(reg.type, leaf)
            assert path is not None, f"{reg.name} sets {leaf}, not in data/provider-force-new.yaml"
            field = EFFECTS.provider[reg.type][path]
            if field.force_new or field.unless:
                assert (role.key, path) in owned, f"{reg.name} sets ForceNew {path}: no key owns it"


@pytest.mark.parametrize("variant", ["dev", "prod", "prod-flex"])
def test_ignored_feeds_are_what_the_components_ignore(variant):
    feeds = [f for entry in EFFECTS.keys.values() for f in entry.feeds] + list(EFFECTS.fixed)
    for reg in _preview(variant).resources:
        role = _role(reg)
        if role is None:
            continue
        for feed in (f for f in feeds if f.resource == role.key):
            if feed.field.split(".")[0] in {p.split(".")[0] for p in _leaves(reg.inputs)}:
                ignored = any(feed.field == i or feed.field.startswith(i + ".") for i in reg.ignore_changes)
                assert feed.ignored == ignored, (reg.name, feed)


# A key changed alone changes only the provider fields its entry lists (fields that follow another
# resource's output, like a subnet's network, do not change under mocks).
MUTATIONS = [
    ("prod", P + "gpu.driverVersion", "LATEST"),
    ("prod", P + "gpu.maxNodes", 6),
    ("prod", P + "gpu.compactPlacement", True),
    ("prod", P + "storage.lustre.throughputTier", 1000),
    ("prod", P + "storage.lustre.capacityGib", 36000),
    ("prod", P + "cluster.headPool.diskSizeGb", 300),
    ("dev", P + "storage.gcs.hierarchicalNamespace", False),
    ("dev", P + "storage.gcs.softDeleteRetentionDays", 7),
    ("dev", P + "network.rdmaMtu", 4096),
    ("dev", P + "cluster.zone", "us-central1-a"),
    ("dev", P + "storage.allowDataLoss", True),
]


@pytest.mark.parametrize("stack,key,value", MUTATIONS, ids=[m[1].split(":")[1] for m in MUTATIONS])
def test_a_key_changes_only_the_fields_it_lists(stack, key, value):
    base = {(r.name, r.type): r for r in _preview(stack).resources if r.type.startswith("gcp:")}
    changed = preview_with(stack, {key: value})
    assert changed.error is None, changed.error
    entry = EFFECTS.entry(key)
    listed = {(f.resource, f.field) for f in entry.feeds}
    seen = set()
    for reg in changed.resources:
        old = base.get((reg.name, reg.type))
        if old is None:
            continue
        role = _role(reg)
        new_leaves, old_leaves = _leaves(reg.inputs), _leaves(old.inputs)
        for leaf in set(new_leaves) | set(old_leaves):
            if new_leaves.get(leaf) != old_leaves.get(leaf):
                path = _known_path(reg.type, leaf) or leaf.split("#")[0].rsplit(".", 1)[0]
                seen.add((role.key, path))
                # A listed block covers the fields inside it (placementPolicy: its presence).
                assert any(r == role.key and (path == f or path.startswith(f + ".")) for r, f in listed), \
                    f"{key} changes {reg.name} {path}, not listed"
    assert seen, f"{key} changed no provider field"


def test_a_feed_names_a_resource_and_a_field():
    assert Feed.parse("gpu-pool initialNodeCount (ignored)") == Feed("gpu-pool", "initialNodeCount", True)
