"""One self-contained HTML page about a run, with its pictures embedded (and written as PNGs
beside it), titled with the run id. From the top: a run summary (model, framework, GPUs,
capacity, settings), a table of attempts and trainer starts, the latest resumable checkpoint and
the command that resumes it, the headline cards, reward and response length, training health
(KL, entropy, gradient norm, clipped fraction, learning rate), validation, throughput and MFU,
a timeline of attempts, restarts, GPU waits and checkpoints, recovery, goodput and cost.

    gke-grpo report RUN [--run-dir DIR] [--out DIR] [--stack STACK]
    build_report(inputs) -> Report(html, figures)

The page needs nothing but itself (no scripts, no external files): the PNGs are data URIs. Each
figure's caption names its axes (read from the matplotlib axes that drew it; each PNG carries
the same text in its metadata) and says what to look for. Figures: jobs/cli/report_figures.py;
the opening sections: jobs/cli/report_sections.py; style (screen and print): report_html.py.
When the stack given is not the run's (another run id), a banner opens the page.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jobs.cli.goodput import BUCKET_LABELS, BUCKETS
from jobs.cli.metrics import StepMetrics
from jobs.cli.output_files import write_output
from jobs.cli.recovery import recoveries, recovery_rows, seconds_text
from jobs.cli.report_figures import (
    Figure,
    goodput_figure,
    health_figure,
    length_figure,
    reward_figure,
    throughput_figure,
    timeline_figure,
)
from jobs.cli.report_html import REPORT_CSS, figures_html, hours_text, html_table, money_text, page_text, utc_text
from jobs.cli.report_inputs import ReportInputs
from jobs.contract.spec import GrpoSpec

__all__ = ["CostBasis", "Report", "ReportInputs", "build_report", "collect_inputs", "planned_steps",
           "run_status_rows", "stage_node_hours"]


@dataclass
class Report:
    html: str
    figures: list[Figure]

    def write(self, out_dir: str | Path) -> Path:
        """The page and its PNGs into ``out_dir`` (created); OSError when a file cannot be
        written (a full disk; a FIFO or a symlink where one of them goes: not followed)."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        for fig in self.figures:
            write_output(out / f"{fig.name}.png", fig.png, follow_symlinks=False)
        page = out / "report.html"
        write_output(page, self.html.encode("utf-8"), follow_symlinks=False)
        return page


# ---- page ---------------------------------------------------------------------------------------

