"""The report's opening sections (run summary, attempts and starts, the latest checkpoint and the
command that resumes it), its training-health curves and validation table, the stack-mismatch
banner, its print styles, and `report` on a path that is no run directory. The run directories
are synthetic (tools/synthetic_run.py: the driver's records, TensorBoard files with the
frameworks' own tags); the page is parsed with the standard library's HTMLParser."""

from __future__ import annotations

import io
from html.parser import HTMLParser

import pytest

from jobs.cli import main as cli
from jobs.cli.metrics import FRAMEWORK_TAGS, HEALTH_FIELDS
from jobs.cli.report import build_report, collect_inputs
from jobs.cli.run_identity import recorded_run_id, run_identity_warning
from tools.synthetic_run import main as synthetic_main
from tools.synthetic_run import write_synthetic_run


class _Sections(HTMLParser):
    """Headings by id, tables by id (rows of cell texts), the h1 and title text, figure ids."""

    def __init__(self):
        super().__init__()
        self.ids: set[str] = set()
        self.tables: dict[str, list[list[str]]] = {}
        self.text: dict[str, str] = {"h1": "", "title": "", "pre": "", "div.banner": ""}
        self._table: str | None = None
        self._cell: list[str] | None = None
        self._open: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        if tag == "table":
            self._table = attrs.get("id") or f"table-{len(self.tables)}"
            self.tables[self._table] = []
        elif tag == "tr" and self._table:
            self.tables[self._table].append([])
        elif tag in ("td", "th") and self._table:
            self._cell = []
        key = f"div.{attrs.get('class')}" if tag == "div" else tag
        self._open.append(key)

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._table and self._cell is not None:
            self.tables[self._table][-1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "table":
            self._table = None
        if self._open:
            self._open.pop()

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)
        for key in set(self._open) & set(self.text):
            self.text[key] += data


def _page(inputs) -> tuple[_Sections, str]:
    html = build_report(inputs).html
    page = _Sections()
    page.feed(html)
    return page, html


def _dev_spec():
    from components.run_spec import load_stack_file, spec_from_config

    return spec_from_config(load_stack_file("dev", None))


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return write_synthetic_run(tmp_path_factory.mktemp("runs") / "folder-name", "verl", run_id="exp-0123abcd")


def test_the_page_opens_with_the_run_id_summary_attempts_and_checkpoint(run):
    page, html = _page(collect_inputs(run.path, now=run.end_time + 60))
    assert page.text["h1"] == "exp-0123abcd"                 # the driver's run id, not the folder's name
    assert page.text["title"].startswith("exp-0123abcd")
    order = [html.index(f'id="{name}"') for name in ("summary", "attempts", "checkpoint", "learning", "health",
                                                      "validation", "throughput", "timeline", "goodput", "cost")]
    assert order == sorted(order)
    header, *rows = page.tables["attempts-table"]
    assert header[:3] == ["attempt/start", "started", "ran"] and "capacity source and nodes" in header
    assert len(rows) == 2
    first, second = (dict(zip(header, row)) for row in rows)
    assert first["exit reason (code)"] == "node_lost (1)" and first["checkpoint at exit"] == "20"
    assert first["capacity source and nodes"].startswith("2 x Spot (gke-gpu-spot-0")
    assert first["steps logged"] == "1-27 (27)" and first["resumed from"] == "-"
    assert second["capacity source and nodes"].startswith("2 x flex-start")
    assert second["resumed from"] == "20" and second["exit reason (code)"] == "succeeded (0)"
    assert second["steps logged"] == f"21-{run.total_steps} ({run.total_steps - 20})"
    assert f"/data/checkpoints/exp-0123abcd/global_step_{run.total_steps}" in html
    # finished: the last checkpoint is for export; no stack given, so the command says STACK
    assert page.text["pre"] == f"gke-grpo export exp-0123abcd --step {run.total_steps} --stack STACK"
    assert 'id="stack-mismatch"' not in html


