"""The run spec a stack file describes, as JSON on stdout (GrpoSpec.to_json); its problems on
stderr and exit 2 when the config is invalid.

    python -m tools.run_spec STACK [--config-file FILE]

What the jobs CLI runs for a stack that is not deployed (or with --config-file): jobs/ cannot
import the config models of components/ (the layers of .importlinter), so it reads the spec
through this command, as it reads a deployed stack through `pulumi stack output`.
"""

from __future__ import annotations

import sys

from components.run_spec import spec_from_config
from tools.stack_file_command import EXIT_OK, parse_and_load, stack_file_parser


def main(argv: list[str] | None = None) -> int:
    loaded = parse_and_load(stack_file_parser("python -m tools.run_spec",
                                              "The run spec a stack file describes, as JSON."), argv)
    if isinstance(loaded, int):
        return loaded
    _, config = loaded
    print(spec_from_config(config).to_json())
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
