"""The jobs CLI: submit, attach, tail, stop and report GRPO runs on the stack's Ray cluster.

    python -m jobs submit    --stack dev [--rerun] [--attempt N] [--no-follow]
    python -m jobs attach    --stack dev
    python -m jobs logs      --stack dev [--follow] [--attempt N]
    python -m jobs status    --stack dev
    python -m jobs list      --stack dev
    python -m jobs stop      --stack dev [--wait]
    python -m jobs plot      --stack dev --out run.png  |  --log FILE ... --out run.png
    python -m jobs report    RUN [--run-dir DIR] [--stack dev] [--out DIR]   (jobs.report)
    python -m jobs preflight ...                       (jobs.preflight)

Target: the deployed stack (``pulumi stack output --json --show-secrets [-s STACK]``; no
``--stack``: Pulumi's selected stack): its namespace, head service, run, spec and kubeconfig.
The CLI opens ``kubectl port-forward`` (with the exported kubeconfig, in a private temporary
file) to the RayCluster's head service on 127.0.0.1 for the duration of the command (always
closed afterwards). Without Pulumi, or with ``--config-file FILE``, the stack file is the offline
fallback (the offline preview's outputs; it says so on stderr). ``--address URL`` uses a dashboard
you reach yourself (then ``--stack`` only names the run, or give ``--run-id``). docs/jobs-cli.md.
Exit codes: see ``jobs.runs`` (0 ok, 1 job failed or plot not written, 2 usage/config, 3 GPU
wait timeout, 4 dashboard unreachable, 5 job stopped, 130 interrupted, 129/143 SIGHUP/SIGTERM);
docs/errors-and-guarantees.md.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Optional, Sequence, TextIO

from jobs.runs import (Attempt, ExitCode, RetryPolicy, RunError, Runs, fmt_duration, fmt_time,
                       run_entrypoint)
from jobs.credentials import redact
from jobs.spec import GrpoSpec
from jobs.stack_outputs import StackError, StackTarget, kubeconfig_file, stack_target

ROOT = Path(__file__).resolve().parent.parent
# A plot that could not be written (full disk, unwritable path): exit 1, as a failure.
EXIT_WRITE_FAILED = ExitCode.JOB_FAILED
# Longest --wait-timeout / --status-every accepted: a year (anything longer is a typo).
MAX_SECONDS = 366 * 24 * 3600.0

# (spec, args) -> (entrypoint, runtime_env); tests inject small real entrypoints here.
EntrypointBuilder = Callable[[GrpoSpec, argparse.Namespace], tuple[str, dict]]


class UsageError(RunError):
    exit_code = ExitCode.USAGE


@dataclass
class Target:
    address: str
    spec: Optional[GrpoSpec]
    run_id: Optional[str]
    stack: Optional[StackTarget] = None   # the stack's outputs, when a stack is targeted


def default_entrypoint(spec: GrpoSpec, args: argparse.Namespace) -> tuple[str, dict]:
    """The run driver's one command (the same as the Pulumi RayJob's) and the rendered runtime
    env; the driver's plan (stages, trainer argv, budgets) is the one deployed to the head."""
    try:
        from jobs.render import render   # lazily: written alongside, heavy imports stay out
    except ModuleNotFoundError as exc:
        if exc.name not in ("jobs.render",):
            raise
        raise UsageError("jobs.render (the training command) is not in this checkout") from None
    rendered = render(spec)
    return run_entrypoint(), dict(rendered.runtime_env or {})


# ---- targets ------------------------------------------------------------------------------------

def load_stack(stack: Optional[str], config_file: Optional[str], err: TextIO) -> StackTarget:
    """The stack's outputs: deployed (`pulumi stack output`), else the stack file offline."""
    if config_file and not stack:
        raise UsageError("--config-file needs --stack STACK (the stack the file configures)")
    try:
        return stack_target(stack, config_file, err)
    except StackError as exc:
        raise UsageError(str(exc)) from None


