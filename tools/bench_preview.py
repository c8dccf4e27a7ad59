"""Benchmark: the offline preview of prod against the floor of importing the SDK modules the
program imports (same interpreter, no program). Prints figures; asserts nothing.

    python -m tools.bench_preview [--runs N] [--stack prod]

Target: preview median <= 2 x floor median + 1 s.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

from tools.preview import ROOT

SDK_PREFIXES = ("pulumi", "pulumi_gcp", "pulumi_kubernetes")

# Run the program once and list the SDK modules it imported (leaves of the package tree the
# program touched), so the floor imports exactly those.
_LIST_MODULES = """
import sys
from tools.preview import run_preview
result = run_preview({stack!r})
assert result.error is None, result.error
names = sorted(n for n in sys.modules if n.split('.')[0] in {prefixes!r})
print('\\n'.join(names))
"""


def sdk_modules(stack: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", _LIST_MODULES.format(stack=stack, prefixes=SDK_PREFIXES)],
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if line]


def timed(args: list[str], env: dict[str, str] | None = None, check: bool = True) -> float:
    start = time.perf_counter()
    subprocess.run(args, cwd=ROOT, check=check, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--stack", default="prod")
    args = parser.parse_args()

    modules = sdk_modules(args.stack)
    floor_cmd = [sys.executable, "-c", "import " + ", ".join(modules)]
    preview_cmd = [sys.executable, "-m", "tools.preview", args.stack, "--json"]
    timed(floor_cmd), timed(preview_cmd)  # warm the page cache and .pyc files
    floors, previews = [], []
    for _ in range(args.runs):
        floors.append(timed(floor_cmd))
        previews.append(timed(preview_cmd))
    floor, preview = statistics.median(floors), statistics.median(previews)
    target = 2 * floor + 1
    print(f"python {sys.version.split()[0]}, {args.runs} runs each, stack {args.stack}")
    print(f"SDK modules imported by the program: {len(modules)}")
    print(f"floor   (import those modules): median {floor:.3f} s  (min {min(floors):.3f}, max {max(floors):.3f})")
    print(f"preview (tools.preview --json): median {preview:.3f} s  (min {min(previews):.3f}, max {max(previews):.3f})")
    print(f"ratio preview/floor: {preview / floor:.2f}")
    print(f"target 2 x floor + 1 s = {target:.3f} s: {'met' if preview <= target else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
