"""The report's opening sections and its validation table, from the run's own records:

    summary_html(inputs)       model and revision, framework and version, nodes x GPUs, capacity
                               source, key settings (the stack's spec, when --stack is given)
    attempts_html(inputs)      one row per trainer start: GPU wait, capacity source and nodes,
                               exit reason, steps, checkpoint resumed from and left, when its
                               capacity ends and the trainer's saves before (capacity_view.py)
    checkpoint_html(inputs)    the latest resumable checkpoint and the command that resumes it
    validation_html(inputs)    the validation score per step, against step 0

What they read: the driver's events.jsonl (driver_start ``run_id``; trainer_start
``gpu_nodes``/``capacity_sources``/``resumed_from_step``; trainer_exit ``reason``/``exit_code``/
``last_checkpoint_step``/``last_step``; driver_end ``exit_code``: jobs/head/driver.py), its
restarts.jsonl, and the TensorBoard steps of each start (jobs/cli/metrics.py).
"""

from __future__ import annotations

import posixpath
from typing import TYPE_CHECKING, Any

from jobs.cli.capacity_view import start_capacity_text
from jobs.cli.gpu_status import placement_text
from jobs.cli.report_html import duration_text, html_table, page_text, utc_text
from jobs.cli.split_view import layout_text
from jobs.contract.capacity import describe_source
from jobs.contract.converters import nemo_rl_step_dir, verl_actor_dir
from jobs.contract.layout import DATA_LAYOUT
from jobs.contract.records import MAX_STEP, Event, plain_int

if TYPE_CHECKING:
    from jobs.cli.report_inputs import ReportInputs

# The console script (pyproject.toml [project.scripts]); `python -m jobs` is the same command.
COMMAND = "gke-grpo"
STACK_PLACEHOLDER = "STACK"
# Validation rows shown in full up to this many; beyond, step 0 and the latest ones.
VALIDATION_ROWS = 30


def _event_of(inputs: ReportInputs, name: str, attempt: int, start: int) -> Event | None:
    found = [e for e in inputs.timeline.events if e.event == name and e.key == (attempt, start)]
    return found[-1] if found else None


def _step(value: Any) -> int | None:
    return plain_int(value, 0, MAX_STEP)


def latest_checkpoint_step(inputs: ReportInputs) -> int | None:
    """The newest complete checkpoint the driver saw: the last trainer_exit (or restart record)
    that names one, else the last step TensorBoard shows a save at."""
    steps = [(e.time, _step(e.extra.get("last_checkpoint_step"))) for e in inputs.timeline.events
             if e.event == "trainer_exit"]
    steps += [(r.time, r.last_checkpoint_step) for r in inputs.timeline.restarts]
    known = [step for _, step in sorted(steps, key=lambda pair: pair[0]) if step is not None]
    if known:
        return known[-1]
    saved = [r.step for r in inputs.metrics.merged() if (r.get("checkpoint_time") or 0) > 0]
    return max(saved) if saved else None


def checkpoint_path(run_id: str, framework: str | None, step: int) -> str | None:
    """Where that checkpoint is on the shared volume: verl's global_step_<n> (the actor's
    shards under it), NeMo RL's step_<n> (jobs/contract/converters.py)."""
    try:
        root = DATA_LAYOUT.run_checkpoint_dir(run_id)
    except ValueError:
        return None
    if framework == "verl":
        return posixpath.dirname(verl_actor_dir(root, step))
    if framework == "nemo-rl":
        return nemo_rl_step_dir(root, step)
    return root


def _capacity_text(inputs: ReportInputs) -> str:
    placements = [e.extra for e in inputs.timeline.events if e.event == "trainer_start" and "gpu_nodes" in e.extra]
    if placements:
        return placement_text(placements[-1]).split(" (")[0] + " (the latest start)"
    model = (inputs.preview_estimate or {}).get("provisioningModel")
    if isinstance(model, str):
        return describe_source(model) + " (the stack's first capacity source)"
    return "unknown (no trainer start with its GPU nodes recorded)"


