"""A split layout's run (gke-grpo:job.layout split, jobs/contract/layouts.py), as the report and
`gke-grpo status` show it: the asynchronous trainer, each pool with its nodes, capacity source
and cost per hour, and how long each side waited for the other.

    is_split(inputs) -> bool
    pool_views(inputs) -> [PoolView]             # rollout first
    wait_figures(inputs) -> WaitFigures | None   # from the framework's TensorBoard scalars
    split_html(inputs) -> str                    # the report's section ("" for a colocated run)
    split_status_rows(inputs) -> [("layout", ...), ("pools", ...), ("waits", ...)]
    pool_node_rows(nodes, wanted) -> [("GPU pools", "rollout 1 up of 1, trainer 0 up of 1")]

What they read:
- the stack's run spec (--stack): ``layout``, ``asynchronous_trainer`` and each pool's nodes;
- the stack output ``gpuCapacity``'s ``pools`` (components/capacity_output.py): each pool's
  worker group, nodes, capacity source (its label, as the preview prints it) and ``hourly``, the
  pool's nodes x its source's hourly rate (data/prices.yaml), in the output's ``currency``;
- the trainer starts' placement records (trainer_start ``gpu_nodes``, each node's ``pool``:
  jobs/head/gpu_wait.py GpuNode.placement), for the nodes each pool got and their sources, and
  without the stack output, with the run's per-source rates (jobs/cli/run_cost.py) for the cost;
- the waits the asynchronous trainer logs to TensorBoard (jobs/cli/metrics.py ASYNC_TAGS, each
  tag's source line there): the trainer's wait for rollouts per logged step (verl ``timing_s/gen``,
  NeMo RL ``timing/train/exposed_generation``) against the step time (``timing_s/step``,
  ``timing/train/total_step_time``), verl fully-async's own ``fully_async/trainer/idle_ratio``
  and the rollouter's ``fully_async/rollouter/idle_ratio``. NeMo RL logs no idle figure for the
  generation side.

Records are the run directory's (a shared volume): every value is checked before it is shown.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jobs.cli.gpu_status import placement_text
from jobs.cli.metrics import StepMetrics, is_asynchronous
from jobs.cli.report_html import html_table, money_text, page_text
from jobs.contract.capacity import count_sources, describe_sources
from jobs.contract.layouts import POOL_GROUPS, POOLS, SPLIT

if TYPE_CHECKING:
    from jobs.cli.report_inputs import ReportInputs

# Rows of the waits table shown per step, the latest ones.
WAIT_ROWS = 10


@dataclass(frozen=True)
class PoolView:
    name: str                              # rollout | trainer
    group: str                             # its Ray worker group
    wanted: int | None                     # nodes the stack gives it
    stack_source: str | None = None        # gpuCapacity's label of its source ("Spot")
    placed: list[dict[str, Any]] = field(default_factory=list)   # the latest start's nodes of it
    hourly: float | None = None            # what its nodes cost an hour while up
    currency: str = ""
    hourly_basis: str = ""

    @property
    def placed_text(self) -> str:
        if not self.placed:
            return "-"
        return placement_text({"gpu_nodes": self.placed, "capacity_sources": count_sources(self.placed)})

    @property
    def source_text(self) -> str:
        if self.stack_source:
            return self.stack_source
        return describe_sources(count_sources(self.placed)) if self.placed else "unknown"


@dataclass(frozen=True)
class WaitFigures:
    """The trainer's wait for rollouts over the logged steps, and the rollouter's idle ratio."""
    framework: str
    steps: list[StepMetrics]               # the rows that carry a wait figure, in step order
    wait_s: float                          # trainer wait, summed over the steps with a step time
    step_s: float                          # their step times, summed
    median_wait_s: float | None
    trainer_idle: float | None             # verl fully-async's own ratio, mean over the steps
    rollouter_idle: float | None           # verl fully-async, mean over the steps

    @property
    def share(self) -> float | None:
        return self.wait_s / self.step_s if self.step_s > 0 else None

    @property
    def latest(self) -> StepMetrics:
        return self.steps[-1]


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 10_000 else None


def _latest_placement(inputs: ReportInputs) -> list[dict[str, Any]]:
    starts = [e.extra for e in inputs.timeline.events
              if e.event == "trainer_start" and isinstance(e.extra.get("gpu_nodes"), list)]
    return [n for n in starts[-1]["gpu_nodes"] if isinstance(n, dict)] if starts else []


def _stack_pools(inputs: ReportInputs) -> list[dict[str, Any]]:
    pools = (inputs.gpu_capacity or {}).get("pools")
    return [p for p in pools if isinstance(p, dict) and p.get("pool") in POOLS] if isinstance(pools, list) else []


def asynchronous_trainer(inputs: ReportInputs) -> str | None:
    """The spec's asynchronous trainer, else the one the TensorBoard tags show."""
    if inputs.spec is not None and inputs.spec.split:
        return inputs.spec.asynchronous_trainer
    tags = {t for start in inputs.metrics.starts for t in start.tags}
    if not is_asynchronous(inputs.framework, tags):
        return None
    if inputs.framework == "nemo-rl":
        return "async-grpo"
    return "fully-async" if any(t.startswith("fully_async/") for t in tags) else "one-step-off"


