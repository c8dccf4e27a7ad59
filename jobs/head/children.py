"""The run driver's child processes: each in its own session (a stop signals its whole process
group), each dying with the driver, each stoppable within Ray's kill window.

    proc = spawn(argv, cwd=..., env=..., stdout=...)
    stop_group(proc, grace)         # SIGTERM the group, SIGKILL what is left after ``grace``

Why they must die with the driver: a child in its own session is not in the process group that
Ray's job supervisor kills when its actor dies (Ray 2.54 dashboard/modules/job/job_supervisor.py
starts a watchdog ``while kill -s 0 <supervisor>; do sleep 1; done; kill -9 -<entrypoint pgid>``),
so a trainer would outlive its driver and keep its GPUs and write the run's checkpoints beside the
next driver's trainer. Each child is therefore started through a tiny wrapper that asks the
kernel for SIGKILL when the driver dies (prctl PR_SET_PDEATHSIG, Linux) and then execs the
command; the signal survives execve.

How long a stop may take: ``ray job stop`` (and the deletion of a RayJob, whose finalizer stops
the Ray job) sends SIGTERM to the entrypoint and every descendant, then SIGKILL after
``RAY_JOB_STOP_WAIT_TIME_S`` seconds (default 3; job_supervisor.py, read from the supervisor
actor's environment, which carries the job's runtime_env env_vars: dashboard/modules/job/
job_manager.py ``_get_supervisor_runtime_env``). The entrypoint's environment is a copy of the
supervisor's, so the driver reads the same variable and gives its children that window less the
time it needs to record the stop.

Standard library only.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence

STOP_WINDOW_ENV = "RAY_JOB_STOP_WAIT_TIME_S"
RAY_DEFAULT_STOP_WINDOW_SECONDS = 3.0      # job_supervisor.py DEFAULT_RAY_JOB_STOP_WAIT_TIME_S
# What the driver keeps of Ray's window for itself: record trainer_exit and driver_end and exit.
RECORD_MARGIN_SECONDS = 1.0
CANNOT_START = 127                         # the wrapper could not exec the command (as a shell)

_PR_SET_PDEATHSIG = 1   # linux/prctl.h
_WRAPPER = (
    "import ctypes, os, sys\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    f"libc.prctl({_PR_SET_PDEATHSIG}, {int(signal.SIGKILL)}, 0, 0, 0)\n"
    "if os.getppid() != int(sys.argv[1]):\n"   # the driver died before prctl took effect
    "    os._exit(1)\n"
    "try:\n"
    "    os.execvp(sys.argv[2], sys.argv[2:])\n"
    "except OSError as exc:\n"
    "    print(f'cannot start {sys.argv[2]}: {exc.strerror or exc}', file=sys.stderr, flush=True)\n"
    f"    os._exit({CANNOT_START})\n"
)


def dying_with_driver(argv: Sequence[str]) -> list[str]:
    """``argv`` run through the parent-death wrapper (Linux); ``argv`` itself elsewhere."""
    if not sys.platform.startswith("linux") or not sys.executable:
        return list(argv)
    return [sys.executable, "-I", "-S", "-c", _WRAPPER, str(os.getpid()), *argv]


def spawn(argv: Sequence[str], *, cwd: str | None = None, env: Mapping[str, str] | None = None,
          stdout: int | None = None, text: bool = False) -> subprocess.Popen:
    """Start ``argv`` in its own session, dying with the driver. Output goes to the driver's
    own stdout unless ``stdout`` is subprocess.PIPE (then stderr follows it)."""
    return subprocess.Popen(dying_with_driver(argv), cwd=cwd, env=dict(env) if env is not None else None,
                            stdout=stdout, stderr=subprocess.STDOUT if stdout is not None else None,
                            text=text, errors="replace" if text else None, bufsize=1 if text else -1,
                            start_new_session=True)


def stop_group(proc: subprocess.Popen, grace: float) -> None:
    """SIGTERM the child's process group, SIGKILL what is left of it after ``grace`` seconds."""
    def signal_group(sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
    signal_group(signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=max(grace, 0.0))
    signal_group(signal.SIGKILL)   # whatever of the group is left
    proc.wait()


def stop_window(environ: Mapping[str, str] = os.environ) -> float:
    """Seconds between Ray's SIGTERM and its SIGKILL for this job (``RAY_JOB_STOP_WAIT_TIME_S``,
    which Ray's supervisor parses with int(); 3 when unset or unreadable)."""
    try:
        return float(int(environ.get(STOP_WINDOW_ENV, "")))
    except ValueError:
        return RAY_DEFAULT_STOP_WINDOW_SECONDS


def stop_grace(environ: Mapping[str, str] = os.environ) -> float:
    """How long the driver lets a child stop after a SIGTERM from Ray: the window less what the
    driver needs to record the stop (at least half a second)."""
    return max(0.5, stop_window(environ) - RECORD_MARGIN_SECONDS)


def was_sigterm(code: int | None) -> bool:
    """An exit status that a SIGTERM explains: killed by it (-15 from Popen, 143 through a
    shell) or Ray's handler's ``sys.exit(15)`` (jobs/contract/exit_codes.py RAY_SIGTERM_EXIT)."""
    from jobs.contract.exit_codes import RAY_SIGTERM_EXIT

    return code in (-signal.SIGTERM, 128 + signal.SIGTERM, RAY_SIGTERM_EXIT)
