"""Every subcommand and option of `gke-grpo` has help text, and `-s` works wherever `--stack`
does (preflight included: its own parser, jobs/cli/preflight.py)."""

from __future__ import annotations

import argparse

import pytest

from jobs.cli import main as cli
from jobs.cli import preflight as preflight_cli
from jobs.cli.main import PROG, build_parser


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    [group] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(group.choices)


def _commands() -> dict[str, argparse.ArgumentParser]:
    commands = _subparsers(build_parser())
    commands["preflight"] = preflight_cli.preflight_parser()   # the CLI hands preflight its argv
    return commands


def test_every_subcommand_is_described():
    top = build_parser()
    [group] = [a for a in top._actions if isinstance(a, argparse._SubParsersAction)]
    described = {choice.dest: choice.help for choice in group._choices_actions}
    assert set(described) == set(_commands()), described
    assert all(described.values()), {k: v for k, v in described.items() if not v}
    assert top.prog == PROG == "gke-grpo"
    assert all(command.description for command in _commands().values())


@pytest.mark.parametrize("name", sorted(_commands()))
def test_every_option_has_help(name):
    parser = _commands()[name]
    missing = [action.option_strings or action.dest for action in parser._actions
               if action.help is None]
    assert not missing, f"gke-grpo {name}: {missing} have no help text"


@pytest.mark.parametrize("name", sorted(_commands()))
def test_short_stack_option_wherever_the_long_one_is(name):
    for action in _commands()[name]._actions:
        if "--stack" in action.option_strings:
            assert "-s" in action.option_strings, f"gke-grpo {name}: --stack without -s"


def test_preflight_takes_s(capsys):
    # -s parses (the stack file of a stack that does not exist: a usage error, not a parse error)
    assert preflight_cli.main(["-s", "no-such-stack"]) == 2
    assert "unrecognized arguments" not in capsys.readouterr().err


@pytest.mark.parametrize("command", ["status", "submit", "report", "serve", "preflight"])
def test_a_bad_option_of_a_subcommand_prints_that_subcommand_s_usage(command, capsys):
    assert cli.main([command, *({"report": ["r-1234abcd"], "preflight": ["-s", "dev"]}.get(command, [])), "--bogus"]) == 2
    err = capsys.readouterr().err
    assert f"usage: gke-grpo {command}" in err and f"gke-grpo {command}: error:" in err
    assert "--bogus" in err and "COMMAND ..." not in err
