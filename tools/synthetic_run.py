"""A synthetic run directory in the run driver's format, for the report's documentation
screenshot and the CLI tests: events.jsonl and restarts.jsonl (jobs/contract/records.py) and TensorBoard
event files with the frameworks' own tags (jobs/cli/metrics.py), written with TensorBoard's own
event file writer the way torch's SummaryWriter.add_scalar writes them (a Summary.Value with
``simple_value``, torch/utils/tensorboard/summary.py scalar()).

    python -m tools.synthetic_run OUT_DIR [--framework verl|nemo-rl] [--live] [--report DIR]

``--report DIR`` also writes the run's report there (what `make demo` runs: both into ./demo/).

The figures are made up (a reward curve that rises, a restart after a lost worker); nothing
here is a measurement.
"""

from __future__ import annotations

import argparse
import json
import math
import random
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from jobs.cli.extras import not_installed
from jobs.cli.metrics import FRAMEWORK_TAGS, NEMO_RL_VAL_TAG
from jobs.contract.capacity import FLEX_START, RESERVATION_PREFIX, SPOT
from jobs.contract.records import EVENTS_FILE, RESTARTS_FILE, tensorboard_dir

VERL_VAL_TAG = "val-core/openai/gsm8k/reward/mean@1"


def write_scalar_events(directory: str | Path, points: Iterable[tuple[str, int, float, float]]) -> Path:
    """(tag, step, value, wall_time) points into one new event file under ``directory``."""
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    writer = EventFileWriter(str(directory))
    for tag, step, value, wall in points:
        writer.add_event(Event(wall_time=wall, step=step,
                               summary=Summary(value=[Summary.Value(tag=tag, simple_value=value)])))
    writer.close()
    return directory


def append_jsonl(path: Path, rows: Iterable[dict]) -> None:
    with path.open("a", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")


@dataclass(frozen=True)
class SyntheticRun:
    path: Path
    framework: str
    total_steps: int
    nodes: int
    gpus_per_node: int
    first_time: float
    end_time: float


def _tag(framework: str, name: str) -> str:
    return FRAMEWORK_TAGS[framework][name][0]


def _placement(source: str, first_node: int, nodes: int = 2, gpus: int = 8) -> dict:
    """A trainer_start's gpu_nodes and capacity_sources, as jobs/head/gpu_wait.py report_placement
    records them."""
    kind = source.split(":", 1)[0].lower()
    chosen = [{"node_id": f"{i:056x}", "address": f"10.8.0.{10 + i}", "node_name": f"gke-gpu-{kind}-{i}",
               "source": source, "gpus": gpus} for i in range(first_node, first_node + nodes)]
    return {"gpu_nodes": chosen, "capacity_sources": {source: nodes}}


def _capacity_end(source: str, begin: float) -> dict:
    """What the driver tells a start on flex-start nodes (jobs/head/capacity_end.py tell): the
    first node's end (here six days on), for a verl trainer; nothing on other sources."""
    if source != FLEX_START:
        return {}
    ends_at = begin + 6 * 86400.0
    return {"capacity_end": {"margin_seconds": 35.0, "margin_basis": "the planner's checkpoint time (synthetic)",
                             "ends_at": ends_at, "node": "gke-gpu-flexstart-2", "source": source,
                             "basis": "flex-start node created at ... (synthetic)",
                             "told": {"MLP_CURRENT_CAPACITY_BLOCK_EXPIRATION_TIMESTAMP": str(int(ends_at)),
                                      "trainer.esi_redundant_time": 35}}}


def _write_eval(path: Path, run_id: str, last_step: int) -> None:
    """GSM8K test results of the base model and of the last step (made-up counts), as
    jobs/head/evaluate.py writes them: what the report's headline and section show."""
    from jobs.contract.datasets import GSM8K_TEST_ROWS
    from jobs.contract.exports import BASE_LABEL, eval_result_path, step_label
    from jobs.contract.gsm8k_scoring import wilson_interval

    for label, step, correct in ((BASE_LABEL, None, 1133), (step_label(last_step), last_step, 1187)):
        low, high = wilson_interval(correct, GSM8K_TEST_ROWS)
        doc = {"label": label, "step": step, "run_id": run_id, "correct": correct, "total": GSM8K_TEST_ROWS,
               "accuracy": correct / GSM8K_TEST_ROWS, "ci95": [low, high], "truncated": 3, "seconds": 412.0,
               "rule": "synthetic (made-up counts)", "rule_source": "tools/synthetic_run.py",
               "dataset": {"split": "test", "revision": None}, "sampling": {"temperature": 0}}
        target = eval_result_path(path, label)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(doc, indent=2))


