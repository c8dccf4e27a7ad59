"""What a stack file would replace of a deployed stack, as one JSON object on stdout.

    python -m tools.replacement_report STACK --deployed-outputs FILE [--config-file FILE]

FILE is the deployed stack's `pulumi stack output --json`. Prints {"refused": [problem, ...],
"replaced": [line, ...], "unread": reason | null}: refused data-store replacements (each names
the key and the three steps to do it on purpose), and what a live run loses. The jobs CLI's
preflight runs it (jobs/ cannot import components/: .importlinter); the Pulumi program makes the
same comparison itself (components/replacements.py). Exit 0, or 2 when the config is invalid.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from components.replacements import compare, data_loss_problems, deployed_from_outputs, run_warnings, stack_identity
from components.run_spec import spec_from_config
from tools.preview import PreviewInputError, read_deployed_outputs
from tools.stack_file_command import EXIT_INVALID, EXIT_OK, parse_and_load, stack_file_parser


def main(argv: list[str] | None = None) -> int:
    parser = stack_file_parser("python -m tools.replacement_report", __doc__.splitlines()[0])
    parser.add_argument("--deployed-outputs", type=Path, required=True)
    loaded = parse_and_load(parser, argv)
    if isinstance(loaded, int):
        return loaded
    args, config = loaded
    try:
        deployed = deployed_from_outputs(read_deployed_outputs(args.deployed_outputs))
    except PreviewInputError as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_INVALID
    replacements = compare(deployed.identity, stack_identity(config))
    refused = data_loss_problems(replacements, config.storage.allow_data_loss)
    checkpoint = deployed.checkpoint_dir or spec_from_config(config).checkpoint_dir
    print(json.dumps({"refused": [str(p) for p in refused],
                      "replaced": run_warnings(replacements, checkpoint, config.storage.allow_data_loss),
                      "unread": deployed.unread}, sort_keys=True))
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
