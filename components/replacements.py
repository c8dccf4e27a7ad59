"""What a config change would replace in the deployed stack, said before anything happens.

The stack exports ``deployedIdentity``: for every resource whose replacement costs data or a live
run (data stores, node pools, the cluster, networks and subnets), the values of the fields that
replace it (the provider's ForceNew fields the component sets from the config; data/provider-
force-new.yaml). On the next preview or update the program reads that output back from its own
stack's last update, before it registers anything, and compares it with the identity the new
config gives (``compare``):

- a data store (bucket, Lustre instance) that would be replaced or removed is REFUSED, with the
  key that causes it, how to keep it, and the three steps to do it on purpose, unless
  ``storage.allowDataLoss`` is true for that update;
- a node pool, the cluster or a network under them that would be replaced is WARNED: a live run
  is stopped and its next attempt resumes from its checkpoint.

The CLI's preflight does the same from ``pulumi stack output`` (tools/replacement_report.py).

How the program reads its own last outputs: the engine's builtin invoke
``pulumi:pulumi:readStackOutputs`` with the stack's fully qualified name (pulumi/pulumi
pkg/resource/deploy/builtins.go: ``readStackReference`` -> ``backendClient.GetStackOutputs(name)``;
the Node.js SDK's StackReference reads outputs synchronously through the same invoke,
sdk/nodejs/stackReference.ts ``invokeSync("pulumi:pulumi:readStackOutputs", {name})``; read
2026-12-01). It is synchronous and registers no resource, so the check runs before the first
registration, and a refused change leaves nothing half-done. Pulumi does not document reading a
stack's OWN outputs this way (UNCONFIRMED); when the read fails or the stack has no such output
(first deploy), nothing is compared and the preview says so. Under the offline preview the mocks
answer the invoke from ``--deployed-outputs FILE`` (tools/mocks.py).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from components.change_effects import ChangeEffects, Resource, load_change_effects
from components.config import PROJECT, Problem

if TYPE_CHECKING:
    from components.config import StackConfig
    from components.config.capacity import PlannedSource

IDENTITY_OUTPUT = "deployedIdentity"
IDENTITY_VERSION = 1
READ_OUTPUTS = "pulumi:pulumi:readStackOutputs"
NETWORK = "gcp:compute/network:Network"
SUBNET = "gcp:compute/subnetwork:Subnetwork"
CLUSTER = "gcp:container/cluster:Cluster"
NODE_POOL = "gcp:container/nodePool:NodePool"
BUCKET = "gcp:storage/bucket:Bucket"
LUSTRE = "gcp:lustre/instance:Instance"
ACCOUNT = "gcp:serviceaccount/account:Account"
CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"


# ---- the identity of what a config deploys --------------------------------------------------------

def _entry(type_: str, **fields: Any) -> dict[str, Any]:
    return {"type": type_, "fields": {k.replace("__", "."): v for k, v in sorted(fields.items())}}


def stack_identity(config: StackConfig) -> dict[str, Any]:
    """The ForceNew field values of every resource whose replacement costs data or a run, as the
    components register them (tests/components/test_replacements.py checks each against the
    preview's inputs), keyed by the component's Pulumi name."""
    names, project, region = config.names, config.project, config.region
    resources: dict[str, dict[str, Any]] = {
        "networks-cluster": _entry(NETWORK, name=names.cluster_network, project=project,
                                   autoCreateSubnetworks=False),
        "networks-gvnic": _entry(NETWORK, name=names.gvnic_network, project=project,
                                 autoCreateSubnetworks=False),
        "networks-rdma": _entry(NETWORK, name=names.rdma_network, project=project,
                                autoCreateSubnetworks=False, networkProfile=config.rdma_network_profile),
        "node-sa": _entry(ACCOUNT, accountId=names.node_service_account, project=project),
    }
    subnets = {"networks-cluster": (names.cluster_subnet, config.network.cluster_subnet_cidr),
               "networks-gvnic": (names.gvnic_subnet, config.network.gvnic_subnet_cidr)}
    subnets.update({f"networks-rdma-{i}": (names.rdma_subnet(i), cidr)
                    for i, cidr in enumerate(config.network.rdma_subnet_cidrs)})
    for key, (name, cidr) in subnets.items():
        resources[f"{key}#subnet"] = _entry(SUBNET, name=name, project=project, region=region,
                                            ipCidrRange=cidr)
    cluster: dict[str, Any] = {"name": config.cluster.name, "project": project, "location": region,
                               "networkingMode": "VPC_NATIVE",
                               "ipAllocationPolicy__clusterSecondaryRangeName": names.pod_range,
                               "ipAllocationPolicy__servicesSecondaryRangeName": names.service_range}
    if config.autopilot:
        cluster["enableAutopilot"] = True
    else:
        cluster["datapathProvider"] = "ADVANCED_DATAPATH"
    resources["cluster"] = _entry(CLUSTER, **cluster)
    if config.head_pool is not None:
        resources["cluster-ray-head"] = _entry(
            NODE_POOL, name="ray-head", project=project, location=region,
            nodeConfig__spot=False, nodeConfig__oauthScopes=[CLOUD_PLATFORM_SCOPE])
    if not config.autopilot:
        # One pool per capacity source, keyed as components/gpu_capacity.py names it.
        for source in config.capacity.sources:
            key = "gpu-pool" + (f"-{source.resource_suffix}" if source.resource_suffix else "")
            resources[key] = _entry(NODE_POOL, **gpu_pool_fields(config, source))
    if config.storage.kind == "gcs":
        gcs = config.storage.gcs
        resources["storage-bucket"] = _entry(
            BUCKET, name=config.bucket_name, project=project, location=region,
            hierarchicalNamespace__enabled=True if gcs is None else gcs.hierarchical_namespace)
    else:
        lustre = config.storage.lustre
        assert lustre is not None or config.lustre_instance_id is not None
        resources["storage-lustre"] = _entry(
            LUSTRE, instanceId=config.lustre_instance_id, project=project, location=config.zone,
            filesystem=lustre.filesystem if lustre else "lustrefs",
            perUnitStorageThroughput=str(lustre.throughput_tier if lustre else 500))
    return {"version": IDENTITY_VERSION, "resources": dict(sorted(resources.items()))}


def gpu_pool_fields(config: StackConfig, source: PlannedSource) -> dict[str, Any]:
    """One GPU pool's ForceNew fields, as components/gpu_capacity.py sets them (double
    underscores stand for dots)."""
    from components.gpu_capacity import RESERVATION_KEY, reservation_value

    gpu = config.gpu
    fields: dict[str, Any] = {
        "name": source.pool_name, "project": config.project, "location": config.region,
        "nodeConfig__guestAccelerators[]__type": [gpu.type],
        "nodeConfig__guestAccelerators[]__count": [config.gpus_per_node],
        "nodeConfig__guestAccelerators[]__gpuDriverInstallationConfig__gpuDriverVersion": [gpu.driver_version],
        "nodeConfig__spot": source.kind == "spot",
        "nodeConfig__flexStart": True if source.kind == "flexStart" else None,
        "nodeConfig__maxRunDuration": f"{source.max_run_duration_seconds}s"
        if source.max_run_duration_seconds else None,
        "nodeConfig__oauthScopes": [CLOUD_PLATFORM_SCOPE],
        "placementPolicy": {"type": "COMPACT"} if gpu.compact_placement else None,
    }
    if source.reservation is not None:
        fields.update({"nodeConfig__reservationAffinity__consumeReservationType": "SPECIFIC_RESERVATION",
                       "nodeConfig__reservationAffinity__key": RESERVATION_KEY,
                       "nodeConfig__reservationAffinity__values": [reservation_value(source.reservation, config.project)]})
    else:
        fields["nodeConfig__reservationAffinity__consumeReservationType"] = "NO_RESERVATION"
    return fields


# ---- comparing it with what is deployed ----------------------------------------------------------

@dataclass(frozen=True)
class Replacement:
    key: str                            # the identity's key (the component's Pulumi name)
    type: str
    resource: Resource | None           # its row of data/change-effects.yaml
    removed: bool
    changes: tuple[tuple[str, Any, Any], ...]    # (field, deployed, new)
    owners: tuple[str, ...]             # the config keys that set the changed fields

    @property
    def holds(self) -> str:
        return self.resource.holds if self.resource else "none"

    @property
    def subject(self) -> str:
        label = self.resource.label if self.resource else self.type
        return f"{label} ({self.key.split('#')[0]})"

    def describe(self) -> str:
        if self.removed:
            return f"{self.subject} is no longer in the config: it would be DELETED"
        changes = ", ".join(f"{f}: {_show(old)} -> {_show(new)}" for f, old, new in self.changes)
        owners = f" (set by {', '.join(self.owners)})" if self.owners else ""
        return f"{self.subject} would be REPLACED: {changes}{owners}"


def _show(value: Any) -> str:
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    return "(unset)" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


def _replaces(effects: ChangeEffects, type_: str, field: str, old: Any, new: Any) -> bool:
    provider = effects.provider.get(type_, {}).get(field)
    if provider is None:
        return True          # a field the identity holds is ForceNew by construction
    if provider.unless and field == "ipCidrRange" and old and new:
        # In place only when the new range contains the old one (an expansion).
        return not ipaddress.IPv4Network(old).subnet_of(ipaddress.IPv4Network(new))
    return provider.force_new or provider.unless is not None


def compare(deployed: dict[str, Any] | None, new: dict[str, Any],
            effects: ChangeEffects | None = None) -> list[Replacement]:
    """What the new identity replaces or removes of the deployed one (nothing when there is
    no deployed identity, or it is of another version)."""
    effects = effects or load_change_effects()
    if not isinstance(deployed, dict) or deployed.get("version") != IDENTITY_VERSION:
        return []
    old_resources = deployed.get("resources") or {}
    new_resources = new.get("resources") or {}
    found = []
    for key, old in sorted(old_resources.items()):
        if not isinstance(old, dict):
            continue
        type_ = str(old.get("type"))
        role = _role(effects, type_, key)
        now = new_resources.get(key)
        if now is None:
            found.append(Replacement(key, type_, role, True, (), ()))
            continue
        old_fields, new_fields = old.get("fields") or {}, now.get("fields") or {}
        changes = tuple((field, old_fields.get(field), new_fields.get(field))
                        for field in sorted(set(old_fields) | set(new_fields))
                        if old_fields.get(field) != new_fields.get(field)
                        and _replaces(effects, type_, field, old_fields.get(field), new_fields.get(field)))
        if changes:
            owners = list(dict.fromkeys(owner for field, _, _ in changes if role
                                        for owner in effects.owners(role.key, field)))
            found.append(Replacement(key, type_, role, False, changes, tuple(owners)))
    return found


def _role(effects: ChangeEffects, type_: str, key: str) -> Resource | None:
    name = key.split("#", maxsplit=1)[0]
    for resource in effects.resources.values():
        if resource.matches(type_, name):
            return resource
    return None


def data_loss_problems(replacements: list[Replacement], allow_data_loss: bool) -> list[Problem]:
    """A refusal, naming the key, for every data store a change would replace or delete."""
    if allow_data_loss:
        return []
    problems = []
    for r in replacements:
        if r.holds != "data":
            continue
        key = r.owners[0] if r.owners else f"{PROJECT}:storage.kind"
        given = r.changes[0][2] if r.changes and r.owners else None
        keep = (", ".join(f"{_owner_of(r, f)} back to {_show(old)}" for f, old, _ in r.changes)
                if r.changes else "storage.kind as it was")
        problems.append(Problem(key, given, (
            f"a change that keeps {r.subject}: {r.describe()}, and every object "
            f"in it would be DELETED. To keep it, set {keep}. To do it on purpose: 1. copy out of "
            f"/data what you need; 2. set {PROJECT}:storage.allowDataLoss true and run `pulumi up` "
            "(the store is deleted and created anew, empty); 3. remove storage.allowDataLoss and run "
            "`pulumi up` again, which protects it again"), reads=tuple(r.owners[1:])))
    return problems


def _owner_of(replacement: Replacement, field: str) -> str:
    """The config key that sets ``field`` most specifically, else the field's own name."""
    effects = load_change_effects()
    owners = effects.owners(replacement.resource.key, field) if replacement.resource else []
    return owners[0] if owners else field


