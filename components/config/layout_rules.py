"""The rules of ``gke-grpo:job.layout``: a split layout's pools against the stack's GPU nodes and
capacity sources, and its settings against the framework. A mixin of rules.py's ``_Rules``; the
release-dependent checks (does this release ship the asynchronous trainer) are preflight's
(jobs/plan/preflight/layout_rules.py), which sees the release a deployed stack keeps."""

from __future__ import annotations

from typing import Any

from components.config.capacity import KINDS, capacity_plan, reference_of, resolve_reference
from components.config.facts import MACHINE_SHAPES
from components.config.models import ClusterConfig, GpuConfig, JobConfig, LayoutConfig, PoolConfig
from jobs.contract.layouts import ASYNCHRONOUS_TRAINERS, FRAMEWORK_SETTINGS, POOLS

LAYOUT = "job.layout"


class _LayoutRules:
    """The ``job.layout`` checks; ``_Rules`` provides ``add``, ``cluster``, ``gpu`` and ``job``."""

    cluster: ClusterConfig | None
    gpu: GpuConfig | None

    def add(self, key: str, given: Any, allowed: str, reads: tuple[str, ...] = ()) -> None:
        raise NotImplementedError

    def _check_layout(self, j: JobConfig) -> None:
        layout = j.layout
        if layout.kind == "colocated":
            for field, key in (("asynchronous_trainer", "asynchronousTrainer"), ("rollout", "rollout"),
                               ("trainer", "trainer"), *((f, k) for f, k, _ in _SETTING_KEYS)):
                value = getattr(layout, field)
                if value is not None:
                    shown = value.model_dump(by_alias=True) if isinstance(value, PoolConfig) else value
                    self.add(f"{LAYOUT}.{key}", shown, "only with layout.kind split (remove it, "
                             "or set kind: split)", reads=(f"{LAYOUT}.kind",))
            return
        self._check_split_settings(j, layout)
        if j.colocated_generation is False or j.generation_nodes:
            key, value = (("job.colocatedGeneration", False) if j.colocated_generation is False
                          else ("job.generationNodes", j.generation_nodes))
            self.add(key, value, "not with layout.kind split: the layout's rollout pool is the "
                     "generation's nodes (remove this key)", reads=(f"{LAYOUT}.kind",))
        pools = [(name, getattr(layout, name)) for name in POOLS]
        for name, pool in pools:
            if pool is None:
                self.add(f"{LAYOUT}.{name}", None, f"required with layout.kind split: "
                         f"{{nodes: N, capacity: <source>}} for the {name} pool")
        if any(pool is None for _, pool in pools) or self.gpu is None:
            return
        g = self.gpu
        total = sum(pool.nodes for _, pool in pools)
        if total != g.nodes:
            self.add(f"{LAYOUT}.rollout.nodes", layout.rollout.nodes if layout.rollout else None,
                     f"rollout.nodes + trainer.nodes = gpu.nodes ({g.nodes}), the run's GPU nodes; "
                     f"they add up to {total}", reads=(f"{LAYOUT}.trainer.nodes", "gpu.nodes"))
        self._check_pool_sources(j, g, layout, pools, total)

    def _check_pool_sources(self, j: JobConfig, g: GpuConfig, layout: LayoutConfig,
                            pools: list, total: int) -> None:
        if g.capacity is not None and not all(s.kind in KINDS for s in g.capacity):
            return       # the capacity rules say what is wrong with the sources
        plan = capacity_plan(g, machine_type=MACHINE_SHAPES[g.type].machine_type)
        offered = ", ".join(dict.fromkeys(reference_of(s) for s in plan.sources))
        drawn: dict[int, list[tuple[str, int]]] = {}
        for name, pool in pools:
            index = resolve_reference(plan, pool.capacity)
            if index is None:
                self.add(f"{LAYOUT}.{name}.capacity", pool.capacity, f"a source of the stack "
                         f"({offered})", reads=("gpu.capacity", "gpu.provisioningModel"))
                continue
            drawn.setdefault(index, []).append((name, pool.nodes))
        if total != g.nodes:
            return       # said above; a source's maximum would only repeat it
        for index, users in drawn.items():
            source = plan.sources[index]
            wanted = sum(nodes for _, nodes in users)
            if wanted > source.max_nodes:
                name = users[-1][0]
                self.add(f"{LAYOUT}.{name}.nodes", dict(users)[name],
                         f"at most the {source.max_nodes} node(s) {source.label} can hold "
                         f"(its pool's maximum){' together with the ' + users[0][0] + ' pool' if len(users) > 1 else ''}; "
                         "raise the source's maxNodes (or gpu.maxNodes) or draw from another source",
                         reads=(f"gpu.capacity[{index}].maxNodes" if g.capacity else "gpu.maxNodes",))
        if len(drawn) > 1 and not FRAMEWORK_SETTINGS[j.framework].pools_steerable:
            assert layout.rollout is not None, "both pools were checked present"
            trainer_source = resolve_reference(plan, layout.trainer.capacity if layout.trainer else None)
            self.add(f"{LAYOUT}.rollout.capacity", layout.rollout.capacity,
                     f"the trainer pool's source ({reference_of(plan.sources[trainer_source or 0])}): "
                     f"{FRAMEWORK_SETTINGS[j.framework].why_not_steerable}",
                     reads=(f"{LAYOUT}.trainer.capacity", "job.framework"))

    def _check_split_settings(self, j: JobConfig, layout: LayoutConfig) -> None:
        allowed = ASYNCHRONOUS_TRAINERS[j.framework]
        if layout.asynchronous_trainer is not None and layout.asynchronous_trainer not in allowed:
            self.add(f"{LAYOUT}.asynchronousTrainer", layout.asynchronous_trainer,
                     f"{' or '.join(allowed)} for job.framework {j.framework}",
                     reads=("job.framework",))
        trainer = layout.asynchronous_trainer or allowed[0]
        for field, key, (framework, trainers, problem) in _SETTING_KEYS:
            value = getattr(layout, field)
            if value is None:
                continue
            if framework != j.framework or trainer not in trainers:
                self.add(f"{LAYOUT}.{key}", value, f"only with {framework} "
                         f"{' or '.join(trainers)} (this run: {j.framework} {trainer})",
                         reads=("job.framework", f"{LAYOUT}.asynchronousTrainer"))
                continue
            allowed_text = problem(value)
            if allowed_text:
                self.add(f"{LAYOUT}.{key}", value, allowed_text)


def _staleness_problem(value: float) -> str | None:
    # verl 0.9.1 verl/experimental/fully_async_policy/fully_async_rollouter.py line 353 asserts
    # `staleness_threshold >= 0`; it sets no upper bound, and neither does this program.
    return None if value >= 0 else "0 or more (verl asserts staleness_threshold >= 0)"


def _at_least_one(value: int) -> str | None:
    return None if value >= 1 else "at least 1"


# (model field, stack key, (framework, asynchronous trainers it applies to, value rule))
_SETTING_KEYS = (
    ("staleness_threshold", "stalenessThreshold", ("verl", ("fully-async",), _staleness_problem)),
    ("trigger_parameter_sync_step", "triggerParameterSyncStep", ("verl", ("fully-async",), _at_least_one)),
    ("max_trajectory_age_steps", "maxTrajectoryAgeSteps", ("nemo-rl", ("async-grpo",), _at_least_one)),
)
