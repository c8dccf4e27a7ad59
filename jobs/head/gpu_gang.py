"""The run's GPU gang request: all its GPU nodes asked of the Ray autoscaler at once, held for the
life of the run, released when the run ends, whatever the reason.

    python3 -m jobs.head.gpu_gang hold --nodes N --gpus-per-node G [--ready-fd FD]  # until stdin closes
    python3 -m jobs.head.gpu_gang hold --nodes N --gpus-per-node G --pool rollout:R --pool trainer:T
    python3 -m jobs.head.gpu_gang release                                          # clear any request

The request is Ray's ``request_resources(bundles=[{"GPU": G}] * N)`` (a split layout's: each
pool's nodes as bundles that also ask for one unit of the pool's custom resource,
``[{"GPU": G, "gke_grpo_rollout_pool": 1}] * R + [{"GPU": G, "gke_grpo_trainer_pool": 1}] * T``, so
the autoscaler scales each pool's own worker group: jobs/contract/layouts.py): a cluster resource
constraint the autoscaler keeps enough nodes for, and which keeps those nodes from idle
termination (Ray 2.54 ray/autoscaler/v2/scheduler.py ``_enforce_idle_termination``: a node
"needed by the cluster resource constraints" is skipped). It belongs to the cluster, not to the
process that made it: it stays until overwritten (ray/autoscaler/sdk/sdk.py: "This request is
persistent until another call to request_resources() is made"; observed with the fake
multi-node provider: the nodes stayed after the requesting process exited). So someone must
clear it when the run ends, or the GPU nodes stay up and billed.

Hence ``hold`` is a small process the driver starts (a child, so the driver never imports Ray and
``ray.init`` never replaces the driver's SIGTERM handler) that makes the request, then waits,
and clears it when:
  - its stdin closes: the driver ended and closed the pipe (every exit of the driver, the kernel
    closes it even when the driver is killed);
  - it gets SIGTERM/SIGINT/SIGHUP: `ray job stop` signals the driver and all its descendants
    (Ray 2.54 dashboard/modules/job/job_supervisor.py), and SIGKILLs them 3 s later;
  - its parent dies (Linux PR_SET_PDEATHSIG: SIGTERM to this process).
Clearing is one GCS call on a connection opened at start (milliseconds), well inside those 3 s.

It talks to the GCS directly (``ray._raylet.GcsClient``), as ``request_resources`` does after
``ray.init`` (ray/autoscaler/_private/commands.py ``request_resources``, Ray 2.54): no Ray driver
is registered, nothing is scheduled.

The driver's side (``GangHolder``) never takes the request for granted:
  - it follows the holder's steps on its ``--ready-fd`` pipe (``loaded``, ``connected``, then
    ``held`` or ``failed <code> <why>``), each within its own bound (CONFIRM_STEPS), and otherwise
    ends the run at once with the cause: 7 NO_RAY (no GCS), 22 GANG_REQUEST_UNSUPPORTED (this Ray
    has no request API), 23 GANG_REQUEST_UNCONFIRMED (a step not done in time, named, or the
    holder could not start); never a GPU wait that times out blaming the capacity;
  - while the run runs, a watcher notices within WATCH_SECONDS that the holder died and starts
    another, which makes the request again (the run still needs its GPUs);
  - at the end, when the holder did not clear the request itself (it died, was killed, or failed
    to clear), it runs ``release`` once, bounded by FALLBACK_SECONDS.

Exit codes (hold, release): 0 released; 1 FAILED (the request could not be cleared); 2 bad
arguments; 7 NO_RAY (no GCS to talk to); 22 GANG_REQUEST_UNSUPPORTED (this Ray has no GCS client or
no cluster resource request call).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from jobs.contract.capacity import GANG_HELD_MARKER, GANG_RELEASED_MARKER
from jobs.contract.exit_codes import ExitCode
from jobs.contract.layouts import Pool, pool_argument, pool_arguments

# The v1 autoscaler's channel (ray/_private/ray_constants.py AUTOSCALER_RESOURCE_REQUEST_CHANNEL).
V1_REQUEST_KEY = b"autoscaler_resource_request"
# The holder's steps, each said on the driver's pipe when done, and the bound the driver gives each
# (measured 2026-12-06 on the 2-core test machine, Ray 2.54.0 and 2.49.2 alike). No GPU node is
# asked for before the last step, so a generous bound on the first two costs no GPU time; a step
# past its bound is a holder that hangs, and the error names the step.
CONFIRM_STEPS: tuple[tuple[str, str, float], ...] = (
    # (what the holder says when the step is done, what the step does, its bound in seconds)
    # Python starts and imports Ray: 0.5 s on an idle machine; the bound leaves room for a head
    # whose CPUs are busy with the run's own CPU work.
    ("loaded", "load Ray's modules", 60.0),
    # GcsClient() gives up on a GCS that does not answer after 35.3 s (Ray's default
    # py_gcs_connect_timeout_s, 30 s; measured with nothing listening), then the autoscaler's
    # key is read with timeout=10: 45 s at most, bound 60 s.
    ("connected", "connect to the Ray GCS", 60.0),
    # One request call, timeout 10 s (GangRequest.request), then ``held``.
    ("held", "make the GPU request", 20.0),
)
CONFIRM_SECONDS = sum(bound for _, _, bound in CONFIRM_STEPS)
# How often the driver's side checks that its holder lives.
WATCH_SECONDS = 1.0
# The bound on the fallback `release` at the driver's end: a GCS connection (35.3 s to give up,
# above), the autoscaler's key and the clearing call (timeout 10 s each): 55 s at most.
FALLBACK_SECONDS = 60.0
# A request that could not be made again is tried again this much later.
RETRY_SECONDS = 5.0


class RequestUnsupported(Exception):
    """The head's Ray has no way to make the request (no GCS client, or no call for it)."""