@contextlib.contextmanager
def open_target(args: argparse.Namespace, err: TextIO) -> Iterator[Target]:
    stack_info = None
    if args.stack or args.config_file or not args.address:
        stack_info = load_stack(args.stack, args.config_file, err)
    spec = stack_info.spec if stack_info else None
    run_id = (stack_info.run_id or (spec.run_id if spec else None)) if stack_info else args.run_id
    if args.address:
        yield Target(args.address, spec, run_id, stack_info)
        return
    assert stack_info is not None
    from jobs.portforward import PortForwardError, port_forward

    namespace, service = stack_info.namespace, stack_info.head_service
    # --kube-context: your own kubeconfig's context; else the stack's exported kubeconfig.
    exported = None if args.kube_context else stack_info.kubeconfig
    print(f"[jobs] port-forward svc/{service} -n {namespace} -> 127.0.0.1 "
          f"({stack_info.describe}; kubeconfig: {'the exported one' if exported else 'yours'})",
          file=err, flush=True)
    with contextlib.ExitStack() as stack:   # stops kubectl on any exit, Ctrl-C included
        kubeconfig = stack.enter_context(kubeconfig_file(exported))
        try:
            address = stack.enter_context(port_forward(
                namespace, service, local_port=args.local_port, context=args.kube_context,
                kubectl=args.kubectl, err=err, kubeconfig=kubeconfig))
        except PortForwardError as exc:
            raise _Unreachable(str(exc)) from None
        yield Target(address, spec, run_id, stack_info)


class _Unreachable(RunError):
    exit_code = ExitCode.DASHBOARD_UNREACHABLE


# ---- commands -----------------------------------------------------------------------------------

def _need_run(target: Target) -> str:
    if not target.run_id:
        raise UsageError("which run? give --stack STACK (its runId output names the run) or --run-id RUN")
    return target.run_id


def _pick(runs: Runs, target: Target, args: argparse.Namespace) -> Attempt:
    """The attempt a command is about: --submission-id, --attempt N, or the latest."""
    if getattr(args, "submission_id", None):
        return runs.attempt_info(args.submission_id)
    run_id = _need_run(target)
    attempts = runs.attempts(run_id)
    if getattr(args, "attempt", None) is not None:
        match = [a for a in attempts if a.number == args.attempt]
        if not match:
            raise UsageError(f"run {run_id} has no attempt {args.attempt} "
                             f"(attempts: {', '.join(str(a.number) for a in attempts) or 'none'})")
        return match[0]
    if not attempts:
        raise UsageError(f"run {run_id} has no attempt on {target.address} yet: "
                         "`python -m jobs submit` starts one")
    return attempts[-1]


def _follow_and_report(runs: Runs, attempt: Attempt, args, out: TextIO, err: TextIO) -> int:
    print(f"[jobs] following {attempt.submission_id} (Ctrl-C detaches; the attempt keeps running)",
          file=err, flush=True)
    runs.follow(attempt.submission_id, status_every=args.status_every)
    final = runs.attempt_info(attempt.submission_id, attempt.number)
    code = runs.exit_code_for(final)
    if code == ExitCode.OK:
        print(f"[jobs] {final.submission_id} SUCCEEDED after {fmt_duration(final.duration())}",
              file=err, flush=True)
    return code