def test_the_resume_command_follows_the_runs_state(tmp_path):
    crashed = write_synthetic_run(tmp_path / "crashed", total_steps=30, crash_after=17)
    inputs = collect_inputs(crashed.path, now=crashed.end_time + 60)
    inputs.timeline.events[:] = [e for e in inputs.timeline.events if (e.attempt == 1 and e.start == 0)
                                 or e.event == "driver_start"]
    from jobs.contract.records import Event
    inputs.timeline.events.append(Event(crashed.end_time, "driver_end", 1, 0, {"exit_code": 18}))
    page, _ = _page(inputs)
    assert page.text["pre"] == "gke-grpo submit --stack STACK"
    live = write_synthetic_run(tmp_path / "live", finished=False)
    page, _ = _page(collect_inputs(live.path, now=live.end_time + 60, stack="dev"))
    assert page.text["pre"] == "gke-grpo attach --stack dev"


def test_the_summary_takes_model_framework_and_settings_from_the_stack(tmp_path):
    spec = _dev_spec()
    run = write_synthetic_run(tmp_path / "r", spec.framework, run_id=spec.run_id)
    page, html = _page(collect_inputs(run.path, now=run.end_time + 60, spec=spec, stack="dev"))
    assert 'id="stack-mismatch"' not in html
    for text in (spec.model, spec.framework_version, f"{spec.nodes} nodes x {spec.gpus_per_node}",
                 f"learning rate {spec.learning_rate:g}", f"every {spec.checkpoint_every_steps} steps"):
        assert text in html, text
    assert page.text["pre"] == f"gke-grpo export {spec.run_id} --step {run.total_steps} --stack dev"


def test_a_run_of_another_stack_gets_a_banner_and_no_stack_in_its_commands(run):
    spec = _dev_spec()
    inputs = collect_inputs(run.path, now=run.end_time + 60, spec=spec, stack="dev")
    warning = inputs.identity_warning
    assert warning is not None and "exp-0123abcd" in warning and spec.run_id in warning
    assert "stack dev's machine rates" in warning
    page, html = _page(inputs)
    assert "stack-mismatch" in page.ids
    assert html.index('id="stack-mismatch"') < html.index('id="summary"')     # at the top
    assert "exp-0123abcd" in page.text["div.banner"] and spec.run_id in page.text["div.banner"]
    assert page.text["pre"].endswith("--stack STACK")


def test_run_identity():
    assert run_identity_warning("a-1", "a-1", "dev") is None
    assert run_identity_warning("a-1", None, "dev") is None and run_identity_warning(None, "a-1") is None
    text = run_identity_warning("a-1", "b-2", "prod")
    assert text is not None and text.startswith("run a-1 is not stack prod's run (b-2)")
    assert "\n" not in text
    assert recorded_run_id([{"run_id": "x-1", "pid": 1}, {"pid": 2}], "folder") == "x-1"
    assert recorded_run_id([{"run_id": ""}, {"run_id": 5}], "folder") == "folder"


@pytest.mark.parametrize("framework", ["verl", "nemo-rl"])
def test_training_health_curves_and_the_validation_table(tmp_path, framework):
    run = write_synthetic_run(tmp_path / framework, framework, total_steps=24, crash_after=13)
    report = build_report(collect_inputs(run.path, now=run.end_time + 60))
    health = next(f for f in report.figures if f.name == "training_health")
    logged = [name for name in HEALTH_FIELDS if name in FRAMEWORK_TAGS[framework]]
    assert len(health.axes) == len(logged) == (5 if framework == "verl" else 4)   # NeMo RL: no clip fraction
    page = _Sections()
    page.feed(report.html)
    header, *rows = page.tables["validation-table"]
    assert header == ["step", "validation score", "change since step 0", "logged by"]
    assert rows[0][0] == "0" and rows[0][3] == "before training" and rows[0][2] == "-"
    assert [int(r[0]) for r in rows] == sorted(int(r[0]) for r in rows) and len(rows) >= 3
    assert all(r[2].startswith(("+", "-")) for r in rows[1:])


def _tag(tag: str, relative: str) -> list[tuple[str, str]]:
    return [(relative, f'"{tag}"')]