def gcs_address(address: str | None) -> str:
    """The GCS address: given, else RAY_ADDRESS (a Ray job's driver has it), else the head's own
    (/tmp/ray/ray_current_cluster, as `ray.init(address="auto")` finds it)."""
    from ray._private import services

    wanted = address or os.environ.get("RAY_ADDRESS") or "auto"
    if wanted.startswith(("http://", "https://")):   # a dashboard URL is not the GCS
        wanted = "auto"
    return str(services.canonicalize_bootstrap_address_or_die(wanted))


class GangRequest:
    """One GCS connection; ``request`` and ``clear`` overwrite the cluster's request."""

    def __init__(self, address: str):
        try:
            from ray._raylet import GcsClient  # type: ignore[attr-defined]
        except ImportError as exc:
            raise RequestUnsupported(f"this Ray has no GCS client (ray._raylet.GcsClient): {exc}") from exc

        self.client = GcsClient(address)
        self.v2 = self._autoscaler_v2()
        if self.v2 and not callable(getattr(self.client, "request_cluster_resource_constraint", None)):
            raise RequestUnsupported("this Ray's GCS client has no request_cluster_resource_constraint "
                                     "(the v2 autoscaler's resource request)")

    def _autoscaler_v2(self) -> bool:
        import ray

        # The key the v2 autoscaler sets (ray/autoscaler/v2/utils.py is_autoscaler_v2).
        value = self.client.internal_kv_get(
            ray._raylet.GCS_AUTOSCALER_V2_ENABLED_KEY.encode(),
            namespace=ray._raylet.GCS_AUTOSCALER_STATE_NAMESPACE.encode(), timeout=10)
        return value == b"1"

    def request(self, nodes: int, gpus_per_node: int, pools: Sequence[Pool] = ()) -> None:
        shapes = gang_bundles(nodes, gpus_per_node, pools)
        if self.v2:
            bundles = [bundle for bundle, _ in shapes]
            counts = [count for _, count in shapes]
            method = self.client.request_cluster_resource_constraint
            # The GCS call gained per-bundle label selectors between the framework images' Ray
            # versions: Ray 2.54 (bundles, label_selectors, count_array), Ray 2.49.2 (bundles,
            # count_array) (the compiled signatures in ray/_raylet.so of both wheels).
            if "label_selectors" in (method.__doc__ or ""):
                method(bundles, [{} for _ in bundles], counts, timeout_s=10)
            else:
                method(bundles, counts, timeout_s=10)
        else:
            listed = [bundle for bundle, count in shapes for _ in range(count)]
            self.client.internal_kv_put(V1_REQUEST_KEY, json.dumps(listed).encode(),
                                        True, namespace=None, timeout=10)

    def clear(self) -> None:
        self.request(0, 0)


