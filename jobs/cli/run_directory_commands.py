"""The commands that read a run's directory (/data/runs/<run-id>: TensorBoard files and the
timeline, on the cluster, fetched, or copied): status rows, plot and report."""

from __future__ import annotations

import os
from pathlib import Path

from jobs.cli.output_files import check_output_dir, describe_write_error
from jobs.cli.ray_jobs import Runs
from jobs.cli.stack_outputs import StackTarget, kubeconfig_file
from jobs.cli.target import Target, Unreachable, UsageError, load_stack, need_run, pick_attempt
from jobs.contract.credentials import redact
from jobs.contract.exit_codes import ExitCode
from jobs.contract.health import HEALTH_FILE
from jobs.contract.records import EVENTS_FILE, RESTARTS_FILE, TENSORBOARD_DIR
from jobs.contract.safe_files import CONSOLE_LOG, UnusableFile, read_text
from jobs.contract.spec import GrpoSpec


def run_directory_of(args, run_id: str | None, stack_info: StackTarget | None = None) -> Path | None:
    """--fetch (a copy from the head pod), --run-dir, else /data/runs/<run-id> when this machine
    sees it (on the head, or a mount)."""
    from jobs.contract.records import run_dir

    if getattr(args, "fetch", False):
        if stack_info is None or not run_id:
            raise UsageError("--fetch needs --stack STACK: its RayCluster is where the run directory is")
        from jobs.cli.fetch_run import FetchError, fetch_run_dir

        dest = Path(args.run_dir) if getattr(args, "run_dir", None) else Path("runs") / run_id
        _replaceable(dest)
        exported = None if args.kube_context else stack_info.kubeconfig
        try:
            with kubeconfig_file(exported) as kubeconfig:
                return fetch_run_dir(stack_info.namespace, stack_info.ray_cluster_name, run_id, dest,
                                     kubectl=args.kubectl, context=args.kube_context,
                                     kubeconfig=kubeconfig)
        except FetchError as exc:
            raise Unreachable(f"--fetch: {exc}") from None
    if getattr(args, "run_dir", None):
        path = Path(args.run_dir)
        if not path.is_dir():
            raise UsageError(f"--run-dir {path}: not a directory")
        return path
    if run_id:
        path = run_dir(checked_run_id(run_id))
        return path if path.is_dir() else None
    return None


def checked_run_id(run_id: str, what: str = "run id") -> str:
    """``run_id`` when it can name /data/runs/<run-id> (letters, digits, '.', '_', '-'); a usage
    error otherwise (``../x`` never leaves the runs directory)."""
    from jobs.contract.records import run_dir

    try:
        run_dir(run_id)
    except ValueError:
        raise UsageError(f"{what} {redact(run_id)[:100]!r} is not a run id (letters, digits, '.', "
                         "'_' and '-', starting with a letter or digit) and not a run directory here") from None
    return run_id


def _replaceable(dest: Path) -> None:
    """--fetch replaces its destination with the copy: refuse one that is not a copy of a run
    directory (a home folder given as --run-dir by mistake must not be deleted)."""
    if not os.path.lexists(dest):
        return
    if dest.is_symlink() or not dest.is_dir():
        raise UsageError(f"--fetch: {dest} exists and is not a directory: give --run-dir a new folder")
    names = {entry.name for entry in dest.iterdir()}
    if names and not names & {EVENTS_FILE, RESTARTS_FILE, TENSORBOARD_DIR, HEALTH_FILE}:
        raise UsageError(f"--fetch replaces {dest} with the copy, and it holds other files (not a run "
                         "directory): give --run-dir a new or empty folder")

