"""The report's pictures, drawn with matplotlib (Agg) into PNG bytes: reward, response length,
training health, throughput and MFU, a timeline of attempts, restarts, GPU waits and
checkpoints, and goodput. Each Figure carries its axis labels (read from the matplotlib axes
that drew it, also written into the PNG's metadata) and a caption that says what to look for.

Sizes are for a page of about 1,200 CSS pixels: the full-width ones are 12 inches at 100 dpi,
the two learning curves 7 inches each, side by side on a wide window.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import TYPE_CHECKING

from jobs.cli.goodput import BUCKET_LABELS, BUCKETS, Goodput, trainer_exit_code
from jobs.cli.metrics import HEALTH_FIELDS, LABELS, StepMetrics, series

if TYPE_CHECKING:
    from jobs.cli.report_inputs import ReportInputs

TIMELINE_ROWS = (("prepare", "data preparation", "tab:purple"), ("gpu_wait", "waiting for GPUs", "tab:gray"),
                 ("health", "health check", "tab:olive"), ("trainer", "trainer", "tab:blue"),
                 ("export", "export", "tab:brown"), ("evaluate", "evaluation", "tab:cyan"))
FULL_WIDTH_INCHES = 12.0
HALF_WIDTH_INCHES = 7.0


@dataclass
class Figure:
    name: str
    title: str
    png: bytes
    axes: list[tuple[str, str]]        # (x label, y label) per panel
    caption: str = ""                  # what the picture shows and what to look for
    wide: bool = True                  # False: one of two side by side on a wide page


def _pyplot():
    import matplotlib
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    return plt


def _finish(fig, name: str, title: str, caption: str, wide: bool = True) -> Figure:
    plt = _pyplot()
    axes = [(ax.get_xlabel(), ax.get_ylabel()) for ax in fig.axes if ax.get_xlabel() or ax.get_ylabel()]
    description = "; ".join(f"x: {x}, y: {y}" for x, y in axes)
    buf = io.BytesIO()
    try:
        fig.tight_layout()
        fig.savefig(buf, format="png", metadata={"Title": title, "Description": description})
    finally:
        plt.close(fig)
    return Figure(name, title, buf.getvalue(), axes, caption, wide)


def constant_value(ys: list[float]) -> float | None:
    """The value of a series that never changes (a constant learning rate), else None."""
    if not ys or max(ys) != min(ys):
        return None
    return ys[0]


def _show_constant(ax, ys: list[float]) -> None:
    """A constant series drawn as one: an axis from 0 to twice its value and no offset, rather
    than matplotlib's +-4 % around it with an offset such as 1e-6, which reads as variation."""
    value = constant_value(ys)
    if value is None:
        return
    ax.set_ylim(*sorted((0.0, 2 * value)) if value else (-1.0, 1.0))
    ax.ticklabel_format(axis="y", useOffset=False)
    ax.text(0.02, 0.92, f"constant: {value:g}", transform=ax.transAxes, fontsize=8, va="top")


def _integer_steps(ax) -> None:
    from matplotlib.ticker import MaxNLocator
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def reward_figure(rows: list[StepMetrics], title: str) -> Figure | None:
    xs, ys = series([r for r in rows if r.is_training], "reward")
    vx, vy = series(rows, "val_reward")
    if not xs and not vx:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(HALF_WIDTH_INCHES, 3.6), dpi=100)
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
    return _finish(fig, "reward", "Reward", "The mean reward of each step's rollouts (solid) and the "
                   "validation score (dashed squares; step 0 is before any update). A rising reward "
                   "with a flat validation score is overfitting or reward hacking; a flat reward is a "
                   "learning-rate, KL or data problem.", wide=False)


