"""Bad input, round two: every reader of a run's files and every entry point that reads them,
against hostile files, in one table. The readers: the run plan (``python3 -m jobs.run --plan``),
events.jsonl and restarts.jsonl, TensorBoard folders and event files, console logs (``plot
--log``), health.json (``gke-grpo health``), and the CLI's own arguments (run ids, --out, --run-dir).
The stack-file reader shares the same core (jobs/contract/safe_files.py); its table is
tests/jobs/plan/test_stack_file.py.

Each case builds its input in a fresh folder (FIFOs, symlink loops and escapes, /dev/zero,
directories, non-UTF-8, deep nesting, 1e308, a 5,000-digit integer, NaN/Infinity/true, a planted
credential) and runs the entry point in-process under a SIGALRM guard (a blocked open or read is
interrupted and fails the case: a hang guard, not a timing assertion). Asserted for every case:
the exit code; one clear message with the expected words, or, for a run directory that is still
usable, the report/status from what is valid with the counted warning; no traceback; never
"internal error" (reserved for real bugs); the planted token nowhere in what is printed or
written; no child process or listening port left behind. Where a real process is the point (the
driver's plan as a FIFO, the CLI reading a FIFO log), the command runs as a subprocess.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from jobs.cli import main as cli
from jobs.contract.records import EVENTS_FILE, RESTARTS_FILE, TENSORBOARD_DIR, tensorboard_dir
from jobs.contract.run_plan import DATA_ROOT_ENV, RunPlanError, load_plan
from jobs.head import driver_main
from tests.conftest import ROOT
from tests.jobs.hostile import child_env
from tools.hostile_files import PLANTED_TOKEN
from tools.synthetic_run import write_scalar_events, write_synthetic_run

FIXTURES = Path(__file__).resolve().parent / "fixtures"
# A hang guard per case. Measured 2026-12-06 on the 2-core machine: every case well under 2 s alone; a
# report case (TensorBoard and matplotlib imports) passed 20 s once with two suites and a Ray run
# of a third session beside it (load average about 30).
CASE_SECONDS = 60
RUN = "hostile-run"


class Hung(Exception):
    pass


@contextlib.contextmanager
def bounded(seconds: float):
    """Interrupt the test's own thread after ``seconds`` (a blocked FIFO open or read returns
    EINTR and the handler's exception surfaces)."""
    def alarm(signum, frame):
        raise Hung(f"no answer within {seconds} s: a hang")
    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _become_subreaper() -> None:
    """Orphans of the processes these tests start (a relay whose parent was killed) are re-parented
    to this process instead of PID 1, so `leftovers` still sees them as children."""
    import ctypes

    pr_set_child_subreaper = 36          # linux/prctl.h
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_child_subreaper, 1, 0, 0, 0)


_become_subreaper()