def summary_rows(inputs: ReportInputs) -> list[tuple[str, str]]:
    spec = inputs.spec
    framework = inputs.framework or "unknown"
    rows: list[tuple[str, str]] = [("run id", inputs.run_id)]
    if inputs.stack:
        rows.append(("stack", inputs.stack))
    if spec is not None:
        rows += [("model", spec.model + (f" @ {spec.model_revision}" if spec.model_revision else " (revision not pinned)")),
                 ("framework", f"{spec.framework} {spec.framework_version} (Ray {spec.ray_version})"),
                 ("image", spec.image),
                 ("GPUs", f"{spec.nodes} nodes x {spec.gpus_per_node} {spec.gpu_type} = "
                          f"{spec.nodes * spec.gpus_per_node} GPUs")]
    else:
        rows += [("model", inputs.model or "unknown (give --stack)"),
                 ("framework", f"{framework} (version: give --stack)")]
        placements = [e.extra for e in inputs.timeline.events
                      if e.event == "trainer_start" and isinstance(e.extra.get("gpu_nodes"), list)]
        if placements:
            rows.append(("GPU nodes", f"{len(placements[-1]['gpu_nodes'])} (the latest start)"))
    rows.append(("capacity", _capacity_text(inputs)))
    if spec is not None:
        steps = f"{spec.total_steps} steps" if spec.total_steps else f"{spec.total_epochs} epochs"
        if inputs.planned_steps and not spec.total_steps:
            steps += f" ({inputs.planned_steps} steps)"
        rows += [("dataset", spec.dataset + (f" @ {spec.dataset_revision}" if spec.dataset_revision else "")),
                 ("length", steps),
                 ("batch", f"{spec.prompts_per_step} prompts x {spec.generations_per_prompt} generations per "
                           f"step, mini-batch {spec.mini_batch_size}"),
                 ("optimiser", f"learning rate {spec.learning_rate:g}, KL coef {spec.kl_loss_coef:g} "
                               f"({spec.kl_loss_type})"),
                 ("sequence", f"prompt <= {spec.max_prompt_length}, response <= {spec.max_response_length} tokens"),
                 ("rollout", f"{spec.rollout_engine}, tensor parallel {spec.rollout_tensor_parallel_size}, "
                             + ("colocated" if spec.colocated_generation else
                                f"{spec.generation_nodes} generation nodes")),
                 *([("layout", layout_text(inputs))] if spec.split else []),
                 ("checkpoints", f"every {spec.checkpoint_every_steps} steps, keep {spec.checkpoints_to_keep}"),
                 ("validation", f"every {spec.validate_every_steps} steps")]
    elif inputs.planned_steps:
        rows.append(("length", f"{inputs.planned_steps} steps"))
    ended = [e for e in inputs.timeline.events if e.event == "driver_end"]
    state = "live (no driver_end yet)" if not inputs.timeline.ended else (
        f"ended, driver exit {ended[-1].extra.get('exit_code', '?')}" if ended else "ended")
    rows.append(("state", state))
    return rows


def summary_html(inputs: ReportInputs) -> str:
    rows = summary_rows(inputs)
    body = "".join(f"<div><dt>{page_text(k)}</dt><dd>{page_text(v)}</dd></div>" for k, v in rows)
    note = "" if inputs.spec is not None else (
        '<p class="sub">Model revision, framework version and settings come from the stack: give '
        "--stack.</p>")
    return f'<h2 id="summary">Run summary</h2><dl class="summary">{body}</dl>{note}'


def _steps_of(inputs: ReportInputs, attempt: int, start: int) -> str:
    for metrics in inputs.metrics.starts:
        if (metrics.attempt, metrics.start) == (attempt, start):
            steps = [s.step for s in metrics.training_steps]
            if steps:
                return f"{min(steps)}-{max(steps)} ({len(steps)})"
    return "-"


def attempt_rows(inputs: ReportInputs) -> list[tuple[Any, ...]]:
    rows = []
    waits = inputs.timeline.intervals("gpu_wait")
    for iv in inputs.timeline.trainer_starts():
        began = _event_of(inputs, "trainer_start", iv.attempt, iv.start)
        extra = began.extra if began is not None else {}
        wait = sum(w.duration(inputs.now) for w in waits if (w.attempt, w.start) == (iv.attempt, iv.start))
        placed = placement_text(extra) if "gpu_nodes" in extra else "-"
        end = iv.end_event.extra if iv.end_event is not None else None
        if end is None:
            exit_text = "running" if not inputs.timeline.ended else "no exit recorded"
            left = None
        else:
            exit_text = f"{end.get('reason') or end.get('stage') or 'exit'} ({end.get('exit_code', '?')})"
            left = _step(end.get("last_checkpoint_step"))
        resumed = _step(extra.get("resumed_from_step"))
        rows.append((f"{iv.attempt}/{iv.start}", utc_text(iv.begin), duration_text(iv.duration(inputs.now)),
                     duration_text(wait) if wait else "-", placed, exit_text, _steps_of(inputs, iv.attempt, iv.start),
                     "-" if resumed is None else resumed, "-" if left is None else left,
                     start_capacity_text(inputs.timeline, iv.attempt, iv.start)))
    return rows


