"""The command line the stack-file tools share (tools/run_spec.py, tools/stack_target.py,
tools/capacity_findings.py, tools/replacement_report.py): `STACK [--config-file FILE]`, the stack
file read and validated without Pulumi, its problem on stderr and exit 2. The jobs CLI runs these
tools as subprocesses (jobs/ cannot import components/: .importlinter)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from components.config import StackConfig
from components.run_spec import StackFileError, load_stack_file

EXIT_OK, EXIT_INVALID = 0, 2


def stack_file_parser(prog: str, description: str) -> argparse.ArgumentParser:
    """A parser with the stack and --config-file; a tool adds its own arguments to it."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("stack", help="stack name: reads Pulumi.STACK.yaml unless --config-file")
    parser.add_argument("--config-file", type=Path, help="a stack file to read instead")
    return parser


def parse_and_load(parser: argparse.ArgumentParser, argv: list[str] | None, *,
                   error_prefix: str = "") -> tuple[argparse.Namespace, StackConfig] | int:
    """The arguments and the validated stack config, or the exit code (0 after --help, 2 for bad
    arguments or an unusable stack file, whose problem is printed on stderr after error_prefix)."""
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return EXIT_INVALID if exit_.code else EXIT_OK
    try:
        return args, load_stack_file(args.stack, args.config_file)
    except StackFileError as exc:
        print(f"{error_prefix}{exc}", file=sys.stderr)
        return EXIT_INVALID