def length_figure(rows: list[StepMetrics]) -> Figure | None:
    xs, ys = series(rows, "response_length")
    if not xs:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(HALF_WIDTH_INCHES, 3.6), dpi=100)
    ax.plot(xs, ys, marker="o", markersize=2.5, linewidth=1.4, color="tab:orange",
            label="response length (mean tokens)")
    ax.set_xlabel("training step")
    ax.set_ylabel(LABELS["response_length"])
    ax.grid(True, alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    _integer_steps(ax)
    return _finish(fig, "response_length", "Response length", "Mean generated tokens per sample. A sharp "
                   "drop, or a climb to the maximum response length, often comes before a reward "
                   "collapse.", wide=False)


def throughput_figure(rows: list[StepMetrics]) -> Figure | None:
    panels = [(name, label) for name, label in (("tokens_per_sec_per_gpu", LABELS["tokens_per_sec_per_gpu"]),
                                                ("mfu", "MFU (%)"), ("step_time", LABELS["step_time"]))
              if series(rows, name)[0]]
    if not panels:
        return None
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(panels), figsize=(FULL_WIDTH_INCHES, 3.0), dpi=100, squeeze=False)
    for ax, (name, label) in zip(axes[0, :], panels):
        xs, ys = series(rows, name)
        if name == "mfu":
            ys = [100 * y for y in ys]
        ax.plot(xs, ys, marker="o", markersize=2, linewidth=1.2, color="tab:red" if name == "mfu" else None)
        _show_constant(ax, ys)
        ax.set_ylabel(label)
        ax.set_xlabel("training step")
        ax.grid(True, alpha=0.3)
        _integer_steps(ax)
    return _finish(fig, "throughput", "Throughput", "Tokens/s per GPU, MFU and step time as the "
                   "framework computes them. Spikes in step time at every checkpoint or validation "
                   "step are the saves and validations; a slow drift up is worth a look.")


def timeline_figure(inputs: ReportInputs) -> Figure | None:
    tl = inputs.timeline
    if tl.empty:
        return None
    t0 = tl.first_time or 0.0
    end = tl.end_time(inputs.now)

    def h(t: float) -> float:
        return (t - t0) / 3600

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(FULL_WIDTH_INCHES, 3.2), dpi=100)
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
    return _finish(fig, "timeline", "Timeline", "One row per stage, in hours since the first start; "
                   "each trainer start is labelled a<attempt>/s<start>. Red crosses are restarts, "
                   "black ticks checkpoints saved, dotted lines new attempts.")


def goodput_figure(g: Goodput) -> Figure | None:
    if g.wall_s <= 0:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(FULL_WIDTH_INCHES, 1.9), dpi=100)
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
    return _finish(fig, "goodput", "Goodput", "Where the wall-clock time went: productive training "
                   "(green) and each kind of badput, as shares of the time since the first start.")


def health_figure(rows: list[StepMetrics], framework: str | None) -> Figure | None:
    """KL, entropy, gradient norm, clipped fraction and learning rate per step: one small panel
    each, for those the framework logged (jobs/cli/metrics.py names the tags)."""
    panels = [name for name in HEALTH_FIELDS if series(rows, name)[0]]
    if not panels:
        return None
    plt = _pyplot()
    columns = min(len(panels), 3)
    lines = (len(panels) + columns - 1) // columns
    fig, axes = plt.subplots(lines, columns, figsize=(FULL_WIDTH_INCHES, 2.6 * lines + 0.2), dpi=100,
                             squeeze=False)
    for index, ax in enumerate(axes.flat):
        if index >= len(panels):
            ax.set_visible(False)
            continue
        name = panels[index]
        xs, ys = series(rows, name)
        ax.plot(xs, ys, marker="o", markersize=2, linewidth=1.2, color=HEALTH_COLORS[name])
        ax.set_xlabel("training step")
        ax.set_ylabel(LABELS[name])
        ax.grid(True, alpha=0.3)
        if name == "lr":
            ax.ticklabel_format(axis="y", style="sci", scilimits=(-2, 3))
        _show_constant(ax, ys)
        _integer_steps(ax)
    source = {"verl": "verl's actor/ tags", "nemo-rl": "NeMo RL's train/ tags"}.get(framework or "",
                                                                                    "the framework's tags")
    return _finish(fig, "training_health", "Training health", f"From {source}. Look for a KL that climbs "
                   "without levelling off, an entropy that falls towards zero (the policy stops "
                   "exploring), spikes in the gradient norm, a clipped fraction that keeps rising, "
                   "and a learning rate that is not the schedule you set.")


HEALTH_COLORS = {"kl": "tab:purple", "entropy": "tab:green", "grad_norm": "tab:red",
                 "clip_fraction": "tab:brown", "lr": "tab:gray"}