def _health_values(framework: str, step: int, rng: random.Random) -> dict[str, float]:
    """Training-health values of a step: a KL that rises and levels off, an entropy that falls
    slowly, a noisy gradient norm with one spike, a small clipped fraction, a constant learning
    rate (verl's default schedule)."""
    values = {"kl": 0.004 + 0.02 * (1 - math.exp(-step / 15)) + rng.uniform(-0.001, 0.001),
              "entropy": 0.42 + 0.38 * math.exp(-step / 30) + rng.uniform(-0.015, 0.015),
              "grad_norm": (0.9 if step == 33 else 0.22) + rng.uniform(-0.04, 0.04),
              "clip_fraction": 0.003 + 0.004 * step / 60 + rng.uniform(0, 0.0015),
              "lr": 1e-6}
    return {name: value for name, value in values.items() if name in FRAMEWORK_TAGS[framework]}


def _recovery_events(steps: list, loss_at: float, decided: float, restarted: float, last_step: int,
                     checkpoint: int) -> list[dict]:
    """The restarted start's first step and the driver's recovery record of it."""
    at = min(wall for _tag, _step, _value, wall in steps)
    where = {"attempt": 1, "start": 1}
    return [{"time": at, "event": "first_step", **where, "step": checkpoint + 1},
            {"time": at, "event": "recovery", **where, "restart": 1, "from_start": 0, "loss_at": loss_at,
             "loss_source": "node marked dead", "decision_s": round(decided - loss_at, 3),
             "restart_s": round(restarted - loss_at, 3), "first_step_s": round(at - loss_at, 3),
             "backoff_s": 30.0, "steps_redone": last_step - checkpoint, "resumed_from_step": checkpoint,
             "first_new_step": checkpoint + 1}]