# Where each health tag is written, per supported verl release: (file in the package, the text
# that writes it). 0.9.1's V1 trainer prefixes the engine's metrics with "actor/"
# (trainer/ppo/v1/trainer_base.py rename_dict), so kl_loss and lr are written there unprefixed.
VERL_TAG_SOURCES = {
    "0.7.1": {
        "actor/kl_loss": _tag("actor/kl_loss", "workers/actor/dp_actor.py"),
        "actor/entropy": _tag("actor/entropy", "trainer/ppo/ray_trainer.py"),
        "actor/grad_norm": _tag("actor/grad_norm", "workers/actor/dp_actor.py"),
        "actor/pg_clipfrac": _tag("actor/pg_clipfrac", "trainer/ppo/core_algos.py"),
        "actor/lr": _tag("actor/lr", "workers/fsdp_workers.py"),
    },
    "0.9.1": {
        "actor/kl_loss": [("workers/utils/losses.py", 'metrics["kl_loss"]'),
                          ("trainer/ppo/v1/trainer_base.py", 'rename_dict(output["metrics"], "actor/")')],
        "actor/entropy": _tag("actor/entropy", "trainer/ppo/v1/trainer_base.py"),
        "actor/grad_norm": _tag("actor/grad_norm", "trainer/ppo/v1/trainer_base.py"),
        "actor/pg_clipfrac": _tag("actor/pg_clipfrac", "trainer/ppo/core_algos.py"),
        "actor/lr": [("workers/engine_workers.py", 'final_metrics["lr"] = lr'),
                     ("trainer/ppo/v1/trainer_base.py", 'rename_dict(output["metrics"], "actor/")')],
    },
}


@pytest.mark.parametrize("version", sorted(VERL_TAG_SOURCES))
def test_verl_health_tags_are_written_by_verl_itself(version):
    from tests.conftest import skip_or_fail
    from tools import verl_snapshot

    tree = verl_snapshot.tree(version)
    if not tree.is_dir():
        skip_or_fail(f"{tree} is missing (make setup installs every verl release in .verl-trees)")
    names = [FRAMEWORK_TAGS["verl"][name][0] for name in HEALTH_FIELDS]
    assert sorted(names) == sorted(VERL_TAG_SOURCES[version])
    for tag, evidence in VERL_TAG_SOURCES[version].items():
        for relative, text in evidence:
            path = tree / relative
            assert path.is_file() and text in path.read_text(), (tag, relative, text)


def test_report_of_a_path_that_is_no_run_directory_is_a_usage_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for argv in (["report", "./runs/foo"], ["report", "runs/foo/"], ["report", "--run-dir", "./runs/foo", "foo"]):
        out, err = io.StringIO(), io.StringIO()
        code = cli.main(argv, out=out, err=err)
        lines = err.getvalue().strip().splitlines()
        assert code == 2 and len(lines) == 1, (argv, err.getvalue())
        assert "runs/foo" in lines[0] and "internal error" not in lines[0]
        assert "not a run id" in lines[0] or "not a directory" in lines[0]
    (tmp_path / "runs" / "empty").mkdir(parents=True)
    err = io.StringIO()
    assert cli.main(["report", "./runs/empty"], out=io.StringIO(), err=err) == 2
    assert "runs/empty" in err.getvalue() and "not a run directory" in err.getvalue()


def test_the_page_prints_well():
    from jobs.cli.report_html import REPORT_CSS

    printed = REPORT_CSS.split("@media print{", 1)[1]
    assert "break-inside:avoid" in printed and "figure" in printed.split("break-inside")[0]
    assert ".pair{display:block}" in printed                      # every figure full width on paper
    assert "background:#fff" in printed and "max-width:none" in printed


def test_the_demo_writes_a_run_and_its_report(tmp_path, capsys):
    assert synthetic_main([str(tmp_path / "run"), "--stack", "dev", "--report", str(tmp_path / "report")]) == 0
    printed = capsys.readouterr().out
    page = tmp_path / "report" / "report.html"
    assert page.is_file() and f"file://{page.resolve()}" in printed
    spec = _dev_spec()
    html = page.read_text()
    assert f">{spec.run_id}</h1>" in html and 'id="stack-mismatch"' not in html
