"""The Hugging Face export (jobs/head/export.py) on checkpoint trees laid out as verl v0.7.1 and
NeMo RL v0.5.0 write them (the same layouts at verl 0.9.1 and NeMo RL v0.7.0: docs/frameworks.md):
the trainer-written weights copied, idempotent, never a half-written export taken for a finished
one; the converters' argv parsed by the converters' own argument parsers, at every supported
release (verl's from .verl-trees/<version>, NeMo RL's from the tag's source committed as
data/nemo-rl-<version>/converters/convert_dcp_to_hf.py.txt, a verbatim copy no linter rewrites); the
bad inputs, one line each; the upload's token kept out of everything printed."""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path
from typing import ClassVar

import pytest

from jobs.contract import converters as conv
from jobs.contract.exports import EXPORT_MARKER, ExportError, export_dir, export_state
from jobs.head import export as ex
from tests.conftest import ROOT, skip_or_fail

RUN = "exp-12345678"
TOKEN = "hf_" + "A" * 34


def hf_files(directory: Path, weights: bytes = b"w" * 1000, tokenizer: bool = True) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text('{"architectures": ["Qwen2ForCausalLM"]}')
    (directory / "generation_config.json").write_text("{}")
    (directory / "model.safetensors").write_bytes(weights)
    if tokenizer:
        (directory / "tokenizer.json").write_text("{}")
        (directory / "tokenizer_config.json").write_text("{}")


def verl_tree(root: Path, steps, tracker, hf=True) -> Path:
    """global_step_N/actor/{model shards, fsdp_config.json, huggingface/} as FSDPCheckpointManager
    writes them, and the tracker verl writes last."""
    for step in steps:
        actor = Path(conv.verl_actor_dir(str(root), step))
        actor.mkdir(parents=True)
        (actor / "model_world_size_2_rank_0.pt").write_bytes(b"s" * 100)
        (actor / "model_world_size_2_rank_1.pt").write_bytes(b"s" * 100)
        (actor / "fsdp_config.json").write_text('{"FSDP_version": 2, "world_size": 2}')
        if hf:
            hf_files(actor / "huggingface", weights=f"step {step}".encode())
        else:   # rank 0 always writes config and tokenizer there
            (actor / "huggingface").mkdir()
            (actor / "huggingface" / "config.json").write_text("{}")
    if tracker is not None:
        (root / "latest_checkpointed_iteration.txt").write_text(str(tracker))
    return root


def nemo_tree(root: Path, steps, partial=()) -> Path:
    for step in steps:
        consolidated = Path(conv.nemo_rl_consolidated_dir(str(root), step))
        hf_files(consolidated, weights=f"step {step}".encode(), tokenizer=False)
        (consolidated / "model.safetensors.index.json").write_text("{}")
        hf_files(Path(conv.nemo_rl_tokenizer_dir(str(root), step)), weights=b"", tokenizer=True)
        (Path(conv.nemo_rl_tokenizer_dir(str(root), step)) / "model.safetensors").unlink()
        (Path(conv.nemo_rl_tokenizer_dir(str(root), step)) / "config.json").unlink()
    for step in partial:
        (root / f"tmp_step_{step}").mkdir(parents=True)
    return root


def request(tmp_path, **changes) -> ex.ExportRequest:
    fields = {"run_id": RUN, "checkpoint_dir": tmp_path / "checkpoints" / RUN,
              "exports_root": tmp_path / "exports", "hf_token_file": tmp_path / "token"}
    fields.update(changes)
    return ex.ExportRequest(**fields)


def no_runner(argv, cwd, memory):
    raise AssertionError("no converter should run: the trainer wrote the weights")


# ---- trainer-written weights: copied -----------------------------------------------------------

def test_verl_latest_complete_step_is_copied_with_its_marker_last(tmp_path, capsys):
    # 30 is being written (the tracker still names 20): never exported.
    verl_tree(tmp_path / "checkpoints" / RUN, [10, 20, 30], tracker=20)
    markers = ex.export_run(request(tmp_path), runner=no_runner)
    target = export_dir(RUN, 20, tmp_path / "exports")
    assert [m["step"] for m in markers] == [20]
    assert sorted(p.name for p in target.iterdir()) == sorted(
        [EXPORT_MARKER, "config.json", "generation_config.json", "model.safetensors",
         "tokenizer.json", "tokenizer_config.json"])
    assert (target / "model.safetensors").read_bytes() == b"step 20"
    marker = json.loads((target / EXPORT_MARKER).read_text())
    assert marker["method"] == "copy" and marker["framework"] == "verl"
    assert marker["files"]["model.safetensors"] == len(b"step 20")
    assert export_state(target).complete
    out = capsys.readouterr().out
    assert ex.EXPORTED_MARKER in out and "global_step_20/actor/huggingface" in out
    # No partial directory is left beside it.
    assert [p.name for p in target.parent.iterdir()] == ["step-20"]


