"""Every command the README and docs/ show works when pasted after the setup the page names
(`make preview`, then ./venv's `gke-grpo` and `python` on PATH; the run-directory commands after
`make cli`): each one's `--help`, run through the documented form (the console script, `python
-m jobs`, `python -m tools.X`, the head's `python3 -m jobs.head.X`); and the documented commands
that can run offline, run for real, from the repository's root and from another directory, with
the same answers."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from jobs.cli.main import build_parser

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
COMMAND = re.compile(r"^(gke-grpo|python3? -m [a-z_][a-z0-9_.]*)((?: [a-z][a-z-]*)?)")
SUBCOMMANDS = set(build_parser()._subparsers._group_actions[0].choices)
BIN = Path(sys.executable).parent          # ./venv/bin: what the README's setup activates


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


SNIPPETS = {doc.name: _snippets(doc.read_text()) for doc in DOCS}


def documented_commands() -> dict[str, list[str]]:
    """The --help form of every documented command -> where it is documented."""
    forms: dict[str, list[str]] = {}
    for name, snippets in SNIPPETS.items():
        for snippet in snippets:
            match = COMMAND.match(snippet)
            if not match:
                continue
            program, word = match.group(1), match.group(2).strip()
            if program == "gke-grpo" or program.endswith(" jobs"):
                form = f"{program} {word} --help" if word in SUBCOMMANDS else f"{program} --help"
            else:
                form = f"{program} --help"
            forms.setdefault(form, []).append(name)
    return forms


FORMS = documented_commands()


def _env() -> dict[str, str]:
    # Only ./venv/bin and the system's own directories: no pulumi or kubectl of the developer's,
    # so the offline answers are the ones a fresh machine gets. PYTHONPATH names this checkout:
    # the console script then runs this tree's code even where ./venv's editable install points
    # at another checkout of the project.
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}/usr/bin{os.pathsep}/bin", "PYTHONPATH": str(ROOT)}


def _argv(command: str) -> list[str]:
    argv = command.split()
    if argv[0] in ("python", "python3"):
        argv[0] = sys.executable
    elif argv[0] == "gke-grpo":
        argv[0] = str(BIN / "gke-grpo")
        assert Path(argv[0]).exists(), "the console script is missing: `make preview` installs it"
    return argv


def test_the_docs_document_the_console_script():
    assert "gke-grpo --help" in FORMS or any(f.startswith("gke-grpo ") for f in FORMS)
    assert {"gke-grpo submit --help", "gke-grpo status --help", "gke-grpo preflight --help"} <= set(FORMS)


@pytest.mark.parametrize("form", sorted(FORMS))
def test_a_documented_command_answers_help(form):
    done = subprocess.run(_argv(form), cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{form} (in {', '.join(sorted(set(FORMS[form])))}): {done.stderr[-800:]}"
    assert "usage:" in done.stdout.lower(), done.stdout[:400]


# ---- the documented commands that run offline, for real --------------------------------------------

RUN_ID = "qwen7b-gsm8k-dev-00000000"
# (page, the command as the page shows it, the command run, from both directories?)
# RUN is the run id above, ./runs/RUN a synthetic run in the directory the command runs in.
OFFLINE = [
    ("README.md", "gke-grpo preflight --stack dev", "gke-grpo preflight --stack dev", True),
    ("running-jobs.md", "gke-grpo report RUN --stack dev", f"gke-grpo report {RUN_ID} --stack dev", True),
    ("metrics-and-report.md", "gke-grpo status --run-dir ./runs/RUN [--stack dev]",
     f"gke-grpo status --run-dir ./runs/{RUN_ID} --stack dev", False),
    ("metrics-and-report.md", "gke-grpo report ./runs/RUN --stack dev --out r",
     f"gke-grpo report ./runs/{RUN_ID} --stack dev --out r", False),
    ("metrics-and-report.md", "gke-grpo plot   --run-dir ./runs/RUN --out run.png",
     f"gke-grpo plot --run-dir ./runs/{RUN_ID} --out run.png", False),
]


@pytest.fixture(scope="module")
def offline_runs(tmp_path_factory) -> dict[tuple[str, str], subprocess.CompletedProcess]:
    """Each OFFLINE command from another directory (holding ./runs/RUN), and those that read no
    run directory also from the repository's root; all at once (each takes seconds)."""
    from tools.synthetic_run import write_synthetic_run

    elsewhere = tmp_path_factory.mktemp("elsewhere")
    write_synthetic_run(elsewhere / "runs" / RUN_ID, total_steps=30, run_id=RUN_ID)
    jobs = [(command, where) for _, _, command, both in OFFLINE
            for where in (("root", "elsewhere") if both else ("elsewhere",))]

    def run(job: tuple[str, str]) -> subprocess.CompletedProcess:
        command, where = job
        return subprocess.run(_argv(command), cwd=ROOT if where == "root" else elsewhere, env=_env(),
                              capture_output=True, text=True, timeout=300)

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = dict(zip(jobs, pool.map(run, jobs)))
    results[("dir", "elsewhere")] = elsewhere       # type: ignore[assignment]
    return results


@pytest.mark.parametrize("page,shown", [(page, shown) for page, shown, _, _ in OFFLINE])
def test_the_offline_commands_are_the_documented_ones(page, shown):
    assert shown in SNIPPETS[page] or any(s.startswith(shown) for s in SNIPPETS[page]), f"{shown} not in {page}"


def test_preflight_gives_the_same_answer_from_anywhere(offline_runs):
    root, elsewhere = (offline_runs[("gke-grpo preflight --stack dev", where)] for where in ("root", "elsewhere"))
    assert root.returncode == elsewhere.returncode == 0, root.stderr + elsewhere.stderr
    assert root.stdout == elsewhere.stdout
    # verl 0.9.1's log-prob path is measured (jobs/plan/logprob_paths.py VERL_091): a plan, no warning.
    assert root.stdout.splitlines()[-1].endswith("0 error(s), 0 warning(s)")
    assert "GPU memory is not checked" not in root.stdout and "GPU memory plan:" in root.stdout
    assert "Traceback" not in root.stderr + elsewhere.stderr


def test_a_missing_run_is_said_the_same_from_anywhere(offline_runs):
    command = f"gke-grpo report {RUN_ID} --stack dev"
    root, elsewhere = (offline_runs[(command, where)] for where in ("root", "elsewhere"))
    assert root.returncode == elsewhere.returncode == 2
    assert root.stderr == elsewhere.stderr
    [line] = root.stderr.splitlines()
    assert line.startswith(f"[gke-grpo] error: no run directory for {RUN_ID}")


def test_the_run_directory_commands_work_from_another_directory(offline_runs):
    elsewhere = offline_runs[("dir", "elsewhere")]
    status, report, plot = (offline_runs[(command, "elsewhere")] for _, _, command, both in OFFLINE if not both)
    for done in (status, report, plot):
        assert done.returncode == 0, done.args and done.stderr[-1500:]
        assert "Traceback" not in done.stderr and "internal error" not in done.stderr
    assert "goodput" in status.stdout and "stack file Pulumi.dev.yaml (offline)" in status.stderr
    assert (elsewhere / "r" / "report.html").is_file() and (elsewhere / "run.png").is_file()
