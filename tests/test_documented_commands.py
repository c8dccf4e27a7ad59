"""Every command the README and docs/ show works when pasted after the README's setup (`make
preview`, then ./venv's `gke-grpo` and `python` on PATH, from the repository's root): each one's
`--help`, run through the documented form (the console script, `python -m jobs`, `python -m
tools.X`, the head's `python3 -m jobs.head.X`)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from jobs.cli.main import build_parser

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
COMMAND = re.compile(r"^(gke-grpo|python3? -m [a-z_][a-z0-9_.]*)((?: [a-z][a-z-]*)?)")
SUBCOMMANDS = set(build_parser()._subparsers._group_actions[0].choices)


def _snippets(text: str) -> list[str]:
    """Lines of fenced code blocks, and inline code spans."""
    found = []
    fenced = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            found.append(line.strip().lstrip("$ ").strip())
        else:
            found += [span.strip() for span in re.findall(r"`([^`]+)`", line)]
    return found


def documented_commands() -> dict[str, list[str]]:
    """The --help form of every documented command -> where it is documented."""
    forms: dict[str, list[str]] = {}
    for doc in DOCS:
        for snippet in _snippets(doc.read_text()):
            match = COMMAND.match(snippet)
            if not match:
                continue
            program, word = match.group(1), match.group(2).strip()
            if program == "gke-grpo" or program.endswith(" jobs"):
                form = f"{program} {word} --help" if word in SUBCOMMANDS else f"{program} --help"
            else:
                form = f"{program} --help"
            forms.setdefault(form, []).append(doc.name)
    return forms


FORMS = documented_commands()


def test_the_docs_document_the_console_script():
    assert "gke-grpo --help" in FORMS or any(f.startswith("gke-grpo ") for f in FORMS)
    assert {"gke-grpo submit --help", "gke-grpo status --help", "gke-grpo preflight --help"} <= set(FORMS)


@pytest.mark.parametrize("form", sorted(FORMS))
def test_a_documented_command_answers_help(form):
    bin_dir = Path(sys.executable).parent          # ./venv/bin: what the README's setup activates
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    argv = form.split()
    if argv[0] in ("python", "python3"):
        argv[0] = sys.executable
    elif argv[0] == "gke-grpo":
        argv[0] = str(bin_dir / "gke-grpo")
        assert Path(argv[0]).exists(), "the console script is missing: `make preview` installs it"
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{form} (in {', '.join(sorted(set(FORMS[form])))}): {done.stderr[-800:]}"
    assert "usage:" in done.stdout.lower(), done.stdout[:400]