def is_split(inputs: ReportInputs) -> bool:
    """The spec says so; without it, the stack output's pools or the placement records' pools."""
    if inputs.spec is not None:
        return inputs.spec.split
    return bool(_stack_pools(inputs)) or any(n.get("pool") in POOLS for n in _latest_placement(inputs))


def pool_views(inputs: ReportInputs) -> list[PoolView]:
    stack = {p["pool"]: p for p in _stack_pools(inputs)}
    wanted: dict[str, int | None] = {p.name: p.nodes for p in inputs.spec.pools} if inputs.spec else {}
    placed = _latest_placement(inputs)
    currency = (inputs.gpu_capacity or {}).get("currency")
    views = []
    for name in POOLS:
        row = stack.get(name, {})
        nodes = [n for n in placed if n.get("pool") == name]
        want = wanted.get(name, _count(row.get("nodes")))
        hourly, cur, basis = _finite(row.get("hourly")), str(currency or ""), "the stack's gpuCapacity"
        if hourly is None and inputs.cost is not None and nodes:
            rates = [inputs.cost.rates.get(str(n.get("source"))) for n in nodes]
            per_node = [r.per_node_hour if r is not None else None for r in rates]
            if all(p is not None for p in per_node):
                hourly = sum(p for p in per_node if p is not None)
                cur, basis = inputs.cost.currency, "its placed nodes' sources (data/prices.yaml)"
        label = row.get("source")
        views.append(PoolView(name, str(row.get("workerGroup") or POOL_GROUPS[name]), want,
                              label[:80] if isinstance(label, str) and label.isprintable() else None,
                              nodes, hourly, cur, basis if hourly is not None else ""))
    return views


def wait_figures(inputs: ReportInputs) -> WaitFigures | None:
    rows = [r for r in inputs.metrics.merged() if r.get("trainer_wait") is not None]
    if not rows or inputs.framework is None:
        return None
    timed = [r for r in rows if r.get("step_time")]
    wait = sum(r.get("trainer_wait") or 0.0 for r in timed)
    step = sum(r.get("step_time") or 0.0 for r in timed)

    def mean(name: str) -> float | None:
        values = [v for v in (r.get(name) for r in inputs.metrics.merged()) if v is not None]
        return statistics.fmean(values) if values else None

    return WaitFigures(inputs.framework, rows, wait, step,
                       statistics.median(r.get("trainer_wait") or 0.0 for r in rows),
                       mean("trainer_idle_ratio"), mean("rollouter_idle_ratio"))


def layout_text(inputs: ReportInputs) -> str:
    trainer = asynchronous_trainer(inputs)
    spec = inputs.spec
    text = f"{SPLIT}: rollout and trainer pools, {inputs.framework or 'the framework'}'s " + \
        (f"{trainer} trainer" if trainer else "asynchronous trainer")
    if spec is not None and spec.split:
        knobs = [f"{k} {v:g}" for k, v in (("staleness threshold", spec.staleness_threshold),
                                          ("parameter sync every", spec.trigger_parameter_sync_step),
                                          ("max trajectory age", spec.max_trajectory_age_steps))
                 if v is not None]
        text += f" ({', '.join(knobs)})" if knobs else ""
    return text


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} s"


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def wait_text(figures: WaitFigures) -> str:
    """One line: the latest step's wait, and over the run."""
    last = figures.latest
    text = f"step {last.step}: trainer waited {_seconds(last.get('trainer_wait'))}"
    if last.get("step_time"):
        text += f" of {_seconds(last.get('step_time'))}"
    if last.get("rollouter_idle_ratio") is not None:
        text += f", rollouter idle {_ratio(last.get('rollouter_idle_ratio'))}"
    if figures.share is not None:
        text += f"; over {len(figures.steps)} logged steps the trainer waited {figures.share:.0%} of its time"
    return text


def pool_line(view: PoolView) -> str:
    wanted = "?" if view.wanted is None else view.wanted
    text = f"{view.name} {wanted} node(s), {view.source_text}"
    if view.hourly is not None:
        text += f", {money_text(view.hourly, view.currency)}/h"
    return text


def split_status_rows(inputs: ReportInputs) -> list[tuple[str, str]]:
    """`status`: the layout, the pools and the latest waits (empty for a colocated run)."""
    if not is_split(inputs):
        return []
    rows = [("layout", layout_text(inputs)), ("pools", "; ".join(pool_line(v) for v in pool_views(inputs)))]
    figures = wait_figures(inputs)
    rows.append(("waits", wait_text(figures) + " [TensorBoard]" if figures else
                 "no wait figure in the TensorBoard files yet"))
    return rows


