"""One self-contained HTML page about a run, with its pictures embedded (and written as PNGs
beside it): reward and response length curves, throughput and MFU, a timeline of attempts,
restarts, GPU waits and checkpoints, goodput and cost.

    python -m jobs report RUN [--run-dir DIR] [--out DIR] [--stack STACK]
    build_report(inputs) -> Report(html, figures)      # figures: name -> (png bytes, axis labels)

Pictures first, because people look before they read; the numbers behind them follow in
tables. The page needs nothing but itself (no scripts, no external files): the PNGs are data
URIs. Each figure's caption names its axes (read from the matplotlib axes that drew it), and
each PNG carries the same text in its metadata.
"""

from __future__ import annotations

import base64
import html
import io
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jobs.cli.data_warnings import DataWarnings
from jobs.cli.goodput import BUCKET_LABELS, BUCKETS, Goodput, trainer_exit_code
from jobs.cli.metrics import LABELS, RunMetrics, StepMetrics, series
from jobs.cli.output_files import write_output
from jobs.cli.recovery import CheckpointAdvice, recoveries, recovery_rows, seconds_text
from jobs.cli.run_cost import RunCost
from jobs.cli.timeline import Timeline
from jobs.contract.credentials import redact

TIMELINE_ROWS = (("prepare", "data preparation", "tab:purple"), ("gpu_wait", "waiting for GPUs", "tab:gray"),
                 ("health", "health check", "tab:olive"), ("trainer", "trainer", "tab:blue"),
                 ("export", "export", "tab:brown"), ("evaluate", "evaluation", "tab:cyan"))


@dataclass
class ReportInputs:
    run_id: str
    run_dir: Path
    timeline: Timeline
    metrics: RunMetrics
    goodput: Goodput
    cost: RunCost | None = None
    preview_estimate: dict[str, Any] | None = None    # components/cost.py estimate_cost()
    planned_steps: int | None = None
    framework: str | None = None
    now: float = field(default_factory=time.time)
    eval_results: list[dict[str, Any]] = field(default_factory=list)   # jobs/cli/eval_results.py
    model: str | None = None
    advice: CheckpointAdvice | None = None     # Young-Daly beside the configured cadence

    def data_warnings(self) -> list[str]:
        """What the readers left out of the run directory, one line per kind of fault
        ("3 lines of events.jsonl skipped: time out of range")."""
        skipped = DataWarnings()
        skipped.extend(self.timeline.warnings)
        skipped.extend(self.metrics.warnings)
        return skipped.lines()


@dataclass
class Figure:
    name: str
    title: str
    png: bytes
    axes: list[tuple[str, str]]        # (x label, y label) per panel


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


# ---- figures ------------------------------------------------------------------------------------

def _pyplot():
    import matplotlib
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    return plt


def _finish(fig, name: str, title: str) -> Figure:
    plt = _pyplot()
    axes = [(ax.get_xlabel(), ax.get_ylabel()) for ax in fig.axes if ax.get_xlabel() or ax.get_ylabel()]
    description = "; ".join(f"x: {x}, y: {y}" for x, y in axes)
    buf = io.BytesIO()
    try:
        fig.tight_layout()
        fig.savefig(buf, format="png", metadata={"Title": title, "Description": description})
    finally:
        plt.close(fig)
    return Figure(name, title, buf.getvalue(), axes)


def _integer_steps(ax) -> None:
    from matplotlib.ticker import MaxNLocator
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def reward_figure(rows: list[StepMetrics], title: str) -> Figure | None:
    xs, ys = series([r for r in rows if r.is_training], "reward")
    vx, vy = series(rows, "val_reward")
    if not xs and not vx:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 3.6), dpi=100)
    if xs:
        ax.plot(xs, ys, marker="o", markersize=2.5, linewidth=1.4, label="train reward (mean)")
    if vx:
        ax.plot(vx, vy, linestyle="--", marker="s", markersize=5, color="tab:green",
                label="validation score (step 0: before training)")
    ax.set_xlabel("training step")
    ax.set_ylabel("reward")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    _integer_steps(ax)
    return _finish(fig, "reward", "Reward")


