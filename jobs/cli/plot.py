"""Reward, response length and throughput over training steps, as a PNG: from the run's
TensorBoard files (jobs/cli/metrics.py) or, as the live fallback, verl or NeMo RL console logs.

    gke-grpo plot --log FILE [--log FILE2 ...] --out run.png
    gke-grpo plot --stack dev --out run.png            # every attempt of the stack's run
    gke-grpo plot --address http://127.0.0.1:8265 --run-id RUN --out run.png
    gke-grpo plot --run-dir /path/to/runs/RUN --out run.png   # the run directory alone

Several logs (the attempts of one run, oldest first) are merged step by step: a resumed attempt
re-logs some steps and the later value wins. Validation scores, when the log has them, are drawn
as points on the reward panel.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TypeGuard

from jobs.cli.output_files import write_output
from jobs.cli.training_logs import StepRecord, training_records

# Beyond this a value is no metric of ours (and matplotlib cannot scale an axis to it).
MAX_PLOTTED = 1e15


def plottable(value: float | None) -> TypeGuard[float]:
    return value is not None and math.isfinite(value) and abs(value) <= MAX_PLOTTED


def _series(records: Sequence[StepRecord], attr: str) -> tuple[list[int], list[float]]:
    xs, ys = [], []
    for r in records:
        value = getattr(r, attr)
        if plottable(value):
            xs.append(r.step)
            ys.append(value)
    return xs, ys


# Throughput per record: the TensorBoard field (jobs/cli/metrics.py), else verl's console key.
THROUGHPUT_KEYS = ("tokens_per_sec_per_gpu", "perf/throughput")


def _throughput_series(records: Sequence[StepRecord]) -> tuple[list[int], list[float]]:
    xs, ys = [], []
    for r in records:
        value = next((r.metrics[k] for k in THROUGHPUT_KEYS if k in r.metrics), None)
        if plottable(value):
            xs.append(r.step)
            ys.append(value)
    return xs, ys


def unplottable_values(records: Sequence[StepRecord]) -> int:
    """How many rewards, lengths and validation scores of the records are NaN, infinite or
    absurdly large (not drawn)."""
    return sum(1 for r in records for v in (r.reward, r.response_length, r.val_reward)
               if v is not None and not plottable(v))


def plot_records(records: Sequence[StepRecord], out: Path | str, title: str = "GRPO run") -> Path:
    """Write the figure (reward, length and, when logged, tokens/s per GPU); raise ValueError
    when there is no training step to draw."""
    import matplotlib
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    train = [r for r in training_records(records) if plottable(r.reward) or plottable(r.response_length)]
    if training_records(records) and not train:
        raise ValueError(f"no training step with a reward or response length that can be drawn: "
                         f"{unplottable_values(records)} value(s) are NaN, infinite or beyond {MAX_PLOTTED:g}")
    if not train:
        raise ValueError("no training step found in the log (verl: `step:N - ...` console lines, "
                         "needs `console` in trainer.logger; NeMo RL: `📊 Training Results:` blocks)")
    tx, ty = _throughput_series(train)
    fig, axes = plt.subplots(3 if tx else 2, 1, sharex=True, figsize=(9, 9 if tx else 6.5), dpi=110)
    ax_reward, ax_len = axes[0], axes[1]
    try:
        xs, ys = _series(train, "reward")
        ax_reward.plot(xs, ys, marker="o", markersize=3, linewidth=1.5, label="train reward (mean)")
        vx, vy = _series(records, "val_reward")
        if vx:
            ax_reward.plot(vx, vy, linestyle="--", marker="s", markersize=5, color="tab:green",
                           label="validation score")
        ax_reward.set_ylabel("reward")
        ax_reward.grid(True, alpha=0.3)
        ax_reward.legend(loc="best", fontsize=8)
        ax_reward.set_title(title)

        lx, ly = _series(train, "response_length")
        ax_len.plot(lx, ly, marker="o", markersize=3, linewidth=1.5, color="tab:orange",
                    label="response length (mean tokens)")
        ax_len.set_ylabel("response length (tokens)")
        ax_len.grid(True, alpha=0.3)
        ax_len.legend(loc="best", fontsize=8)
        if tx:
            axes[2].plot(tx, ty, marker="o", markersize=3, linewidth=1.5, color="tab:red",
                         label="throughput (framework's tokens/s per GPU)")
            axes[2].set_ylabel("tokens/s per GPU")
            axes[2].grid(True, alpha=0.3)
            axes[2].legend(loc="best", fontsize=8)
        axes[-1].set_xlabel("training step")
        axes[-1].xaxis.set_major_locator(MaxNLocator(integer=True))
        fig.tight_layout()
        out = Path(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        _write_figure(fig, out)
    finally:
        plt.close(fig)
    return out


def _write_figure(fig, out: Path) -> None:
    """Render in memory, then write it ourselves (jobs/cli/output_files.py: a failed write is an
    OSError with the errno, a FIFO nobody reads fails instead of hanging)."""
    import io

    buffer = io.BytesIO()
    fig.savefig(buffer, format=(out.suffix.lstrip(".").lower() or "png"))
    write_output(out, buffer.getvalue())


def describe_records(records: Sequence[StepRecord]) -> str:
    train = training_records(records)
    if not train:
        return "no training steps"
    first, last = train[0], train[-1]

    def fmt(v: float | None, spec: str) -> str:
        return "-" if v is None else format(v, spec)
    return (f"{len(train)} steps ({first.step}..{last.step}); reward {fmt(first.reward, '.4f')} -> "
            f"{fmt(last.reward, '.4f')}; response length {fmt(first.response_length, '.1f')} -> "
            f"{fmt(last.response_length, '.1f')}")