def _wait_rows(figures: WaitFigures) -> list[tuple[Any, ...]]:
    rows: list[tuple[Any, ...]] = []
    for r in figures.steps[-WAIT_ROWS:]:
        step, wait = r.get("step_time"), r.get("trainer_wait")
        rows.append((r.step, _seconds(wait), _seconds(step),
                     "-" if not step or wait is None else f"{wait / step:.0%}",
                     _ratio(r.get("trainer_idle_ratio")), _ratio(r.get("rollouter_idle_ratio")),
                     _seconds(r.get("weight_sync"))))
    return rows


_WAIT_TAGS = {
    "fully-async": ("verl's timing_s/gen (the trainer blocked on the rollouts' queue, summed over each "
                    "parameter-sync cycle) against timing_s/step; fully_async/trainer/idle_ratio and "
                    "fully_async/rollouter/idle_ratio as verl computes them"),
    "one-step-off": ("verl's timing_s/gen (the trainer waiting for the previous step's background "
                     "generation) against timing_s/step; verl logs no rollouter idle ratio for it"),
    "async-grpo": ("NeMo RL's timing/train/exposed_generation (the training loop waiting for "
                   "trajectories) against timing/train/total_step_time; NeMo RL logs no idle "
                   "figure for the generation side"),
}


def split_html(inputs: ReportInputs) -> str:
    """The report's section on the split layout; "" for a colocated run (the page stays as it was)."""
    if not is_split(inputs):
        return ""
    views = pool_views(inputs)
    parts = ['<h2 id="split-layout">Split layout: rollout and trainer pools</h2>',
             f"<p>{page_text(layout_text(inputs))}.</p>",
             html_table([(v.name, v.group, "?" if v.wanted is None else v.wanted, v.source_text,
                          v.placed_text, "-" if v.hourly is None else money_text(v.hourly, v.currency) + " /h",
                          v.hourly_basis or "-") for v in views],
                        ("pool", "Ray worker group", "nodes", "capacity source", "nodes placed (latest start)",
                         "cost per hour", "rate from"), table_id="pools-table")]
    total = [v.hourly for v in views]
    if all(h is not None for h in total):
        parts.append(f'<p class="sub">Both pools: {page_text(money_text(sum(h for h in total if h is not None), views[0].currency))} '
                     "per hour while their nodes are up.</p>")
    figures = wait_figures(inputs)
    parts.append("<h3>How long each side waited for the other</h3>")
    if figures is None:
        parts.append('<p class="note">No wait figure in the TensorBoard files (yet).</p>')
        return "\n".join(parts)
    summary = [("trainer waited for rollouts", f"{_seconds(figures.wait_s)} of {_seconds(figures.step_s)} "
                f"({_ratio(figures.share)}) over {len(figures.steps)} logged steps"),
               ("median wait per logged step", _seconds(figures.median_wait_s))]
    if figures.trainer_idle is not None:
        summary.append(("trainer idle ratio (mean)", _ratio(figures.trainer_idle)))
    if figures.rollouter_idle is not None:
        summary.append(("rollouter idle ratio (mean)", _ratio(figures.rollouter_idle)))
    parts.append(html_table(summary, ("", "value"), table_id="waits-summary"))
    parts.append(html_table(_wait_rows(figures), ("step", "trainer wait", "step time", "wait share",
                                                  "trainer idle", "rollouter idle", "weight sync"),
                            table_id="waits-table"))
    source = _WAIT_TAGS.get(asynchronous_trainer(inputs) or "", "the framework's wait metrics")
    parts.append(f'<p class="sub">The latest {min(len(figures.steps), WAIT_ROWS)} logged steps. From '
                 f"{page_text(source)} (jobs/cli/metrics.py names each tag's source line).</p>")
    return "\n".join(parts)


def pool_node_rows(nodes: Sequence[Mapping[str, Any]], wanted: Mapping[str, int]) -> list[tuple[str, str]]:
    """Live `status`: each pool's GPU nodes up (the Ray nodes advertising its resource,
    jobs/cli/gpu_status.py gpu_nodes) against the nodes it wants; [] when no node or wish has a pool."""
    if not wanted and not any(n.get("pool") for n in nodes):
        return []
    parts = []
    for name in POOLS:
        up = [n for n in nodes if n.get("pool") == name]
        text = f"{name} {len(up)} up" + (f" of {wanted[name]}" if name in wanted else "")
        if up:
            text += f" ({describe_sources(count_sources([dict(n) for n in up]))})"
        parts.append(text)
    return [("GPU pools", ", ".join(parts))]
