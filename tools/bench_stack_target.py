"""Benchmark: offline targeting of a stack (what `gke-grpo status/report/submit -s STACK` run
without Pulumi) against the floor of reading and validating the stack file, each in a fresh
interpreter as the CLI runs it. Prints figures; asserts nothing.

    python -m tools.bench_stack_target [--runs N] [--stack dev] [--with-preview]

Target: `python -m tools.stack_target STACK` median <= 2 x the floor's median. --with-preview
also times the whole offline preview (what offline targeting ran before) for comparison.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile

from tools.bench_preview import timed


def _timed_median(label: str, argv: list[str], runs: int, env: dict[str, str] | None = None,
            check: bool = True) -> float:
    timed(argv, env=env, check=check)           # warm the page cache and the .pyc files
    times = [timed(argv, env=env, check=check) for _ in range(runs)]
    median = statistics.median(times)
    print(f"{label}: median {median:.3f} s  (min {min(times):.3f}, max {max(times):.3f})")
    return median


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--stack", default="dev")
    parser.add_argument("--with-preview", action="store_true")
    args = parser.parse_args()

    print(f"python {sys.version.split()[0]}, {args.runs} runs each, stack {args.stack}, {os.cpu_count()} CPUs")
    floor = _timed_median("floor  (read + validate the stack file)   ",
                    [sys.executable, "-c", "from components.run_spec import load_stack_file; "
                     f"load_stack_file({args.stack!r})"], args.runs)
    target = _timed_median("target (python -m tools.stack_target)     ",
                     [sys.executable, "-m", "tools.stack_target", args.stack], args.runs)
    # A whole command that needs only the stack's identity, without Pulumi on PATH: the report of
    # a run directory that holds nothing usable (its exit 2 comes after the stack is targeted).
    with tempfile.TemporaryDirectory() as empty:
        no_pulumi = {**os.environ, "PATH": os.path.dirname(sys.executable)}
        _timed_median("command (gke-grpo report DIR -s STACK)    ",
                [sys.executable, "-m", "jobs", "report", empty, "--stack", args.stack], args.runs, no_pulumi,
                check=False)
    if args.with_preview:
        _timed_median("preview (python -m tools.preview --json)  ",
                [sys.executable, "-m", "tools.preview", args.stack, "--json"], max(1, args.runs // 3))
    print(f"ratio target/floor: {target / floor:.2f}; target 2 x floor = {2 * floor:.3f} s: "
          f"{'met' if target <= 2 * floor else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