def run_warnings(replacements: list[Replacement], checkpoint_dir: str,
                 allow_data_loss: bool = False) -> list[str]:
    """What a change does to a live run (node pools, the cluster, networks under them), and the
    data stores a change deletes on purpose (storage.allowDataLoss)."""
    warnings = []
    for r in replacements:
        if r.holds == "run" and r.type == NODE_POOL and not r.removed:
            renamed = any(field == "name" for field, _, _ in r.changes)
            order = ("the new pool is created first, under its new name, and the old one deleted "
                     "after it: a live run keeps its GPUs until then, is STOPPED when the old pool "
                     "goes, and" if renamed else
                     "the old pool is deleted first (a reservation's capacity, or a fixed nodePool "
                     "name, cannot be held by two pools): a live run on it is STOPPED at once, and")
            warnings.append(f"{r.describe()}: {order} its next attempt resumes from its "
                            f"checkpoint ({checkpoint_dir})")
        elif r.holds == "run":
            warnings.append(f"{r.describe()}: a live run on it is STOPPED; its next attempt "
                            f"resumes from its checkpoint ({checkpoint_dir})")
        elif r.holds == "data" and allow_data_loss:
            warnings.append(f"{r.describe()}: storage.allowDataLoss is true, so its data is "
                            "deleted with it")
    return warnings


