"""`python -m jobs report`, `status` and `plot` on a run directory: real TensorBoard files and
a timeline in the driver's format (tools/synthetic_run.py); the report page is parsed and its
embedded images decoded."""

from __future__ import annotations

import base64
import io
import struct
import zlib
from html.parser import HTMLParser

import pytest

from jobs.cli import main as cli
from jobs.cli.report import CostBasis, build_report, collect_inputs, planned_steps
from tools.synthetic_run import write_synthetic_run

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def run_cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    return cli.main(list(argv), out=out, err=err), out.getvalue(), err.getvalue()


class _Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.images: list[dict] = []
        self.captions: list[str] = []
        self.tags: list[str] = []
        self.text: list[str] = []
        self._in_caption = False

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        attrs = dict(attrs)
        if tag == "img":
            self.images.append(attrs)
        if tag == "figcaption":
            self._in_caption = True
            self.captions.append("")
        for name in ("src", "href"):
            if name in attrs and tag != "img":
                self.text.append(f"LINK {attrs[name]}")

    def handle_endtag(self, tag):
        if tag == "figcaption":
            self._in_caption = False

    def handle_data(self, data):
        self.text.append(data)
        if self._in_caption:
            self.captions[-1] += data


def png_chunks(data: bytes) -> dict[bytes, list[bytes]]:
    assert data[:8] == PNG_SIGNATURE
    chunks: dict[bytes, list[bytes]] = {}
    pos = 8
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])
        assert zlib.crc32(kind + body) == crc, "corrupt PNG chunk"
        chunks.setdefault(kind, []).append(body)
        pos += 12 + length
    assert b"IEND" in chunks
    return chunks


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return write_synthetic_run(tmp_path_factory.mktemp("runs") / "exp-12345678", "verl")


EXPECTED_AXES = {
    "Reward": [("training step", "reward")],
    "Response length": [("training step", "response length (tokens)")],
    "Training health": [("training step", "KL to the reference policy"), ("training step", "policy entropy"),
                        ("training step", "gradient norm"), ("training step", "clipped fraction"),
                        ("training step", "learning rate")],
    "Throughput": [("training step", "tokens/s per GPU"), ("training step", "MFU (%)"),
                   ("training step", "step time (s)")],
    "Timeline": [("hours since the first start", "stage")],
    "Goodput": [("share of wall-clock time (%)", "run")],
}


def test_report_page_is_self_contained_with_real_pngs(run, tmp_path):
    inputs = collect_inputs(run.path, cost_basis=CostBasis("a3-ultragpu-8g", "spot", 2), planned=run.total_steps,
                            now=run.end_time + 60)
    page_path = build_report(inputs).write(tmp_path / "out")
    html = page_path.read_text()
    page = _Page()
    page.feed(html)
    assert "script" not in page.tags and not [t for t in page.text if t.startswith("LINK ")]
    assert len(page.images) == len(EXPECTED_AXES)
    titles = []
    for img, caption in zip(page.images, page.captions):
        src = img["src"]
        assert src.startswith("data:image/png;base64,")
        data = base64.b64decode(src.split(",", 1)[1], validate=True)
        chunks = png_chunks(data)
        width, height = struct.unpack(">II", chunks[b"IHDR"][0][:8])
        assert width >= 600 and height >= 150
        text = b"".join(chunks.get(b"tEXt", [])).decode("latin-1")
        title = caption.split(" x: ")[0].strip()
        titles.append(title)
        for x, y in EXPECTED_AXES[title]:
            assert f"x: {x} / y: {y}" in caption           # in the page
            assert f"x: {x}, y: {y}" in text                # in the PNG's own metadata
        # the PNG written beside the page is the same picture
        name = {"Reward": "reward", "Response length": "response_length", "Throughput": "throughput",
                "Training health": "training_health",
                "Timeline": "timeline", "Goodput": "goodput"}[title]
        assert (tmp_path / "out" / f"{name}.png").read_bytes() == data
    assert titles == list(EXPECTED_AXES)
    body = " ".join(page.text)
    g = inputs.goodput
    assert f"{g.goodput:.1%}" in body and "waiting for GPUs" in body and "restarts" in body
    assert "node_lost" in body                              # the restart table
    assert "cost so far" in body and "USD" in body and "2026-12-01" in body
    # the step-0 baseline (val_before_train) next to the latest validation score
    rows = inputs.metrics.merged()
    assert rows[0].step == 0 and not rows[0].is_training
    vals = [r.get("val_reward") for r in rows if r.get("val_reward") is not None]
    assert f"{vals[0]:.3f} -> {vals[-1]:.3f}" in body and vals[-1] > vals[0]


def test_report_cli_with_the_stack_prices_and_estimate(run, tmp_path):
    code, out, err = run_cli("report", str(run.path), "--stack", "dev", "--out", str(tmp_path / "r"))
    assert code == 0, err
    html = (tmp_path / "r" / "report.html").read_text()
    assert "preview estimate" in html and "runCostUpperBound" in html
    assert "wrote" in out and "goodput" in out


def test_report_cli_usage_errors(tmp_path):
    code, _, err = run_cli("report", "no-such-run-00000000")
    assert code == 2 and "no run directory" in err and "--run-dir" in err
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = run_cli("report", str(empty))
    assert code == 2 and "not a run directory" in err


def test_status_from_the_run_directory_alone(run):
    code, out, _ = run_cli("status", "--run-dir", str(run.path))
    assert code == 0
    lines = dict(line.split(None, 1) for line in out.strip().splitlines())
    assert lines["state"] == "ended"
    assert lines["progress"].startswith(f"step {run.total_steps}, reward ") and "tokens/s/GPU" in lines["progress"]
    assert "MFU" in lines["progress"] and lines["progress"].endswith("[TensorBoard]")
    assert lines["goodput"].startswith(tuple("0123456789")) and "waiting for GPUs" in lines["goodput"]
    assert lines["starts"] == "2 trainer start(s), 1 restart(s)"
    assert lines["validation"].startswith("step 0: ")


def test_plot_from_the_run_directory(run, tmp_path):
    code, out, _ = run_cli("plot", "--run-dir", str(run.path), "--out", str(tmp_path / "p.png"))
    assert code == 0 and "[TensorBoard files]" in out and f"{run.total_steps} steps" in out
    png_chunks((tmp_path / "p.png").read_bytes())


def test_planned_steps():
    assert planned_steps(300, None, 256) == 300
    assert planned_steps(None, 2, 256, train_rows=7473) == 2 * 29
    assert planned_steps(None, None, 256) is None


def test_status_from_the_run_directory_with_the_stack_config(run):
    # --stack without --address: the config only (cost, planned steps), no port-forward
    code, out, err = run_cli("status", "--run-dir", str(run.path), "--stack", "dev", "--kubectl", "/nonexistent")
    assert code == 0, err
    cost = dict(line.split(None, 1) for line in out.strip().splitlines())["cost"]
    assert "USD so far" in cost and "node-hours" in cost and "preview estimate" in cost


def test_a_missing_run_directory_is_said_before_the_stack_is_read(monkeypatch, tmp_path):
    from jobs.cli import run_directory_commands

    def no_stack(*args):
        raise AssertionError("the stack was read for a run that is not here")

    monkeypatch.setattr(run_directory_commands, "load_stack", no_stack)
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli("report", "somerun-1234abcd", "--stack", "dev")
    assert code == 2 and out == ""
    assert "no run directory for somerun-1234abcd" in err and "AssertionError" not in err