def cmd_submit(runs: Runs, target: Target, args, out, err, build: EntrypointBuilder) -> int:
    spec = target.spec
    if spec is None:
        raise UsageError("submit needs the stack's run spec (output runSpec): target the stack "
                         "(--stack STACK, or Pulumi's selected stack) deployed by this version")
    entrypoint, runtime_env = build(spec, args)
    result = runs.submit(spec, entrypoint, runtime_env, rerun=args.rerun, attempt=args.attempt)
    a = result.attempt
    if result.action == "succeeded":
        print(f"[jobs] run {spec.run_id} already SUCCEEDED (attempt {a.number}, {a.submission_id}, "
              f"ended {fmt_time(a.end_time)}); nothing submitted. --rerun starts attempt "
              f"{a.number + 1} (it resumes from {spec.checkpoint_dir}).", file=out, flush=True)
        return ExitCode.OK
    if result.action == "attached":
        print(f"[jobs] attempt {a.number} of run {spec.run_id} ({a.submission_id}) is {a.status}: "
              "attaching to it, nothing submitted", file=out, flush=True)
    else:
        print(f"[jobs] submitted {a.submission_id} (attempt {a.number} of run {spec.run_id}); "
              f"checkpoints: {spec.checkpoint_dir}", file=out, flush=True)
    if args.no_follow:
        return runs.exit_code_for(a) if not a.live else ExitCode.OK
    return _follow_and_report(runs, a, args, out, err)


def cmd_attach(runs: Runs, target: Target, args, out, err) -> int:
    attempt = _pick(runs, target, args)
    if not attempt.live:
        print(f"[jobs] {attempt.submission_id} is already {attempt.status} "
              f"(ended {fmt_time(attempt.end_time)})", file=out, flush=True)
        return runs.exit_code_for(attempt)
    return _follow_and_report(runs, attempt, args, out, err)


def cmd_logs(runs: Runs, target: Target, args, out, err) -> int:
    attempt = _pick(runs, target, args)
    if args.follow and attempt.live:
        return _follow_and_report(runs, attempt, args, out, err)
    out.write(runs.logs(attempt.submission_id))
    out.flush()
    return ExitCode.OK


def cmd_status(runs: Runs, target: Target, args, out, err) -> int:
    from jobs.logs import ProgressTracker

    attempt = _pick(runs, target, args)
    structured = _run_rows(args, target.run_id, target)
    log = runs.logs(attempt.submission_id)
    rows = [("run", target.run_id or attempt.metadata.get("run_id", "-")),
            ("attempt", f"{attempt.number} ({attempt.submission_id})"),
            ("state", attempt.status),
            ("started", fmt_time(attempt.start_time)),
            ("ended", fmt_time(attempt.end_time)),
            ("elapsed", fmt_duration(attempt.duration()))]
    if not any(key == "progress" for key, _ in structured):
        # The live fallback: the console lines of the attempt's log on the Ray head.
        tracker = ProgressTracker()
        tracker.feed(log + "\n")
        rows.append(("progress", tracker.describe() + " [console log]"))
    rows += structured
    from jobs.run import restarts_from_log
    rows.append(("restarts", describe_restarts(restarts_from_log(log))))
    if attempt.message:
        rows.append(("message", attempt.message))
    if target.spec is not None:
        rows.append(("checkpoints", target.spec.checkpoint_dir))
    from jobs.health import health_from_log, status_rows as health_rows
    rows += health_rows(health_from_log(log))       # the gate's result line in the job log
    for key, value in rows:
        print(f"{key:<12}{value}", file=out)
    out.flush()
    return runs.exit_code_for(attempt, show_tail=False)


def describe_restarts(records: list[dict]) -> str:
    """`1 (lost_worker, exit 1, last checkpoint step 40)` from the driver's RESTART records."""
    if not records:
        return "0"
    last = records[-1]
    step = last.get("last_checkpoint_step")
    return (f"{len(records)} (last: {last.get('reason')}, exit {last.get('exit_code')}, "
            f"last checkpoint step {step if step is not None else 'none'})")


# ---- the run directory (TensorBoard files, timeline): status, plot, report ----------------------