def gang_bundles(nodes: int, gpus_per_node: int,
                 pools: Sequence[Pool] = ()) -> list[tuple[dict[str, float], int]]:
    """(bundle, count) pairs of the request: ``nodes`` GPU nodes, or each pool's nodes bound to
    the pool's custom resource; [] clears it."""
    if not nodes:
        return []
    if not pools:
        return [({"GPU": float(gpus_per_node)}, nodes)]
    return [({"GPU": float(gpus_per_node), pool.resource: 1.0}, pool.nodes) for pool in pools]


def _say(marker: str, fields: dict[str, Any]) -> None:
    print(marker + json.dumps(fields, sort_keys=True), flush=True)


def _die_with_parent() -> None:
    """SIGTERM when the parent (the driver) dies, however it dies (Linux prctl)."""
    with contextlib.suppress(Exception):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def _tell(ready_fd: int | None, line: str, *, last: bool = True) -> None:
    """One line to the driver's confirmation pipe: a step done, or (last) the answer, after which
    the pipe is closed."""
    if ready_fd is None:
        return
    with contextlib.suppress(OSError):
        os.write(ready_fd, (line.replace("\n", " ") + "\n").encode())
        if last:
            os.close(ready_fd)


def hold(nodes: int, gpus_per_node: int, address: str | None, ready_fd: int | None = None,
         pools: Sequence[Pool] = ()) -> int:
    _die_with_parent()
    done = threading.Event()
    reason = {"why": "the driver ended (its pipe closed)"}

    def on_signal(signum, frame):
        reason["why"] = f"{signal.Signals(signum).name} (the run is stopping)"
        done.set()

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)
    try:
        # The modules the next steps use, loaded before the GCS steps' bounds start.
        import ray._private.services
        import ray._raylet  # noqa: F401
        _tell(ready_fd, "loaded", last=False)
        gang = GangRequest(gcs_address(address))
        _tell(ready_fd, "connected", last=False)
        gang.request(nodes, gpus_per_node, pools)
    except RequestUnsupported as exc:
        code, why = ExitCode.GANG_REQUEST_UNSUPPORTED, str(exc)
    except Exception as exc:    # ConnectionError, RuntimeError (no cluster), RPC errors, no ray
        code, why = ExitCode.NO_RAY, f"cannot reach the Ray GCS: {type(exc).__name__}: {exc}"
    else:
        code, why = ExitCode.OK, ""
    if code != ExitCode.OK:
        print(f"{GANG_RELEASED_MARKER.strip()} {why}", file=sys.stderr, flush=True)
        _tell(ready_fd, f"failed {int(code)} {why}")
        return int(code)
    _say(GANG_HELD_MARKER, {"nodes": nodes, "gpus_per_node": gpus_per_node,
                            "autoscaler": "v2" if gang.v2 else "v1",
                            **({"pools": {p.name: p.nodes for p in pools}} if pools else {})})
    _tell(ready_fd, "held")

    if os.getppid() == 1:     # the parent died before prctl took effect
        done.set()
    # The pipe from the driver: its end (EOF) is the driver's end. Polled with select and read
    # unbuffered, so a signal (which sets `done`) is seen within the poll period.
    stdin = sys.stdin.fileno()
    while not done.is_set():
        try:
            readable, _, _ = select.select([stdin], [], [], 0.5)
            if readable and not os.read(stdin, 4096):
                break
        except InterruptedError:
            continue
        except (OSError, ValueError):     # no stdin at all: hold until a signal
            done.wait()
    # From here the holder only clears and exits: a later signal (the driver's death right after
    # its release, PR_SET_PDEATHSIG) must not cut that short. Python puts the default handler
    # back while it finalizes, so such a SIGTERM would end a holder that cleared with -15.
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    try:
        gang.clear()
    except Exception as exc:
        print(f"{GANG_RELEASED_MARKER.strip()} FAILED to clear the request: {type(exc).__name__}: "
              f"{exc}: the GPU nodes stay until the next run's request, or "
              "`python3 -m jobs.head.gpu_gang release` on the head", file=sys.stderr, flush=True)
        return int(ExitCode.FAILED)
    _say(GANG_RELEASED_MARKER, {"reason": reason["why"]})
    return int(ExitCode.OK)


