"""Benchmark: time and peak memory the offline preview needs to refuse each hostile stack file
(tools/hostile_files.py), against the accepted committed file. Prints figures; asserts nothing.

    python -m tools.bench_hostile [--runs N]

Each run is a fresh `python -m tools.preview dev --config-file FILE` process: wall time from
spawn to exit, peak resident memory from the kernel's accounting of that child (wait4's
ru_maxrss), exit code. The target: refused in under a few seconds and a few
hundred MB.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tools.hostile_files import CASES, make
from tools.preview import ROOT


def measure_refusal(config_file: Path) -> tuple[float, float, int]:
    """(seconds, peak RSS in MiB, exit code) of one preview of config_file."""
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "tools.preview", "dev", "--config-file", str(config_file)],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    return elapsed, usage.ru_maxrss / 1024, proc.returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench_hostile", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="runs per file (the median is printed)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as directory:
        files = [("committed Pulumi.dev.yaml (accepted)", ROOT / "Pulumi.dev.yaml")]
        files += [(case.name, make(case.name, Path(directory))) for case in CASES]
        print(f"{'file':<40}{'exit':>5}{'median s':>10}{'max s':>8}{'peak MiB':>10}")
        for name, path in files:
            runs = [measure_refusal(path) for _ in range(args.runs)]
            times = [t for t, _, _ in runs]
            print(f"{name:<40}{runs[-1][2]:>5}{statistics.median(times):>10.3f}{max(times):>8.3f}"
                  f"{max(m for _, m, _ in runs):>10.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