def length_figure(rows: list[StepMetrics]) -> Figure | None:
    xs, ys = series(rows, "response_length")
    if not xs:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 3.0), dpi=100)
    ax.plot(xs, ys, marker="o", markersize=2.5, linewidth=1.4, color="tab:orange",
            label="response length (mean tokens)")
    ax.set_xlabel("training step")
    ax.set_ylabel(LABELS["response_length"])
    ax.grid(True, alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    _integer_steps(ax)
    return _finish(fig, "response_length", "Response length")


def throughput_figure(rows: list[StepMetrics]) -> Figure | None:
    panels = [(name, label) for name, label in (("tokens_per_sec_per_gpu", LABELS["tokens_per_sec_per_gpu"]),
                                                ("mfu", "MFU (%)"), ("step_time", LABELS["step_time"]))
              if series(rows, name)[0]]
    if not panels:
        return None
    plt = _pyplot()
    fig, axes = plt.subplots(len(panels), 1, sharex=True, figsize=(8, 2.3 * len(panels) + 0.4), dpi=100,
                             squeeze=False)
    for ax, (name, label) in zip(axes[:, 0], panels):
        xs, ys = series(rows, name)
        if name == "mfu":
            ys = [100 * y for y in ys]
        ax.plot(xs, ys, marker="o", markersize=2, linewidth=1.2, color="tab:red" if name == "mfu" else None)
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
    axes[-1, 0].set_xlabel("training step")
    for ax in axes[:-1, 0]:
        ax.set_xlabel("training step")      # shared axis: the label names every panel's x
        ax.xaxis.label.set_visible(False)
    _integer_steps(axes[-1, 0])
    return _finish(fig, "throughput", "Throughput")


def timeline_figure(inputs: ReportInputs) -> Figure | None:
    tl = inputs.timeline
    if tl.empty:
        return None
    t0 = tl.first_time or 0.0
    end = tl.end_time(inputs.now)

    def h(t: float) -> float:
        return (t - t0) / 3600

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, 3.2), dpi=100)
    labels = []
    for row, (kind, label, color) in enumerate(TIMELINE_ROWS):
        labels.append(label)
        for iv in tl.intervals(kind):
            stop = iv.end if iv.end is not None else end
            ax.broken_barh([(h(iv.begin), max(h(stop) - h(iv.begin), 1e-4))], (row - 0.35, 0.7),
                           facecolors=color, alpha=0.85)
            if kind == "trainer":
                ax.text(h(iv.begin), row + 0.42, f"a{iv.attempt}/s{iv.start}", fontsize=7, va="bottom")
    trainer_row = [kind for kind, _, _ in TIMELINE_ROWS].index("trainer")
    restart_times = [r.time for r in tl.restarts] or [
        iv.end for iv in tl.trainer_starts() if iv.end is not None and trainer_exit_code(iv) not in (0, None)]
    if restart_times:
        ax.plot([h(t) for t in restart_times], [trainer_row] * len(restart_times), "X", color="tab:red",
                markersize=10, label="restart (trainer exit)")
    ckpts = [r.wall_time for s in inputs.metrics.starts for r in s.steps if (r.get("checkpoint_time") or 0) > 0]
    if ckpts:
        ax.plot([h(t) for t in ckpts], [trainer_row + 0.0] * len(ckpts), "|", color="black",
                markersize=16, markeredgewidth=2, label="checkpoint saved")
    attempts = tl.attempt_spans(inputs.now)
    for _attempt, first, _last in attempts[1:]:
        ax.axvline(h(first), color="black", linestyle=":", linewidth=1)
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels)
    ax.set_ylim(-0.7, len(labels) - 0.1 + 0.5)
    ax.set_xlim(0, max(h(end), 1e-3) * 1.01)
    ax.set_xlabel("hours since the first start")
    ax.set_ylabel("stage")
    ax.grid(True, axis="x", alpha=0.3)
    if restart_times or ckpts:
        ax.legend(loc="upper left", fontsize=8, ncol=2)
    return _finish(fig, "timeline", "Timeline")


def goodput_figure(g: Goodput) -> Figure | None:
    if g.wall_s <= 0:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, 2.2), dpi=100)
    left = 0.0
    colors = {"productive": "tab:green", "gpu_wait": "tab:gray", "data_prep": "tab:purple",
              "health_check": "tab:olive", "restarts": "tab:red", "checkpoint_save": "black",
              "validation": "tab:cyan", "trainer_startup": "tab:blue", "export_evaluate": "tab:brown",
              "other": "lightgray"}
    for bucket in ("productive", *BUCKETS):
        share = 100 * (g.share(bucket) or 0.0)
        if share <= 0:
            continue
        ax.barh([0], [share], left=left, color=colors[bucket], label=BUCKET_LABELS[bucket].split(" (")[0])
        if share >= 6:
            ax.text(left + share / 2, 0, f"{share:.0f}%", ha="center", va="center", fontsize=8,
                    color="white" if bucket in ("productive", "restarts", "checkpoint_save", "trainer_startup") else "black")
        left += share
    ax.set_xlim(0, 100)
    ax.set_yticks([])
    ax.set_xlabel("share of wall-clock time (%)")
    ax.set_ylabel("run")
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.02), ncol=5, fontsize=7, frameon=False)
    return _finish(fig, "goodput", "Goodput")