def report_inputs(args, run_id: str | None, stack_info: StackTarget | None = None,
                   spec: GrpoSpec | None = None):
    from jobs.cli.report import CostBasis, collect_inputs, planned_steps

    directory = run_directory_of(args, run_id, stack_info)
    if directory is None:
        return None
    cost_basis = preview = planned = None
    estimate = stack_info.cost_estimate if stack_info is not None else None
    if estimate is not None:   # the stack's output costEstimate (components/cost.py estimate_cost)
        try:
            cost_basis = CostBasis(str(estimate["machineType"]), str(estimate["provisioningModel"]),
                                   int(estimate["gpuNodes"]))
        except (KeyError, TypeError, ValueError):
            raise UsageError("the stack's output costEstimate has no machineType, provisioningModel "
                             "and gpuNodes: deploy this version of the program") from None
        preview = estimate
    if spec is not None:
        planned = planned_steps(spec.total_steps, spec.total_epochs, spec.prompts_per_step)
    inputs = collect_inputs(directory, run_id or directory.name, framework=spec.framework if spec else None,
                            cost_basis=cost_basis, planned=planned, preview_estimate=preview,
                            model=spec.model if spec else None,
                            checkpoint_every_steps=spec.checkpoint_every_steps if spec else None,
                            spec=spec, stack=stack_info.stack if stack_info else None)
    # A split run's pools, their sources and cost per hour (jobs/cli/split_view.py).
    inputs.gpu_capacity = stack_info.gpu_capacity if stack_info else None
    inputs.dashboard_url = stack_info.dashboard_url if stack_info else None
    return inputs

def warn(lines: list[str], err, limit: int = 20) -> None:
    """What the readers skipped, one line each on stderr (the report and status show them too)."""
    for line in lines[:limit]:
        print(f"[gke-grpo] warning: {redact(line)}", file=err)
    if len(lines) > limit:
        print(f"[gke-grpo] warning: ... and {len(lines) - limit} more (see the report)", file=err)
    err.flush()


def run_rows(args, run_id: str | None, target: Target | None) -> list[tuple[str, str]]:
    from jobs.cli.report import run_status_rows

    inputs = report_inputs(args, run_id, getattr(target, "stack", None), getattr(target, "spec", None))
    return run_status_rows(inputs) if inputs is not None else []

def cmd_status_offline(args, out, err) -> int:
    """status from a run directory alone (no Ray dashboard): `status --run-dir DIR`."""
    from jobs.cli.report import run_status_rows

    stack_info = spec = None
    if args.stack or args.config_file:
        stack_info = load_stack(args.stack, args.config_file, err)
        spec = stack_info.spec
    inputs = report_inputs(args, args.run_id or Path(args.run_dir).resolve().name, stack_info, spec)
    if inputs is None:
        raise UsageError(f"--run-dir {args.run_dir}: not a directory")
    g = inputs.goodput
    mismatch = inputs.identity_warning      # jobs/cli/run_identity.py
    if mismatch:
        print(f"[gke-grpo] warning: MISMATCH: {mismatch}", file=err, flush=True)
    rows = [("run", inputs.run_id), ("run dir", str(inputs.run_dir)),
            ("state", "live (no driver_end yet)" if g.live else "ended")]
    if mismatch:
        rows.append(("WARNING", f"MISMATCH: {mismatch}"))
    rows += run_status_rows(inputs)
    if not any(key == "progress" for key, _ in rows):
        rows.append(("progress", "no TensorBoard step metrics in the run directory"))
    for key, value in rows:
        print(f"{key:<12}{value}", file=out)
    out.flush()
    return ExitCode.OK

def cmd_report(args, out, err) -> int:
    stack_info = spec = None
    if args.out:
        check_output_dir("--out", args.out)
    run = args.run
    if run and Path(run).is_dir() and not args.run_dir:      # Path("") is the current folder
        args.run_dir = run
        run = Path(run).resolve().name
    else:
        checked_run_id(run, "RUN")
    run_id = run
    # A run directory that is not here is said before the stack is read (that takes seconds).
    if not args.fetch and run_directory_of(args, run_id) is None:
        from jobs.contract.records import run_dir
        raise UsageError(f"no run directory for {run_id}: {run_dir(run_id)} is not here; give "
                         "--fetch --stack STACK (a copy from the head pod), or copy it yourself "
                         "(docs/metrics-and-report.md) and give --run-dir DIR")
    if args.stack or args.config_file:
        stack_info = load_stack(args.stack, args.config_file, err)
        spec = stack_info.spec
    inputs = report_inputs(args, run_id, stack_info, spec)
    if inputs is None:    # pragma: no cover - checked above, and --fetch returns a directory or raises
        raise UsageError(f"no run directory for {run_id}")
    skipped = inputs.data_warnings()
    if inputs.timeline.empty and inputs.metrics.empty:
        found = f": {'; '.join(skipped[:5])}" if skipped else ""
        raise UsageError(f"{inputs.run_dir}: no usable events.jsonl records and no TensorBoard step "
                         f"metrics: not a run directory?{found}")
    out_dir = args.out or f"report-{inputs.run_id}"
    if not args.out:
        check_output_dir("--out", out_dir)
    warn(skipped, err)
    if inputs.identity_warning:     # also a banner at the top of the page
        print(f"[gke-grpo] warning: MISMATCH: {inputs.identity_warning}", file=err, flush=True)
    from jobs.cli.report import build_report

    report = build_report(inputs)
    try:
        page = report.write(out_dir)
    except OSError as exc:   # a full disk, a FIFO or a symlink where a file goes
        print(f"[gke-grpo] error: cannot write the report to {out_dir}: {describe_write_error(exc)}"
              + (f" ({exc.filename})" if exc.filename else ""), file=err, flush=True)
        return ExitCode.FAILED
    print(f"[gke-grpo] wrote {page} ({len(report.figures)} figures): goodput {inputs.goodput.describe()}",
          file=out, flush=True)
    return ExitCode.OK