def test_a_finished_export_is_not_redone(tmp_path, capsys):
    verl_tree(tmp_path / "checkpoints" / RUN, [10], tracker=10)
    ex.export_run(request(tmp_path), runner=no_runner)
    target = export_dir(RUN, 10, tmp_path / "exports")
    before = (target / EXPORT_MARKER).stat().st_mtime_ns
    ex.export_run(request(tmp_path), runner=no_runner)
    assert (target / EXPORT_MARKER).stat().st_mtime_ns == before
    assert "already complete, skipped" in capsys.readouterr().out


@pytest.mark.parametrize("damage", ["no-marker", "truncated-file", "garbled-marker"])
def test_a_half_written_export_is_never_taken_for_finished(tmp_path, capsys, damage):
    verl_tree(tmp_path / "checkpoints" / RUN, [10], tracker=10)
    target = export_dir(RUN, 10, tmp_path / "exports")
    if damage == "no-marker":          # a crash before the marker: files but no marker
        hf_files(target, weights=b"half")
    else:
        ex.export_run(request(tmp_path), runner=no_runner)
        if damage == "truncated-file":
            (target / "model.safetensors").write_bytes(b"st")
        else:
            (target / EXPORT_MARKER).write_text("{not json")
    state = export_state(target)
    assert not state.complete and state.reason
    ex.export_run(request(tmp_path), runner=no_runner)
    assert "replacing it" in capsys.readouterr().out
    assert export_state(target).complete
    assert (target / "model.safetensors").read_bytes() == b"step 10"


def test_every_k_exports_each_complete_multiple_and_the_latest(tmp_path):
    verl_tree(tmp_path / "checkpoints" / RUN, [10, 20, 30, 40, 50], tracker=50)
    markers = ex.export_run(request(tmp_path, every_steps=20), runner=no_runner)
    assert [m["step"] for m in markers] == [20, 40, 50]


def test_nemo_rl_consolidated_weights_and_the_separate_tokenizer(tmp_path):
    nemo_tree(tmp_path / "checkpoints" / RUN, [10, 20], partial=[30])
    markers = ex.export_run(request(tmp_path), runner=no_runner)
    assert [m["step"] for m in markers] == [20]
    target = export_dir(RUN, 20, tmp_path / "exports")
    names = {p.name for p in target.iterdir()}
    assert {"config.json", "model.safetensors", "model.safetensors.index.json",
            "tokenizer.json", "tokenizer_config.json", EXPORT_MARKER} <= names
    assert markers[0]["framework"] == "nemo-rl"


# ---- converters: the argv is the converter's own parser's --------------------------------------

def parse_args_of(path: Path):
    """The file's ``parse_args`` alone (argparse only), without importing its module: verl's
    imports torch and transformers, NeMo RL's nemo_rl."""
    tree = ast.parse(path.read_text())
    function = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "parse_args")
    module = ast.Module(body=[ast.Import(names=[ast.alias("argparse")]), function], type_ignores=[])
    namespace: dict = {}
    exec(compile(ast.fix_missing_locations(module), str(path), "exec"), namespace)
    return namespace["parse_args"]


def parse(path: Path, argv, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["prog", *argv])
    return parse_args_of(path)()


def verl_merger_file(version: str) -> Path:
    from tools import verl_snapshot

    package = verl_snapshot.tree(version) / "model_merger"
    if not package.is_dir():
        skip_or_fail(f"{package} is missing (make setup installs every verl release in .verl-trees)")
    return package