# ---- page ---------------------------------------------------------------------------------------

def _e(value: Any) -> str:
    """Text for the page: escaped, and anything credential-shaped a run artifact carried (a
    restart reason, a file name) redacted."""
    return html.escape(redact(str(value)), quote=True)


def _fmt_time(t: float | None) -> str:
    if t is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(t))


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.2f} h"


def _money(value: float | None, currency: str) -> str:
    return "unknown" if value is None else f"{value:,.2f} {currency}"


def _table(rows: list[tuple[Any, ...]], header: tuple[str, ...] | None = None, cls: str = "") -> str:
    out = [f'<table class="{cls}">' if cls else "<table>"]
    if header:
        out.append("<tr>" + "".join(f"<th>{_e(h)}</th>" for h in header) + "</tr>")
    for row in rows:
        out.append("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def _figure_html(fig: Figure) -> str:
    data = base64.b64encode(fig.png).decode("ascii")
    axes = "; ".join(f"x: {x} / y: {y}" for x, y in fig.axes)
    return (f'<figure id="fig-{_e(fig.name)}"><img src="data:image/png;base64,{data}" '
            f'alt="{_e(fig.title)} ({_e(axes)})">'
            f'<figcaption><b>{_e(fig.title)}</b> <span class="axes">{_e(axes)}</span></figcaption></figure>')


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:980px;color:#222}
h1{font-size:22px;margin-bottom:4px} h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd}
.sub{color:#666;font-size:13px} figure{margin:12px 0} img{max-width:100%}
figcaption{font-size:12px;color:#555} .axes{color:#888}
table{border-collapse:collapse;font-size:13px;margin:8px 0} td,th{border:1px solid #ddd;padding:3px 8px;text-align:left}
th{background:#f4f4f4} .big{font-size:28px;font-weight:600} .cards{display:flex;gap:28px;flex-wrap:wrap}
.card{padding:6px 0} .label{font-size:12px;color:#666} .note{font-size:12px;color:#8a6d3b}
"""


def build_report(inputs: ReportInputs) -> Report:
    rows = inputs.metrics.merged()
    training = [r for r in rows if r.is_training]
    g = inputs.goodput
    figures = [f for f in (
        reward_figure(rows, f"{inputs.run_id}"),
        length_figure(training),
        throughput_figure(training),
        timeline_figure(inputs),
        goodput_figure(g),
    ) if f is not None]
    by_name = {f.name: f for f in figures}
    state = "live" if g.live else "ended"
    latest = training[-1] if training else None
    baseline = next((r.get("val_reward") for r in rows if r.step == 0 and r.get("val_reward") is not None), None)
    last_val = next((r.get("val_reward") for r in reversed(rows) if r.get("val_reward") is not None), None)
    steps_text = "-" if latest is None else (
        f"{latest.step}" + (f" of {inputs.planned_steps}" if inputs.planned_steps else ""))
    cards = [("goodput", "-" if g.goodput is None else f"{g.goodput:.1%}" + (" (upper bound)" if g.upper_bound else "")),
             ("steps", steps_text),
             ("reward (latest)", "-" if latest is None or latest.get("reward") is None else f"{latest.get('reward'):.3f}"),
             ("validation: step 0 -> latest", "-" if baseline is None else
              f"{baseline:.3f} -> {last_val:.3f}" if last_val is not None else f"{baseline:.3f}"),
             ("GSM8K test: base -> trained", _eval_card(inputs.eval_results)),
             ("cost so far", "-" if inputs.cost is None else _money(inputs.cost.so_far, inputs.cost.currency))]
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>GRPO run {_e(inputs.run_id)}</title><style>{_CSS}</style></head><body>",
        f"<h1>GRPO run {_e(inputs.run_id)}</h1>",
        f'<div class="sub">{_e(inputs.framework or inputs.metrics.framework or "framework unknown")} · {state} · '
        f"first start {_e(_fmt_time(inputs.timeline.first_time))} · report of {_e(_fmt_time(inputs.now))} · "
        f"{_e(inputs.run_dir)}</div>",
        '<div class="cards">' + "".join(f'<div class="card"><div class="label">{_e(k)}</div>'
                                        f'<div class="big">{_e(v)}</div></div>' for k, v in cards) + "</div>",
    ]
    parts.append("<h2>Learning</h2>")
    for name in ("reward", "response_length"):
        if name in by_name:
            parts.append(_figure_html(by_name[name]))
    if not training:
        parts.append('<p class="note">No training step in the TensorBoard files (yet).</p>')
    parts.append("<h2>Held-out evaluation (GSM8K test split)</h2>")
    parts.append(_eval_html(inputs, latest, last_val))
    parts.append("<h2>Throughput</h2>")
    if "throughput" in by_name:
        parts.append(_figure_html(by_name["throughput"]))
        recent = training[-20:]
        def med(name: str) -> float | None:
            vals = sorted(v for v in (r.get(name) for r in recent) if v is not None)
            return vals[len(vals) // 2] if vals else None
        tps, mfu, st = med("tokens_per_sec_per_gpu"), med("mfu"), med("step_time")
        parts.append(_table([("tokens/s per GPU", "-" if tps is None else f"{tps:,.0f}"),
                             ("MFU", "-" if mfu is None else f"{mfu:.1%}"),
                             ("step time", "-" if st is None else f"{st:.1f} s")],
                            ("median of the last 20 steps", "value")))
    parts.append("<h2>Timeline</h2>")
    if "timeline" in by_name:
        parts.append(_figure_html(by_name["timeline"]))
    if inputs.timeline.restarts:
        parts.append(_table([(_fmt_time(r.time), r.attempt, r.start, r.reason, r.exit_code,
                              "-" if r.last_checkpoint_step is None else r.last_checkpoint_step)
                             for r in inputs.timeline.restarts],
                            ("restart at", "attempt", "start", "reason", "exit code", "resumed from step")))
    placements = [e for e in inputs.timeline.events if e.event == "trainer_start" and "gpu_nodes" in e.extra]
    if placements:
        from jobs.cli.gpu_status import placement_text
        parts.append(_table([(_fmt_time(e.time), e.attempt, e.start, placement_text(e.extra))
                             for e in placements],
                            ("trainer start", "attempt", "start", "GPU nodes and their capacity source")))
    parts.append(_recovery_html(inputs))
    parts.append("<h2>Goodput</h2>")
    if "goodput" in by_name:
        parts.append(_figure_html(by_name["goodput"]))
    parts.append(_table([(BUCKET_LABELS[b], _hours(g.productive_s if b == "productive" else g.badput_s[b]),
                          "-" if g.share(b) is None else f"{g.share(b):.1%}")
                         for b in ("productive", *BUCKETS)] + [("wall clock" + (" so far" if g.live else ""),
                                                                _hours(g.wall_s), "100%")],
                        ("where the time went", "hours", "share")))
    if g.lost_steps:
        parts.append(f'<p class="sub">{g.lost_steps} step(s) were redone after restarts.</p>')
    parts.append("<h2>Cost</h2>")
    parts.append(_cost_html(inputs))
    notes = list(g.notes)
    if notes:
        parts.append("<h2>Notes</h2><ul>" + "".join(f'<li class="note">{_e(n)}</li>' for n in notes) + "</ul>")
    skipped = inputs.data_warnings()
    if skipped:
        parts.append("<h2>Data left out</h2><p class=\"sub\">Records of the run directory that could not be "
                     "used; the page shows the rest.</p><ul>"
                     + "".join(f'<li class="note">{_e(n)}</li>' for n in skipped) + "</ul>")
    parts.append('<p class="sub">Goodput: productive training time / wall-clock time since the first start '
                 "(docs/metrics-and-report.md). Metrics: the frameworks' own TensorBoard files under "
                 f"{_e(inputs.run_dir)}/tensorboard/.</p>")
    parts.append("</body></html>")
    return Report("\n".join(parts), figures)


def _eval_card(results: list[dict[str, Any]]) -> str:
    base = next((r["accuracy"] for r in results if r["label"] == "base"), None)
    trained = [r["accuracy"] for r in results if r["label"] != "base"]
    if base is None and not trained:
        return "-"
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
        cost = _money(hours * inputs.cost.rate.per_node_hour, inputs.cost.currency)
    return eval_section_html(inputs.eval_results, model=inputs.model,
                             training_reward=None if latest is None else latest.get("reward"),
                             validation=last_val, stage_hours=hours, stage_cost=cost)


def _recovery_html(inputs: ReportInputs) -> str:
    """Each restart's recovery (seconds from the node loss; steps redone) and the checkpoint
    period that serves goodput beside the configured one (jobs/cli/recovery.py)."""
    parts = ["<h2>Recovery and checkpoint cadence</h2>"]
    rows = recoveries(inputs.timeline)
    if rows:
        parts.append(_table([(r.get("attempt"), r.get("restart"),
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
        parts.append(f"<p>{_e(advice.describe())}.</p>")
        parts.append(f'<p class="sub">{_e(advice.sources())}. Young (1974): the period that '
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
                rows.append((f"rate: {describe_source(source)}", f"{_money(rate.per_node_hour, cur)} "
                             f"per node-hour x {hours:.2f} node-hours", rate.basis))
        else:
            rows.append(("rate", f"{_money(c.rate.per_node_hour, cur)} per node-hour", c.rate.basis))
        rows.append(("cost so far", _money(c.so_far, cur),
                     "committed capacity the run occupied (reservation)" if c.committed else "incremental"))
        if c.to_finish is not None:
            rows.append(("to finish", _money(c.to_finish, cur),
                         f"{c.steps_left} steps at the median recent step time ({c.hours_to_finish:.2f} h)"))
        if c.to_finish_at_goodput is not None:
            rows.append(("to finish at the goodput so far", _money(c.to_finish_at_goodput, cur),
                         "if waits, restarts and saves recur at the rate seen"))
        if c.so_far is not None and c.to_finish is not None:
            rows.append(("total (so far + to finish)", _money(c.so_far + c.to_finish, cur), ""))
        rows.append(("prices as of", c.prices_as_of, "data/prices.yaml"))
    est = inputs.preview_estimate
    if est:
        key = "committedCostOverRunDeadline" if "committedCostOverRunDeadline" in est else "runCostUpperBound"
        rows.append(("preview estimate", _money(est.get(key), est.get("currency", "")),
                     f"{key}: {est.get('hourlyGpuCapacity')} per hour x {est.get('runHoursUpperBound')} h "
                     "(job.activeDeadlineSeconds)"))
    if not rows:
        return '<p class="note">No cost: give --stack (machine type, nodes and provisioning model).</p>'
    return _table(rows, ("", "value", "basis"))


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
                   checkpoint_every_steps: int | None = None) -> ReportInputs:
    """Everything the report and `status` show, read from the run directory (+ the price table)."""
    from jobs.cli.goodput import compute_goodput
    from jobs.cli.metrics import read_run_metrics
    from jobs.cli.run_cost import median_step_seconds, run_cost
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

            model = cost_basis.provisioning_model
            cost = run_cost(timeline, nodes=cost_basis.nodes, rate=hourly_rate(machine, model),
                            currency=table.currency, prices_as_of=table.as_of,
                            provisioning_model=model, now=now,
                            rate_of=lambda source: hourly_rate(machine, provisioning_model_of(source, model)),
                            steps_done=training[-1].step if training else (0 if planned else None),
                            steps_planned=planned,
                            step_seconds=median_step_seconds([r.get("step_time") or 0 for r in training]),
                            goodput=goodput.goodput)
    from jobs.cli.eval_results import read_eval_results
    from jobs.cli.recovery import checkpoint_advice

    advice = checkpoint_advice(timeline, metrics, every_steps=checkpoint_every_steps, now=now,
                               capacity_source=cost_basis.provisioning_model if cost_basis else None,
                               nodes=cost_basis.nodes if cost_basis else None)
    return ReportInputs(run_id or run_dir.name, run_dir, timeline, metrics, goodput, cost, preview_estimate,
                        planned, framework or metrics.framework, now,
                        eval_results=read_eval_results(run_dir), model=model, advice=advice)


def run_status_rows(inputs: ReportInputs) -> list[tuple[str, str]]:
    """The rows `python -m jobs status` adds from the run directory."""
    from jobs.cli.metrics import describe_latest

    rows = []
    if not inputs.metrics.empty:
        rows.append(("progress", describe_latest(inputs.metrics.latest()) + " [TensorBoard]"))
        val = [r for r in inputs.metrics.merged() if r.get("val_reward") is not None]
        if val:
            rows.append(("validation", ", ".join(f"step {r.step}: {r.get('val_reward'):.4f}"
                                                 for r in (val[:1] + val[-1:] if len(val) > 1 else val))))
    if not inputs.timeline.empty:
        from jobs.cli.gpu_status import start_sources_rows

        rows.append(("goodput", inputs.goodput.describe()))
        starts = inputs.timeline.trainer_starts()
        rows.append(("starts", f"{len(starts)} trainer start(s), {len(inputs.timeline.restarts)} restart(s)"))
        rows += start_sources_rows(inputs.timeline)
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
        rows.append(("skipped", f"... and {len(skipped) - 5} more (python -m jobs report shows all)"))
    return rows