def cmd_plot(runs: Runs | None, target: Target | None, args, out, err) -> int:
    from jobs.cli.plot import MAX_PLOTTED, describe_records, plot_records, unplottable_values
    from jobs.cli.training_logs import merge_runs, parse_log

    framework = None if args.framework == "auto" else args.framework
    structured = None if args.log else report_inputs(
        args, getattr(target, "run_id", None) or args.run_id, getattr(target, "stack", None),
        getattr(target, "spec", None))
    if structured is not None:
        warn(structured.data_warnings(), err)
    if structured is not None and not structured.metrics.empty:
        records = structured.metrics.step_records()
        title = structured.run_id
        source = "TensorBoard files"
    elif runs is None and not args.log:
        skipped = structured.data_warnings() if structured is not None else []
        raise UsageError(f"{getattr(args, 'run_dir', None)}: no TensorBoard step metrics there"
                         + (f" ({'; '.join(skipped[:5])})" if skipped else ""))
    elif args.log:
        texts = []
        for name in args.log:
            try:
                texts.append((name, read_text(name, CONSOLE_LOG, errors="replace")))
            except UnusableFile as exc:
                raise UsageError(f"--log: {exc}") from None
        title = ", ".join(Path(n).name for n, _ in texts)
    else:
        assert runs is not None and target is not None
        if args.attempt is not None or args.submission_id:
            chosen = [pick_attempt(runs, target, args)]
        else:
            chosen = runs.attempts(need_run(target))
            if not chosen:
                raise UsageError(f"run {target.run_id} has no attempt on {target.address} yet")
        texts = [(a.submission_id, runs.logs(a.submission_id)) for a in chosen]
        title = target.run_id or chosen[-1].submission_id
        if target.spec is not None and framework is None:
            framework = target.spec.framework
    if structured is None or structured.metrics.empty:
        records = merge_runs(*(parse_log(text, framework) for _, text in texts))
        source = "console log"
    try:
        path = plot_records(records, args.out, title=title)
    except ValueError as exc:
        print(f"[gke-grpo] {exc}", file=err, flush=True)
        return ExitCode.USAGE
    except OSError as exc:   # a full disk, a FIFO nobody reads
        print(f"[gke-grpo] error: cannot write the plot to {args.out}: {describe_write_error(exc)}",
              file=err, flush=True)
        return ExitCode.FAILED
    unplottable = unplottable_values(records)
    if unplottable:
        print(f"[gke-grpo] warning: {unplottable} value(s) not drawn: NaN, infinite or beyond "
              f"{MAX_PLOTTED:g}", file=err, flush=True)
    print(f"[gke-grpo] wrote {path}: {describe_records(records)} [{source}]", file=out, flush=True)
    return ExitCode.OK


def cmd_health(args, out, err) -> int:
    """`health PATH`: a health.json (or the run directory holding it) as `status` shows it; exit
    0 when the gate passed, 6 when it failed."""
    from jobs.cli.health_view import gate_passed, health_status_rows, read_health

    path = Path(args.path)
    if path.is_dir():
        path = path / HEALTH_FILE
    try:
        doc = read_health(path)
    except UnusableFile as exc:
        raise UsageError(str(exc)) from None
    if not isinstance(doc, dict):
        raise UsageError(f"{path}: not a health result (a JSON object)")
    for key, value in health_status_rows(doc):
        print(f"{key:<12}{value}", file=out)
    out.flush()
    return ExitCode.OK if gate_passed(doc) else ExitCode.HEALTH_GATE_FAILED
