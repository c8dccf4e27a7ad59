"""Regenerates the golden preview files (tests/golden/<stack>.json). Run on purpose only:

    python -m tools.golden [STACK ...]

Tests never write these files; they fail with a unified diff when the preview changes, and the
regenerated file then shows the change to reviewers in the pull request.
"""

import sys
from pathlib import Path

from tools.preview import ROOT, render_json, run_preview

GOLDEN_DIR = ROOT / "tests" / "golden"
STACKS = ("dev", "prod")


def golden_path(stack: str) -> Path:
    return GOLDEN_DIR / f"{stack}.json"


def main(argv: list[str]) -> int:
    for stack in argv or STACKS:
        result = run_preview(stack)
        if result.error or result.unknown_inputs:
            print(f"{stack}: preview failed: {result.error or result.unknown_inputs}", file=sys.stderr)
            return 1
        golden_path(stack).write_text(render_json(result))
        print(f"wrote {golden_path(stack).relative_to(ROOT)} ({len(result.resources)} resources)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
