"""The outputs the jobs CLI targets a stack by (namespace, RayCluster, run, spec, cost basis,
capacity plan), computed from the stack file alone, as one JSON object on stdout; the config's
problems (and the job preflight's errors) on stderr and exit 2.

    python -m tools.stack_target STACK [--config-file FILE]

What the jobs CLI runs to target a stack offline (no Pulumi, or --config-file): it reads and
validates the stack file and runs no Pulumi program (components/stack_target.py), so it takes
about what reading and validating the file takes (tools/bench_preview.py --target measures it).
"""

from __future__ import annotations

import json
import sys

from components.config import ConfigError
from components.stack_target import target_outputs
from tools.stack_file_command import EXIT_INVALID, EXIT_OK, parse_and_load, stack_file_parser


def main(argv: list[str] | None = None) -> int:
    parser = stack_file_parser("python -m tools.stack_target",
                               "The outputs the jobs CLI targets a stack by, from its stack file.")
    loaded = parse_and_load(parser, argv, error_prefix="error: ")
    if isinstance(loaded, int):
        return loaded
    args, config = loaded
    try:
        outputs = target_outputs(config)
    except ConfigError as exc:             # the job preflight's errors, as `pulumi up` stops on them
        print(f"error: {args.config_file or f'Pulumi.{args.stack}.yaml'}: {exc}", file=sys.stderr)
        return EXIT_INVALID
    print(json.dumps(outputs, sort_keys=True))
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
