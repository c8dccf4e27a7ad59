"""What a stack file would replace of a deployed stack, as one JSON object on stdout.

    python -m tools.replacement_report STACK --deployed-outputs FILE [--config-file FILE]

FILE is the deployed stack's `pulumi stack output --json`. Prints {"refused": [problem, ...],
"replaced": [line, ...], "unread": reason | null}: refused data-store replacements (each names
the key and the three steps to do it on purpose), and what a live run loses. The jobs CLI's
preflight runs it (jobs/ cannot import components/: .importlinter); the Pulumi program makes the
same comparison itself (components/replacements.py). Exit 0, or 2 when the config is invalid.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from components.replacements import compare, data_loss_problems, deployed_from_outputs, run_warnings, stack_identity
from components.run_spec import StackFileError, load_stack_file, spec_from_config
from tools.preview import PreviewInputError, read_deployed_outputs

EXIT_OK, EXIT_INVALID = 0, 2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.replacement_report", description=__doc__.splitlines()[0])
    parser.add_argument("stack")
    parser.add_argument("--deployed-outputs", type=Path, required=True)
    parser.add_argument("--config-file", type=Path)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return EXIT_INVALID if exit_.code else EXIT_OK
    try:
        config = load_stack_file(args.stack, args.config_file)
        deployed = deployed_from_outputs(read_deployed_outputs(args.deployed_outputs))
    except (StackFileError, PreviewInputError) as exc:
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