@pytest.mark.parametrize("version", ["0.9.1", "0.7.1"])
def test_verl_merger_argv_parses_with_verls_own_parser(tmp_path, monkeypatch, version):
    package = verl_merger_file(version)
    argv = conv.verl_merger_argv("/data/checkpoints/" + RUN, 40, "/data/exports/x/.step-40.partial")
    assert argv[:3] == ("python3", "-m", "verl.model_merger")
    args = parse(package / "base_model_merger.py", argv[3:], monkeypatch)
    assert args.operation == "merge" and args.backend == "fsdp"
    assert args.local_dir == f"/data/checkpoints/{RUN}/global_step_40/actor"
    assert args.target_dir == "/data/exports/x/.step-40.partial"
    assert args.hf_upload_path is None        # uploads go through the export, with the token file
    main = (package / "__main__.py").read_text()
    assert "parse_args()" in main and '"fsdp"' in main and "FSDPModelMerger" in main
    # The hyphenated spelling would be refused: the test can fail.
    with pytest.raises(SystemExit):
        parse(package / "base_model_merger.py", ["merge", "--backend", "fsdp", "--local-dir", "x"],
              monkeypatch)


@pytest.mark.parametrize("version", ["0.7.0", "0.5.0"])
def test_nemo_rl_converter_argv_parses_with_the_releases_own_parser(monkeypatch, version):
    source = ROOT / "data" / f"nemo-rl-{version}" / "converters" / "convert_dcp_to_hf.py.txt"
    argv = conv.nemo_rl_converter_argv("/data/checkpoints/" + RUN, 10, "/tmp/out/converted")
    assert argv[:4] == ("uv", "run", "python", conv.NEMO_RL_CONVERTER)
    args = parse(source, argv[4:], monkeypatch)
    assert args.config == f"/data/checkpoints/{RUN}/step_10/config.yaml"
    assert args.dcp_ckpt_path == f"/data/checkpoints/{RUN}/step_10/policy/weights"
    assert args.hf_ckpt_path == "/tmp/out/converted"


def test_verl_checkpoint_without_hf_weights_runs_the_merger_with_memory_for_it(tmp_path):
    verl_tree(tmp_path / "checkpoints" / RUN, [10], tracker=10, hf=False)
    calls = []

    def fake_merger(argv, cwd, memory):
        calls.append((argv, memory))
        target = Path(argv[argv.index("--target_dir") + 1])
        hf_files(target, weights=b"merged bf16")
        return 0

    markers = ex.export_run(request(tmp_path), runner=fake_merger)
    argv, memory = calls[0]
    target = export_dir(RUN, 10, tmp_path / "exports")
    assert argv[argv.index("--target_dir") + 1].startswith(str(target.parent / ".step-10.partial-"))
    assert memory == int(200 * ex.CONVERTER_MEMORY_FACTOR) + ex.CONVERTER_MEMORY_EXTRA
    assert markers[0]["method"] == "convert"
    assert (target / "model.safetensors").read_bytes() == b"merged bf16"


def test_a_failing_converter_leaves_nothing_behind(tmp_path):
    verl_tree(tmp_path / "checkpoints" / RUN, [10], tracker=10, hf=False)
    with pytest.raises(RuntimeError, match="converter exited 137"):
        ex.export_run(request(tmp_path), runner=lambda argv, cwd, memory: 137)
    assert not (tmp_path / "exports" / RUN).exists() or not any((tmp_path / "exports" / RUN).iterdir())


def test_nemo_rl_v2_checkpoint_without_consolidated_weights_says_why(tmp_path):
    step = tmp_path / "checkpoints" / RUN / "step_10" / "policy" / "weights" / "model"
    step.mkdir(parents=True)
    (step / "shard-00001-model-00001-of-00001.safetensors").write_bytes(b"x")
    with pytest.raises(ExportError, match=r"save_consolidated=true.*#1427"):
        ex.export_run(request(tmp_path), runner=no_runner)


# ---- bad input ---------------------------------------------------------------------------------

def run_main(tmp_path, capsys, *argv):
    code = ex.main(["--exports-root", str(tmp_path / "exports"), "--hf-token-file",
                    str(tmp_path / "token"), *argv], runner=no_runner)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_unknown_run_names_the_runs_there_are(tmp_path, capsys):
    verl_tree(tmp_path / "checkpoints" / "other-run", [10], tracker=10)
    code, _, err = run_main(tmp_path, capsys, "--run-id", RUN, "--checkpoint-dir",
                            str(tmp_path / "checkpoints" / RUN))
    assert code == 2
    assert err.count("\n") == 1 and f"unknown run {RUN}" in err and "other-run" in err


def test_a_step_without_a_complete_checkpoint(tmp_path, capsys):
    verl_tree(tmp_path / "checkpoints" / RUN, [10, 20, 30], tracker=20)
    code, _, err = run_main(tmp_path, capsys, "--run-id", RUN, "--checkpoint-dir",
                            str(tmp_path / "checkpoints" / RUN), "--step", "30")
    assert code == 2 and err.count("\n") == 1
    assert "step 30 of run exp-12345678 has no complete checkpoint (complete steps" in err
    assert "10, 20" in err