def release(address: str | None) -> int:
    try:
        GangRequest(gcs_address(address)).clear()
    except RequestUnsupported as exc:
        print(f"{GANG_RELEASED_MARKER.strip()} {exc}", file=sys.stderr, flush=True)
        return int(ExitCode.GANG_REQUEST_UNSUPPORTED)
    except Exception as exc:
        print(f"{GANG_RELEASED_MARKER.strip()} cannot reach the Ray GCS: {type(exc).__name__}: "
              f"{exc}", file=sys.stderr, flush=True)
        return int(ExitCode.NO_RAY)
    _say(GANG_RELEASED_MARKER, {"reason": "released by hand"})
    return int(ExitCode.OK)


class GangRequestError(Exception):
    """The gang request was not confirmed: ``code`` (an ExitCode) and why."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code, self.message = int(code), message


class GangHolder:
    """The driver's side of ``hold``: the child process, the pipe whose end releases it, the
    confirmation pipe, the watcher that makes the request again when the holder dies, and the
    fallback release. Standard library only: the driver never imports Ray.

    ``on_event(name, **fields)``: what the driver records (gpu_request_lost, gpu_request_remade,
    gpu_request_remake_failed), called from the watcher's thread. ``stop_seen(exit_code)``: the
    driver's own rule for whether a child's exit belongs to a stop of the driver (Driver.stop_seen):
    a holder that died in a stop is not replaced."""

    def __init__(self, nodes: int, gpus_per_node: int, *, pools: Sequence[Pool] = (),
                 on_event: Callable[..., None] | None = None,
                 stop_seen: Callable[[int | None], bool] | None = None,
                 confirm_steps: tuple[tuple[str, str, float], ...] = CONFIRM_STEPS,
                 watch_seconds: float = WATCH_SECONDS, fallback_seconds: float = FALLBACK_SECONDS):
        self.nodes, self.gpus_per_node, self.pools = nodes, gpus_per_node, tuple(pools)
        self.on_event = on_event or (lambda name, **fields: None)
        self.stop_seen = stop_seen or (lambda code: False)
        self.confirm_steps, self.watch_seconds = confirm_steps, watch_seconds
        self.confirm_seconds = sum(bound for _, _, bound in confirm_steps)
        self.fallback_seconds = fallback_seconds
        self.proc: subprocess.Popen | None = None
        self.remade = 0
        self.fallback_exit_code: int | None = None
        self._releasing = threading.Event()
        # The watcher has stopped starting holders / the holder has ended: a holder started by the
        # watcher has that *thread* as its parent for PR_SET_PDEATHSIG, so the thread waits for
        # the holder's end before it exits (else the holder's clean release races a SIGTERM).
        self._watcher_idle = threading.Event()
        self._holder_ended = threading.Event()
        self._watcher: threading.Thread | None = None

    @classmethod
    def start(cls, nodes: int, gpus_per_node: int, **options: Any) -> GangHolder:
        """Make the request and see it confirmed (GangRequestError otherwise), then watch it."""
        holder = cls(nodes, gpus_per_node, **options)
        holder._spawn_confirmed()
        holder._watcher = threading.Thread(target=holder._watch, name="gang-watch", daemon=True)
        holder._watcher.start()
        return holder

    def _argv(self, ready_fd: int) -> list[str]:
        return [sys.executable, "-m", "jobs.head.gpu_gang", "hold", "--nodes", str(self.nodes),
                "--gpus-per-node", str(self.gpus_per_node), *pool_arguments(self.pools),
                "--ready-fd", str(ready_fd)]

    def _spawn_confirmed(self) -> None:
        read_end, write_end = os.pipe()
        try:
            try:
                # Its own session: a kill of the driver's process group alone (Ray's supervisor
                # watchdog, `kill -9 -<pgid>`: jobs/head/children.py) leaves the holder, which then
                # sees its stdin close and clears the request instead of dying with it standing.
                proc = subprocess.Popen(self._argv(write_end), stdin=subprocess.PIPE, pass_fds=(write_end,),
                                        start_new_session=True)
            except OSError as exc:
                raise GangRequestError(ExitCode.GANG_REQUEST_UNCONFIRMED,
                                       f"the gang holder could not start: {exc.strerror or exc}") from exc
            finally:
                os.close(write_end)
            self.proc = proc
            answer = self._answer(read_end, proc)
        finally:
            os.close(read_end)
        if answer == "held":
            return
        self._stop(proc)
        if answer.startswith("failed "):       # the holder made no request: nothing to clear
            code, _, why = answer[len("failed "):].partition(" ")
            raise GangRequestError(int(code) if code.isdigit() else ExitCode.FAILED, why)
        # Silent or dead before answering: it may have made the request before it stopped.
        self._fallback()
        raise GangRequestError(ExitCode.GANG_REQUEST_UNCONFIRMED, answer)

    def _fallback(self) -> None:
        """``release`` once, within fallback_seconds (its exit code: fallback_exit_code; None
        when it did not end in time or could not start)."""
        try:
            self.fallback_exit_code = subprocess.run(
                [sys.executable, "-m", "jobs.head.gpu_gang", "release"], stdin=subprocess.DEVNULL,
                timeout=self.fallback_seconds, check=False).returncode
        except (OSError, subprocess.TimeoutExpired):
            self.fallback_exit_code = None

    def _answer(self, read_end: int, proc: subprocess.Popen) -> str:
        """The holder's answer line, or why there is none: it exited, or a step was not done
        within its bound (the step named, with how long the holder had run)."""
        started = time.monotonic()
        lines: list[str] = []
        data = b""
        for said, doing, bound in self.confirm_steps:
            deadline = time.monotonic() + bound
            while b"\n" not in data:
                left = deadline - time.monotonic()
                if left <= 0:
                    done = f" ({', '.join(lines)} before)" if lines else ""
                    return (f"the gang holder did not {doing} within {bound:.0f}s{done}: no "
                            f"answer to the GPU request after {time.monotonic() - started:.0f}s")
                readable, _, _ = select.select([read_end], [], [], min(left, 0.5))
                if readable:
                    chunk = os.read(read_end, 4096)
                    if not chunk:
                        code = proc.wait()
                        return f"the gang holder exited {code} before confirming the GPU request"
                    data += chunk
            line, _, data = data.partition(b"\n")
            text = line.decode(errors="replace").strip()
            if text != said:              # ``failed <code> <why>``, whichever step it ends
                return text
            lines.append(text)
        return lines[-1]

    @staticmethod
    def _stop(proc: subprocess.Popen) -> None:
        if proc.poll() is None:
            proc.kill()
        proc.wait()

    def _watch(self) -> None:
        """Every watch_seconds: a holder that exited while the run still holds the gang is
        replaced, and the request made again; a failed attempt is tried again RETRY_SECONDS
        later (the run still needs its GPUs; the GPU wait or the trainer's node loss decides
        what becomes of the run meanwhile)."""
        try:
            self._replace_dead_holders()
        finally:
            self._watcher_idle.set()
            self._holder_ended.wait(timeout=self.confirm_seconds + 2 * self.fallback_seconds)

    def _replace_dead_holders(self) -> None:
        while not self._releasing.wait(self.watch_seconds):
            proc = self.proc
            code = None if proc is None else proc.poll()
            if code is None:
                continue
            # A stop of the job (`ray job stop`, the RayJob deleted) SIGTERMs every process of the
            # driver's tree, the holder included (Ray 2.54 dashboard/modules/job/job_supervisor.py:
            # `[job_process] + job_process.children(recursive=True)`): the driver is stopping and
            # releases the gang within Ray's window. Making the request again then would hold the
            # release past that window (seen under load: no driver_end before Ray's SIGKILL).
            # A holder signalled clears the request itself and exits 0 (`hold`): to the driver's
            # rule that is a child ended by the stop's SIGTERM.
            if self.stop_seen(-signal.SIGTERM if code == 0 else code):
                return
            self.on_event("gpu_request_lost", holder_exit_code=code)
            while not self._releasing.is_set():
                try:
                    self._spawn_confirmed()
                except GangRequestError as exc:
                    self.on_event("gpu_request_remake_failed", exit_code=exc.code, message=exc.message)
                    if self._releasing.wait(RETRY_SECONDS):
                        return
                    continue
                self.remade += 1
                self.on_event("gpu_request_remade", times=self.remade)
                break

    def release(self, timeout: float = 10.0) -> int | None:
        """Close the pipe (the holder clears the request and exits); its exit code, None when
        it did not exit in time (it is then killed). Unless the holder cleared the request
        itself (exit 0), ``release`` runs once, within fallback_seconds (its exit code:
        ``fallback_exit_code``; None when it did not end in time)."""
        self._releasing.set()
        watcher = self._watcher
        if watcher is not None and watcher is not threading.current_thread():
            # A new holder the watcher is starting is waited for (bounded), then released too.
            self._watcher_idle.wait(timeout=self.confirm_seconds + self.watch_seconds + 1)
        try:
            return self._end_holder(timeout)
        finally:
            self._holder_ended.set()
            if watcher is not None and watcher is not threading.current_thread():
                watcher.join(timeout=1)

    def _end_holder(self, timeout: float) -> int | None:
        proc = self.proc
        code: int | None = None
        if proc is not None:
            if proc.stdin is not None:
                with contextlib.suppress(OSError):
                    proc.stdin.close()
            try:
                code = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self._stop(proc)
        if code != 0:
            self._fallback()
        return code


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m jobs.head.gpu_gang",
                                     description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    held = sub.add_parser("hold", help="request the gang, hold it until stdin closes or a signal")
    held.add_argument("--nodes", type=_positive_int, required=True)
    held.add_argument("--gpus-per-node", type=_positive_int, required=True)
    held.add_argument("--address", default=None, help="GCS address (default: RAY_ADDRESS, auto)")
    held.add_argument("--pool", type=pool_argument, action="append", default=[],
                      help="a split layout's pool, NAME:NODES (rollout, trainer); the pools' "
                           "nodes add up to --nodes")
    held.add_argument("--ready-fd", type=int, default=None,
                      help="a pipe to say `held` or `failed <code> <why>` on, once")
    cleared = sub.add_parser("release", help="clear the cluster's resource request")
    cleared.add_argument("--address", default=None)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    if args.command == "hold":
        if args.pool and sum(pool.nodes for pool in args.pool) != args.nodes:
            print(f"the pools' nodes ({', '.join(f'{p.name}:{p.nodes}' for p in args.pool)}) do not "
                  f"add up to --nodes {args.nodes}", file=sys.stderr)
            return 2
        return hold(args.nodes, args.gpus_per_node, args.address, args.ready_fd, args.pool)
    return release(args.address)


if __name__ == "__main__":
    sys.exit(main())
