"""The GPU capacity waterfall as the components use it: ``gke-grpo:gpu.capacity`` (or the one
source of ``gpu.provisioningModel``), in order, each with its node pool's name and size.

    capacity_plan(gpu, autopilot=..., machine_type=...) -> CapacityPlan

Pool names are derived from the source alone (never from its position), so adding, removing or
reordering sources never renames, and so never replaces, the pool of another source. A Spot or
flex-start pool's name ends in a hash of the fields whose change replaces it, so its replacement
is created first, beside it; a reservation's pool (and a pool named by ``nodePool``) keeps a fixed
name and is deleted first: the reservation's capacity cannot be held by two pools at once. The one pool
of a ``provisioningModel`` config is ``<machine>-pool`` (Spot and flex-start: ``<machine>-pool-<hash>``);
a list's source keeps it (GKE name and Pulumi resource name: the pool is neither replaced nor
moved) by saying ``nodePool: <machine>-pool``, whatever its kind: that value stands for the former
pool, hash included.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from components.config.models import CapacitySource, GpuConfig, Reservation

# gpu.capacity[].kind -> gpu.provisioningModel, and back.
KINDS = ("reservation", "flexStart", "spot")
PROVISIONING_MODEL_OF_KIND = {"reservation": "reservation", "flexStart": "flex-start", "spot": "spot"}
KIND_OF_PROVISIONING_MODEL = {model: kind for kind, model in PROVISIONING_MODEL_OF_KIND.items()}
# GKE node pool names: at most 40 characters (gcloud container node-pools create, NAME).
POOL_NAME_MAX = 40


@dataclass(frozen=True)
class PlannedSource:
    """One source of the waterfall, resolved: what its node pool (Standard) and the ComputeClass
    priority say, and what it costs."""
    kind: str                              # reservation | flexStart | spot
    reservation: Reservation | None        # reservation only
    max_run_duration_seconds: int | None   # flexStart only
    max_nodes: int                         # the most nodes its pool may have
    min_nodes: int                         # its pool's minimum (a reservation: held)
    initial_nodes: int                     # its pool's nodes at creation
    pool_name: str                         # GKE node pool name (Standard)
    resource_suffix: str                   # Pulumi resource name suffix ("": <machine>-pool's)
    # Replaced create-before-delete: the pool's name carries a hash of its replacing fields, so
    # a replacement's new pool can exist beside the old one. False: fixed name, deleted first.
    create_before_delete: bool = False

    @property
    def provisioning_model(self) -> str:
        return PROVISIONING_MODEL_OF_KIND[self.kind]

    @property
    def label(self) -> str:
        """How the preview, the CLI and the records name the source."""
        if self.reservation is not None:
            name = self.reservation.name
            return f"reservation {name}" + (f" (block {self.reservation.block})"
                                            if self.reservation.block else "")
        return "flex-start" if self.kind == "flexStart" else "Spot"


@dataclass(frozen=True)
class CapacityPlan:
    sources: tuple[PlannedSource, ...]
    from_list: bool                        # gpu.capacity given (else provisioningModel)

    @property
    def waterfall(self) -> bool:
        return len(self.sources) > 1

    @property
    def reach(self) -> int:
        """The most GPU nodes the sources' pools can hold at once (Standard)."""
        return sum(s.max_nodes for s in self.sources)


def source_identity(source: CapacitySource) -> tuple:
    """Two sources with the same identity are one source listed twice."""
    if source.kind == "reservation":
        return ("reservation", source.name, source.block, source.project)
    return (source.kind,)


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text.lower()).strip("-")


def pool_name_for(machine_type: str, source: CapacitySource) -> str:
    """``<machine>-spot``, ``<machine>-flex``, ``<machine>-res-<name>[-<block>]``; names longer
    than GKE's 40 characters keep their start and end in an 8-character hash of the source."""
    if source.kind == "spot":
        tail = "spot"
    elif source.kind == "flexStart":
        tail = "flex"
    else:
        parts = [source.project or "", source.name or "", source.block or ""]
        tail = "res-" + "-".join(_slug(p) for p in parts if p)
    name = f"{machine_type}-{tail}"
    if len(name) <= POOL_NAME_MAX:
        return name
    digest = hashlib.sha256(repr(source_identity(source)).encode()).hexdigest()[:8]
    return f"{name[:POOL_NAME_MAX - 9].rstrip('-')}-{digest}"


def legacy_pool_name(machine_type: str) -> str:
    """The one GPU pool's name before gpu.capacity existed (and with provisioningModel)."""
    return f"{machine_type}-pool"


def _legacy_source(gpu: GpuConfig) -> CapacitySource:
    model = gpu.provisioning_model or "spot"
    kind = KIND_OF_PROVISIONING_MODEL.get(model, model)
    fields: dict = {"kind": kind}
    if kind == "reservation" and gpu.reservation is not None:
        fields.update(name=gpu.reservation.name, block=gpu.reservation.block,
                      project=gpu.reservation.project, endTime=gpu.reservation.end_time)
    if kind == "flexStart":
        fields["maxRunDurationSeconds"] = gpu.max_run_duration_seconds
    return CapacitySource.model_validate({k: v for k, v in fields.items() if v is not None})