@dataclass(frozen=True)
class Deployed:
    identity: dict[str, Any] | None     # deployedIdentity of the stack's last update
    checkpoint_dir: str | None          # runCheckpointDir: where a stopped run resumes from
    unread: str | None                  # why nothing could be compared, or None
    run_spec: dict[str, Any] | None = None   # runSpec: the deployed run (components/releases.py)


def deployed_from_outputs(outputs: Any) -> Deployed:
    """The parts of a stack's outputs (`pulumi stack output --json`) the comparison reads."""
    outputs = outputs if isinstance(outputs, dict) else {}
    identity = outputs.get(IDENTITY_OUTPUT)
    checkpoint = outputs.get("runCheckpointDir")
    run_spec = outputs.get("runSpec")
    run_spec = run_spec if isinstance(run_spec, dict) else None
    if not isinstance(identity, dict):
        return Deployed(None, None, "the stack has no deployedIdentity output yet (never deployed, "
                                    "or by an older version of this program)", run_spec)
    return Deployed(identity, checkpoint if isinstance(checkpoint, str) else None, None, run_spec)


def read_deployed() -> Deployed:
    """This stack's last outputs, read through the engine (module docstring)."""
    import pulumi

    name = f"{pulumi.get_organization()}/{pulumi.get_project()}/{pulumi.get_stack()}"
    try:
        result = pulumi.runtime.invoke(READ_OUTPUTS, {"name": name})
    except Exception as exc:   # the engine or backend refused: nothing to compare with
        return Deployed(None, None, f"the stack's last outputs could not be read ({type(exc).__name__})")
    value = getattr(result, "value", None) or {}
    return deployed_from_outputs(value.get("outputs") if isinstance(value, dict) else None)