def build_report(inputs: ReportInputs) -> Report:
    from jobs.cli.report_sections import attempts_html, checkpoint_html, summary_html, validation_html
    from jobs.cli.split_view import split_html

    rows = inputs.metrics.merged()
    training = [r for r in rows if r.is_training]
    g = inputs.goodput
    figures = [f for f in (
        reward_figure(rows, f"{inputs.run_id}"),
        length_figure(training),
        health_figure(training, inputs.framework),
        throughput_figure(training),
        timeline_figure(inputs),
        goodput_figure(g),
    ) if f is not None]
    by_name = {f.name: f for f in figures}
    latest = training[-1] if training else None
    last_val = next((r.get("val_reward") for r in reversed(rows) if r.get("val_reward") is not None), None)
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{page_text(inputs.run_id)}: GRPO run report</title><style>{REPORT_CSS}</style></head><body>",
        f'<h1 id="run-id">{page_text(inputs.run_id)}</h1>',
        f'<div class="sub">GRPO run report · {page_text(inputs.framework or "framework unknown")} · '
        f'{"live" if g.live else "ended"} · first start {page_text(utc_text(inputs.timeline.first_time))} · '
        f"report of {page_text(utc_text(inputs.now))} · {page_text(inputs.run_dir)}</div>",
    ]
    warning = inputs.identity_warning
    if warning:
        parts.append(f'<div class="banner" id="stack-mismatch" role="alert">Not this stack\'s run: '
                     f"{page_text(warning)}.</div>")
    parts.append(summary_html(inputs))
    if inputs.dashboard_url:           # the stack's Cloud Monitoring dashboard (--stack)
        parts.append(f'<p id="dashboard">Live: <a href="{page_text(inputs.dashboard_url)}">the '
                     "stack's Cloud Monitoring dashboard</a></p>")
    parts.append(_cards_html(inputs, latest, last_val))
    parts.append(attempts_html(inputs))
    split = split_html(inputs)         # a split layout's pools and waits; nothing when colocated
    if split:
        parts.append(split)
    parts.append(checkpoint_html(inputs))
    parts.append('<h2 id="learning">Learning</h2>')
    parts.append(figures_html([by_name[n] for n in ("reward", "response_length") if n in by_name]))
    if not training:
        parts.append('<p class="note">No training step in the TensorBoard files (yet).</p>')
    parts.append('<h2 id="health">Training health</h2>')
    if "training_health" in by_name:
        parts.append(figures_html([by_name["training_health"]]))
    else:
        parts.append('<p class="note">No KL, entropy, gradient norm, clipped fraction or learning rate in '
                     "the TensorBoard files (yet).</p>")
    parts.append(validation_html(inputs))
    parts.append("<h3>Held-out evaluation (GSM8K test split)</h3>")
    parts.append(_eval_html(inputs, latest, last_val))
    parts.append('<h2 id="throughput">Throughput</h2>')
    if "throughput" in by_name:
        parts.append(figures_html([by_name["throughput"]]))
        parts.append(_median_table(training[-20:]))
    parts.append('<h2 id="timeline">Timeline</h2>')
    if "timeline" in by_name:
        parts.append(figures_html([by_name["timeline"]]))
    if inputs.timeline.restarts:
        parts.append(html_table([(utc_text(r.time), r.attempt, r.start, r.reason, r.exit_code,
                                  "-" if r.last_checkpoint_step is None else r.last_checkpoint_step)
                                 for r in inputs.timeline.restarts],
                                ("restart at", "attempt", "start", "reason", "exit code", "resumed from step")))
    parts.append(_recovery_html(inputs))
    parts.append('<h2 id="goodput">Goodput</h2>')
    if "goodput" in by_name:
        parts.append(figures_html([by_name["goodput"]]))
    parts.append(html_table([(BUCKET_LABELS[b], hours_text(g.productive_s if b == "productive" else g.badput_s[b]),
                              "-" if g.share(b) is None else f"{g.share(b):.1%}")
                             for b in ("productive", *BUCKETS)] + [("wall clock" + (" so far" if g.live else ""),
                                                                    hours_text(g.wall_s), "100%")],
                            ("where the time went", "hours", "share")))
    if g.lost_steps:
        parts.append(f'<p class="sub">{g.lost_steps} step(s) were redone after restarts.</p>')
    parts.append('<h2 id="cost">Cost</h2>')
    parts.append(_cost_html(inputs))
    notes = list(g.notes)
    if notes:
        parts.append("<h2>Notes</h2><ul>" + "".join(f'<li class="note">{page_text(n)}</li>' for n in notes) + "</ul>")
    skipped = inputs.data_warnings()
    if skipped:
        parts.append("<h2>Data left out</h2><p class=\"sub\">Records of the run directory that could not be "
                     "used; the page shows the rest.</p><ul>"
                     + "".join(f'<li class="note">{page_text(n)}</li>' for n in skipped) + "</ul>")
    parts.append('<p class="sub">Goodput: productive training time / wall-clock time since the first start '
                 "(docs/metrics-and-report.md). Metrics: the frameworks' own TensorBoard files under "
                 f"{page_text(inputs.run_dir)}/tensorboard/.</p>")
    parts.append("</body></html>")
    return Report("\n".join(parts), figures)


def _cards_html(inputs: ReportInputs, latest: StepMetrics | None, last_val: float | None) -> str:
    rows = inputs.metrics.merged()
    g = inputs.goodput
    baseline = next((r.get("val_reward") for r in rows if r.step == 0 and r.get("val_reward") is not None), None)
    steps_text = "-" if latest is None else (
        f"{latest.step}" + (f" of {inputs.planned_steps}" if inputs.planned_steps else ""))
    reward = None if latest is None else latest.get("reward")
    cards = [("goodput", "-" if g.goodput is None else f"{g.goodput:.1%}" + (" (upper bound)" if g.upper_bound else "")),
             ("steps", steps_text),
             ("reward (latest)", "-" if reward is None else f"{reward:.3f}"),
             ("validation: step 0 -> latest", "-" if baseline is None else
              f"{baseline:.3f} -> {last_val:.3f}" if last_val is not None else f"{baseline:.3f}"),
             ("GSM8K test: base -> trained", _eval_card(inputs.eval_results)),
             ("cost so far", "-" if inputs.cost is None else money_text(inputs.cost.so_far, inputs.cost.currency))]
    return '<div class="cards">' + "".join(f'<div class="card"><div class="label">{page_text(k)}</div>'
                                           f'<div class="big">{page_text(v)}</div></div>' for k, v in cards) + "</div>"


