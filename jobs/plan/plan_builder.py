"""The run plan of one run, built by the Pulumi program (and the CLI) from the run's spec and its
rendered trainer command: what the run driver on the head reads (jobs/contract/run_plan.py).
"""

from __future__ import annotations

from typing import Any

from jobs.contract.layout import DATA_LAYOUT
from jobs.contract.layouts import completion_text
from jobs.contract.run_plan import DEFAULT_MAX_RESTARTS, PYTHON, Command, RunPlan
from jobs.contract.spec import GrpoSpec
from jobs.plan.render import RenderedJob, capacity_end_overrides

# The data and model staging of the plan's prepare stage, run on the head (jobs/head/staging.py).
STAGING_MODULE = "jobs.head.staging"


def build_plan(spec: GrpoSpec, rendered: RenderedJob, *, deadline_seconds: float | None, gpu_wait_seconds: float,
               max_restarts: int = DEFAULT_MAX_RESTARTS, run_dir: str | None = None,
               health: dict[str, Any] | None = None,
               prune_checkpoints_keep: int | None = None,
               after_training: tuple[Command, Command | None] | None = None,
               capacity_end: dict[str, Any] | None = None,
               metrics: dict[str, Any] | None = None) -> RunPlan:
    """The plan of one run from its spec and its rendered training command, plus the budgets
    that are not part of the run's identity. ``health`` (the gate's settings) and
    ``prune_checkpoints_keep`` (verl's checkpoint pruning) switch those driver stages on;
    ``after_training`` (export, evaluate: jobs/plan/after_training.py) the stages after a
    completed trainer; ``capacity_end`` (jobs/plan/capacity_end.py) tells each trainer start when
    its capacity ends: ``rendered`` must then come from render(spec, its margin); ``metrics``
    (metrics_port, gpu_hourly_rate, currency) the driver's own metrics endpoint."""
    if not rendered.argv:
        raise ValueError("the rendered job has no argv")
    told = capacity_end_overrides(spec, None if capacity_end is None else capacity_end["margin_seconds"])
    if not set(told) <= set(rendered.overrides):
        raise ValueError("the plan's capacity_end needs the job rendered with its margin "
                         "(render(spec, capacity_margin_seconds)): the trainer would not be told")
    revisions = ((("--model-revision", spec.model_revision) if spec.model_revision else ())
                 + (("--dataset-revision", spec.dataset_revision) if spec.dataset_revision else ()))
    prepare = Command(argv=(PYTHON, "-m", STAGING_MODULE, "--framework", spec.framework,
                            "--model", spec.model, "--dataset", spec.dataset, *revisions))
    return RunPlan(
        run_id=spec.run_id, attempt=spec.attempt, framework=spec.framework,
        run_dir=run_dir or DATA_LAYOUT.run_dir(spec.run_id),
        checkpoint_dir=spec.checkpoint_dir, prepare=prepare,
        gpus=spec.total_gpus, gpus_per_node=spec.gpus_per_node,
        gpu_wait_seconds=float(gpu_wait_seconds),
        trainer=Command(argv=tuple(rendered.argv), cwd=rendered.cwd),
        deadline_seconds=None if deadline_seconds is None else float(deadline_seconds),
        max_restarts=int(max_restarts), health=health,
        prune_checkpoints_keep=prune_checkpoints_keep if spec.framework == "verl" else None,
        export=after_training[0] if after_training else None,
        evaluate=after_training[1] if after_training else None,
        capacity_end=capacity_end, total_steps=spec.total_steps,
        pools={pool.name: pool.nodes for pool in spec.pools} or None,
        completion_text=completion_text(spec.framework, spec.asynchronous_trainer),
        **(metrics or {}),
    )