# A name suffix of 7 characters ("-" + 6 hex digits of the replacing fields' hash).
REPLACEMENT_HASH_LENGTH = 6


def replacing_fields_hash(gpu: GpuConfig, machine_type: str, kind: str,
                          max_run_duration_seconds: int | None) -> str:
    """A hash of what the pool's ForceNew fields come from (components/replacements.py
    gpu_pool_fields lists them): a change of any gives the pool a new name."""
    fields = (machine_type, gpu.type, gpu.driver_version, kind, max_run_duration_seconds,
              gpu.compact_placement)
    return hashlib.sha256(repr(fields).encode()).hexdigest()[:REPLACEMENT_HASH_LENGTH]


def _replaceable_name(base: str, gpu: GpuConfig, machine_type: str, kind: str,
                      max_run_duration_seconds: int | None) -> str:
    """``base-<hash>``: a Spot or flex-start pool holds no capacity of its own, so a replacement
    can create the new pool first, under this new name, and delete the old one after it."""
    tail = "-" + replacing_fields_hash(gpu, machine_type, kind, max_run_duration_seconds)
    return base[:POOL_NAME_MAX - len(tail)].rstrip("-") + tail


def capacity_plan(gpu: GpuConfig, *, machine_type: str) -> CapacityPlan:
    """The validated config's sources, in order (the rules have checked them)."""
    default_max = gpu.nodes if gpu.max_nodes is None else gpu.max_nodes
    if gpu.capacity is None:
        source = _legacy_source(gpu)
        reserved = source.kind == "reservation"
        minimum = gpu.min_nodes if gpu.min_nodes is not None else (gpu.nodes if reserved else 0)
        name = legacy_pool_name(machine_type)
        if not reserved:
            name = _replaceable_name(name, gpu, machine_type, source.kind, source.max_run_duration_seconds)
        planned = PlannedSource(
            kind=source.kind, reservation=_reservation(source),
            max_run_duration_seconds=source.max_run_duration_seconds, max_nodes=default_max,
            min_nodes=minimum, initial_nodes=gpu.nodes if reserved else 0,
            pool_name=name, resource_suffix="", create_before_delete=not reserved)
        return CapacityPlan((planned,), from_list=False)
    planned_sources = []
    for source in gpu.capacity:
        if source.kind == "reservation":
            size = source.max_nodes if source.max_nodes is not None else gpu.nodes
            minimum = initial = maximum = size
        else:
            maximum = source.max_nodes if source.max_nodes is not None else default_max
            minimum = initial = 0
        base = source.node_pool or pool_name_for(machine_type, source)
        if base == legacy_pool_name(machine_type):
            # The pool of a former provisioningModel config, named exactly as that config named
            # it (above): Pulumi resource `gpu-pool`, GKE name `<machine>-pool`, with the hash of
            # its replacing fields for Spot and flex-start. Moving to an equivalent one-source
            # list, or adding sources around it, then changes neither name.
            suffix = ""
            replaceable = source.kind != "reservation"
        else:
            suffix = base
            # A reservation's pool holds the reservation's capacity: its replacement must delete
            # it first. An explicit nodePool is a name the user chose: kept exactly (deleted
            # first too).
            replaceable = source.kind != "reservation" and source.node_pool is None
        name = (_replaceable_name(base, gpu, machine_type, source.kind, source.max_run_duration_seconds)
                if replaceable else base)
        planned_sources.append(PlannedSource(
            kind=source.kind, reservation=_reservation(source),
            max_run_duration_seconds=source.max_run_duration_seconds, max_nodes=maximum,
            min_nodes=minimum, initial_nodes=initial, pool_name=name, resource_suffix=suffix,
            create_before_delete=replaceable))
    return CapacityPlan(tuple(planned_sources), from_list=True)


def _reservation(source: CapacitySource) -> Reservation | None:
    if source.kind != "reservation" or source.name is None:
        return None
    fields = {"name": source.name, "block": source.block, "project": source.project,
              "endTime": source.end_time}
    return Reservation.model_validate({k: v for k, v in fields.items() if v is not None})


# ---- job.layout: a pool's capacity source ---------------------------------------------------

def reference_of(source: PlannedSource) -> str:
    """How ``job.layout.<pool>.capacity`` names a source: ``spot``, ``flexStart`` or
    ``reservation/<name>``."""
    if source.kind == "reservation" and source.reservation is not None:
        return f"reservation/{source.reservation.name}"
    return source.kind


def resolve_reference(plan: CapacityPlan, reference: str | None) -> int | None:
    """The index of the source a pool's ``capacity`` names (None: the first), or None when the
    stack has no such source; ``reservation`` alone names the stack's only reservation."""
    if reference is None:
        return 0
    matches = [i for i, source in enumerate(plan.sources)
               if reference_of(source) == reference
               or (reference == "reservation" and source.kind == "reservation")]
    return matches[0] if len(matches) == 1 else None
