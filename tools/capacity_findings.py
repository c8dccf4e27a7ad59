"""What a stack's GPU capacity may cost before a run starts, as preflight warnings (one JSON list
of lines on stdout): today the worst case of a partial flex-start grant while a gang assembles
(components/cost.py flex_start_partial_grant).

    python -m tools.capacity_findings STACK [--config-file FILE]

The jobs CLI's preflight runs it (jobs/ cannot import components/: .importlinter). Exit 0, or 2
when the config is invalid.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from components.cost import flex_start_partial_grant, partial_grant_line
from components.run_spec import StackFileError, load_stack_file

EXIT_OK, EXIT_INVALID = 0, 2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.capacity_findings", description=__doc__.splitlines()[0])
    parser.add_argument("stack")
    parser.add_argument("--config-file", type=Path)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return EXIT_INVALID if exit_.code else EXIT_OK
    try:
        config = load_stack_file(args.stack, args.config_file)
    except StackFileError as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_INVALID
    grant = flex_start_partial_grant(config)
    print(json.dumps([] if grant is None else [partial_grant_line(grant)]))
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