def write_synthetic_run(root: str | Path, framework: str = "verl", *, t0: float = 1_780_000_000.0,
                        total_steps: int = 60, crash_after: int = 27, checkpoint_every: int = 10,
                        validate_every: int = 10, seed: int = 7, finished: bool = True,
                        run_id: str | None = None, sources: tuple[str, ...] = (SPOT, FLEX_START)) -> SyntheticRun:
    """Attempt 1: prepare, GPU wait, health gate, trainer start 0 that loses a worker after step
    ``crash_after`` (checkpoint at the last multiple of ``checkpoint_every``), a second GPU
    wait, trainer start 1 that resumes and finishes (or is still running: ``finished=False``).
    Start 0 runs on the first of ``sources`` (records' names: spot, flexStart,
    reservation:<name>), start 1 on the next one of a waterfall, else on the same; a finished run
    has the base model's and the last step's GSM8K test results."""
    rng, health_rng = random.Random(seed), random.Random(seed + 1)   # health: its own stream, so the
    path = Path(root)                                                # other curves stay as they were
    path.mkdir(parents=True, exist_ok=True)
    events: list[dict] = []
    restarts: list[dict] = []
    val_tag = VERL_VAL_TAG if framework == "verl" else NEMO_RL_VAL_TAG

    def event(t: float, name: str, start: int, **extra) -> None:
        events.append({"time": t, "event": name, "attempt": 1, "start": start, **extra})

    def reward(step: int) -> float:
        return 0.25 + 0.6 / (1 + math.exp(-(step - 18) / 6)) + rng.uniform(-0.02, 0.02)

    def run_steps(start: int, first_step: int, last_step: int, t: float) -> tuple[float, list]:
        points = []
        for step in range(first_step, last_step + 1):
            ckpt = 35.0 if step % checkpoint_every == 0 else 0.0
            val = 25.0 if validate_every and step % validate_every == 0 else 0.0
            step_time = 70.0 + rng.uniform(-4, 4) + ckpt + val
            t += step_time
            tokens = 2400 + 30 * step ** 0.5 + rng.uniform(-60, 60)
            values = {"reward": reward(step), "response_length": 310 - 2.2 * step + rng.uniform(-6, 6),
                      "step_time": step_time, "tokens_per_sec_per_gpu": tokens,
                      "mfu": 0.31 + rng.uniform(-0.015, 0.015)}
            if ckpt:
                values["checkpoint_time"] = ckpt
            if val:
                values["validation_time"] = val
            values.update(_health_values(framework, step, health_rng))
            for name, value in values.items():
                points.append((_tag(framework, name), step, value, t))
            if val:
                points.append((val_tag, step, reward(step) + 0.04, t))
        return t, points

    t = t0
    event(t, "driver_start", 0, run_id=run_id or path.name, pid=4242, resumed=False)
    for offset, name in ((2, "prepare_start"), (290, "prepare_end"),
                         (291, "gpu_wait_start"), (1491, "gpu_wait_end"), (1492, "health_start")):
        event(t + offset, name, 0)
    event(t + 1552, "health_end", 0, passed=True)
    begin = t + 1555
    event(begin, "trainer_start", 0, resumed_from_step=None, **_placement(sources[0], 0))
    t = begin + 240.0                                   # model load, vLLM start, step-0 validation
    tb0 = tensorboard_dir(path, 1, 0)
    points = [(val_tag, 0, reward(0) + 0.03, t)]
    t, steps = run_steps(0, 1, crash_after, t)
    t += 41.0                                           # the step that never finished
    checkpoint = (crash_after // checkpoint_every) * checkpoint_every
    write_scalar_events(tb0, points + steps)
    event(t, "trainer_exit", 0, exit_code=1, reason="node_lost", last_checkpoint_step=checkpoint,
          last_step=crash_after)
    loss_at, decided = t - 3.0, t + 0.5                 # the cluster marked the node dead first
    restarts.append({"time": decided, "reason": "node_lost", "exit_code": 1, "last_checkpoint_step": checkpoint,
                     "attempt": 1, "start": 0, "trained": True, "last_step": crash_after, "loss_at": loss_at,
                     "backoff_s": 30.0})
    event(t + 1, "gpu_wait_start", 1)
    event(t + 661, "gpu_wait_end", 1)
    begin = t + 663
    event(begin, "trainer_start", 1, resumed_from_step=checkpoint,
          **_placement(sources[min(1, len(sources) - 1)], 2), **_capacity_end(sources[min(1, len(sources) - 1)], begin))
    t = begin + 300.0                                   # model load + resume + validation
    points = [(val_tag, checkpoint, reward(checkpoint) + 0.03, t)]   # verl validates on resume
    last = total_steps if finished else checkpoint + (total_steps - checkpoint) // 2
    t, steps = run_steps(1, checkpoint + 1, last, t)
    if steps:
        events.extend(_recovery_events(steps, loss_at, decided, begin, crash_after, checkpoint))
    write_scalar_events(tensorboard_dir(path, 1, 1), points + steps)
    if finished:
        event(t + 20, "trainer_exit", 1, exit_code=0, reason="succeeded", last_checkpoint_step=total_steps,
              last_step=total_steps)
        event(t + 22, "driver_end", 1, exit_code=0)
        t += 22
        _write_eval(path, run_id or path.name, total_steps)
    append_jsonl(path / EVENTS_FILE, events)
    append_jsonl(path / RESTARTS_FILE, restarts)
    return SyntheticRun(path, framework, total_steps, 2, 8, t0, t)


def write_demo_report(run: SyntheticRun, out: str | Path, stack: str | None) -> Path:
    """The run's report, as `gke-grpo report RUN_DIR --stack STACK --out OUT` writes it for a
    deployed stack: the stack file's spec and cost estimate stand in for its outputs."""
    from jobs.cli.report import CostBasis, build_report, collect_inputs, planned_steps

    spec = estimate = basis = None
    if stack is not None:
        from components.cost import estimate_cost
        from components.run_spec import load_stack_file, spec_from_config

        config = load_stack_file(stack, None)
        spec, estimate = spec_from_config(config), estimate_cost(config)
        basis = CostBasis(estimate["machineType"], estimate["provisioningModel"], int(estimate["gpuNodes"]))
    inputs = collect_inputs(
        run.path, framework=run.framework, cost_basis=basis, preview_estimate=estimate, spec=spec, stack=stack,
        planned=planned_steps(spec.total_steps, spec.total_epochs, spec.prompts_per_step) if spec else run.total_steps,
        model=spec.model if spec else None, checkpoint_every_steps=spec.checkpoint_every_steps if spec else 10,
        now=run.end_time + 600)
    return build_report(inputs).write(out)


def _record_name(source) -> str:
    """A config capacity source as the run's records name it (jobs/contract/capacity.py)."""
    if source.reservation is not None:
        return RESERVATION_PREFIX + source.reservation.name
    return FLEX_START if source.kind == "flexStart" else SPOT


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.synthetic_run", description=__doc__.split("\n\n")[0])
    parser.add_argument("out", help="run directory to write (must not exist)")
    parser.add_argument("--framework", choices=("verl", "nemo-rl"),
                        help="the trainer whose TensorBoard tags are written (default: the stack's, else verl)")
    parser.add_argument("--live", action="store_true",
                        help="leave the second start running, its last step a minute ago")
    parser.add_argument("--steps", type=int, default=58, help="planned steps (dev: 2 epochs of 29)")
    parser.add_argument("--stack", help="take the run id, framework and settings from Pulumi.STACK.yaml "
                                        "(offline), as if that stack had run it")
    parser.add_argument("--report", metavar="DIR", help="also write the run's report into DIR")
    args = parser.parse_args(argv)
    for module in ("tensorboard", "matplotlib") if args.report else ("tensorboard",):
        missing = not_installed(module, "`python -m tools.synthetic_run`")
        if missing is not None:
            parser.exit(2, f"error: {missing}\n")
    if Path(args.out).exists():
        parser.error(f"{args.out} exists")
    run_id = framework = None
    sources: tuple[str, ...] = (SPOT, FLEX_START)
    if args.stack:
        from components.run_spec import StackFileError, load_stack_file, spec_from_config

        try:
            config = load_stack_file(args.stack, None)
        except StackFileError as exc:
            parser.error(str(exc))
        spec = spec_from_config(config)
        run_id, framework = spec.run_id, spec.framework
        sources = tuple(_record_name(source) for source in config.capacity.sources)
    framework = args.framework or framework or "verl"
    t0 = 1_780_000_000.0
    if args.live:   # place the run so that now is a minute after its last step
        import tempfile
        import time

        with tempfile.TemporaryDirectory() as scratch:
            dry = write_synthetic_run(scratch, framework, t0=0.0, total_steps=args.steps, finished=False)
        t0 = time.time() - dry.end_time - 60
    run = write_synthetic_run(args.out, framework, t0=t0, total_steps=args.steps, finished=not args.live,
                              run_id=run_id, sources=sources)
    print(f"wrote {run.path} ({run.framework}, {run.total_steps} planned steps)")
    if args.report:
        page = write_demo_report(run, args.report, args.stack)
        print(f"report: {page.resolve()}")
        print(f"open it: file://{page.resolve()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