def attempts_html(inputs: ReportInputs) -> str:
    rows = attempt_rows(inputs)
    head = '<h2 id="attempts">Attempts and starts</h2>'
    if not rows:
        return head + '<p class="note">No trainer start recorded in events.jsonl (yet).</p>'
    return head + html_table(rows, ("attempt/start", "started", "ran", "GPU wait", "capacity source and nodes",
                                    "exit reason (code)", "steps logged", "resumed from", "checkpoint at exit",
                                    "capacity end"),
                             cls="wide", table_id="attempts-table") + \
        '<p class="sub">Each attempt is one submission of the run; each start one launch of the trainer ' \
        "inside it (the driver restarts it after a lost node). Steps logged: first-last (count) in " \
        "that start's TensorBoard folder. Capacity end: when the start's flex-start nodes or " \
        "reservation end on schedule, and the trainer's saves before it (docs/gpu-capacity.md).</p>"


def resume_advice(inputs: ReportInputs) -> tuple[str, str]:
    """(what to do, the command) for the run's state."""
    stack = inputs.stack if inputs.stack and inputs.identity_warning is None else STACK_PLACEHOLDER
    where = f"--stack {stack}"
    step = latest_checkpoint_step(inputs)
    if not inputs.timeline.ended and not inputs.timeline.empty:
        return ("The run is live: its driver restarts the trainer by itself after a lost node. Follow it:",
                f"{COMMAND} attach {where}")
    ends = [e for e in inputs.timeline.events if e.event == "driver_end"]
    if ends and ends[-1].extra.get("exit_code") == 0:
        if step is None:
            return ("The run finished.", f"{COMMAND} status {where}")
        return (f"The run finished; its last checkpoint (step {step}) can be exported for serving:",
                f"{COMMAND} export {inputs.run_id} --step {step} {where}")
    if step is None:
        return ("The run ended without a checkpoint: the next attempt starts from step 0.", f"{COMMAND} submit {where}")
    return (f"The run ended early. The next attempt resumes from step {step}:", f"{COMMAND} submit {where}")


def checkpoint_html(inputs: ReportInputs) -> str:
    parts = ['<h2 id="checkpoint">Latest checkpoint and how to resume</h2>']
    step = latest_checkpoint_step(inputs)
    if step is None:
        parts.append('<p class="note">No complete checkpoint recorded.</p>')
    else:
        path = checkpoint_path(inputs.run_id, inputs.framework, step)
        parts.append(f"<p>Step <b>{step}</b>" + (f" at <code>{page_text(path)}</code>" if path else "")
                     + " on the shared volume (the newest complete save the driver saw).</p>")
    advice, command = resume_advice(inputs)
    parts.append(f"<p>{page_text(advice)}</p><pre class=\"command\">{page_text(command)}</pre>")
    if STACK_PLACEHOLDER in command.split():
        parts.append(f'<p class="sub">{STACK_PLACEHOLDER}: the stack that deployed run {page_text(inputs.run_id)}. '
                     "A checkpoint resumes only on the same number of GPUs (docs/running-jobs.md).</p>")
    return "\n".join(parts)


def validation_rows(inputs: ReportInputs) -> list[tuple[Any, ...]]:
    scored = [r for r in inputs.metrics.merged() if r.get("val_reward") is not None]
    if not scored:
        return []
    base = scored[0].get("val_reward") if scored[0].step == 0 else None
    shown = scored if len(scored) <= VALIDATION_ROWS else scored[:1] + scored[-(VALIDATION_ROWS - 1):]
    rows: list[tuple[Any, ...]] = []
    for row in shown:
        score = row.get("val_reward")
        assert score is not None
        change = "-" if base is None or row.step == 0 else f"{score - base:+.3f}"
        rows.append((row.step, f"{score:.3f}", change, "before training" if row.step == 0 else
                     f"attempt {row.attempt} start {row.start}"))
    if len(shown) < len(scored):
        rows.insert(1, ("...", f"{len(scored) - len(shown)} more", "", ""))
    return rows


def validation_html(inputs: ReportInputs) -> str:
    rows = validation_rows(inputs)
    head = '<h2 id="validation">Validation</h2>'
    if not rows:
        return head + '<p class="note">No validation score in the TensorBoard files (yet).</p>'
    tag = {"verl": "val-core/&lt;source&gt;/reward/mean@N", "nemo-rl": "validation/accuracy"}.get(
        inputs.framework or "", "the framework's validation tag")
    return head + html_table(rows, ("step", "validation score", "change since step 0", "logged by"),
                             table_id="validation-table") + \
        f'<p class="sub">The mean score on the validation files ({tag}); step 0 is the baseline ' \
        "before any update.</p>"
