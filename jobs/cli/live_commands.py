"""The commands that talk to the run's Ray dashboard: submit, attach, logs, status, list, stop,
release-gpus."""

from __future__ import annotations

from typing import TextIO

from jobs.cli.ray_jobs import Attempt, Runs, fmt_duration, fmt_time
from jobs.cli.run_directory_commands import run_rows
from jobs.cli.target import EntrypointBuilder, Target, UsageError, need_run, pick_attempt
from jobs.contract.exit_codes import ExitCode


def follow_and_report(runs: Runs, attempt: Attempt, args, out: TextIO, err: TextIO) -> int:
    print(f"[gke-grpo] following {attempt.submission_id} (Ctrl-C detaches; the attempt keeps running)",
          file=err, flush=True)
    runs.follow(attempt.submission_id, status_every=args.status_every)
    final = runs.attempt_info(attempt.submission_id, attempt.number)
    code = runs.exit_code_for(final)
    if code == ExitCode.OK:
        print(f"[gke-grpo] {final.submission_id} SUCCEEDED after {fmt_duration(final.duration())}",
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
        print(f"[gke-grpo] run {spec.run_id} already SUCCEEDED (attempt {a.number}, {a.submission_id}, "
              f"ended {fmt_time(a.end_time)}); nothing submitted. --rerun starts attempt "
              f"{a.number + 1} (it resumes from {spec.checkpoint_dir}).", file=out, flush=True)
        return ExitCode.OK
    if result.action == "attached":
        print(f"[gke-grpo] attempt {a.number} of run {spec.run_id} ({a.submission_id}) is {a.status}: "
              "attaching to it, nothing submitted", file=out, flush=True)
    else:
        print(f"[gke-grpo] submitted {a.submission_id} (attempt {a.number} of run {spec.run_id}); "
              f"checkpoints: {spec.checkpoint_dir}", file=out, flush=True)
    if args.no_follow:
        return runs.exit_code_for(a) if not a.live else ExitCode.OK
    return follow_and_report(runs, a, args, out, err)

def cmd_attach(runs: Runs, target: Target, args, out, err) -> int:
    attempt = pick_attempt(runs, target, args)
    if not attempt.live:
        print(f"[gke-grpo] {attempt.submission_id} is already {attempt.status} "
              f"(ended {fmt_time(attempt.end_time)})", file=out, flush=True)
        return runs.exit_code_for(attempt)
    return follow_and_report(runs, attempt, args, out, err)

def cmd_logs(runs: Runs, target: Target, args, out, err) -> int:
    attempt = pick_attempt(runs, target, args)
    if args.follow and attempt.live:
        return follow_and_report(runs, attempt, args, out, err)
    out.write(runs.logs(attempt.submission_id))
    out.flush()
    return ExitCode.OK

def cmd_status(runs: Runs, target: Target, args, out, err) -> int:
    from jobs.cli.training_logs import ProgressTracker

    attempt = pick_attempt(runs, target, args)
    structured = run_rows(args, target.run_id, target)
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
    from jobs.cli.rayjob_status import rayjob_rows
    from jobs.cli.recovery import describe_restarts, recovery_rows
    from jobs.contract.records import recoveries_from_log, restarts_from_log
    rows.append(("restarts", describe_restarts(restarts_from_log(log))))
    if not any(key == "recovery" for key, _ in structured):
        rows += recovery_rows(recoveries_from_log(log))    # the attempt's, from its log
    rows += rayjob_rows(target.kube, target.run_id, attempt.submission_id, attempt.status)
    if attempt.message:
        rows.append(("message", attempt.message))
    if target.spec is not None:
        rows.append(("checkpoints", target.spec.checkpoint_dir))
    if not any(key == "gsm8k test" for key, _ in rows):
        # The evaluation's RESULT lines in the job log, when the run directory is not at hand.
        from jobs.cli.eval_results import eval_results_from_log, eval_status_rows
        rows += eval_status_rows(eval_results_from_log(log))
    from jobs.cli.health_view import health_status_rows
    from jobs.contract.health import health_from_log
    rows += health_status_rows(health_from_log(log))       # the gate's result line in the job log
    rows += gpu_rows(runs, target, attempt, log)
    if target.stack is not None and target.stack.dashboard_url:
        rows.append(("dashboard", target.stack.dashboard_url))   # Cloud Monitoring, live
    for key, value in rows:
        print(f"{key:<12}{value}", file=out)
    out.flush()
    return runs.exit_code_for(attempt, show_tail=False)

def gpu_rows(runs: Runs, target: Target, attempt: Attempt, log: str) -> list[tuple[str, str]]:
    """GPU workers up / requested / releasing, and where the GPUs came from (jobs/cli/gpu_status.py)."""
    from jobs.cli.gpu_status import gpu_nodes, gpu_worker_rows

    try:
        nodes = gpu_nodes(runs.cluster_nodes())
    except Exception as exc:     # an older dashboard, a refused call: the row says so
        return [("GPU workers", f"unknown (the dashboard's node list: {type(exc).__name__})")]
    from jobs.cli.split_view import pool_node_rows

    stack = getattr(target, "stack", None)
    capacity = getattr(stack, "gpu_capacity", None)
    spec = getattr(target, "spec", None)
    # A split run: each pool's nodes up against the nodes the spec gives it.
    wanted = {p.name: p.nodes for p in spec.pools} if spec is not None and spec.split else {}
    pools = (capacity or {}).get("pools") if isinstance(capacity, dict) else None
    if not wanted and isinstance(pools, list):     # else the stack output's pools
        wanted = {str(p["pool"]): p["nodes"] for p in pools if isinstance(p, dict)
                  and isinstance(p.get("pool"), str) and isinstance(p.get("nodes"), int)}
    return gpu_worker_rows(nodes, log, attempt.live, capacity) + pool_node_rows(nodes, wanted)


def cmd_list(runs: Runs, target: Target, args, out, err) -> int:
    run_id = need_run(target)
    attempts = runs.attempts(run_id)
    if not attempts:
        print(f"run {run_id}: no attempts on {target.address}", file=out, flush=True)
        return ExitCode.OK
    from jobs.cli.rayjob_status import RayJobQueryError, mismatch, rayjobs_of_run

    rayjobs, note = {}, None
    if target.kube is not None:
        try:
            rayjobs = rayjobs_of_run(target.kube, run_id)
        except RayJobQueryError as exc:
            note = f"RayJobs not checked: {exc}"
    print(f"run {run_id}", file=out)
    header = (f"{'ATTEMPT':<8}{'SUBMISSION ID':<52}{'STATE':<11}{'STARTED':<22}{'ENDED':<22}"
              f"{'DURATION':<10}{'RAYJOB':<10}RESTARTS")
    print(header, file=out)
    problems = []
    for a in attempts:
        rayjob = rayjobs.get(a.submission_id)
        shown = "-" if rayjob is None else (rayjob.deployment or "New")
        print(f"{a.number:<8}{a.submission_id:<52}{a.status:<11}{fmt_time(a.start_time):<22}"
              f"{fmt_time(a.end_time):<22}{fmt_duration(a.duration()):<10}{shown:<10}"
              f"{len(runs.restarts(a.submission_id))}", file=out)
        problem = mismatch(rayjob, a.status) if rayjob is not None else None
        if problem:
            problems.append(f"MISMATCH attempt {a.number}: {problem}")
    for line in problems:
        print(line, file=out)
    out.flush()
    if note:      # a missing or refused kubectl is a note, not part of the table
        print(f"[gke-grpo] {note}", file=err, flush=True)
    return ExitCode.OK

def cmd_stop(runs: Runs, target: Target, args, out, err) -> int:
    run_id = need_run(target)
    stopped = runs.stop(run_id)
    if stopped is None:
        print(f"[gke-grpo] run {run_id}: no PENDING or RUNNING attempt to stop", file=out, flush=True)
        return ExitCode.OK
    print(f"[gke-grpo] stop requested for {stopped.submission_id} (attempt {stopped.number})",
          file=out, flush=True)
    if args.wait:
        status = runs.wait_terminal(stopped.submission_id, timeout=args.wait_seconds)
        print(f"[gke-grpo] {stopped.submission_id}: {status}", file=out, flush=True)
    return ExitCode.OK


# What `release-gpus` runs on the head: the gang holder's own `release` (jobs/head/gpu_gang.py),
# from the code archive on the head's PYTHONPATH (components/head_code.py), as the driver runs.
RELEASE_ENTRYPOINT = "python3 -m jobs.head.gpu_gang release"


def cmd_release_gpus(runs: Runs, target: Target, args, out, err) -> int:
    """Clear the cluster's GPU gang request that an ended driver left standing (its holder was
    killed with it): the GPU workers then idle out. Refused while the run has a live attempt:
    that attempt's driver holds the request, and `gke-grpo stop` ends it and releases it."""
    import time

    run_id = target.run_id
    live = [a for a in runs.attempts(run_id) if a.live] if run_id else []
    if live:
        print(f"[gke-grpo] attempt {live[-1].number} of run {run_id} ({live[-1].submission_id}) is "
              f"{live[-1].status}: its driver holds the GPU request; `gke-grpo stop` ends the "
              "attempt and releases it", file=err, flush=True)
        return ExitCode.USAGE
    submission_id = f"gke-grpo-release-gpus-{int(time.time())}"
    runs._call("submit", "submit_job", entrypoint=RELEASE_ENTRYPOINT, submission_id=submission_id,
               metadata={"gke_grpo": "release-gpus"})
    status = runs.wait_terminal(submission_id, timeout=args.wait_seconds)
    for line in runs.logs(submission_id).splitlines():
        print(line, file=out)
    print(f"[gke-grpo] {submission_id}: {status}", file=out, flush=True)
    return ExitCode.OK if status == "SUCCEEDED" else ExitCode.FAILED