def _parents() -> dict[int, int]:
    """{pid: parent pid} of every live (not zombie) process."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(") ", 1)[1].split()
                if fields[0] not in ("Z", "X"):
                    parents[int(entry)] = int(fields[1])
    return parents


def leftovers() -> tuple[set[int], set[int]]:
    """This process's children and the TCP ports that this process or its descendants listen on.
    Not counted: the suite's own background inner runs and commands (tests/jobs/ray_head.py,
    tests/background.py), which come and go
    while these tests run, and the ports of processes that are not ours (another suite running
    beside this one)."""
    from tests import background
    from tests.jobs import ray_head

    parents = _parents()
    children = {pid for pid, parent in parents.items() if parent == os.getpid()} - ray_head.background_pids() - background.pids()
    ours, frontier = {os.getpid()}, set(children)
    while frontier:
        ours |= frontier
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - ours
    sockets = set()
    for pid in ours:
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    target = os.readlink(f"/proc/{pid}/fd/{fd}")
                    if target.startswith("socket:["):
                        sockets.add(target[len("socket:["):-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for row in Path(table).read_text().splitlines()[1:]:
                fields = row.split()
                if fields[3] == "0A" and fields[9] in sockets:
                    ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return children, ports


# ---- inputs ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    """A small, valid run directory (events, restarts, two trainer starts' TensorBoard files)."""
    root = tmp_path_factory.mktemp("template") / RUN
    write_synthetic_run(root, total_steps=12, crash_after=5)
    return root


def _append(path: Path, *lines: str | bytes) -> None:
    with open(path, "ab") as f:
        for line in lines:
            f.write((line if isinstance(line, bytes) else line.encode()) + b"\n")


def _replace_with(path: Path, kind: str, target: str | None = None) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif os.path.lexists(path):
        path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    elif kind == "symlink":
        path.symlink_to(target)
    elif kind == "sparse":           # a size beyond the cap, without writing it
        with open(path, "wb") as f:
            f.truncate(int(target))


def _event(t, name="x", attempt=1, start=0) -> str:
    return f'{{"time": {t}, "event": "{name}", "attempt": {attempt}, "start": {start}}}'


# Run-directory mutations: name -> what to do to a copy of the template.
MUTATIONS: dict[str, Callable[[Path], None]] = {
    "events-fifo": lambda d: _replace_with(d / EVENTS_FILE, "fifo"),
    "events-directory": lambda d: _replace_with(d / EVENTS_FILE, "directory"),
    "events-dev-zero": lambda d: _replace_with(d / EVENTS_FILE, "symlink", "/dev/zero"),
    "events-symlink-loop": lambda d: _replace_with(d / EVENTS_FILE, "symlink", EVENTS_FILE),
    "events-oversize": lambda d: _replace_with(d / EVENTS_FILE, "sparse", str(65 << 20)),
    "events-1e308": lambda d: _append(d / EVENTS_FILE, _event("1e308"), _event("1e308"), _event("-5")),
    "events-5000-digits": lambda d: _append(d / EVENTS_FILE, _event("9" * 5000)),
    "events-nan-inf": lambda d: _append(d / EVENTS_FILE, _event("NaN"), _event("Infinity"), _event("1e400")),
    "events-bool-attempt": lambda d: _append(d / EVENTS_FILE, _event(5, attempt="true")),
    "events-deep": lambda d: _append(d / EVENTS_FILE, "[" * 10_000 + "]" * 10_000),
    "events-not-utf8": lambda d: _append(d / EVENTS_FILE, b'{"time": 5, "event": "\xff\xfe"}'),
    "restarts-fifo": lambda d: _replace_with(d / RESTARTS_FILE, "fifo"),
    "restarts-1e308": lambda d: _append(d / RESTARTS_FILE, _event("1e308")),
    "tensorboard-to-root": lambda d: _replace_with(d / TENSORBOARD_DIR, "symlink", "/"),
    "start-dir-to-root": lambda d: (d / TENSORBOARD_DIR / "attempt-9-start-0").symlink_to("/"),
    "tensorboard-loops": lambda d: (
        Path(tensorboard_dir(d, 1, 0), "parent").symlink_to(".."),
        Path(tensorboard_dir(d, 1, 0), "self").symlink_to("self")),
    "tfevents-fifo": lambda d: os.mkfifo(Path(tensorboard_dir(d, 1, 1), "events.out.tfevents.0.fifo")),
    "tfevents-corrupt": lambda d: [_append(f, b"\x10" + b"\x00" * 15) for f in Path(tensorboard_dir(d, 1, 0)).iterdir()],
    "tfevents-oversize": lambda d: _replace_with(Path(tensorboard_dir(d, 1, 1), "events.out.tfevents.big"),
                                                 "sparse", str(513 << 20)),
    "tfevents-absurd-points": lambda d: write_scalar_events(tensorboard_dir(d, 1, 1), [
        ("critic/score/mean", 3, 0.5, 1e308), ("critic/score/mean", 4, float("nan"), 1_780_000_000.0),
        ("critic/score/mean", -1, 0.5, 1_780_000_000.0), ("response_length/mean", 5, 1e300, 1_780_000_000.0)]),
    "planted-token": lambda d: _append(d / RESTARTS_FILE, json.dumps(
        {"time": 1_780_000_100.0, "reason": f"hf_token={PLANTED_TOKEN}", "attempt": 1, "start": 0})),
    "nothing-usable": lambda d: (_replace_with(d / EVENTS_FILE, "fifo"), shutil.rmtree(d / TENSORBOARD_DIR)),
    # for the report (a timeline without metrics: two pictures, quick to draw)
    "report-escapes": lambda d: (MUTATIONS["events-1e308"](d), MUTATIONS["tensorboard-to-root"](d),
                                 MUTATIONS["planted-token"](d)),
}


def _run_dir(template: Path, tmp: Path, mutation: str) -> Path:
    run = tmp / RUN
    shutil.copytree(template, run, symlinks=True)
    MUTATIONS[mutation](run)
    return run


def _health(tmp: Path, body: str | bytes | None = None, kind: str | None = None, target: str | None = None) -> Path:
    path = tmp / "health.json"
    if kind:
        _replace_with(path, kind, target)
    elif body is not None:
        path.write_bytes(body if isinstance(body, bytes) else body.encode())
    return path


def _health_doc(**changes) -> str:
    doc = {"version": 1, "passed": True, "started": 1_780_000_000.0, "nodes": 2, "gpus_per_node": 8,
           "backend": "nccl", "seconds": 42.0, "checks": [{"name": "all_gather 8 GiB", "passed": True,
                                                          "measured_gbps": 320.5, "threshold_gbps": 244.3}]}
    doc.update(changes)
    return json.dumps(doc)


def _fifo_inside(folder: Path, name: str) -> Path:
    folder.mkdir()
    os.mkfifo(folder / name)
    return folder


def _link_inside(folder: Path, name: str) -> Path:
    folder.mkdir()
    (folder / name).symlink_to(folder.parent / "elsewhere.png")
    return folder


def _log(tmp: Path, text: str | bytes | None = None, kind: str | None = None, target: str | None = None) -> Path:
    path = tmp / "console.log"
    if kind:
        _replace_with(path, kind, target)
    else:
        path.write_bytes(text if isinstance(text, bytes) else (text or "").encode())
    return path


# ---- the table ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Case:
    name: str
    argv: Callable[[Path, Path], list[str]]   # (template run dir, fresh folder) -> jobs CLI argv
    code: int
    phrase: str                                 # in the one message (failures) or the output (warnings)


def status(mutation: str) -> Callable[[Path, Path], list[str]]:
    return lambda template, tmp: ["status", "--run-dir", str(_run_dir(template, tmp, mutation))]


CLI_CASES: tuple[Case, ...] = (
    # run artifacts are data: skipped and counted, the rest still shown (status: no pictures, fast)
    Case("events-fifo", status("events-fifo"), 0, "events.jsonl not read: it is a FIFO, not a regular events file"),
    Case("events-directory", status("events-directory"), 0, "events.jsonl not read: it is a directory"),
    Case("events-dev-zero", status("events-dev-zero"), 0, "events.jsonl not read: it leads outside"),
    Case("events-symlink-loop", status("events-symlink-loop"), 0, "events.jsonl not read: it is a symlink loop"),
    Case("events-oversize", status("events-oversize"), 0, "events.jsonl not read: it is larger than 64 MiB"),
    Case("events-1e308", status("events-1e308"), 0, "3 lines of events.jsonl skipped: time out of range"),
    Case("events-5000-digits", status("events-5000-digits"), 0, "1 line of events.jsonl skipped: time out of range"),
    Case("events-nan-inf", status("events-nan-inf"), 0, "3 lines of events.jsonl skipped: time not finite"),
    Case("events-bool-attempt", status("events-bool-attempt"), 0, "attempt missing or not a whole number"),
    Case("events-deep", status("events-deep"), 0, "1 line of events.jsonl skipped: nested deeper than 64 levels"),
    Case("events-not-utf8", status("events-not-utf8"), 0, "1 line of events.jsonl skipped: not UTF-8"),
    Case("restarts-fifo", status("restarts-fifo"), 0, "restarts.jsonl not read: it is a FIFO"),
    Case("restarts-1e308", status("restarts-1e308"), 0, "1 line of restarts.jsonl skipped: time out of range"),
    Case("tensorboard-to-root", status("tensorboard-to-root"), 0,
         "tensorboard: leads outside the run directory (a symlink?): not read"),
    Case("start-dir-to-root", status("start-dir-to-root"), 0,
         "tensorboard/attempt-9-start-0: a symlink out of the run directory: not followed"),
    Case("tensorboard-loops", status("tensorboard-loops"), 0, "self: a symlink loop: not read"),
    Case("tfevents-fifo", status("tfevents-fifo"), 0, "events.out.tfevents.0.fifo: a FIFO, not a regular file"),
    Case("tfevents-corrupt", status("tfevents-corrupt"), 0, "a corrupt record at byte"),
    Case("tfevents-oversize", status("tfevents-oversize"), 0, "events.out.tfevents.big not read: it is larger than 512 MiB"),
    Case("tfevents-absurd-points", status("tfevents-absurd-points"), 0,
         "1 TensorBoard point of attempt-1-start-1 skipped: wall time out of range"),
    Case("nothing-usable", lambda t, tmp: ["report", RUN, "--run-dir", str(_run_dir(t, tmp, "nothing-usable")),
                                           "--out", str(tmp / "out")], 2,
         "no usable events.jsonl records and no TensorBoard step metrics: not a run directory?: "
         "events.jsonl not read: it is a FIFO"),
    # the report renders from what is valid and says what it left out (the page is checked too)
    Case("report-with-escapes", lambda t, tmp: ["report", RUN, "--run-dir", str(_run_dir(t, tmp, "report-escapes")),
                                                "--out", str(tmp / "out")], 0,
         "3 lines of events.jsonl skipped: time out of range"),
    # refusals are usage errors in their own words
    Case("report-run-id-escape", lambda t, tmp: ["report", "../etc"], 2, "RUN '../etc' is not a run id"),
    Case("report-empty-run-id", lambda t, tmp: ["report", ""], 2, "RUN '' is not a run id"),
    Case("report-missing-run", lambda t, tmp: ["report", "no-such-run-here"], 2,
         "no run directory for no-such-run-here: /data/runs/no-such-run-here is not here"),
    Case("report-run-dir-missing", lambda t, tmp: ["report", RUN, "--run-dir", str(tmp / "gone")], 2,
         "gone: not a directory"),
    Case("report-out-is-a-file", lambda t, tmp: ["report", RUN, "--run-dir", str(t),
                                                 "--out", str(_log(tmp, "x"))], 2, "exists and is not a directory"),
    Case("report-out-under-a-file", lambda t, tmp: ["report", RUN, "--run-dir", str(t),
                                                    "--out", str(_log(tmp, "x") / "out")], 2,
         "is not a directory, so nothing can be written below it"),
    Case("report-out-holds-a-fifo", lambda t, tmp: ["report", RUN, "--run-dir", str(_run_dir(t, tmp, "tensorboard-to-root")),
                                                    "--out", str(_fifo_inside(tmp / "out", "report.html"))], 1,
         "cannot write the report to"),
    Case("report-out-holds-a-symlink", lambda t, tmp: ["report", RUN, "--run-dir", str(_run_dir(t, tmp, "tensorboard-to-root")),
                                                       "--out", str(_link_inside(tmp / "out", "timeline.png"))], 1,
         "it is a symlink (not followed inside an output folder)"),
    Case("status-run-id-escape", lambda t, tmp: ["status", "--run-id", "../../etc", "--address", "http://127.0.0.1:1"],
         2, "is not a run id"),
    Case("status-run-dir-missing", lambda t, tmp: ["status", "--run-dir", str(tmp / "gone")], 2, "not a directory"),
    # plot: console logs and --out
    Case("log-fifo", lambda t, tmp: ["plot", "--log", str(_log(tmp, kind="fifo")), "--out", str(tmp / "p.png")], 2,
         "is a FIFO, not a regular console log"),
    Case("log-dev-zero", lambda t, tmp: ["plot", "--log", "/dev/zero", "--out", str(tmp / "p.png")], 2,
         "/dev/zero is a character device, not a regular console log"),
    Case("log-directory", lambda t, tmp: ["plot", "--log", str(tmp), "--out", str(tmp / "p.png")], 2,
         "is a directory, not a console log"),
    Case("log-missing", lambda t, tmp: ["plot", "--log", str(tmp / "gone.log"), "--out", str(tmp / "p.png")], 2,
         "cannot read"),
    Case("log-oversize", lambda t, tmp: ["plot", "--log", str(_log(tmp, kind="sparse", target=str(513 << 20))),
                                         "--out", str(tmp / "p.png")], 2, "is larger than 512 MiB"),
    Case("log-absurd-numbers", lambda t, tmp: ["plot", "--log", str(_log(
        tmp, "step:1 - critic/score/mean:1e308 - response_length/mean:nan\n"
             "step:2 - critic/score/mean:-1e308 - response_length/mean:1e400\n"
             f"step:{'9' * 5000} - critic/score/mean:0.5\n" + "step:3 - x:" + "9" * 200_000 + "\n"
             + b"\xff\xfe".decode("latin-1") + f" hf_token={PLANTED_TOKEN}\n")), "--out", str(tmp / "p.png")], 2,
         "no training step with a reward or response length that can be drawn: 4 value(s)"),
    Case("plot-out-is-a-fifo", lambda t, tmp: ["plot", "--log", str(FIXTURES / "verl_console.log"), "--out",
                                               str(_fifo_inside(tmp / "out", "p.png") / "p.png")], 1,
         "p.png: it is a FIFO that no process reads"),
    Case("plot-out-is-a-directory", lambda t, tmp: ["plot", "--log", str(_log(tmp, "")), "--out", str(tmp)], 2,
         "is a directory: give a file name"),
    Case("plot-out-under-a-file", lambda t, tmp: ["plot", "--log", str(_log(tmp, "")), "--out",
                                                  str(_log(tmp, "") / "p.png")], 2, "is not a directory"),
    Case("plot-run-dir-nothing", lambda t, tmp: ["plot", "--run-dir", str(_run_dir(t, tmp, "tensorboard-to-root")),
                                                 "--out", str(tmp / "p.png")], 2,
         "no TensorBoard step metrics there (tensorboard: leads outside the run directory"),
    # gke-grpo health: health.json
    Case("health-fifo", lambda t, tmp: ["health", str(_health(tmp, kind="fifo"))], 2,
         "is a FIFO, not a regular health result"),
    Case("health-dev-zero", lambda t, tmp: ["health", "/dev/zero"], 2, "is a character device, not a regular health result"),
    Case("health-directory", lambda t, tmp: ["health", str(_health(tmp, kind="directory").parent)], 2,
         "health.json is a directory, not a health result"),
    Case("health-not-utf8", lambda t, tmp: ["health", str(_health(tmp, b'{"passed": "\xff"}'))], 2,
         "is not UTF-8: byte 0xff at offset 12"),
    Case("health-deep", lambda t, tmp: ["health", str(_health(tmp, "[" * 100_000 + "]" * 100_000))], 2,
         "nested deeper than 64 levels"),
    Case("health-not-json", lambda t, tmp: ["health", str(_health(tmp, "{'passed': True}"))], 2, "is not JSON"),
    Case("health-list", lambda t, tmp: ["health", str(_health(tmp, "[1, 2]"))], 2, "not a health result (a JSON object)"),
    Case("health-huge-numbers", lambda t, tmp: ["health", str(_health(tmp, _health_doc(
        started=1e308, seconds=float("inf"), nodes="__NODES__",
        checks=[{"name": "x", "threshold_gbps": "300", "measured_gbps": 1e308}]).replace('"__NODES__"', "9" * 5000)))],
         0, "health      PASSED ?, ? node(s) x 8 GPUs, nccl, ?s"),
    Case("health-passed-is-a-string", lambda t, tmp: ["health", str(_health(tmp, _health_doc(passed="yes")))], 6,
         "health      FAILED"),
    Case("health-error-is-a-string", lambda t, tmp: ["health", str(_health(tmp, _health_doc(
        passed=False, error=f"token {PLANTED_TOKEN}", warnings=[f"HF_TOKEN={PLANTED_TOKEN}"], failed_nodes="n0")))], 6,
         "error in ?: token [redacted]"),
)


@pytest.mark.parametrize("case", CLI_CASES, ids=[c.name for c in CLI_CASES])
def test_the_jobs_cli(case, template, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)                  # a default --out lands here, never in the checkout
    before = leftovers()
    out, err = io.StringIO(), io.StringIO()
    argv = case.argv(template, tmp_path)
    with bounded(CASE_SECONDS):
        try:
            code = cli.main(argv, out=out, err=err)
        except SystemExit as exc:                # never: main returns its code
            pytest.fail(f"SystemExit({exc.code}) escaped")
    parser = capsys.readouterr().err             # argparse's own usage errors
    errors = err.getvalue() + parser
    text = out.getvalue() + errors
    assert code == case.code, text
    assert "Traceback" not in text and "internal error" not in text and PLANTED_TOKEN not in text, text
    if code in (1, 2):
        lines = [line for line in errors.splitlines()
                 if line.strip() and not line.startswith(("[gke-grpo] warning:", "usage:", "   "))]
        assert len(lines) == 1, err.getvalue()
        assert case.phrase in lines[0], lines[0]
        assert len(lines[0]) < 600
    else:
        assert case.phrase in text, text
    for written in tmp_path.rglob("*.html"):
        if written.is_file() and not written.is_symlink():          # not the planted FIFO
            assert PLANTED_TOKEN not in written.read_text(errors="replace")
    if case.name == "report-with-escapes":
        page = (tmp_path / "out" / "report.html").read_text()
        assert "3 lines of events.jsonl skipped: time out of range" in page
        assert "tensorboard: leads outside the run directory (a symlink?): not read" in page
        assert "hf_token=[redacted]" in page                 # the restart reason, shown redacted
    assert leftovers() == before


# ---- the run plan, as the driver reads it ---------------------------------------------------------

def _plan(root: Path, **changes) -> dict:
    plan = {
        "version": 1, "run_id": RUN, "attempt": 1, "framework": "verl",
        "run_dir": f"{root}/runs/{RUN}", "checkpoint_dir": f"{root}/checkpoints/{RUN}",
        "prepare": {"argv": ["python3", "-m", "jobs.head.staging"], "cwd": None, "env": {}},
        "gpus": 16, "gpus_per_node": 8, "gpu_wait_seconds": 1800.0,
        "trainer": {"argv": ["python3", "-m", "verl.trainer.main_ppo", "trainer.nnodes=2"], "cwd": None, "env": {}},
        "deadline_seconds": 604800.0, "max_restarts": 20,
        "health": {"mode": "enforce", "iterations": 5,
                   "storage": {"directory": f"{root}/runs/{RUN}/health-probe", "size_bytes": 1 << 30,
                               "streams": 10, "kind": "gcs", "expected_write_gbps": 4.6,
                               "expected_read_gbps": 14.2, "expected_source": "gcsfuse docs"}},
        "prune_checkpoints_keep": 2,
    }
    for dotted, value in changes.items():
        target, *path = dotted.split(".")
        node = plan
        for part in [target, *path][:-1]:
            node = node[part]
        node[[target, *path][-1]] = value
    return plan


def _plan_text(root: Path, raw: str | None = None, **changes) -> str:
    text = json.dumps(_plan(root, **changes))
    return text if raw is None else text.replace('"__RAW__"', raw)


PLAN_CASES: tuple[tuple[str, Callable[[Path], str | bytes | None], str], ...] = (
    ("dev-zero", lambda r: None, "is unreadable: a character device, not a regular run plan"),
    ("directory", lambda r: None, "is unreadable: a directory, not a run plan"),
    ("symlink-loop", lambda r: None, "is unreadable: a symlink loop"),
    ("oversize", lambda r: None, "is unreadable: larger than 1 MiB: not a run plan"),
    ("not-utf8", lambda r: b'{"version": 1, "run_id": "\xff"}', "is unreadable: not UTF-8: byte 0xff at offset 26"),
    ("deep", lambda r: "[" * 100_000 + "]" * 100_000, "nested deeper than 64 levels"),
    ("not-json", lambda r: "{version: 1}", "is not JSON (line 1, column 2"),
    ("version-true", lambda r: _plan_text(r, version=True), "plan version true (a boolean), this driver reads version 1"),
    ("gpus-true", lambda r: _plan_text(r, gpus=True), "gpus must be a whole number from 1 to 1,000,000, got true"),
    ("gpus-5000-digits", lambda r: _plan_text(r, '9' * 5000, gpus="__RAW__"), "gpus must be a whole number from 1 "
     "to 1,000,000, got a 5000-digit integer"),
    ("gpus-float", lambda r: _plan_text(r, gpus=16.0), "gpus must be a whole number from 1 to 1,000,000, got 16.0"),
    ("budget-nan", lambda r: _plan_text(r, "NaN", gpu_wait_seconds="__RAW__"),
     "gpu_wait_seconds must be a finite number above 0 up to 2,147,483,647, got NaN"),
    ("budget-infinity", lambda r: _plan_text(r, "Infinity", deadline_seconds="__RAW__"),
     "deadline_seconds must be a finite number above 0 up to 2,147,483,647, got Infinity"),
    ("budget-1e400", lambda r: _plan_text(r, "1e400", stop_grace_seconds="__RAW__"), "stop_grace_seconds must be a "
     "finite number above 0 up to 2,147,483,647, got Infinity"),
    ("budget-1e308", lambda r: _plan_text(r, backoff_cap_seconds=1e308), "backoff_cap_seconds must be a finite "
     "number above 0 up to 2,147,483,647, got 1e+308"),
    ("budget-bool", lambda r: _plan_text(r, gpu_poll_seconds=True), "gpu_poll_seconds must be a finite number above 0 "
     "up to 3,600, got true (a boolean)"),
    ("budget-negative", lambda r: _plan_text(r, max_restarts=-1), "max_restarts must be a whole number from 0"),
    ("health-not-an-object", lambda r: _plan_text(r, health="yes"), "health must be an object, got 'yes'"),
    ("health-bad-fields", lambda r: _plan_text(r, **{"health.iterations": "5", "health.surprise": 1}),
     "unknown health plan keys: health.surprise; health.iterations must be a whole number from 1 to 100,000, got '5'"),
    ("health-storage-elsewhere", lambda r: _plan_text(r, **{"health.storage.directory": "/data/x"}),
     "health.storage.directory must be below run_dir"),
    ("prune-negative", lambda r: _plan_text(r, prune_checkpoints_keep=-2), "prune_checkpoints_keep must be a whole "
     "number from 1 to 1,000,000, got -2"),
    ("prune-string", lambda r: _plan_text(r, prune_checkpoints_keep="2"), "prune_checkpoints_keep must be a whole "
     "number from 1 to 1,000,000, got '2'"),
    ("run-dir-relative", lambda r: _plan_text(r, run_dir="runs/x"), "run_dir must be an absolute, normalized path"),
    ("run-dir-dotdot", lambda r: _plan_text(r, run_dir=f"{r}/runs/../../etc"), "run_dir must be an absolute, normalized"),
    ("run-dir-outside", lambda r: _plan_text(r, run_dir="/etc/cron.d"), "run_dir must be a directory below "),
    ("checkpoints-outside", lambda r: _plan_text(r, checkpoint_dir=f"{r}/checkpoints"), "checkpoint_dir must be a "
     "directory below"),
    ("cwd-relative", lambda r: _plan_text(r, **{"trainer.cwd": "opt/verl"}), "trainer.cwd must be an absolute"),
    ("argv-nul", lambda r: _plan_text(r, **{"trainer.argv": ["python3", "a\x00b"]}), "trainer.argv[1] must not "
     "contain control characters"),
    ("env-credential", lambda r: _plan_text(r, **{"trainer.env": {"HF_TOKEN": "abc123notatoken"}}),
     "the plan must never carry a secret (the head reads the Hugging Face token from its mounted Secret): "
     "trainer.env.HF_TOKEN holds what looks like a credential assignment (HF_TOKEN=...)"),
    ("argv-token", lambda r: _plan_text(r, **{"trainer.argv": ["python3", "x", f"+trainer.hub_token={PLANTED_TOKEN}"]}),
     "trainer.argv[2] holds what looks like a Hugging Face token (hf_...)"),
    ("env-name", lambda r: _plan_text(r, **{"prepare.env": {"A=B": "1", "OK": 5}}),
     "prepare.env: 'A=B' is not an environment variable name; prepare.env.OK must be a string, got 5"),
    ("every-problem-named", lambda r: _plan_text(r, gpus=0, framework="jax", surprise=1),
     "3 problems: unknown plan keys: surprise; framework 'jax' is not one of verl, nemo-rl; gpus must be"),
)


def _plan_file(tmp: Path, name: str, content: str | bytes | None) -> Path:
    path = tmp / "plan.json"
    if name == "dev-zero":
        return Path("/dev/zero")
    if name == "directory":
        path.mkdir()
    elif name == "symlink-loop":
        path.symlink_to(path.name)
    elif name == "oversize":
        _replace_with(path, "sparse", str(2 << 20))
    else:
        path.write_bytes(content if isinstance(content, bytes) else str(content).encode())
    return path


def test_the_control_plan_is_valid(tmp_path, monkeypatch):
    monkeypatch.setenv(DATA_ROOT_ENV, str(tmp_path))
    path = _plan_file(tmp_path, "ok", _plan_text(tmp_path))
    assert load_plan(path).gpus == 16
    monkeypatch.delenv(DATA_ROOT_ENV)
    with pytest.raises(RunPlanError, match="run_dir must be a directory below /data/runs/"):
        load_plan(path)                          # the default root is the shared mount, /data


@pytest.mark.parametrize("name,content,phrase", PLAN_CASES, ids=[c[0] for c in PLAN_CASES])
def test_the_driver_refuses_a_bad_plan_before_any_stage(name, content, phrase, tmp_path, monkeypatch):
    """``python3 -m jobs.run --plan FILE`` in-process: exit 2 with one line naming every bad key,
    before anything runs (no run directory, no record, no checkpoint directory is created)."""
    monkeypatch.setenv(DATA_ROOT_ENV, str(tmp_path))
    path = _plan_file(tmp_path, name, content(tmp_path))
    before = leftovers()
    out = io.StringIO()
    with bounded(CASE_SECONDS), contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = driver_main.main(["--plan", str(path), "--plan-wait-seconds", "0"])
    text = out.getvalue()
    assert code == 2, text
    [line] = [line for line in text.splitlines() if line.strip()]
    assert line.startswith("[jobs.run] FAILED (exit 2 USAGE): plan file ") and phrase in line, line
    assert "Traceback" not in text and PLANTED_TOKEN not in text and "abc123notatoken" not in text
    assert not (tmp_path / "runs").exists() and not (tmp_path / "checkpoints").exists()
    assert leftovers() == before


# ---- real processes, where a real process is the point --------------------------------------------

def _run(argv: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *argv], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={**child_env(), DATA_ROOT_ENV: str(tmp_path)})


