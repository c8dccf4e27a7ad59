"""`gke-grpo status --run-dir DIR --stack S` and `report DIR --stack S` on a run directory whose run
is not stack S's: the cost and planned steps come from S's config, so both say so loudly (a stderr
warning; status adds a WARNING row). The run a directory holds is the run id its driver recorded
(driver_start), else the directory's name."""

from __future__ import annotations

import io
import json

import pytest

from jobs.cli import main as cli
from jobs.cli.stack_outputs import offline_spec
from tools.synthetic_run import write_synthetic_run


def run_cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    return cli.main(list(argv), out=out, err=err), out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def dev_run(tmp_path_factory):
    """A synthetic run whose directory and recorded run id are the dev stack's."""
    run_id = offline_spec("dev").run_id
    run = write_synthetic_run(tmp_path_factory.mktemp("runs") / run_id, "verl")
    events = run.path / "events.jsonl"
    lines = [json.loads(line) for line in events.read_text().splitlines()]
    for line in lines:
        if line.get("event") == "driver_start":
            line["run_id"] = run_id
    events.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return run


def _rows(out: str) -> dict[str, str]:
    return dict(line.split(None, 1) for line in out.strip().splitlines())


def test_status_of_the_stacks_own_run_has_no_mark(dev_run):
    code, out, err = run_cli("status", "--run-dir", str(dev_run.path), "--stack", "dev")
    assert code == 0, err
    assert "MISMATCH" not in out + err and "WARNING" not in _rows(out)


def test_status_of_another_stacks_run_is_marked_loudly(dev_run):
    code, out, err = run_cli("status", "--run-dir", str(dev_run.path), "--stack", "prod")
    assert code == 0, err
    prod_run = offline_spec("prod").run_id
    warning = _rows(out)["WARNING"]
    assert warning.startswith("MISMATCH: ") and f"is not stack prod's run ({prod_run})" in warning
    assert "the costs use stack prod's machine rates" in warning
    assert "[gke-grpo] warning: MISMATCH" in err


def test_report_of_another_stacks_run_warns(dev_run, tmp_path):
    code, _, err = run_cli("report", str(dev_run.path), "--stack", "prod", "--out", str(tmp_path / "r"))
    assert code == 0, err
    assert "[gke-grpo] warning: MISMATCH" in err and dev_run.path.name in err
    assert 'id="stack-mismatch"' in (tmp_path / "r" / "report.html").read_text()   # the banner


def test_the_recorded_run_id_wins_over_the_folder_name(dev_run, tmp_path):
    import shutil

    copy = tmp_path / "renamed-copy"
    shutil.copytree(dev_run.path, copy)
    code, out, err = run_cli("status", "--run-dir", str(copy), "--stack", "dev")
    assert code == 0 and "MISMATCH" not in out + err
