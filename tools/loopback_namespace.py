"""Run a benchmark inside its own network and PID namespace with only loopback up, so that the
real Ray head and fake nodes it starts can listen on 127.0.0.1 alone and every process they leave
dies with the namespace (``unshare --net --pid --fork --kill-child``).

    if inside():                     # in the namespace
        if args.init: return namespace_init([sys.executable, "-m", module, *forwarded])
        return measure(args)
    return run_in_namespace(module, forwarded, timeout=...)   # on the machine
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INSIDE_ENV = "GKE_GRPO_BENCH_NAMESPACE"


def inside() -> bool:
    """Whether this process runs in a benchmark's namespace (where `ray stop` and signalling a
    raylet touch nothing of the machine's)."""
    return os.environ.get(INSIDE_ENV) == "1"


def namespace_init(argv: list[str]) -> int:
    """PID 1 of the namespace: run argv, reap every orphan (Ray leaves some), return its code."""
    child = subprocess.Popen(argv)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda signum, frame: child.send_signal(signum))
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            return 1
        if pid == child.pid:
            return os.waitstatus_to_exitcode(status)


def run_in_namespace(module: str, forwarded: list[str], *, timeout: float, ray_tmpfs: str = "2g") -> int:
    """``python -m module --init *forwarded`` as PID 1 of a new namespace with loopback up and a
    tmpfs on /tmp/ray (Ray's session files); its exit code."""
    for tool in ("unshare", "ip", "mount"):
        if shutil.which(tool) is None:
            print(f"{module}: needs `{tool}` (util-linux / iproute2)", file=sys.stderr)
            return 2
    inner = " ".join(["ip link set lo up",
                      f"&& mkdir -p /tmp/ray && mount -t tmpfs -o size={ray_tmpfs} tmpfs /tmp/ray",
                      f"&& exec {sys.executable} -m {module} --init", *forwarded])
    proc = subprocess.run(["unshare", "--net", "--pid", "--fork", "--kill-child", "--mount-proc",
                           "sh", "-c", inner],
                          cwd=ROOT, env=dict(os.environ, **{INSIDE_ENV: "1"}), timeout=timeout)
    return proc.returncode
