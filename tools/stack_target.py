"""The outputs the jobs CLI targets a stack by (namespace, RayCluster, run, spec, cost basis,
capacity plan), computed from the stack file alone, as one JSON object on stdout; the config's
problems (and the job preflight's errors) on stderr and exit 2.

    python -m tools.stack_target STACK [--config-file FILE]

What the jobs CLI runs to target a stack offline (no Pulumi, or --config-file): it reads and
validates the stack file and runs no Pulumi program (components/stack_target.py), so it takes
about what reading and validating the file takes (tools/bench_preview.py --target measures it).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from components.config import ConfigError
from components.run_spec import StackFileError, load_stack_file
from components.stack_target import target_outputs

EXIT_OK, EXIT_INVALID_CONFIG = 0, 2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.stack_target",
                                     description="The outputs the jobs CLI targets a stack by, from its stack file.")
    parser.add_argument("stack", help="stack name: reads Pulumi.STACK.yaml unless --config-file")
    parser.add_argument("--config-file", type=Path, help="a stack file to read instead")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return EXIT_INVALID_CONFIG if exit_.code else EXIT_OK
    try:
        outputs = target_outputs(load_stack_file(args.stack, args.config_file))
    except StackFileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_INVALID_CONFIG
    except ConfigError as exc:
        print(f"error: {args.config_file or f'Pulumi.{args.stack}.yaml'}: {exc}", file=sys.stderr)
        return EXIT_INVALID_CONFIG
    print(json.dumps(outputs, sort_keys=True))
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