def _median_table(recent: list[StepMetrics]) -> str:
    def med(name: str) -> float | None:
        vals = sorted(v for v in (r.get(name) for r in recent) if v is not None)
        return vals[len(vals) // 2] if vals else None
    tps, mfu, st = med("tokens_per_sec_per_gpu"), med("mfu"), med("step_time")
    return html_table([("tokens/s per GPU", "-" if tps is None else f"{tps:,.0f}"),
                       ("MFU", "-" if mfu is None else f"{mfu:.1%}"),
                       ("step time", "-" if st is None else f"{st:.1f} s")],
                      ("median of the last 20 steps", "value"))


def _eval_card(results: list[dict[str, Any]]) -> str:
    base = next((r["accuracy"] for r in results if r["label"] == "base"), None)
    trained = [r["accuracy"] for r in results if r["label"] != "base"]
    if base is None and not trained:
        return "not yet: after training"     # jobs/head/evaluate.py, gke-grpo:job.evaluate
    return " -> ".join(f"{a:.1%}" for a in ([base] if base is not None else []) + trained[-1:])


def stage_node_hours(inputs: ReportInputs) -> float | None:
    """Node-hours of the export and evaluation after training (inside the attempt's span, so
    already in the cost so far)."""
    if inputs.cost is None:
        return None
    seconds = sum(i.duration(inputs.now) for kind in ("export", "evaluate")
                  for i in inputs.timeline.intervals(kind))
    return inputs.cost.nodes * seconds / 3600


def _eval_html(inputs: ReportInputs, latest: StepMetrics | None, last_val: float | None) -> str:
    from jobs.cli.eval_results import eval_section_html

    hours = stage_node_hours(inputs)
    cost = None
    if hours is not None and inputs.cost is not None and inputs.cost.rate.per_node_hour is not None:
        cost = money_text(hours * inputs.cost.rate.per_node_hour, inputs.cost.currency)
    return eval_section_html(inputs.eval_results, model=inputs.model,
                             training_reward=None if latest is None else latest.get("reward"),
                             validation=last_val, stage_hours=hours, stage_cost=cost)


def _recovery_html(inputs: ReportInputs) -> str:
    """Each restart's recovery (seconds from the node loss; steps redone) and the checkpoint
    period that serves goodput beside the configured one (jobs/cli/recovery.py)."""
    parts = ["<h2>Recovery and checkpoint cadence</h2>"]
    rows = recoveries(inputs.timeline)
    if rows:
        parts.append(html_table([(r.get("attempt"), r.get("restart"),
                              *(seconds_text(r.get(k)) for k in ("decision_s", "restart_s", "first_step_s", "backoff_s")),
                              "-" if r.get("steps_redone") is None else r["steps_redone"],
                              r.get("loss_source", "-")) for r in rows],
                            ("attempt", "restart", "loss -> decision", "loss -> trainer restart",
                             "loss -> first new step", "backoff", "steps redone", "loss time from")))
    else:
        parts.append('<p class="sub">No restart reached its first new step.</p>')
    advice = inputs.advice
    if advice is None:
        parts.append('<p class="sub">Checkpoint period: no checkpoint save timed yet.</p>')
    else:
        parts.append(f"<p>{page_text(advice.describe())}.</p>")
        parts.append(f'<p class="sub">{page_text(advice.sources())}. Young (1974): the period that '
                     "minimises saves plus redone work is sqrt(2 x checkpoint cost x mean time "
                     "between interruptions).</p>")
    return "\n".join(parts)


def _cost_html(inputs: ReportInputs) -> str:
    c = inputs.cost
    rows: list[tuple[Any, ...]] = []
    if c is not None:
        cur = c.currency
        rows.append(("node-hours used", f"{c.node_hours:.2f} ({c.nodes} nodes)",
                     "GPU nodes held from GPUs ready to each attempt's end"))
        if len(c.by_source) > 1:
            from jobs.contract.capacity import describe_source
            for source, hours in sorted(c.by_source.items()):
                rate = c.rates[source]
                rows.append((f"rate: {describe_source(source)}", f"{money_text(rate.per_node_hour, cur)} "
                             f"per node-hour x {hours:.2f} node-hours", rate.basis))
        else:
            rows.append(("rate", f"{money_text(c.rate.per_node_hour, cur)} per node-hour", c.rate.basis))
        rows.append(("cost so far", money_text(c.so_far, cur),
                     "committed capacity the run occupied (reservation)" if c.committed else "incremental"))
        if c.to_finish is not None:
            rows.append(("to finish", money_text(c.to_finish, cur),
                         f"{c.steps_left} steps at the median recent step time ({c.hours_to_finish:.2f} h)"))
        if c.to_finish_at_goodput is not None:
            rows.append(("to finish at the goodput so far", money_text(c.to_finish_at_goodput, cur),
                         "if waits, restarts and saves recur at the rate seen"))
        if c.so_far is not None and c.to_finish is not None:
            rows.append(("total (so far + to finish)", money_text(c.so_far + c.to_finish, cur), ""))
        rows.append(("prices as of", c.prices_as_of, "data/prices.yaml"))
    est = inputs.preview_estimate
    if est:
        key = "committedCostOverRunDeadline" if "committedCostOverRunDeadline" in est else "runCostUpperBound"
        rows.append(("preview estimate", money_text(est.get(key), est.get("currency", "")),
                     f"{key}: {est.get('hourlyGpuCapacity')} per hour x {est.get('runHoursUpperBound')} h "
                     "(job.activeDeadlineSeconds)"))
    if not rows:
        return '<p class="note">No cost: give --stack (machine type, nodes and provisioning model).</p>'
    return html_table(rows, ("", "value", "basis"))


# ---- inputs -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class CostBasis:
    """What the run's cost needs from the stack config: the GPU machines and how they are bought."""
    machine_type: str
    provisioning_model: str
    nodes: int


def planned_steps(total_steps: int | None, total_epochs: int | None, prompts_per_step: int,
                  train_rows: int | None = None) -> int | None:
    """The run's length in steps: gke-grpo:job.totalSteps, else epochs x floor(rows / prompts)
    (both trainers drop the last partial batch)."""
    if total_steps is not None:
        return total_steps
    if total_epochs is None or prompts_per_step <= 0:
        return None
    if train_rows is None:
        from jobs.contract.datasets import GSM8K_TRAIN_ROWS
        train_rows = GSM8K_TRAIN_ROWS
    return total_epochs * max(train_rows // prompts_per_step, 1)


def collect_inputs(run_dir: str | Path, run_id: str | None = None, *, framework: str | None = None,
                   cost_basis: CostBasis | None = None, planned: int | None = None,
                   preview_estimate: dict[str, Any] | None = None, now: float | None = None,
                   prices_file: Path | None = None, model: str | None = None,
                   checkpoint_every_steps: int | None = None, spec: GrpoSpec | None = None,
                   stack: str | None = None) -> ReportInputs:
    """Everything the report and `status` show, read from the run directory (+ the price table).
    The run id is the one the driver recorded (driver_start), else ``run_id``, else the folder's
    name; ``spec`` and ``stack`` (from --stack) fill the summary and the commands shown, and are
    compared with it (ReportInputs.identity_warning)."""
    from jobs.cli.goodput import compute_goodput
    from jobs.cli.metrics import read_run_metrics
    from jobs.cli.run_cost import median_step_seconds, run_cost
    from jobs.cli.run_identity import recorded_run_id
    from jobs.cli.timeline import read_timeline
    from jobs.plan.prices import PRICES_FILE, hourly_rate, load_price_table

    run_dir = Path(run_dir)
    now = time.time() if now is None else now
    timeline = read_timeline(run_dir)
    metrics = read_run_metrics(run_dir, framework)
    goodput = compute_goodput(timeline, metrics, now)
    cost = None
    if cost_basis is not None and not timeline.empty:
        table = load_price_table(prices_file or PRICES_FILE)
        machine = table.machines.get(cost_basis.machine_type)
        if machine is None:
            goodput.notes.append(f"no price for machine type {cost_basis.machine_type} in data/prices.yaml")
        else:
            training = [r for r in metrics.merged() if r.is_training]
            from jobs.contract.capacity import provisioning_model_of

            bought = cost_basis.provisioning_model
            cost = run_cost(timeline, nodes=cost_basis.nodes, rate=hourly_rate(machine, bought),
                            currency=table.currency, prices_as_of=table.as_of,
                            provisioning_model=bought, now=now,
                            rate_of=lambda source: hourly_rate(machine, provisioning_model_of(source, bought)),
                            steps_done=training[-1].step if training else (0 if planned else None),
                            steps_planned=planned,
                            step_seconds=median_step_seconds([r.get("step_time") or 0 for r in training]),
                            goodput=goodput.goodput)
    from jobs.cli.eval_results import read_eval_results
    from jobs.cli.recovery import checkpoint_advice

    advice = checkpoint_advice(timeline, metrics, every_steps=checkpoint_every_steps, now=now,
                               capacity_source=cost_basis.provisioning_model if cost_basis else None,
                               nodes=cost_basis.nodes if cost_basis else None)
    recorded = recorded_run_id([e.extra for e in timeline.events if e.event == "driver_start"],
                               run_id or run_dir.name)
    return ReportInputs(recorded, run_dir, timeline, metrics, goodput, cost, preview_estimate,
                        planned, framework or metrics.framework, now,
                        eval_results=read_eval_results(run_dir), model=model, advice=advice, spec=spec,
                        stack=stack)


def run_status_rows(inputs: ReportInputs) -> list[tuple[str, str]]:
    """The rows `gke-grpo status` adds from the run directory."""
    from jobs.cli.metrics import describe_latest

    rows = []
    if not inputs.metrics.empty:
        rows.append(("progress", describe_latest(inputs.metrics.latest()) + " [TensorBoard]"))
        val = [r for r in inputs.metrics.merged() if r.get("val_reward") is not None]
        if val:
            rows.append(("validation", ", ".join(f"step {r.step}: {r.get('val_reward'):.4f}"
                                                 for r in (val[:1] + val[-1:] if len(val) > 1 else val))))
    if inputs.dashboard_url:
        rows.append(("dashboard", inputs.dashboard_url))
    from jobs.cli.capacity_view import capacity_rows
    from jobs.cli.gpu_status import start_sources_rows
    from jobs.cli.split_view import split_status_rows

    if not inputs.timeline.empty:
        rows.append(("goodput", inputs.goodput.describe()))
        starts = inputs.timeline.trainer_starts()
        rows.append(("starts", f"{len(starts)} trainer start(s), {len(inputs.timeline.restarts)} restart(s)"))
        rows += start_sources_rows(inputs.timeline)
    rows += split_status_rows(inputs)         # a split layout's pools and waits
    if not inputs.timeline.empty:
        rows += capacity_rows(inputs.timeline)
        rows += recovery_rows(recoveries(inputs.timeline))
    if inputs.advice is not None:
        rows.append(("ckpt period", inputs.advice.describe()))
    if inputs.eval_results:
        from jobs.cli.eval_results import eval_status_rows

        training = [r for r in inputs.metrics.merged() if r.is_training]
        rows += eval_status_rows(inputs.eval_results, training[-1].get("reward") if training else None)
    if inputs.cost is not None:
        text = inputs.cost.describe()
        est = inputs.preview_estimate or {}
        key = "committedCostOverRunDeadline" if "committedCostOverRunDeadline" in est else "runCostUpperBound"
        if est.get(key) is not None:
            text += f"; preview estimate {est[key]:,.2f} {est.get('currency', '')} ({key})"
        rows.append(("cost", text))
    skipped = inputs.data_warnings()
    for line in skipped[:5]:
        rows.append(("skipped", line))
    if len(skipped) > 5:
        rows.append(("skipped", f"... and {len(skipped) - 5} more (gke-grpo report shows all)"))
    return rows
