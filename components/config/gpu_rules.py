"""The GPU rules of the stack config (``gke-grpo:gpu``): the machine, its capacity sources (one
``provisioningModel`` or the ``capacity`` waterfall), node counts and the GKE versions they need.
A mixin of rules.py's ``_Rules``: every problem names its key and the keys it read."""

from __future__ import annotations

from typing import Any

from components.config.capacity import KINDS, capacity_plan, legacy_pool_name, source_identity
from components.config.facts import (
    COMPUTE_CLASS_MIN_GKE_VERSION,
    FLEX_START_MAX_RUN_SECONDS,
    FLEX_START_MIN_GKE_VERSION,
    MACHINE_SHAPES,
    PROVISIONING_MODELS,
)
from components.config.models import CapacitySource, ClusterConfig, GpuConfig, JobConfig
from components.config.patterns import _GKE_VERSION, version_at_least

ON_DEMAND_WORDS = ("on-demand", "ondemand", "standard", "on_demand", "onDemand")
# Why Autopilot gets one source: this program wires the RDMA NICs with the multi-network API
# (networking.gke.io/interfaces), which Autopilot pairs with node selectors on the Accelerator
# class; Google's documented way to combine a custom ComputeClass with RDMA on Autopilot is
# managed DRANET (ComputeClass nodePoolConfig.dra.networking, GKE 1.35.2-gke.1842000+, "Allocate
# network resources by using GKE managed DRANET", updated 2026-04-10), a different API that must
# not be mixed with the multi-network one in a cluster.
AUTOPILOT_WATERFALL = (
    "one source on Autopilot: a waterfall is a custom ComputeClass, and Google documents RDMA "
    "with a custom ComputeClass on Autopilot only through managed DRANET (GKE "
    "1.35.2-gke.1842000+), not the multi-network interfaces this program gives the GPU pods; "
    "use a Standard cluster (cluster.mode standard) for a waterfall")