def _run_directory(args, run_id: Optional[str], stack_info: Optional[StackTarget] = None) -> Optional[Path]:
    """--fetch (a copy from the head pod), --run-dir, else /data/runs/<run-id> when this machine
    sees it (on the head, or a mount)."""
    from jobs.timeline import run_dir

    if getattr(args, "fetch", False):
        if stack_info is None or not run_id:
            raise UsageError("--fetch needs --stack STACK: its RayCluster is where the run directory is")
        from jobs.fetch_run import FetchError, fetch_run_dir

        dest = Path(args.run_dir) if getattr(args, "run_dir", None) else Path("runs") / run_id
        exported = None if args.kube_context else stack_info.kubeconfig
        try:
            with kubeconfig_file(exported) as kubeconfig:
                return fetch_run_dir(stack_info.namespace, stack_info.ray_cluster_name, run_id, dest,
                                     kubectl=args.kubectl, context=args.kube_context,
                                     kubeconfig=kubeconfig)
        except FetchError as exc:
            raise _Unreachable(f"--fetch: {exc}") from None
    if getattr(args, "run_dir", None):
        path = Path(args.run_dir)
        if not path.is_dir():
            raise UsageError(f"--run-dir {path}: not a directory")
        return path
    if run_id:
        try:
            path = run_dir(run_id)
        except ValueError:
            return None
        return path if path.is_dir() else None
    return None


def _report_inputs(args, run_id: Optional[str], stack_info: Optional[StackTarget] = None,
                   spec: Optional[GrpoSpec] = None):
    from jobs.report import CostBasis, collect_inputs, planned_steps

    directory = _run_directory(args, run_id, stack_info)
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
    return collect_inputs(directory, run_id or directory.name, framework=spec.framework if spec else None,
                          cost_basis=cost_basis, planned=planned, preview_estimate=preview)


def _run_rows(args, run_id: Optional[str], target: Optional[Target]) -> list[tuple[str, str]]:
    from jobs.report import status_rows

    inputs = _report_inputs(args, run_id, getattr(target, "stack", None), getattr(target, "spec", None))
    return status_rows(inputs) if inputs is not None else []


def cmd_status_offline(args, out, err) -> int:
    """status from a run directory alone (no Ray dashboard): `status --run-dir DIR`."""
    from jobs.report import status_rows

    stack_info = spec = None
    if args.stack or args.config_file:
        stack_info = load_stack(args.stack, args.config_file, err)
        spec = stack_info.spec
    inputs = _report_inputs(args, args.run_id or Path(args.run_dir).resolve().name, stack_info, spec)
    assert inputs is not None
    g = inputs.goodput
    rows = [("run", inputs.run_id), ("run dir", str(inputs.run_dir)),
            ("state", "live (no driver_end yet)" if g.live else "ended")]
    rows += status_rows(inputs)
    if not any(key == "progress" for key, _ in rows):
        rows.append(("progress", "no TensorBoard step metrics in the run directory"))
    for key, value in rows:
        print(f"{key:<12}{value}", file=out)
    out.flush()
    return ExitCode.OK


def cmd_report(args, out, err) -> int:
    stack_info = spec = None
    if args.stack or args.config_file:
        stack_info = load_stack(args.stack, args.config_file, err)
        spec = stack_info.spec
    run = args.run
    if Path(run).is_dir() and not args.run_dir:
        args.run_dir = run
        run = Path(run).resolve().name
    run_id = run
    if spec is not None and not args.run_dir and run_id != spec.run_id:
        print(f"[jobs] note: run {run_id} is not the stack's run ({spec.run_id}); cost and planned "
              "steps are the stack's", file=err, flush=True)
    inputs = _report_inputs(args, run_id, stack_info, spec)
    if inputs is None:
        from jobs.timeline import run_dir
        raise UsageError(f"no run directory for {run_id}: {run_dir(run_id)} is not here; give "
                         "--fetch --stack STACK (a copy from the head pod), or copy it yourself "
                         "(docs/metrics-and-report.md) and give --run-dir DIR")
    if inputs.timeline.empty and inputs.metrics.empty:
        raise UsageError(f"{inputs.run_dir}: no events.jsonl and no TensorBoard files: not a run directory?")
    from jobs.report import build_report

    report = build_report(inputs)
    page = report.write(args.out or f"report-{inputs.run_id}")
    print(f"[jobs] wrote {page} ({len(report.figures)} figures): goodput {inputs.goodput.describe()}",
          file=out, flush=True)
    return ExitCode.OK


