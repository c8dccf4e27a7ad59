"""Every exit code of every program of the run, in one table, so a number means one thing
wherever it appears: the run driver's (the Ray job's status and the RayJob's), the GPU wait's,
the health gate's, data staging's, the GPU gang holder's and the jobs CLI's (docs/errors-and-guarantees.md).

Which program returns which code is in ``USED_BY``; a test keeps the docs' table equal to it.

No code that means something else may look like a signal exit: 128 + N is what a shell reports for
a process killed by signal N (only HANGUP, INTERRUPTED and TERMINATED, which mean exactly that,
live there), and 15 is what a process whose SIGTERM handler is Ray's exits with (Ray 2.54
ray/_private/worker.py ``init``: ``def sigterm_handler(signum, frame): sys.exit(signum)``,
installed by every ``ray.init`` from a main thread; the GPU wait and the health gate call it), so
15 is reserved and the driver reads it, from a child it asked to stop, as that stop.
"""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    OK = 0
    # The trainer failed after training steps, not as a lost worker (driver); the Ray job
    # failed, or a plot or report could not be written (CLI); a staging step failed.
    FAILED = 1
    USAGE = 2                    # bad arguments, an invalid plan or config
    GPU_WAIT_TIMEOUT = 3         # the run's GPUs did not become available in time
    DASHBOARD_UNREACHABLE = 4    # the Ray dashboard did not answer (CLI)
    JOB_STOPPED = 5              # the Ray job was stopped (CLI)
    HEALTH_GATE_FAILED = 6       # the fabric or storage gate did not pass
    NO_RAY = 7                   # could not connect to Ray (GPU wait, gate)
    BEFORE_FIRST_STEP = 10       # the trainer failed before the attempt's first training step
    RESTARTS_EXHAUSTED = 11      # lost nodes max_restarts times
    DEADLINE = 12                # the run's time budget is spent; the trainer was stopped
    PREPARE_FAILED = 13          # data or model staging failed
    TRAINER_NOT_FOUND = 14       # the trainer command or its working directory does not exist
    NOT_WRITABLE = 16            # the checkpoint or run directory cannot be written
    GPU_GANG_INFEASIBLE = 17     # the autoscaler can never provide the run's GPU nodes
    WORKER_CRASHED = 18          # a worker process died while no node was lost (segfault, kill)
    OUT_OF_MEMORY = 19           # host (Ray's memory monitor) or GPU (CUDA) out of memory
    COLLECTIVE_TIMEOUT = 20      # a collective timed out while no node left: a hang
    CRASH_LOOP = 21              # lost nodes again without a newer checkpoint: no progress
    GANG_REQUEST_UNSUPPORTED = 22  # the head's Ray has no cluster resource request API
    GANG_REQUEST_UNCONFIRMED = 23  # the gang holder did not confirm the GPU request in time
    HANGUP = 129                 # SIGHUP (CLI)
    INTERRUPTED = 130            # Ctrl-C (CLI)
    TERMINATED = 143             # SIGTERM: `ray job stop`, the RayJob deleted (driver, CLI)


DRIVER = "driver"
GPU_WAIT = "gpu wait"
GATE = "health gate"
STAGING = "staging"
EXPORT = "export"                # jobs/head/export.py and the serving pod's check
EVALUATE = "evaluation"          # jobs/head/evaluate.py
CLI = "jobs CLI"
GANG = "gang holder"             # jobs/head/gpu_gang.py

# The exit status a process whose SIGTERM handler is Ray's returns (``sys.exit(signal.SIGTERM)``).
RAY_SIGTERM_EXIT = 15

USED_BY: dict[ExitCode, tuple[str, ...]] = {
    ExitCode.OK: (DRIVER, GPU_WAIT, GATE, STAGING, EXPORT, EVALUATE, GANG, CLI),
    ExitCode.FAILED: (DRIVER, STAGING, EXPORT, EVALUATE, GANG, CLI),
    ExitCode.USAGE: (DRIVER, GPU_WAIT, GATE, STAGING, EXPORT, EVALUATE, GANG, CLI),
    ExitCode.GPU_WAIT_TIMEOUT: (DRIVER, GPU_WAIT, CLI),
    ExitCode.DASHBOARD_UNREACHABLE: (CLI,),
    ExitCode.JOB_STOPPED: (CLI,),
    ExitCode.HEALTH_GATE_FAILED: (DRIVER, GATE, CLI),
    ExitCode.NO_RAY: (DRIVER, GPU_WAIT, GATE, GANG),
    ExitCode.BEFORE_FIRST_STEP: (DRIVER,),
    ExitCode.RESTARTS_EXHAUSTED: (DRIVER,),
    ExitCode.DEADLINE: (DRIVER,),
    ExitCode.PREPARE_FAILED: (DRIVER,),
    ExitCode.TRAINER_NOT_FOUND: (DRIVER,),
    ExitCode.NOT_WRITABLE: (DRIVER,),
    ExitCode.GPU_GANG_INFEASIBLE: (DRIVER, GPU_WAIT, CLI),
    ExitCode.CRASH_LOOP: (DRIVER,),
    ExitCode.GANG_REQUEST_UNSUPPORTED: (DRIVER, GANG),
    ExitCode.GANG_REQUEST_UNCONFIRMED: (DRIVER,),
    ExitCode.WORKER_CRASHED: (DRIVER,),
    ExitCode.OUT_OF_MEMORY: (DRIVER,),
    ExitCode.COLLECTIVE_TIMEOUT: (DRIVER,),
    ExitCode.HANGUP: (CLI,),
    ExitCode.INTERRUPTED: (CLI,),
    ExitCode.TERMINATED: (DRIVER, CLI),
}