def test_the_driver_command_with_a_fifo_plan_does_not_hang(tmp_path):
    os.mkfifo(tmp_path / "plan.json")
    proc = _run(["-m", "jobs.run", "--plan", str(tmp_path / "plan.json")], tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stdout.strip() == (f"[jobs.run] FAILED (exit 2 USAGE): plan file {tmp_path}/plan.json is "
                                   "unreadable: a FIFO, not a regular run plan")
    assert proc.stderr == ""


def test_the_cli_with_a_fifo_log_does_not_hang(tmp_path):
    os.mkfifo(tmp_path / "console.log")
    proc = _run(["-m", "jobs", "plot", "--log", str(tmp_path / "console.log"), "--out", str(tmp_path / "p.png")],
                tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip() == f"[gke-grpo] error: --log: {tmp_path}/console.log is a FIFO, not a regular console log"


# ---- the readers' own bounds ----------------------------------------------------------------------

def test_a_walk_never_leaves_the_run_directory_nor_loops(tmp_path):
    from jobs.contract.safe_files import walk_files

    run = tmp_path / "run"
    (run / "a" / "b").mkdir(parents=True)
    (run / "a" / "b" / "x.tfevents").write_bytes(b"")
    (run / "a" / "up").symlink_to("..")                   # inside: followed once, never twice
    (run / "a" / "root").symlink_to("/")                  # outside: not followed
    (run / "a" / "b" / "deeper").symlink_to(run / "a")
    (run / "outside").symlink_to(tmp_path)
    with bounded(CASE_SECONDS):
        found = walk_files(run, within=run, want=lambda n: "tfevents" in n)
    assert found.files == [run / "a" / "b" / "x.tfevents"]
    assert sorted(found.skipped) == ["a/root: a symlink out of the run directory: not followed",
                                     "outside: a symlink out of the run directory: not followed"]
    deep = run
    for _ in range(20):
        deep = deep / "d"
    deep.mkdir(parents=True)
    found = walk_files(run, within=run, want=lambda n: True, max_depth=16, max_entries=100)
    assert any("deeper than 16 levels" in line for line in found.skipped)
    found = walk_files(run, within=run, want=lambda n: True, max_entries=3)
    assert found.skipped[-1] == ".: more than 3 entries: the rest not read"


def test_fetch_never_replaces_a_folder_that_is_not_a_run_directory(tmp_path):
    from jobs.cli.run_directory_commands import _replaceable
    from jobs.cli.target import UsageError

    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(UsageError, match="holds other files"):
        _replaceable(tmp_path)
    run = tmp_path / "copy"
    run.mkdir()
    _replaceable(run)                                   # empty: fine
    (run / EVENTS_FILE).write_text("")
    _replaceable(run)                                   # an earlier copy: fine


# ---- the head's own records ---------------------------------------------------------------------
# What the driver reads back of what it and the trainer wrote on /data (the checkpoint tracker,
# health.json, the GPU placement, staging markers): a bad file there is a record not written, never
# a hang, a traceback or a resumed step that does not exist.

RECORD_CASES = {
    "fifo": lambda path: _replace_with(path, "fifo"),
    "directory": lambda path: _replace_with(path, "directory"),
    "dev-zero": lambda path: _replace_with(path, "symlink", "/dev/zero"),
    "sparse-2GiB": lambda path: _replace_with(path, "sparse", str(2 << 30)),
    "not-utf8": lambda path: path.write_bytes(b"\xff\xfe7\x00"),
    "5000-digits": lambda path: path.write_text("9" * 5000),
    "negative": lambda path: path.write_text("-3"),
    "deep-json": lambda path: path.write_text("[" * 5000 + "]" * 5000),
    "json-list": lambda path: path.write_text('[{"passed": true}]'),
}


@pytest.mark.parametrize("case", sorted(RECORD_CASES))
def test_the_drivers_own_records_read_as_not_written(case, tmp_path):
    from jobs.contract.capacity import PLACEMENT_FILE
    from jobs.contract.health import HEALTH_FILE
    from jobs.head.checkpoints import VERL_TRACKER, last_checkpoint_step, prune_verl_checkpoints, tracker_step
    from jobs.head.driver_hooks import DefaultHooks
    from jobs.head.export import complete_steps
    from jobs.head.fabric_gate import gate_needed
    from jobs.head.staging import marker_done

    checkpoints = tmp_path / "checkpoints"
    (checkpoints / "global_step_5").mkdir(parents=True)
    for path in (checkpoints / VERL_TRACKER, tmp_path / HEALTH_FILE, tmp_path / PLACEMENT_FILE,
                 tmp_path / ".gke-grpo-complete"):
        path.write_text("")
        RECORD_CASES[case](path)
    plan = type("Plan", (), {"run_dir": str(tmp_path)})()
    with bounded(CASE_SECONDS):
        assert tracker_step(checkpoints) is None
        assert last_checkpoint_step(checkpoints) == 5          # from the step folders instead
        assert prune_verl_checkpoints(checkpoints, keep=1) == []   # nothing removed on a bad tracker
        assert complete_steps(checkpoints, "verl") == []
        assert gate_needed(tmp_path, ["node-a"]) is True       # measured again, never skipped
        assert DefaultHooks().gpu_placement(plan) == {}
        assert marker_done(tmp_path / ".gke-grpo-complete") is False
    assert (checkpoints / "global_step_5").is_dir()


def test_a_passing_health_result_with_a_broken_placement_is_measured_again(tmp_path):
    from jobs.contract.health import HEALTH_FILE
    from jobs.head.fabric_gate import gate_needed

    for placement in ({"bundles": [{"node_ids": "node-a"}]}, {"bundles": [None]}, {"bundles": {}}, []):
        (tmp_path / HEALTH_FILE).write_text(json.dumps({"passed": True, "placement": placement}))
        assert gate_needed(tmp_path, ["node-a"]) is True
    (tmp_path / HEALTH_FILE).write_text(json.dumps({"passed": True, "placement": {"bundles": [{"node_ids": ["node-a"]}]}}))
    assert gate_needed(tmp_path, ["node-a"]) is False
    assert gate_needed(tmp_path, ["node-b"]) is True