def cmd_list(runs: Runs, target: Target, args, out, err) -> int:
    run_id = _need_run(target)
    attempts = runs.attempts(run_id)
    if not attempts:
        print(f"run {run_id}: no attempts on {target.address}", file=out, flush=True)
        return ExitCode.OK
    print(f"run {run_id}", file=out)
    header = (f"{'ATTEMPT':<8}{'SUBMISSION ID':<52}{'STATE':<11}{'STARTED':<22}{'ENDED':<22}"
              f"{'DURATION':<10}RESTARTS")
    print(header, file=out)
    for a in attempts:
        print(f"{a.number:<8}{a.submission_id:<52}{a.status:<11}{fmt_time(a.start_time):<22}"
              f"{fmt_time(a.end_time):<22}{fmt_duration(a.duration()):<10}"
              f"{len(runs.restarts(a.submission_id))}", file=out)
    out.flush()
    return ExitCode.OK


def cmd_stop(runs: Runs, target: Target, args, out, err) -> int:
    run_id = _need_run(target)
    stopped = runs.stop(run_id)
    if stopped is None:
        print(f"[jobs] run {run_id}: no PENDING or RUNNING attempt to stop", file=out, flush=True)
        return ExitCode.OK
    print(f"[jobs] stop requested for {stopped.submission_id} (attempt {stopped.number})",
          file=out, flush=True)
    if args.wait:
        status = runs.wait_terminal(stopped.submission_id, timeout=args.wait_seconds)
        print(f"[jobs] {stopped.submission_id}: {status}", file=out, flush=True)
    return ExitCode.OK


def cmd_plot(runs: Optional[Runs], target: Optional[Target], args, out, err) -> int:
    from jobs.logs import merge_runs, parse_log
    from jobs.plot import plot_records, summary

    framework = None if args.framework == "auto" else args.framework
    structured = None if args.log else _report_inputs(
        args, getattr(target, "run_id", None) or args.run_id, getattr(target, "stack", None),
        getattr(target, "spec", None))
    if structured is not None and not structured.metrics.empty:
        records = structured.metrics.step_records()
        title = structured.run_id
        source = "TensorBoard files"
    elif runs is None and not args.log:
        raise UsageError(f"{getattr(args, 'run_dir', None)}: no TensorBoard step metrics there")
    elif args.log:
        texts = []
        for name in args.log:
            try:
                texts.append((name, Path(name).read_text(errors="replace")))
            except OSError as exc:
                raise UsageError(f"cannot read {name}: {exc.strerror}") from None
        title = ", ".join(Path(n).name for n, _ in texts)
    else:
        assert runs is not None and target is not None
        if args.attempt is not None or args.submission_id:
            chosen = [_pick(runs, target, args)]
        else:
            chosen = runs.attempts(_need_run(target))
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
        print(f"[jobs] {exc}", file=err, flush=True)
        return ExitCode.USAGE
    except OSError as exc:   # a full disk, an unwritable or impossible path
        print(f"[jobs] error: cannot write the plot to {args.out}: "
              f"{exc.strerror or type(exc).__name__}", file=err, flush=True)
        return EXIT_WRITE_FAILED
    print(f"[jobs] wrote {path}: {summary(records)} [{source}]", file=out, flush=True)
    return ExitCode.OK


# ---- parsing ------------------------------------------------------------------------------------

def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text[:40]!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text}")
    return value


