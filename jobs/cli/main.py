"""The jobs CLI: submit, attach, tail, stop and report GRPO runs on the stack's Ray cluster.

    gke-grpo submit    --stack dev [--rerun] [--attempt N] [--no-follow]
    gke-grpo attach    --stack dev
    gke-grpo logs      --stack dev [--follow] [--attempt N]
    gke-grpo status    --stack dev
    gke-grpo list      --stack dev
    gke-grpo stop      --stack dev [--wait]
    gke-grpo plot      --stack dev --out run.png  |  --log FILE ... --out run.png
    gke-grpo report    RUN [--run-dir DIR] [--stack dev] [--out DIR]
    gke-grpo health    PATH
    gke-grpo export    RUN [--step N] --stack dev
    gke-grpo serve     RUN [--step N] [--dry-run] --stack dev  |  serve [RUN] --stop
    gke-grpo preflight --stack dev

Target: the deployed stack (``pulumi stack output --json --show-secrets [-s STACK]``; no
``--stack``: Pulumi's selected stack): its namespace, head service, run, spec and kubeconfig.
The CLI opens ``kubectl port-forward`` (with the exported kubeconfig, in a private temporary
file) to the RayCluster's head service on 127.0.0.1 for the duration of the command (always
closed afterwards). Without Pulumi, or with ``--config-file FILE``, the stack file is the offline
fallback (its outputs computed from the validated file; it says so on stderr). ``--address URL`` uses a dashboard
you reach yourself (then ``--stack`` only names the run, or give ``--run-id``). docs/jobs-cli.md.
Exit codes: jobs/contract/exit_codes.py (0 ok, 1 job failed or plot not written, 2 usage/config, 3 GPU
wait timeout, 4 dashboard unreachable, 5 job stopped, 130 interrupted, 129/143 SIGHUP/SIGTERM);
docs/errors-and-guarantees.md.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import weakref
from collections.abc import Sequence
from typing import TextIO

from jobs.cli.arguments import port_number, positive_int, positive_seconds, resolve_address, run_id_text
from jobs.cli.export_serve import add_export_serve_parsers, cmd_export, cmd_serve
from jobs.cli.extras import missing_cli_module, not_installed
from jobs.cli.live_commands import (
    cmd_attach,
    cmd_list,
    cmd_logs,
    cmd_release_gpus,
    cmd_status,
    cmd_stop,
    cmd_submit,
)
from jobs.cli.output_files import check_output_file
from jobs.cli.ray_jobs import RetryPolicy, RunError, Runs
from jobs.cli.run_directory_commands import cmd_health, cmd_plot, cmd_report, cmd_status_offline
from jobs.cli.target import EntrypointBuilder, UsageError, default_entrypoint, open_target
from jobs.contract.credentials import redact
from jobs.contract.exit_codes import ExitCode
from jobs.contract.safe_files import UnusableFile

# The console script's name (pyproject.toml [project.scripts]); `python -m jobs` is its alias.
PROG = "gke-grpo"


# Each parser's subcommand parsers: a bad option is reported with its subcommand's usage.
_SUBPARSERS: weakref.WeakKeyDictionary[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]] = \
    weakref.WeakKeyDictionary()


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
    g.add_argument("--run-id", type=run_id_text, help="the run, when no --stack names it")
    g.add_argument("--kube-context", help="kubectl context for the port-forward")
    g.add_argument("--kubectl", default="kubectl", help=argparse.SUPPRESS)
    g.add_argument("--local-port", type=port_number, help="local port of the port-forward (default: a free one)")

    follow = argparse.ArgumentParser(add_help=False)
    follow.add_argument("--status-every", type=positive_seconds, default=30.0, metavar="SECONDS",
                        help="status line (state, elapsed, latest step/reward) interval while following")

    which = argparse.ArgumentParser(add_help=False)
    which.add_argument("--attempt", type=positive_int, help="attempt number (default: the latest)")
    which.add_argument("--submission-id", help="a Ray submission id instead of the run's attempts")

    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="Exit codes: 0 ok, 1 job failed, 2 usage/config error, "
                                            "3 GPU wait timeout, 4 dashboard unreachable, "
                                            "5 job stopped, 130 interrupted (129 SIGHUP, 143 SIGTERM).")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("submit", parents=[target, follow], help="submit the next attempt, or attach to the live one")
    p.add_argument("--rerun", action="store_true", help="submit a new attempt even if the run SUCCEEDED")
    p.add_argument("--attempt", type=positive_int, help="force this attempt number")
    p.add_argument("--no-follow", action="store_true", help="return once submitted")
    sub.add_parser("attach", parents=[target, follow, which], help="follow the latest (or given) attempt")
    p = sub.add_parser("logs", parents=[target, follow, which], help="print (or --follow) an attempt's logs")
    p.add_argument("--follow", "-f", action="store_true",
                   help="keep printing new lines until the attempt ends (Ctrl-C stops following, not the attempt)")
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
    p.add_argument("--wait-seconds", type=positive_seconds, default=60.0, help=argparse.SUPPRESS)
    p = sub.add_parser("release-gpus", parents=[target],
                       help="clear a GPU request an ended run left standing (refused while the run is live)")
    p.add_argument("--wait-seconds", type=positive_seconds, default=120.0, help=argparse.SUPPRESS)
    p = sub.add_parser("plot", parents=[target, which, rundir],
                       help="reward, response length and throughput over steps (PNG)")
    p.add_argument("--log", action="append", help="a console log file (repeat for attempts, oldest first)")
    p.add_argument("--out", required=True, help="PNG to write")
    p.add_argument("--framework", choices=("auto", "verl", "nemo-rl"), default="auto",
                   help="whose console log lines to read (--log files or the attempt's logs; default: recognised from the lines)")
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
    p = sub.add_parser("health", help="the fabric and storage gate's result (health.json), as status shows it")
    p.add_argument("path", metavar="PATH", help="a health.json, or the run directory holding it")
    add_export_serve_parsers(sub, target, follow)
    sub.add_parser("preflight", help="check the job config against the frameworks' rules",
                   add_help=False)
    _SUBPARSERS[parser] = dict(sub.choices)
    for choice in sub._choices_actions:   # argparse keeps the one-line helps here
        command = sub.choices[choice.dest]
        text = choice.help or ""
        command.description = command.description or text[:1].upper() + text[1:] + "."
    return parser


# The commands that talk to the dashboard (submit also needs the entrypoint builder).
COMMANDS = {"attach": cmd_attach, "logs": cmd_logs, "status": cmd_status, "list": cmd_list,
            "stop": cmd_stop, "plot": cmd_plot, "export": cmd_export, "release-gpus": cmd_release_gpus}
# Shared by every call of main that passes no policy: safe, RetryPolicy is frozen.
DEFAULT_RETRY = RetryPolicy()


def _preflight(argv: Sequence[str]) -> int:
    from jobs.cli import preflight

    return int(preflight.main(list(argv)) or 0)

def main(argv: Sequence[str] | None = None, *, build_entrypoint: EntrypointBuilder | None = None,
         out: TextIO | None = None, err: TextIO | None = None,
         retry: RetryPolicy = DEFAULT_RETRY) -> int:
    """The CLI; SIGTERM and SIGHUP end it like Ctrl-C does (the port-forward is stopped, the
    attempt keeps running), with exit code 128 + the signal number."""
    err_stream = err or sys.stderr
    with _signals_end_the_command():
        try:
            return _main(argv, build_entrypoint=build_entrypoint, out=out, err=err, retry=retry)
        except _Terminated as exc:
            print(f"\n[gke-grpo] {signal.Signals(exc.signum).name}: stopped; the port-forward is closed "
                  "and the attempt keeps running on the cluster (`gke-grpo stop` stops it)",
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
        with contextlib.suppress(ValueError, OSError):  # pragma: no cover - not the main thread / unsupported
            previous[sig] = signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)

def _main(argv: Sequence[str] | None, *, build_entrypoint: EntrypointBuilder | None,
          out: TextIO | None, err: TextIO | None, retry: RetryPolicy) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    out = out or sys.stdout
    err = err or sys.stderr
    if argv and argv[0] == "preflight":
        return _preflight(argv[1:])
    parser = build_parser()
    try:
        args, unknown = parser.parse_known_args(argv)
        if unknown:
            # The subcommand's own usage, not the top-level one (argparse reports unknown
            # arguments from the parser that was called).
            subcommand = _SUBPARSERS.get(parser, {}).get(args.command or "")
            (subcommand or parser).error(f"unrecognized arguments: {' '.join(unknown)}")
    except SystemExit as exc:
        return int(exc.code or 0)
    if not args.command:
        parser.print_help(err)
        return ExitCode.USAGE
    return _run_command(args, build_entrypoint=build_entrypoint, out=out, err=err, retry=retry)


def _without_dashboard(args: argparse.Namespace, out: TextIO, err: TextIO) -> int | None:
    """The exit code of a command that reads files only, or None when it needs the dashboard."""
    if args.command == "plot" and args.log:
        return cmd_plot(None, None, args, out, err)
    if args.command == "report":
        return cmd_report(args, out, err)
    if args.command == "health":
        return cmd_health(args, out, err)
    if args.command == "serve":
        return cmd_serve(args, out, err)
    if args.command in ("status", "plot") and args.run_dir and not (args.address or args.fetch):
        # The run directory alone: no dashboard (a copy on the laptop, or on the head);
        # --stack then only gives the config (machines, prices, planned steps).
        return cmd_status_offline(args, out, err) if args.command == "status" else \
            cmd_plot(None, None, args, out, err)
    return None


def _run_command(args: argparse.Namespace, *, build_entrypoint: EntrypointBuilder | None, out: TextIO, err: TextIO,
         retry: RetryPolicy) -> int:
    """Run a parsed command; every error it ends with becomes a one-line message and an exit code."""
    target = None
    try:
        resolve_address(args)
        if args.command == "plot":
            check_output_file("--out", args.out)     # before any reading or connecting
        code = _without_dashboard(args, out, err)
        if code is not None:
            return code
        # Before the stack is read and a port-forward opened: every command from here on talks
        # to the dashboard through Ray's client.
        missing = not_installed("ray", f"`{PROG} {args.command}`")
        if missing is not None:
            raise UsageError(missing)
        with open_target(args, err) as target:
            runs = Runs(target.address, retry=retry, out=out, err=err,
                        namespace=target.stack.namespace if target.stack else None)
            if args.command == "submit":
                return cmd_submit(runs, target, args, out, err, build_entrypoint or default_entrypoint)
            return COMMANDS[args.command](runs, target, args, out, err)
    except (RunError, UnusableFile) as exc:   # UnusableFile: a file the command needs (path and why)
        print(f"[gke-grpo] error: {redact(exc)}", file=err, flush=True)
        return getattr(exc, "exit_code", ExitCode.USAGE)
    except RuntimeError as exc:
        # The Job Submission SDK's "Request failed with status code N: ..." (and its own checks).
        text = str(exc)
        if "status code 404" in text or "does not exist" in text:
            print(f"[gke-grpo] error: {redact(text)[:2000]}", file=err, flush=True)
            return ExitCode.USAGE
        print(f"[gke-grpo] error: the Ray dashboard at {getattr(target, 'address', '?')} answered "
              f"with an error: {redact(text)[:2000]}", file=err, flush=True)
        return ExitCode.DASHBOARD_UNREACHABLE
    except KeyboardInterrupt:
        print("\n[gke-grpo] interrupted: stopped following; the attempt keeps running on the cluster "
              "(`gke-grpo stop` stops it)", file=err, flush=True)
        return ExitCode.INTERRUPTED
    except Exception as exc:
        if os.environ.get("GKE_GRPO_DEBUG") == "1" and not (
                isinstance(exc, ModuleNotFoundError) and missing_cli_module(exc, "") is not None):
            raise
        return _unexpected(exc, args.command, err)


def _unexpected(exc: Exception, command: str, err: TextIO) -> int:
    """A module of requirements-cli.txt missing mid-command (one line naming `make cli`), else a bug."""
    missing = missing_cli_module(exc, f"`{PROG} {command}`") if isinstance(exc, ModuleNotFoundError) else None
    if missing is not None:
        print(f"[gke-grpo] error: {missing}", file=err, flush=True)
        return ExitCode.USAGE
    print(f"[gke-grpo] internal error ({type(exc).__name__}: {redact(exc)[:300]}); this is a bug: "
          "rerun with GKE_GRPO_DEBUG=1 for the traceback", file=err, flush=True)
    return ExitCode.FAILED
