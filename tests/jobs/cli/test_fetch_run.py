"""`--fetch`: the run directory copied from the Ray head pod with `kubectl cp` (jobs/cli/fetch_run.py),
against a fake kubectl that answers `get pods` and `cp` from a local folder standing in for the
head's /data, and logs its argv."""

from __future__ import annotations

import io
import json
import sys
import textwrap
from pathlib import Path

import pytest

from jobs.cli import main as cli
from jobs.cli.fetch_run import FetchError, fetch_run_dir
from tests.jobs.cli.test_main import dev_spec
from tools.synthetic_run import write_synthetic_run

FAKE = textwrap.dedent("""\
    #!{python}
    import json, shutil, sys
    from pathlib import Path
    argv = sys.argv[1:]
    with open({log!r}, "a") as f:
        f.write(json.dumps(argv) + "\\n")
    if "--context" in argv:
        i = argv.index("--context"); argv = argv[:i] + argv[i + 2:]
    if argv[:2] == ["get", "pods"]:
        print({pods!r}, end="")
        sys.exit(0)
    if argv[0] == "cp":
        source = argv[-2].split(":", 1)[1]
        local = Path({root!r}) / source.lstrip("/")
        if not local.is_dir():
            print(f"tar: {{source}}: No such file or directory", file=sys.stderr); sys.exit(1)
        shutil.copytree(local, argv[-1])
        sys.exit(0)
    sys.exit(2)
    """)


def fake_kubectl(tmp_path: Path, pods: str = "grpo-dev-head-abcde") -> tuple[Path, Path, Path]:
    root, log = tmp_path / "head-fs", tmp_path / "kubectl.log"
    script = tmp_path / "kubectl"
    script.write_text(FAKE.format(python=sys.executable, log=str(log), pods=pods, root=str(root)))
    script.chmod(0o755)
    return script, log, root


def calls(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_fetch_copies_from_the_head_container(tmp_path):
    kubectl, log, root = fake_kubectl(tmp_path)
    write_synthetic_run(root / "data" / "runs" / "exp-1", "verl")
    dest = tmp_path / "local" / "exp-1"
    dest.mkdir(parents=True)
    (dest / "stale").write_text("old copy")
    assert fetch_run_dir("grpo", "grpo-dev", "exp-1", dest, kubectl=str(kubectl), context="ctx") == dest
    assert (dest / "events.jsonl").is_file() and not (dest / "stale").exists()
    get, cp = calls(log)
    assert get == ["--context", "ctx", "get", "pods", "-n", "grpo", "-l",
                   "ray.io/cluster=grpo-dev,ray.io/node-type=head", "-o", "jsonpath={.items[*].metadata.name}"]
    assert cp == ["--context", "ctx", "cp", "-c", "ray-head", "grpo/grpo-dev-head-abcde:/data/runs/exp-1",
                  str(dest) + ".partial"]


def test_fetch_errors_are_clear(tmp_path):
    kubectl, _, _ = fake_kubectl(tmp_path)
    with pytest.raises(FetchError, match=r"exit 1.*No such file"):
        fetch_run_dir("grpo", "grpo-dev", "exp-2", tmp_path / "x", kubectl=str(kubectl))
    (tmp_path / "n").mkdir()
    nohead, _, _ = fake_kubectl(tmp_path / "n", pods="")
    with pytest.raises(FetchError, match="no Ray head pod of RayCluster grpo-dev"):
        fetch_run_dir("grpo", "grpo-dev", "exp-2", tmp_path / "x", kubectl=str(nohead))
    with pytest.raises(FetchError, match="not found"):
        fetch_run_dir("grpo", "grpo-dev", "exp-2", tmp_path / "x", kubectl=str(tmp_path / "no-kubectl"))


def test_report_fetch_with_the_stack(tmp_path, monkeypatch):
    spec = dev_spec()
    kubectl, log, root = fake_kubectl(tmp_path)
    write_synthetic_run(root / "data" / "runs" / spec.run_id, "verl")
    monkeypatch.chdir(tmp_path)
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(["report", spec.run_id, "--stack", "dev", "--fetch", "--kubectl", str(kubectl),
                     "--out", str(tmp_path / "rep")], out=out, err=err)
    assert code == 0, err.getvalue()
    assert (tmp_path / "runs" / spec.run_id / "events.jsonl").is_file()     # ./runs/<run-id>
    assert (tmp_path / "rep" / "report.html").is_file()
    assert calls(log)[0][calls(log)[0].index("-n") + 1] == "grpo"         # the stack's namespace
    code = cli.main(["report", spec.run_id, "--fetch"], out=out, err=err)
    assert code == 2 and "--fetch needs --stack" in err.getvalue()