def _positive_seconds(text: str) -> float:
    """A finite, positive number of seconds (not 0, -1, inf or nan), at most a year."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, got {text[:40]!r}") from None
    if not math.isfinite(value) or value <= 0 or value > MAX_SECONDS:
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds above 0 and at most "
                                         f"{MAX_SECONDS:.0f}, got {text[:40]}")
    return value


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a port number, got {text[:40]!r}") from None
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port between 1 and 65535, got {text}")
    return value


def dashboard_address(text: str, source: str = "--address") -> str:
    """A Ray dashboard URL, checked at once: http(s)://host[:port] with a port in 1-65535 and
    no credentials, path, query or fragment. Returns it without a trailing slash; UsageError
    (exit 2, before any connection) naming `source` otherwise."""
    from urllib.parse import urlsplit

    shown = redact(text)[:120]
    if any(ch.isspace() or ord(ch) < 32 for ch in text):
        raise UsageError(f"{source}: {shown!r} is not a dashboard URL: it contains blanks or "
                         "control characters")
    try:
        url = urlsplit(text.strip())
        port = url.port
    except ValueError as exc:
        raise UsageError(f"{source}: {shown!r} is not a dashboard URL ({exc}); expected "
                         "http://HOST:PORT such as http://127.0.0.1:8265") from None
    if url.scheme not in ("http", "https"):
        raise UsageError(f"{source}: {shown!r} is not a dashboard URL: the scheme must be http or "
                         "https (e.g. http://127.0.0.1:8265; ray:// and GCS addresses such as "
                         "127.0.0.1:6379 are for ray.init, not for jobs)")
    if not url.hostname:
        raise UsageError(f"{source}: {shown!r} has no host; expected http://HOST:PORT")
    if port is not None and not 1 <= port <= 65535:
        raise UsageError(f"{source}: port {port} is out of range (1-65535)")
    if url.username or url.password:
        raise UsageError(f"{source}: credentials in the URL are not accepted (they would be "
                         "printed and logged)")
    if url.path.strip("/") or url.query or url.fragment:
        raise UsageError(f"{source}: {shown!r} has a path, query or fragment; give the "
                         "dashboard's root, http://HOST:PORT")
    return f"{url.scheme}://{url.netloc}"


def _resolve_address(args: argparse.Namespace) -> None:
    """--address, else $RAY_ADDRESS (as Ray's own job CLI does), validated before anything."""
    if getattr(args, "address", None) is not None:
        args.address = dashboard_address(args.address, "--address")
    elif os.environ.get("RAY_ADDRESS") and hasattr(args, "address"):
        args.address = dashboard_address(os.environ["RAY_ADDRESS"], "RAY_ADDRESS")


def build_parser() -> argparse.ArgumentParser:
    target = argparse.ArgumentParser(add_help=False)
    g = target.add_argument_group("target")
    g.add_argument("--stack", "-s", help="the deployed stack whose outputs name the run and the RayCluster "
                                         "(default: Pulumi's selected stack; without Pulumi: Pulumi.STACK.yaml, "
                                         "offline)")
    g.add_argument("--config-file", help="offline: a stack file in the Pulumi.<stack>.yaml format instead "
                                         "of the deployed stack")
    g.add_argument("--address", help="Ray dashboard URL, e.g. http://127.0.0.1:8265 (no port-forward; "
                                     "default: $RAY_ADDRESS when set)")
    g.add_argument("--run-id", help="the run, when no --stack names it")
    g.add_argument("--kube-context", help="kubectl context for the port-forward")
    g.add_argument("--kubectl", default="kubectl", help=argparse.SUPPRESS)
    g.add_argument("--local-port", type=_port, help="local port of the port-forward (default: a free one)")

    follow = argparse.ArgumentParser(add_help=False)
    follow.add_argument("--status-every", type=_positive_seconds, default=30.0, metavar="SECONDS",
                        help="status line (state, elapsed, latest step/reward) interval while following")

    which = argparse.ArgumentParser(add_help=False)
    which.add_argument("--attempt", type=_positive_int, help="attempt number (default: the latest)")
    which.add_argument("--submission-id", help="a Ray submission id instead of the run's attempts")

    parser = argparse.ArgumentParser(prog="python -m jobs", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="Exit codes: 0 ok, 1 job failed, 2 usage/config error, "
                                            "3 GPU wait timeout, 4 dashboard unreachable, "
                                            "5 job stopped, 130 interrupted (129 SIGHUP, 143 SIGTERM).")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("submit", parents=[target, follow], help="submit the next attempt, or attach to the live one")
    p.add_argument("--rerun", action="store_true", help="submit a new attempt even if the run SUCCEEDED")
    p.add_argument("--attempt", type=_positive_int, help="force this attempt number")
    p.add_argument("--no-follow", action="store_true", help="return once submitted")
    sub.add_parser("attach", parents=[target, follow, which], help="follow the latest (or given) attempt")
    p = sub.add_parser("logs", parents=[target, follow, which], help="print (or --follow) an attempt's logs")
    p.add_argument("--follow", "-f", action="store_true")
    rundir = argparse.ArgumentParser(add_help=False)
    rundir.add_argument("--run-dir", help="the run's directory (/data/runs/<run-id> on the cluster, or a copy): "
                                          "TensorBoard metrics and timeline; alone, no dashboard is needed")
    rundir.add_argument("--fetch", action="store_true",
                        help="first copy the run directory from the head pod (kubectl cp) to --run-dir "
                             "or ./runs/<run-id>")
    sub.add_parser("status", parents=[target, which, rundir], help="state, progress, goodput and cost of the run")
    sub.add_parser("list", parents=[target], help="the run's attempts with state and times")
    p = sub.add_parser("stop", parents=[target], help="stop the run's live attempt")
    p.add_argument("--wait", action="store_true", help="wait until it is STOPPED")
    p.add_argument("--wait-seconds", type=_positive_seconds, default=60.0, help=argparse.SUPPRESS)
    p = sub.add_parser("plot", parents=[target, which, rundir],
                       help="reward, response length and throughput over steps (PNG)")
    p.add_argument("--log", action="append", help="a console log file (repeat for attempts, oldest first)")
    p.add_argument("--out", required=True, help="PNG to write")
    p.add_argument("--framework", choices=("auto", "verl", "nemo-rl"), default="auto")
    p = sub.add_parser("report", help="one HTML page with the run's curves, timeline, goodput and cost")
    p.add_argument("run", metavar="RUN", help="run id (its directory /data/runs/RUN) or a run directory")
    p.add_argument("--run-dir", help="the run's directory, when RUN is an id and the directory is elsewhere")
    p.add_argument("--stack", "-s", help="stack whose outputs give the machines, nodes, price model and "
                                         "planned steps (deployed; without Pulumi: the stack file)")
    p.add_argument("--config-file", help="offline: a stack file in the Pulumi.<stack>.yaml format")
    p.add_argument("--out", help="folder to write report.html and the PNGs to (default: report-RUN)")
    p.add_argument("--fetch", action="store_true",
                   help="first copy /data/runs/RUN from the stack's Ray head pod (kubectl cp)")
    p.add_argument("--kube-context", help="kubectl context for --fetch")
    p.add_argument("--kubectl", default="kubectl", help=argparse.SUPPRESS)
    sub.add_parser("preflight", help="check the job config against the frameworks' rules (jobs.preflight)",
                   add_help=False)
    return parser


COMMANDS = {"attach": cmd_attach, "logs": cmd_logs, "status": cmd_status, "list": cmd_list,
            "stop": cmd_stop}


def _preflight(argv: Sequence[str], err: TextIO) -> int:
    try:
        from jobs import preflight
    except ModuleNotFoundError as exc:
        if exc.name != "jobs.preflight":
            raise
        print("[jobs] jobs.preflight is not in this checkout", file=err, flush=True)
        return ExitCode.USAGE
    return int(preflight.main(list(argv)) or 0)


def main(argv: Optional[Sequence[str]] = None, *, build_entrypoint: Optional[EntrypointBuilder] = None,
         out: Optional[TextIO] = None, err: Optional[TextIO] = None,
         retry: RetryPolicy = RetryPolicy()) -> int:
    """The CLI; SIGTERM and SIGHUP end it like Ctrl-C does (the port-forward is stopped, the
    attempt keeps running), with exit code 128 + the signal number."""
    err_stream = err or sys.stderr
    with _signals_end_the_command():
        try:
            return _main(argv, build_entrypoint=build_entrypoint, out=out, err=err, retry=retry)
        except _Terminated as exc:
            print(f"\n[jobs] {signal.Signals(exc.signum).name}: stopped; the port-forward is closed "
                  "and the attempt keeps running on the cluster (`python -m jobs stop` stops it)",
                  file=err_stream, flush=True)
            return 128 + exc.signum


class _Terminated(BaseException):
    """SIGTERM or SIGHUP, raised in the main thread so that every context unwinds."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def _signals_end_the_command():
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise _Terminated(signum)

    previous = {}
    for sig in (signal.SIGTERM, signal.SIGHUP):
        try:
            previous[sig] = signal.signal(sig, handler)
        except (ValueError, OSError):  # pragma: no cover - not the main thread / unsupported
            pass
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _main(argv: Optional[Sequence[str]], *, build_entrypoint: Optional[EntrypointBuilder],
          out: Optional[TextIO], err: Optional[TextIO], retry: RetryPolicy) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    out = out or sys.stdout
    err = err or sys.stderr
    if argv and argv[0] == "preflight":
        return _preflight(argv[1:], err)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    if not args.command:
        parser.print_help(err)
        return ExitCode.USAGE
    target = None
    try:
        _resolve_address(args)
        if args.command == "plot" and args.log:
            return cmd_plot(None, None, args, out, err)
        if args.command == "report":
            return cmd_report(args, out, err)
        if args.command in ("status", "plot") and args.run_dir and not (args.address or args.fetch):
            # The run directory alone: no dashboard (a copy on the laptop, or on the head);
            # --stack then only gives the config (machines, prices, planned steps).
            return cmd_status_offline(args, out, err) if args.command == "status" else \
                cmd_plot(None, None, args, out, err)
        with open_target(args, err) as target:
            runs = Runs(target.address, retry=retry, out=out, err=err)
            if args.command == "submit":
                return cmd_submit(runs, target, args, out, err, build_entrypoint or default_entrypoint)
            if args.command == "plot":
                return cmd_plot(runs, target, args, out, err)
            return COMMANDS[args.command](runs, target, args, out, err)
    except RunError as exc:
        print(f"[jobs] error: {redact(exc)}", file=err, flush=True)
        return exc.exit_code
    except RuntimeError as exc:
        # The Job Submission SDK's "Request failed with status code N: ..." (and its own checks).
        text = str(exc)
        if "status code 404" in text or "does not exist" in text:
            print(f"[jobs] error: {redact(text)[:2000]}", file=err, flush=True)
            return ExitCode.USAGE
        print(f"[jobs] error: the Ray dashboard at {getattr(target, 'address', '?')} answered "
              f"with an error: {redact(text)[:2000]}", file=err, flush=True)
        return ExitCode.DASHBOARD_UNREACHABLE
    except KeyboardInterrupt:
        print("\n[jobs] interrupted: stopped following; the attempt keeps running on the cluster "
              "(`python -m jobs stop` stops it)", file=err, flush=True)
        return ExitCode.INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - a bug: one line, nothing secret
        if os.environ.get("GKE_GRPO_DEBUG") == "1":
            raise
        print(f"[jobs] internal error ({type(exc).__name__}: {redact(exc)[:300]}); this is a bug: "
              "rerun with GKE_GRPO_DEBUG=1 for the traceback", file=err, flush=True)
        return ExitCode.JOB_FAILED
