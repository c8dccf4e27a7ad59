"""Runs and attempts over Ray's Job Submission SDK.

A *run* is identified by its spec (``GrpoSpec.run_id``: experiment name + spec hash); each try of
it is an *attempt*, a Ray job whose submission id is ``spec.submission_id(n)``
(``<run_id>-attempt-<n>``). Every attempt writes to and resumes from the run's checkpoint
directory (``spec.checkpoint_dir``, derived from the run id, not from the attempt), so:

  latest attempt     submit does
  ----------------   --------------------------------------------------------------------
  none               submits attempt max(1, spec.attempt)
  PENDING/RUNNING    attaches to it (never a duplicate submission)
  SUCCEEDED          reports it and does nothing, unless rerun=True: next attempt
  FAILED/STOPPED     submits the next attempt (n + 1), which resumes from the checkpoints

A submission that races another (Ray answers HTTP 500 "... already exists") attaches to the
attempt that won. The entrypoint is the run driver's one command (``run_entrypoint``:
``python3 -m jobs.run --plan /opt/gke-grpo/run/plan.json``); the Pulumi RayJob submits the same.

Exit codes (jobs/contract/exit_codes.py, the one table of every program): 0 OK; 1 FAILED (the
attempt FAILED: its last ~50 log lines are printed); 2 USAGE (bad flags, an unreadable or
invalid stack config, a refused runtime env, an attempt that does not exist); 3
GPU_WAIT_TIMEOUT (the GPU nodes did not join in time); 4 DASHBOARD_UNREACHABLE (no answer
after bounded retries, each call abandoned after RetryPolicy.call_timeout, all within
RetryPolicy.budget, or a server error); 5 JOB_STOPPED (`gke-grpo stop` or the RayJob's deletion; a
spent budget is a FAILED attempt, the driver exits 12); 130 INTERRUPTED (Ctrl-C: following
stops, the attempt keeps running on the cluster).

Secrets never travel through the Job Submission API (the dashboard shows entrypoints, runtime
envs and metadata to anyone who can reach it): ``check_no_secrets`` refuses env vars whose names
look like credentials and values that look like tokens, before anything is sent.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import re
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TextIO

from jobs.cli.training_logs import ProgressTracker
from jobs.contract.credentials import looks_like_secret_name, redact, secret_value_kind
from jobs.contract.exit_codes import ExitCode
from jobs.contract.records import GPU_GANG_INFEASIBLE_MARKER, GPU_WAIT_TIMEOUT_MARKER
from jobs.contract.run_plan import RUN_COMMAND, submission_metadata
from jobs.contract.spec import GrpoSpec

LIVE = ("PENDING", "RUNNING")
TERMINAL = ("SUCCEEDED", "FAILED", "STOPPED")
LOG_TAIL_LINES = 50


class RunError(Exception):
    exit_code: ExitCode = ExitCode.USAGE


class DashboardUnreachable(RunError):
    exit_code = ExitCode.DASHBOARD_UNREACHABLE


class SecretInJobError(RunError):
    exit_code = ExitCode.USAGE


class SubmitFailed(RunError):
    """The dashboard refused the submission and has no such job: nothing was submitted."""
    exit_code = ExitCode.DASHBOARD_UNREACHABLE


class SubmitUncertain(DashboardUnreachable):
    """The submission failed and whether the job exists could not be checked."""


# ---- the entrypoint ---------------------------------------------------------------------------

def run_entrypoint() -> str:
    """The one command of every attempt, for the CLI and the Pulumi RayJob alike: the run driver
    with the plan the stack deployed to the head (jobs/contract/run_plan.py RUN_COMMAND). It
    prepares the data and model, waits for the GPUs, trains, restarts after lost workers and
    enforces the budget; nothing attempt-specific is in it (the driver reads its attempt from the
    submission id), and nothing a shell would interpret (KubeRay's submitter and Ray's job CLI
    each parse it).
    """
    return RUN_COMMAND


# ---- secrets ----------------------------------------------------------------------------------

def secret_like_env_name(name: str) -> bool:
    """The project's credential rule for names (jobs/contract/credentials.py)."""
    return looks_like_secret_name(name)


