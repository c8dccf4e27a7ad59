"""The serving pod's first command: which export vLLM serves, or why none can be.

    python3 -m jobs.head.serve_check --run-id RUN [--step N] [--exports-root /data/exports]

Prints the export's directory (the newest complete one without --step) and exits 0; otherwise
one line on stderr and exit 2: an unknown run (no exports), a step that was never exported, an
export directory that exists but is incomplete (jobs/contract/exports.py export_state). The
serve manifest (jobs/plan/serve_manifest.py) runs it before ``vllm serve``, so the pod's log
says what is wrong instead of vLLM failing on half a model.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from jobs.contract.exit_codes import ExitCode
from jobs.contract.exports import EXPORTS_ROOT, ExportError, export_dir, export_state, parse_step_label


def export_to_serve(run_id: str, step: int | None, root: Path) -> Path:
    try:
        runs = export_dir(run_id, 0, root).parent      # checks the run id's characters
    except ValueError as exc:
        raise ExportError(str(exc)) from None
    if not runs.is_dir():
        raise ExportError(f"run {run_id} has no exports under {root} (`gke-grpo export {run_id}` "
                          "writes one)")
    if step is not None:
        target = export_dir(run_id, step, root)
        state = export_state(target)
        if not state.complete:
            raise ExportError(f"cannot serve step {step} of run {run_id}: {state.reason}; "
                              f"`gke-grpo export {run_id} --step {step}` (re)writes it")
        return target
    steps = sorted((s for p in runs.iterdir() for s in [parse_step_label(p.name)] if s is not None),
                   reverse=True)
    for candidate in steps:
        if export_state(export_dir(run_id, candidate, root)).complete:
            return export_dir(run_id, candidate, root)
    raise ExportError(f"run {run_id} has no complete export under {runs} (steps there: "
                      f"{', '.join(map(str, sorted(steps))) or 'none'}); `gke-grpo export {run_id}` "
                      "writes one")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m jobs.head.serve_check")
    parser.add_argument("--run-id", required=True)
    parser.add_argument("--step", type=int)
    parser.add_argument("--exports-root", default=EXPORTS_ROOT)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(ExitCode.USAGE) if exc.code else 0
    try:
        path = export_to_serve(args.run_id, args.step, Path(args.exports_root))
    except ExportError as exc:
        print(f"[serve] error: {exc}", file=sys.stderr, flush=True)
        return int(ExitCode.USAGE)
    print(path, flush=True)
    return int(ExitCode.OK)


if __name__ == "__main__":
    sys.exit(main())