class _GpuRules:
    """The ``gke-grpo:gpu`` checks; ``_Rules`` provides ``add``, ``cluster`` and ``gpu``."""

    cluster: ClusterConfig | None
    gpu: GpuConfig | None

    def add(self, key: str, given: Any, allowed: str, reads: tuple[str, ...] = ()) -> None:
        raise NotImplementedError

    @property
    def _autopilot(self) -> bool:
        return self.cluster is not None and self.cluster.mode == "autopilot"

    def _version_below(self, minimum: str) -> str | None:
        """cluster.minMasterVersion when it is an exact version below ``minimum``."""
        version = self.cluster.min_master_version if self.cluster is not None else None
        if version and _GKE_VERSION.fullmatch(version) and not version_at_least(version, minimum):
            return version
        return None

    def _check_gpu(self, g: GpuConfig) -> None:
        shape = MACHINE_SHAPES[g.type]
        if g.machine_type is not None:
            if self._autopilot:
                self.add("gpu.machineType", g.machine_type, "not allowed on Autopilot (a node "
                         "pool setting): Autopilot picks the machine from gpu.type")
            elif g.machine_type != shape.machine_type:
                self.add("gpu.machineType", g.machine_type,
                         f"{g.type} runs on {shape.machine_type} only (omit the key: it is "
                         "derived from gpu.type)")
        if g.capacity is not None:
            self._check_capacity(g)
        else:
            self._check_provisioning_model(g)
        if self._version_below(shape.min_gke_version):
            self.add("cluster.minMasterVersion", self._version_below(shape.min_gke_version),
                     f"at least {shape.min_gke_version} for {g.type}")
        if self._autopilot:
            self._check_no_pool_settings(g)
        else:
            self._check_pool_counts(g)

    # ---- one source: gpu.provisioningModel ----------------------------------------------------
    def _check_provisioning_model(self, g: GpuConfig) -> None:
        shape = MACHINE_SHAPES[g.type]
        model = g.provisioning_model
        if model is None:
            # reads gpu.capacity: a list refused for its shape is reported instead of this.
            self.add("gpu.provisioningModel", None, "required: one of reservation, spot, "
                     "flex-start; or give gpu.capacity, a list of sources in order",
                     reads=("gpu.capacity",))
            return
        if model not in PROVISIONING_MODELS:
            hint = f"{shape.machine_type} has no plain on-demand capacity; " if model in ON_DEMAND_WORDS else ""
            self.add("gpu.provisioningModel", model, hint + "one of reservation, spot, "
                     "flex-start (a reservation you own, Spot VMs, or flex-start for up to 7 days)")
        if model == "reservation":
            if g.reservation is None:
                self.add("gpu.reservation", None, 'required when provisioningModel is '
                         '"reservation": {"name": "<reservation name>"}')
        elif g.reservation is not None:
            self.add("gpu.reservation", g.reservation.model_dump(by_alias=True, exclude_none=True),
                     'only with provisioningModel "reservation"')
        # The reservation's names and project, and the 7-day bound of maxRunDurationSeconds, are
        # checked by their types (components/config/types.py).
        if g.reservation is not None and self._autopilot:
            r = g.reservation
            if r.block is not None:
                self.add("gpu.reservation.block", r.block, "Standard clusters only: this program "
                         "selects a reservation block through a node pool's reservation affinity")
            if r.project is not None:
                self.add("gpu.reservation.project", r.project, "Standard clusters only: this "
                         "program consumes a shared reservation through a node pool's affinity")
        if g.max_run_duration_seconds is not None:
            if self._autopilot:
                self.add("gpu.maxRunDurationSeconds", g.max_run_duration_seconds, "Standard clusters "
                         "only: it is a node pool setting (Autopilot flex-start nodes get GKE's default)")
            elif model != "flex-start":
                self.add("gpu.maxRunDurationSeconds", g.max_run_duration_seconds,
                         'only with provisioningModel "flex-start"')
        if model == "flex-start" and g.auto_repair:
            self.add("gpu.autoRepair", g.auto_repair, "false (or omitted) with flex-start: GKE "
                     "does not auto-repair flex-start nodes")
        if model == "flex-start" and self._version_below(FLEX_START_MIN_GKE_VERSION):
            self.add("cluster.minMasterVersion", self._version_below(FLEX_START_MIN_GKE_VERSION),
                     f"at least {FLEX_START_MIN_GKE_VERSION} for flex-start GPU node pools")

    # ---- the waterfall: gpu.capacity ----------------------------------------------------------
    def _check_capacity(self, g: GpuConfig) -> None:
        assert g.capacity is not None
        for key, value, what in (("provisioningModel", g.provisioning_model, "the kind of a source"),
                                 ("reservation", g.reservation, "a reservation source's name"),
                                 ("maxRunDurationSeconds", g.max_run_duration_seconds,
                                  "a flexStart source's maxRunDurationSeconds"),
                                 ("minNodes", g.min_nodes, "its pools' sizes: a reservation's "
                                  "pool is held at its maxNodes, Spot and flex-start pools scale "
                                  "from 0")):
            if value is not None:
                shown = value.model_dump(by_alias=True, exclude_none=True) if hasattr(value, "model_dump") else value
                self.add(f"gpu.{key}", shown, f"not with gpu.capacity: it says {what} "
                         "(remove this key)", reads=("gpu.capacity",))
        if not g.capacity:
            self.add("gpu.capacity", [], "at least one source, e.g. [{kind: spot}] (or remove "
                     "the key and give gpu.provisioningModel)")
            return
        seen: dict[tuple, int] = {}
        for i, source in enumerate(g.capacity):
            self._check_source(g, i, source)
            identity = source_identity(source)
            if identity in seen:
                self.add(f"gpu.capacity[{i}]", source.model_dump(by_alias=True, exclude_none=True),
                         f"a source listed once: it repeats gpu.capacity[{seen[identity]}]",
                         reads=(f"gpu.capacity[{seen[identity]}]",))
            else:
                seen[identity] = i
        if self._autopilot and len(g.capacity) > 1:
            self.add("gpu.capacity", [s.kind for s in g.capacity], AUTOPILOT_WATERFALL,
                     reads=("cluster.mode",))
        if not self._autopilot and len(g.capacity) > 1 and self._version_below(COMPUTE_CLASS_MIN_GKE_VERSION):
            self.add("cluster.minMasterVersion", self._version_below(COMPUTE_CLASS_MIN_GKE_VERSION),
                     f"at least {COMPUTE_CLASS_MIN_GKE_VERSION} for a waterfall (a custom "
                     "ComputeClass)", reads=("gpu.capacity",))
        if any(s.kind == "flexStart" for s in g.capacity) and self._version_below(FLEX_START_MIN_GKE_VERSION):
            self.add("cluster.minMasterVersion", self._version_below(FLEX_START_MIN_GKE_VERSION),
                     f"at least {FLEX_START_MIN_GKE_VERSION} for flex-start GPU nodes",
                     reads=("gpu.capacity",))
        if self.cluster is not None and not self._autopilot and len(g.capacity) > 1:
            from components.config.stack import compute_class_name
            name = compute_class_name(self.cluster.name)
            if name.startswith(("gke", "autopilot")):
                self.add("cluster.name", self.cluster.name, f"a name not starting with gke or "
                         f"autopilot: the waterfall's ComputeClass is named {name!r}, and GKE "
                         "refuses ComputeClass names with those prefixes", reads=("gpu.capacity",))

    def _check_source(self, g: GpuConfig, i: int, source: CapacitySource) -> None:
        key = f"gpu.capacity[{i}]"
        shape = MACHINE_SHAPES[g.type]
        if source.kind not in KINDS:
            hint = f"{shape.machine_type} has no plain on-demand capacity; " if source.kind in ON_DEMAND_WORDS else ""
            self.add(f"{key}.kind", source.kind, hint + "one of reservation, flexStart, spot "
                     f"(the sources {shape.machine_type} can use)")
        if source.kind == "reservation" and source.name is None:
            self.add(f"{key}.name", None, "required for a reservation source: the reservation's name")
        if source.kind != "reservation":
            for field, value in (("name", source.name), ("block", source.block),
                                 ("project", source.project), ("endTime", source.end_time)):
                if value is not None:
                    self.add(f"{key}.{field}", value, "only with kind reservation",
                             reads=(f"{key}.kind",))
        duration = source.max_run_duration_seconds
        if source.kind != "flexStart" and duration is not None:
            self.add(f"{key}.maxRunDurationSeconds", duration, "only with kind flexStart",
                     reads=(f"{key}.kind",))
        elif duration is not None and not 600 <= duration <= FLEX_START_MAX_RUN_SECONDS:
            self.add(f"{key}.maxRunDurationSeconds", duration, "600 (10 minutes) to "
                     f"{FLEX_START_MAX_RUN_SECONDS} (7 days, flex-start's limit)")
        if self._autopilot:
            pool_settings: tuple[tuple[str, object, str], ...] = (
                ("block", source.block, "a node pool's reservation affinity"),
                ("project", source.project, "a node pool's reservation affinity"),
                ("maxRunDurationSeconds", source.max_run_duration_seconds, "a node pool setting"),
                ("maxNodes", source.max_nodes, "a node pool's bound"),
                ("nodePool", source.node_pool, "a node pool's name"))
            for field, setting, what in pool_settings:
                if setting is not None:
                    self.add(f"{key}.{field}", setting, f"Standard clusters only: {what} "
                             "(Autopilot has no node pools)", reads=("cluster.mode",))

    # ---- node counts --------------------------------------------------------------------------
    def _check_no_pool_settings(self, g: GpuConfig) -> None:
        pool_only = {
            "minNodes": (g.min_nodes, "autoscaling bounds"),
            "maxNodes": (g.max_nodes, "autoscaling bounds"),
            "autoRepair": (g.auto_repair, "auto-repair"),
            "compactPlacement": (g.compact_placement, "compact placement"),
            "diskSizeGb": (g.disk_size_gb, "the node boot disk"),
        }
        for key, (value, what) in pool_only.items():
            if value is not None:
                self.add(f"gpu.{key}", value, f"not allowed on Autopilot: {what} is a node "
                         "pool setting and Autopilot manages nodes itself (remove the key)")

    def _check_pool_counts(self, g: GpuConfig) -> None:
        min_nodes = 0 if g.min_nodes is None else g.min_nodes
        max_nodes = g.nodes if g.max_nodes is None else g.max_nodes
        if min_nodes > g.nodes:
            self.add("gpu.minNodes", min_nodes, f"at most gpu.nodes ({g.nodes})", reads=("gpu.nodes",))
        if max_nodes < g.nodes and g.capacity is None:
            self.add("gpu.maxNodes", max_nodes, f"at least gpu.nodes ({g.nodes}): the run "
                     "needs that many nodes at once", reads=("gpu.nodes",))
        # Compact placement with flex-start is allowed: Cluster Toolkit's gke-node-pool
        # precondition supports it on A3 Ultra, A4 and H4D (modules/compute/gke-node-pool/
        # main.tf @104708037, 2026-06-25), the only machines this program deploys.
        if g.provisioning_model == "flex-start" and min_nodes > 0 and g.capacity is None:
            self.add("gpu.minNodes", min_nodes, "0 (or omitted) with flex-start: a minimum "
                     "would hold a granted node, and pay for it, for up to 7 days "
                     "(maxRunDurationSeconds) with nothing running on it")
        if g.capacity and all(s.kind in KINDS for s in g.capacity):
            shape = MACHINE_SHAPES[g.type]
            plan = capacity_plan(g, machine_type=shape.machine_type)
            if plan.reach < g.nodes:
                reach = ", ".join(f"{s.label} {s.max_nodes}" for s in plan.sources)
                self.add("gpu.capacity", [s.kind for s in g.capacity],
                         f"sources whose node pools reach gpu.nodes ({g.nodes}): together they "
                         f"hold at most {plan.reach} ({reach}); raise a source's maxNodes (or "
                         "gpu.maxNodes) or add a source",
                         reads=("gpu.nodes", "gpu.maxNodes",
                                *(f"gpu.capacity[{i}].maxNodes" for i in range(len(g.capacity)))))
            names: dict[str, int] = {}
            identities = [source_identity(s) for s in g.capacity]
            for i, source in enumerate(plan.sources):
                if source.pool_name in names and identities[i] != identities[names[source.pool_name]]:
                    self.add(f"gpu.capacity[{i}].nodePool", source.pool_name,
                             f"a pool name of its own: gpu.capacity[{names[source.pool_name]}] "
                             "has it", reads=(f"gpu.capacity[{names[source.pool_name]}]",))
                names.setdefault(source.pool_name, i)
            # `<machine>-pool` stands for the former provisioningModel pool (its Pulumi resource
            # `gpu-pool` and, for Spot and flex-start, a hashed GKE name): one source can be it.
            legacy = legacy_pool_name(shape.machine_type)
            keeping = [i for i, source in enumerate(g.capacity) if source.node_pool == legacy]
            for i in keeping[1:]:
                if plan.sources[i].pool_name == plan.sources[keeping[0]].pool_name:
                    continue      # one pool name for both: said above
                self.add(f"gpu.capacity[{i}].nodePool", g.capacity[i].node_pool,
                         f"another name: gpu.capacity[{keeping[0]}] keeps the former provisioningModel "
                         "pool under it, and one pool can serve one source",
                         reads=(f"gpu.capacity[{keeping[0]}].nodePool",))

    # ---- capacity that ends on schedule -------------------------------------------------------
    def _run_durations(self, g: GpuConfig) -> list[tuple[str, int]]:
        """(key, seconds) of each flex-start node lifetime the config gives, valid ones only (a
        bad one has its own problem)."""
        found = []
        if g.capacity is None:
            if g.provisioning_model == "flex-start" and g.max_run_duration_seconds is not None:
                found.append(("gpu.maxRunDurationSeconds", g.max_run_duration_seconds))
        else:
            found += [(f"gpu.capacity[{i}].maxRunDurationSeconds", s.max_run_duration_seconds)
                      for i, s in enumerate(g.capacity)
                      if s.kind == "flexStart" and s.max_run_duration_seconds is not None]
        return [(key, seconds) for key, seconds in found if 600 <= seconds <= FLEX_START_MAX_RUN_SECONDS]

    def _check_capacity_outlives_a_checkpoint(self, j: JobConfig) -> None:
        """A flex-start node must live longer than one checkpoint interval (checkpointEverySteps
        x the planner's step time): one that ends sooner is gone before the run's first
        checkpoint on it, whatever the driver tells the trainer."""
        from jobs.plan.checkpoint_interval import load_interruption_priors

        if self.gpu is None or j.checkpoint_every_steps < 1:
            return
        step = load_interruption_priors().step_seconds
        if not step.value:
            return
        interval = j.checkpoint_every_steps * step.value
        for key, seconds in self._run_durations(self.gpu):
            if seconds <= interval:
                self.add(key, seconds, f"longer than one checkpoint interval: job.checkpointEverySteps "
                         f"({j.checkpoint_every_steps}) x {step.value:.0f} s a step (the planner's step "
                         f"time, {step.label()}: data/interruption-priors.yaml) = {interval:.0f} s; a node "
                         "that ends sooner is gone before its first checkpoint. Raise it, or checkpoint "
                         "more often", reads=("job.checkpointEverySteps",))