def check_no_secrets(entrypoint: str, runtime_env: Mapping[str, Any] | None,
                     metadata: Mapping[str, str] | None = None) -> None:
    """Refuse anything that looks like a secret in what the Job Submission API would show.
    Credentials reach the pods as Kubernetes Secrets (env from secretKeyRef), never here."""
    problems: list[str] = []
    env_vars = dict((runtime_env or {}).get("env_vars") or {})
    for name, value in env_vars.items():
        if looks_like_secret_name(str(name)):
            problems.append(f"runtime_env.env_vars.{redact(name)}: the name looks like a credential")
        kind = secret_value_kind(value)
        if kind:
            problems.append(f"runtime_env.env_vars.{redact(name)}: the value looks like {kind}")
    texts = {"entrypoint": entrypoint}
    texts.update({f"metadata.{k}": str(v) for k, v in (metadata or {}).items()})
    for key, value in (runtime_env or {}).items():
        if key != "env_vars":
            texts[f"runtime_env.{key}"] = repr(value)
    for where, text in texts.items():
        kind = secret_value_kind(text)
        if kind:
            problems.append(f"{redact(where)}: contains what looks like {kind}")
    if problems:
        raise SecretInJobError(
            "refusing to submit: secrets must not go through the Ray Job Submission API (the "
            "dashboard shows entrypoints, runtime envs and metadata); give them to the pods as "
            "Kubernetes Secrets instead:\n  - " + "\n  - ".join(problems))


# ---- attempts ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Attempt:
    submission_id: str
    number: int
    status: str
    start_time: int | None = None   # ms since the epoch, as Ray reports it
    end_time: int | None = None
    message: str = ""
    metadata: dict = field(default_factory=dict)
    driver_exit_code: int | None = None

    @property
    def live(self) -> bool:
        return self.status in LIVE

    def duration(self, now: float | None = None) -> float | None:
        if not self.start_time:
            return None
        end = self.end_time / 1000 if self.end_time else (now or time.time())
        return max(0.0, end - self.start_time / 1000)


def attempt_number(run_id: str, submission_id: str | None) -> int | None:
    if not submission_id:
        return None
    match = re.fullmatch(re.escape(run_id) + r"-attempt-(\d+)", submission_id)
    return int(match.group(1)) if match else None


def _status(value: Any) -> str:
    return str(getattr(value, "value", value))


