"""A stand-in `pulumi` executable for the jobs CLI tests.

The real Pulumi CLI cannot be installed here (no network to get.pulumi.com, and no backend or
cloud to deploy to), so these tests put this script on PATH as `pulumi`. It answers the two
commands jobs/cli/stack_outputs.py runs, in the real CLI's documented format
(https://www.pulumi.com/docs/iac/cli/commands/pulumi_stack_output/, read 2026-12-01):

    pulumi stack output --json [--show-secrets] [-s|--stack NAME] [--non-interactive]
        one JSON object, output name -> value; secret outputs print as "[secret]" unless
        --show-secrets (then in plaintext); no --stack: the selected stack
    pulumi stack --show-name [--non-interactive]
        the selected stack's name

The stacks and their outputs come from a JSON file (stack -> {"outputs": {...}, "secrets":
[names]}, plus "selected"); every call's argv is appended to a log. An unknown stack fails like
the real CLI does (a message on stderr, non-zero exit; the exact wording is not checked by the
tests: it is modelled, not copied).
"""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

SCRIPT = '''#!{python}
import json, sys
state = json.load(open({state!r}))
with open({log!r}, "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\\n")
args = [a for a in sys.argv[1:] if a != "--non-interactive"]
stack = state.get("selected")
for flag in ("-s", "--stack"):
    if flag in args:
        i = args.index(flag)
        stack = args[i + 1]
        del args[i:i + 2]
if args[:2] == ["stack", "--show-name"]:
    if stack is None:
        print("error: no stack selected", file=sys.stderr); sys.exit(255)
    print(stack); sys.exit(0)
if args[:2] == ["stack", "output"] and "--json" in args:
    if stack not in state["stacks"]:
        print(f"error: no stack named '{{stack}}' found", file=sys.stderr); sys.exit(255)
    entry = state["stacks"][stack]
    shown = {{k: (v if "--show-secrets" in args or k not in entry.get("secrets", []) else "[secret]")
              for k, v in entry["outputs"].items()}}
    print(json.dumps(shown, indent=2)); sys.exit(0)
print("stand-in pulumi: unsupported command " + " ".join(sys.argv[1:]), file=sys.stderr)
sys.exit(2)
'''


def install(bin_dir: Path, stacks: dict[str, dict], selected: str | None = "dev") -> Path:
    """Write `pulumi` into bin_dir; returns the argv log (one JSON list per call)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    state = bin_dir / "pulumi-state.json"
    state.write_text(json.dumps({"stacks": stacks, "selected": selected}))
    log = bin_dir / "pulumi-calls.log"
    script = bin_dir / "pulumi"
    script.write_text(SCRIPT.format(python=sys.executable, state=str(state), log=str(log)))
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return log


def calls(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