@pytest.mark.parametrize("repo", ["a/b/c", "-bad/name", "name.", "a--b/c", "org/x.git", "org/" + "n" * 97,
                                  "org/na me"])
def test_an_invalid_hub_repo_name(tmp_path, capsys, repo):
    verl_tree(tmp_path / "checkpoints" / RUN, [10], tracker=10)
    code, _, err = run_main(tmp_path, capsys, "--run-id", RUN, "--checkpoint-dir",
                            str(tmp_path / "checkpoints" / RUN), f"--hub-repo={repo}")
    assert code == 2 and err.count("\n") == 1 and "not a valid Hugging Face repo id" in err
    assert not (tmp_path / "exports").exists()      # refused before anything is written


@pytest.mark.parametrize("repo", ["org/model", "Org-1/Qwen2.5-7B-grpo_gsm8k", "model"])
def test_valid_hub_repo_names(repo):
    assert ex.hub_repo_problem(repo) is None


# ---- upload ------------------------------------------------------------------------------------

class FakeHfApi:
    calls: ClassVar[list] = []

    def __init__(self, token=None):
        FakeHfApi.calls.append(("init", token))

    def create_repo(self, **kwargs):
        FakeHfApi.calls.append(("create_repo", kwargs))

    def upload_folder(self, **kwargs):
        FakeHfApi.calls.append(("upload_folder", kwargs))
        if kwargs["repo_id"] == "org/fails":
            raise OSError(f"401 Unauthorized for token {TOKEN}")


def test_upload_reads_the_token_file_and_never_prints_it(tmp_path, capsys):
    verl_tree(tmp_path / "checkpoints" / RUN, [10, 20], tracker=20)
    (tmp_path / "token").write_text(TOKEN + "\n")
    FakeHfApi.calls = []
    ex.export_run(request(tmp_path, hub_repo="org/model", every_steps=10), runner=no_runner,
                  api_factory=FakeHfApi)
    assert FakeHfApi.calls[0] == ("init", TOKEN)
    kind, kwargs = FakeHfApi.calls[1]
    assert kind == "create_repo" and kwargs["private"] is True and kwargs["exist_ok"] is True
    kind, kwargs = FakeHfApi.calls[2]
    assert kwargs["folder_path"] == str(export_dir(RUN, 20, tmp_path / "exports"))   # the newest
    assert EXPORT_MARKER in kwargs["ignore_patterns"]
    captured = capsys.readouterr()
    assert TOKEN not in captured.out + captured.err
    with pytest.raises(RuntimeError) as failure:
        ex.export_run(request(tmp_path, hub_repo="org/fails"), runner=no_runner, api_factory=FakeHfApi)
    assert TOKEN not in str(failure.value) and "upload to org/fails failed" in str(failure.value)


def test_options_come_from_the_deployed_plan(tmp_path, monkeypatch):
    from jobs.contract.run_plan import DATA_ROOT_ENV, Command, RunPlan

    monkeypatch.setenv(DATA_ROOT_ENV, "/data")      # the plan as the stack deploys it

    plan = RunPlan(run_id=RUN, attempt=1, framework="verl", run_dir="/data/runs/" + RUN,
                   checkpoint_dir="/data/checkpoints/" + RUN, prepare=None, gpus=8, gpus_per_node=8,
                   gpu_wait_seconds=60, trainer=Command(argv=("true",)), deadline_seconds=None,
                   export=Command(argv=("python3", "-m", "jobs.head.export", "--run-id", RUN,
                                        "--checkpoint-dir", "/data/checkpoints/" + RUN,
                                        "--framework", "verl", "--hub-repo", "org/model")))
    path = tmp_path / "plan.json"
    path.write_text(plan.to_json())
    same = ex.request_from_args(["--plan", str(path), "--run-id", RUN, "--step", "30"])
    assert (same.hub_repo, same.framework, same.steps) == ("org/model", "verl", (30,))
    assert same.checkpoint_dir == Path("/data/checkpoints/" + RUN)
    other = ex.request_from_args(["--plan", str(path), "--run-id", "older-run-1"])
    assert (other.hub_repo, other.framework) == (None, None)   # another run: never its repo
    assert other.checkpoint_dir == Path("/data/checkpoints/older-run-1")