def fmt_time(ms: int | None) -> str:
    if not ms:
        return "-"
    return _dt.datetime.fromtimestamp(ms / 1000, _dt.UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def fmt_duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded exponential backoff for an unreachable dashboard: `tries` calls, sleeping
    base, 2*base, 4*base ... (each at most `cap`) between them. Every call is abandoned after
    `call_timeout` seconds (a dashboard that accepts connections and never answers), and no retry
    starts that could end after `budget` seconds: one dashboard operation never takes longer."""
    tries: int = 5
    base: float = 0.5
    cap: float = 8.0
    call_timeout: float = 10.0
    budget: float = 30.0

    def delays(self):
        return [min(self.cap, self.base * 2 ** i) for i in range(self.tries - 1)]


class DashboardTimeout(TimeoutError):
    """A dashboard call that got no answer within the call timeout."""


def call_with_timeout(fn: Callable[[], Any], timeout: float) -> Any:
    """fn() in a daemon thread, abandoned after `timeout` seconds (DashboardTimeout).

    The Job Submission SDK calls `requests` without a timeout (ray/dashboard/modules/
    dashboard_sdk.py, Ray 2.54.0: `requests.request(...)` in `_do_request`), so a dashboard (or a
    port-forward) that accepts the connection and never answers would block forever. A thread
    that never returns is left behind as a daemon: it cannot keep the CLI alive."""
    import threading

    result: dict[str, Any] = {}
    done = threading.Event()

    def target() -> None:
        try:
            result["value"] = fn()
        except BaseException as exc:
            result["error"] = exc
        finally:
            done.set()

    threading.Thread(target=target, name="dashboard-call", daemon=True).start()
    if not done.wait(timeout):
        raise DashboardTimeout(f"no answer within {timeout:g}s")
    if "error" in result:
        raise result["error"]
    return result.get("value")


def _is_unreachable(exc: BaseException) -> bool:
    # builtin ConnectionError (Ray's own connection check), requests' ConnectionError/Timeout
    # (IOError subclasses), aiohttp's ClientConnectorError (OSError): all OSError.
    if isinstance(exc, OSError):
        return True
    try:
        import aiohttp
        if isinstance(exc, (aiohttp.ClientError, asyncio.TimeoutError)):
            return True
    except ImportError:  # pragma: no cover - aiohttp comes with ray[default]
        pass
    # The tail websocket closing abnormally (port-forward dropped) is a RuntimeError.
    return isinstance(exc, RuntimeError) and "closed unexpectedly" in str(exc)


@dataclass
class SubmitResult:
    action: str            # "submitted" | "attached" | "succeeded"
    attempt: Attempt


class Runs:
    """The attempts of runs on one Ray cluster (a dashboard address)."""

    def __init__(self, address: str, *, retry: RetryPolicy = RetryPolicy(),
                 out: TextIO | None = None, err: TextIO | None = None,
                 client_factory: Callable[[str], Any] | None = None,
                 sleep: Callable[[float], None] = time.sleep, namespace: str | None = None):
        self.address = address
        self.namespace = namespace    # the RayCluster's, for the hints (None: --address alone)
        self.retry = retry
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self._sleep = sleep
        self._factory = client_factory
        self._client = None

    # -- plumbing ----------------------------------------------------------------------------
    def _unreachable(self, exc: BaseException, tries: int,
                     waited: float | None = None) -> DashboardUnreachable:
        if waited is None:
            waited = sum(self.retry.delays()[: tries - 1])
        return DashboardUnreachable(
            f"the Ray dashboard at {self.address} did not answer after {tries} "
            f"{'try' if tries == 1 else 'tries'} over {waited:.1f}s ({type(exc).__name__}: "
            f"{redact(exc)}).\n"
            f"  Is the RayCluster up (`kubectl get raycluster,pods -n {self.namespace or 'NAMESPACE'}`), is the "
            "head pod Running, and is the port-forward alive? With --stack the CLI opens the "
            "port-forward itself; with --address you keep it open.")

    def _with_retries(self, what: str, fn: Callable[[], Any]) -> Any:
        delays = self.retry.delays()
        started = time.monotonic()
        for attempt in range(1, self.retry.tries + 1):
            try:
                return call_with_timeout(fn, self.retry.call_timeout)
            except Exception as exc:
                if not _is_unreachable(exc):
                    raise
                if attempt == self.retry.tries:
                    raise self._unreachable(exc, attempt) from exc
                delay = delays[attempt - 1]
                if time.monotonic() - started + delay + self.retry.call_timeout > self.retry.budget:
                    raise self._unreachable(exc, attempt, time.monotonic() - started) from exc
                print(f"[gke-grpo] {what}: dashboard at {self.address} not answering "
                      f"({type(exc).__name__}); retry {attempt}/{self.retry.tries - 1} in {delay:.1f}s",
                      file=self.err, flush=True)
                self._sleep(delay)

    @property
    def client(self):
        if self._client is None:
            def connect():
                if self._factory is not None:
                    return self._factory(self.address)
                from ray.job_submission import JobSubmissionClient
                return JobSubmissionClient(self.address)
            self._client = self._with_retries("connect", connect)
        return self._client

    def _call(self, what: str, method: str, *args, **kwargs):
        client = self.client
        return self._with_retries(what, lambda: getattr(client, method)(*args, **kwargs))

    # -- queries -----------------------------------------------------------------------------
    def attempts(self, spec_or_run: GrpoSpec | str) -> list[Attempt]:
        """This run's attempts, oldest first (by attempt number)."""
        run_id = spec_or_run if isinstance(spec_or_run, str) else spec_or_run.run_id
        prefix = run_id + "-attempt-"
        found = []
        for job in self._call("list jobs", "list_jobs"):
            sid = getattr(job, "submission_id", None)
            if not sid or not sid.startswith(prefix):
                continue
            number = attempt_number(run_id, sid)
            if number is not None:
                found.append(self._attempt(job, number))
        return sorted(found, key=lambda a: a.number)

    def latest(self, spec_or_run: GrpoSpec | str) -> Attempt | None:
        attempts = self.attempts(spec_or_run)
        return attempts[-1] if attempts else None

    def attempt_info(self, submission_id: str, number: int = 0) -> Attempt:
        return self._attempt(self._call("job info", "get_job_info", submission_id), number)

    @staticmethod
    def _attempt(job: Any, number: int) -> Attempt:
        return Attempt(
            submission_id=job.submission_id, number=number, status=_status(job.status),
            start_time=getattr(job, "start_time", None), end_time=getattr(job, "end_time", None),
            message=getattr(job, "message", None) or "", metadata=dict(getattr(job, "metadata", None) or {}),
            driver_exit_code=getattr(job, "driver_exit_code", None))

    def status(self, submission_id: str) -> str:
        return _status(self._call("job status", "get_job_status", submission_id))

    def logs(self, submission_id: str) -> str:
        return self._call("job logs", "get_job_logs", submission_id) or ""

    def cluster_nodes(self) -> Any:
        """The dashboard's state API node list (``GET /api/v0/nodes?detail=1``), as JSON."""
        client = self.client

        def get():
            response = client._do_request("GET", "/api/v0/nodes?detail=1&limit=10000")
            response.raise_for_status()
            return response.json()
        return self._with_retries("cluster nodes", get)

    def restarts(self, submission_id: str) -> list[dict]:
        """The driver's trainer restarts in this attempt, read back from its Ray job log."""
        from jobs.contract.records import restarts_from_log
        try:
            return restarts_from_log(self.logs(submission_id))
        except RuntimeError:     # no logs yet (runtime env still being set up)
            return []

    # -- actions -----------------------------------------------------------------------------
    def submit(self, spec: GrpoSpec, entrypoint: str, runtime_env: dict | None = None, *,
               rerun: bool = False, attempt: int | None = None) -> SubmitResult:
        """Submit the next attempt of the run, or attach to its live one (module docstring)."""
        check_no_secrets(entrypoint, runtime_env, submission_metadata(spec, 0))  # before any call
        attempts = self.attempts(spec)
        latest = attempts[-1] if attempts else None
        if attempt is not None:
            if attempt < 1:
                raise RunError(f"--attempt must be >= 1, got {attempt}")
            same = next((a for a in attempts if a.number == attempt), None)
            if same is not None and same.live:
                return SubmitResult("attached", same)
            if same is not None:
                raise RunError(f"attempt {attempt} of run {spec.run_id} already exists "
                               f"({same.status}); Ray keeps submission ids unique: choose a "
                               f"higher --attempt or omit it (next would be {attempts[-1].number + 1})")
            live = [a for a in attempts if a.live]
            if live:
                raise RunError(f"attempt {live[-1].number} of run {spec.run_id} is "
                               f"{live[-1].status}: two attempts of one run would write the same "
                               "checkpoint directory; stop it first (gke-grpo stop)")
            number = attempt
        elif latest is None:
            number = max(1, spec.attempt)
        elif latest.live:
            return SubmitResult("attached", latest)
        elif latest.status == "SUCCEEDED" and not rerun:
            return SubmitResult("succeeded", latest)
        else:  # FAILED, STOPPED, or SUCCEEDED with rerun
            number = max(latest.number + 1, spec.attempt)

        submission_id = spec.submission_id(number)
        metadata = submission_metadata(spec, number)
        client = self.client
        delays, tried = self.retry.delays(), 0
        while True:
            tried += 1
            try:
                # Never retried blindly: a submission that failed may still have created the job
                # (a 5xx after the job was stored, a timeout); _after_failed_submit finds out.
                call_with_timeout(lambda: client.submit_job(
                    entrypoint=entrypoint, submission_id=submission_id,
                    runtime_env=runtime_env or None, metadata=metadata), self.retry.call_timeout)
            except Exception as exc:
                if isinstance(exc, RuntimeError) and "already exists" in str(exc):
                    # Someone (another CLI, the RayJob's submitter) submitted this attempt first.
                    return SubmitResult("attached", self.attempt_info(submission_id, number))
                if not (isinstance(exc, RuntimeError) or _is_unreachable(exc)):
                    raise
                # A connection the dashboard dropped (seen from a head under load: "Remote end
                # closed connection without response") is tried again once the dashboard says
                # the attempt does not exist; the submission id makes a second job impossible.
                again = _is_unreachable(exc) and tried < self.retry.tries
                result = self._after_failed_submit(submission_id, number, exc, may_try_again=again)
                if result is not None:
                    return result
                delay = delays[tried - 1]
                print(f"[gke-grpo] submitting {submission_id}: the connection failed "
                      f"({type(exc).__name__}) and the dashboard has no such job; submitting again "
                      f"({tried}/{self.retry.tries - 1}) in {delay:.1f}s", file=self.err, flush=True)
                self._sleep(delay)
                continue
            return SubmitResult("submitted", self.attempt_info(submission_id, number))

    def _after_failed_submit(self, submission_id: str, number: int, exc: BaseException, *,
                             may_try_again: bool = False) -> SubmitResult | None:
        """The submission answered with an error or not at all: ask the dashboard whether the
        attempt exists before saying anything, and report what really happened. None: the attempt
        does not exist and ``may_try_again`` lets the caller submit it again."""
        what = f"{type(exc).__name__}: {redact(str(exc))[:300]}"
        try:
            info = self.attempt_info(submission_id, number)
        except DashboardUnreachable:
            raise SubmitUncertain(
                f"submitting {submission_id} failed ({what}) and the dashboard at {self.address} "
                "then stopped answering: the attempt may or may not have been created. Check "
                "with `gke-grpo list` before submitting again (a second submit attaches "
                "to it if it exists).") from None
        except RuntimeError as check:
            if ("404" in str(check) or "does not exist" in str(check)) and may_try_again:
                return None
            if "404" in str(check) or "does not exist" in str(check):
                raise SubmitFailed(
                    f"submitting {submission_id} failed ({what}); the dashboard has no such job: "
                    "nothing was submitted. Fix the cause (the head's disk, its logs: kubectl "
                    "logs <head pod>) and submit again.") from None
            raise
        print(f"[gke-grpo] the dashboard answered the submission of {submission_id} with an error "
              f"({what}), but the attempt exists ({info.status}): it was submitted",
              file=self.err, flush=True)
        return SubmitResult("submitted", info)

    def stop(self, spec_or_run: GrpoSpec | str) -> Attempt | None:
        """Stop the latest live attempt; None when no attempt is live."""
        live = [a for a in self.attempts(spec_or_run) if a.live]
        if not live:
            return None
        target = live[-1]
        self._call("stop", "stop_job", target.submission_id)
        return target

    def wait_terminal(self, submission_id: str, timeout: float, poll: float = 0.5) -> str:
        deadline = time.monotonic() + timeout
        while True:
            status = self.status(submission_id)
            if status in TERMINAL or time.monotonic() >= deadline:
                return status
            self._sleep(poll)

    # -- following ---------------------------------------------------------------------------
    def follow(self, submission_id: str, *, status_every: float = 30.0,
               print_logs: bool = True, tracker: ProgressTracker | None = None) -> str:
        """Stream the attempt's logs until it ends, printing a status line (state, elapsed
        time, latest step/reward from the logs) to stderr every `status_every` seconds.
        Returns the final status."""
        tracker = tracker or ProgressTracker()
        return asyncio.run(self._follow(submission_id, status_every, print_logs, tracker))

    def status_line(self, submission_id: str, status: str, started: float,
                    tracker: ProgressTracker) -> str:
        return (f"[gke-grpo] {submission_id}: {status}, elapsed {fmt_duration(time.monotonic() - started)}"
                f", {tracker.describe()}")

    async def _follow(self, submission_id: str, status_every: float, print_logs: bool,
                      tracker: ProgressTracker) -> str:
        client = self.client
        started = time.monotonic()
        stop = asyncio.Event()

        main = asyncio.current_task()
        if main is None:      # impossible: asyncio.run() runs this coroutine as a task
            raise RuntimeError("_follow must run inside a task")
        lost: list[DashboardUnreachable] = []
        # The status probe doubles as the liveness check of a quiet log stream: a dashboard
        # that stops answering ends the follow (exit 4) within a probe interval + the budget.
        probe_every = min(status_every, self.retry.budget)

        async def ticker():
            last_print = time.monotonic()
            while not stop.is_set():
                try:
                    await asyncio.wait_for(stop.wait(), timeout=probe_every)
                    return
                except TimeoutError:
                    pass
                try:
                    status = await asyncio.to_thread(self.status, submission_id)
                except DashboardUnreachable as exc:
                    if stop.is_set():      # moot after the stream's end: a cancel would hit `await tick`
                        return
                    lost.append(exc)
                    main.cancel()
                    return
                if time.monotonic() - last_print >= status_every - 1e-3:
                    last_print = time.monotonic()
                    print(self.status_line(submission_id, status, started, tracker),
                          file=self.err, flush=True)

        tick = asyncio.create_task(ticker())
        try:
            await self._stream_logs(client, submission_id, print_logs=print_logs, tracker=tracker)
        except asyncio.CancelledError:
            if lost:
                raise lost[0] from None
            raise
        finally:
            stop.set()
            await tick
        # The stream ends when the job is terminal; its status may lag by a moment.
        status = await asyncio.to_thread(self.wait_terminal, submission_id, 10.0)
        print(self.status_line(submission_id, status, started, tracker), file=self.err, flush=True)
        return status

    async def _stream_logs(self, client, submission_id: str, *, print_logs: bool,
                           tracker: ProgressTracker) -> None:
        """The attempt's log until the server closes the stream, reconnecting within the retry
        policy when the dashboard drops it."""
        delays = self.retry.delays()
        failures = 0
        printed = 0           # characters already shown: a reconnect replays the log from its start
        while True:
            seen = 0
            try:
                async for chunk in client.tail_job_logs(submission_id):
                    failures = 0
                    end = seen + len(chunk)
                    if end > printed:
                        new = chunk[max(0, printed - seen):]
                        if print_logs:
                            self.out.write(new)
                            self.out.flush()
                        tracker.feed(new)
                        printed = end
                    seen = end
                return      # the server closed the stream: the attempt is terminal
            except Exception as exc:
                if not _is_unreachable(exc):
                    raise
                failures += 1
                if failures >= self.retry.tries:
                    raise self._unreachable(exc, failures) from exc
                delay = delays[failures - 1]
                print(f"[gke-grpo] log stream of {submission_id} interrupted ({type(exc).__name__}); "
                      f"reconnecting in {delay:.1f}s", file=self.err, flush=True)
                await asyncio.sleep(delay)

    # -- reporting ---------------------------------------------------------------------------
    def exit_code_for(self, attempt: Attempt, *, show_tail: bool = True) -> ExitCode:
        """Map an attempt's state to the CLI's exit code; for a failure, print its log tail."""
        if attempt.status == "SUCCEEDED" or attempt.live:
            return ExitCode.OK
        if attempt.status == "STOPPED":
            print(f"[gke-grpo] {attempt.submission_id} was STOPPED. `gke-grpo submit` starts the "
                  "next attempt, resuming from the run's checkpoints.", file=self.err, flush=True)
            return ExitCode.JOB_STOPPED
        tail = self.log_tail(attempt.submission_id)
        if show_tail:
            print(f"[gke-grpo] {attempt.submission_id} FAILED"
                  + (f" (driver exit code {attempt.driver_exit_code})"
                     if attempt.driver_exit_code is not None else "")
                  + (f": {attempt.message}" if attempt.message else "")
                  + f"\n[gke-grpo] last {LOG_TAIL_LINES} log lines:", file=self.err)
            print(tail, file=self.err, flush=True)
        if GPU_WAIT_TIMEOUT_MARKER in tail:
            print("[gke-grpo] the GPUs did not become available in time (exit 3): submit again once "
                  "the GPU nodes have joined; the next attempt resumes from the checkpoints.",
                  file=self.err, flush=True)
            return ExitCode.GPU_WAIT_TIMEOUT
        if GPU_GANG_INFEASIBLE_MARKER in tail:
            print("[gke-grpo] the Ray autoscaler can never provide this run's GPU nodes (exit 17): "
                  "the deployed GPU worker group holds fewer (gke-grpo:gpu.nodes); deploy the "
                  "stack this run needs.", file=self.err, flush=True)
            return ExitCode.GPU_GANG_INFEASIBLE
        return ExitCode.FAILED

    def log_tail(self, submission_id: str, lines: int = LOG_TAIL_LINES) -> str:
        try:
            text = self.logs(submission_id)
        except RuntimeError as exc:   # no logs (e.g. the runtime env failed to set up)
            return f"(no logs: {exc})"
        return "\n".join(text.rstrip("\n").splitlines()[-lines:])
