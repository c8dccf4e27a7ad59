"""The run spec a stack file describes, as JSON on stdout (GrpoSpec.to_json); its problems on
stderr and exit 2 when the config is invalid.

    python -m tools.run_spec STACK [--config-file FILE]

What the jobs CLI runs for a stack that is not deployed (or with --config-file): jobs/ cannot
import the config models of components/ (the layers of .importlinter), so it reads the spec
through this command, as it reads a deployed stack through `pulumi stack output`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from components.run_spec import StackFileError, load_stack_file, spec_from_config

EXIT_OK, EXIT_INVALID_CONFIG = 0, 2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.run_spec",
                                     description="The run spec a stack file describes, as JSON.")
    parser.add_argument("stack", help="stack name: reads Pulumi.STACK.yaml unless --config-file")
    parser.add_argument("--config-file", type=Path, help="a stack file to read instead")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return EXIT_INVALID_CONFIG if exit_.code else EXIT_OK
    try:
        config = load_stack_file(args.stack, args.config_file)
    except StackFileError as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_INVALID_CONFIG
    print(spec_from_config(config).to_json())
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
