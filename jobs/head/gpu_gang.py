"""The run's GPU gang request: all its GPU nodes asked of the Ray autoscaler at once, held for the
life of the run, released when the run ends, whatever the reason.

    python3 -m jobs.head.gpu_gang hold --nodes N --gpus-per-node G   # until stdin closes
    python3 -m jobs.head.gpu_gang release                            # clear any request

The request is Ray's ``request_resources(bundles=[{"GPU": G}] * N)``: a cluster resource
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

Exit codes: 0 released; 2 bad arguments; 7 NO_RAY (no GCS to talk to).
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
from collections.abc import Sequence
from typing import Any

from jobs.contract.capacity import GANG_HELD_MARKER, GANG_RELEASED_MARKER
from jobs.contract.exit_codes import ExitCode

# The v1 autoscaler's channel (ray/_private/ray_constants.py AUTOSCALER_RESOURCE_REQUEST_CHANNEL).
V1_REQUEST_KEY = b"autoscaler_resource_request"


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
        from ray._raylet import GcsClient  # type: ignore[attr-defined]

        self.client = GcsClient(address)
        self.v2 = self._autoscaler_v2()

    def _autoscaler_v2(self) -> bool:
        import ray

        # The key the v2 autoscaler sets (ray/autoscaler/v2/utils.py is_autoscaler_v2).
        value = self.client.internal_kv_get(
            ray._raylet.GCS_AUTOSCALER_V2_ENABLED_KEY.encode(),
            namespace=ray._raylet.GCS_AUTOSCALER_STATE_NAMESPACE.encode(), timeout=10)
        return value == b"1"

    def request(self, nodes: int, gpus_per_node: int) -> None:
        bundle = {"GPU": float(gpus_per_node)}
        if self.v2:
            bundles, counts = ([bundle], [nodes]) if nodes else ([], [])
            method = self.client.request_cluster_resource_constraint
            # The GCS call gained per-bundle label selectors between the framework images' Ray
            # versions: Ray 2.54 (bundles, label_selectors, count_array), Ray 2.49.2 (bundles,
            # count_array) (the compiled signatures in ray/_raylet.so of both wheels).
            if "label_selectors" in (method.__doc__ or ""):
                method(bundles, [{} for _ in bundles], counts, timeout_s=10)
            else:
                method(bundles, counts, timeout_s=10)
        else:
            self.client.internal_kv_put(V1_REQUEST_KEY, json.dumps([bundle] * nodes).encode(),
                                        True, namespace=None, timeout=10)

    def clear(self) -> None:
        self.request(0, 0)


def _say(marker: str, fields: dict[str, Any]) -> None:
    print(marker + json.dumps(fields, sort_keys=True), flush=True)


def _die_with_parent() -> None:
    """SIGTERM when the parent (the driver) dies, however it dies (Linux prctl)."""
    with contextlib.suppress(Exception):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def hold(nodes: int, gpus_per_node: int, address: str | None) -> int:
    _die_with_parent()
    done = threading.Event()
    reason = {"why": "the driver ended (its pipe closed)"}

    def on_signal(signum, frame):
        reason["why"] = f"{signal.Signals(signum).name} (the run is stopping)"
        done.set()

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)
    try:
        gang = GangRequest(gcs_address(address))
        gang.request(nodes, gpus_per_node)
    except Exception as exc:    # ConnectionError, RuntimeError (no cluster), RPC errors
        print(f"{GANG_RELEASED_MARKER.strip()} cannot reach the Ray GCS: {type(exc).__name__}: "
              f"{exc}", file=sys.stderr, flush=True)
        return int(ExitCode.NO_RAY)
    _say(GANG_HELD_MARKER, {"nodes": nodes, "gpus_per_node": gpus_per_node,
                            "autoscaler": "v2" if gang.v2 else "v1"})

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
    except Exception as exc:
        print(f"{GANG_RELEASED_MARKER.strip()} cannot reach the Ray GCS: {type(exc).__name__}: "
              f"{exc}", file=sys.stderr, flush=True)
        return int(ExitCode.NO_RAY)
    _say(GANG_RELEASED_MARKER, {"reason": "released by hand"})
    return int(ExitCode.OK)


class GangHolder:
    """The driver's side of ``hold``: the child process and the pipe whose end releases it.
    Standard library only: the driver never imports Ray."""

    def __init__(self, proc: subprocess.Popen):
        self.proc = proc

    @classmethod
    def start(cls, nodes: int, gpus_per_node: int) -> GangHolder:
        argv = [sys.executable, "-m", "jobs.head.gpu_gang", "hold", "--nodes", str(nodes),
                "--gpus-per-node", str(gpus_per_node)]
        return cls(subprocess.Popen(argv, stdin=subprocess.PIPE))

    def release(self, timeout: float = 10.0) -> int | None:
        """Close the pipe (the holder clears the request and exits); its exit code, None when
        it did not exit in time (it is then killed: a request it made stays until the next
        run's, or `python3 -m jobs.head.gpu_gang release`)."""
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None


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
    cleared = sub.add_parser("release", help="clear the cluster's resource request")
    cleared.add_argument("--address", default=None)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    if args.command == "hold":
        return hold(args.nodes, args.gpus_per_node, args.address)
    return release(args.address)


if __name__ == "__main__":
    sys.exit(main())
