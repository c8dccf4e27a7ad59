"""What a stack's GPU capacity may cost before a run starts, as preflight warnings (one JSON list
of lines on stdout): today the worst case of a partial flex-start grant while a gang assembles
(components/cost.py flex_start_partial_grant).

    python -m tools.capacity_findings STACK [--config-file FILE]

The jobs CLI's preflight runs it (jobs/ cannot import components/: .importlinter). Exit 0, or 2
when the config is invalid.
"""

from __future__ import annotations

import json
import sys

from components.cost import flex_start_partial_grant, partial_grant_line
from tools.stack_file_command import EXIT_OK, parse_and_load, stack_file_parser


def main(argv: list[str] | None = None) -> int:
    loaded = parse_and_load(stack_file_parser("python -m tools.capacity_findings", __doc__.splitlines()[0]), argv)
    if isinstance(loaded, int):
        return loaded
    _, config = loaded
    grant = flex_start_partial_grant(config)
    print(json.dumps([] if grant is None else [partial_grant_line(grant)]))
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
