"""Data and model preparation: verl parquet and NeMo RL JSONL from GSM8K-format files, scored by
verl's own GSM8K reward; idempotent (markers), interrupted downloads redone, token never shown."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from jobs.contract import datasets
from jobs.contract.layout import HF_TOKEN_FILE
from jobs.head import staging as prep
from tests.conftest import skip_or_fail

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "gsm8k"
MODEL = "Qwen/Qwen2.5-7B-Instruct"
TOKEN = "hf_fixture_token_never_printed_0123456789"
SOURCE_TRAIN_TRUTHS = ["12", "1250", "3.5", "-5", "3150", "110"]
# A tenth of the 6-row fixture's train split (at least one row) is held out for validation: the
# row whose question has the lowest sha256 (row 0 here). The test split stays whole.
TRAIN_TRUTHS = ["1250", "3.5", "-5", "3150", "110"]
VALIDATION_TRUTHS = ["12"]
TEST_TRUTHS = ["180", "36", "360"]
SPLIT_TRUTHS = (("train", TRAIN_TRUTHS), ("validation", VALIDATION_TRUTHS), ("test", TEST_TRUTHS))


def fixture_rows(split: str) -> list[dict]:
    """The fixture's records of a prepared split (train less validation, validation, test)."""
    source = "test" if split == "test" else "train"
    raw = [json.loads(line) for line in (FIXTURE / f"{source}.jsonl").read_text().splitlines()]
    if split == "test":
        return raw
    train, validation = prep.split_validation(raw)
    return train if split == "train" else validation


class FakeModelDownloader:
    """snapshot_download stand-in: writes a config.json and a weights file; counts calls."""

    def __init__(self, fail_first: bool = False):
        self.calls: list[dict] = []
        self.fail_first = fail_first

    def __call__(self, *, repo_id, local_dir, token, revision=None):
        self.calls.append({"repo_id": repo_id, "local_dir": local_dir, "token": token,
                           "revision": revision})
        target = Path(local_dir)
        (target / "model-00001-of-00002.safetensors").write_bytes(b"part")
        if self.fail_first and len(self.calls) == 1:
            raise ConnectionError("connection reset while downloading model-00002-of-00002")
        (target / "model-00002-of-00002.safetensors").write_bytes(b"part")
        (target / "config.json").write_text('{"architectures": ["Qwen2ForCausalLM"]}')


class FakeHubFiles:
    """hf_hub_download stand-in serving the fixture as the Hub's parquet files."""

    def __init__(self, parquet_dir: Path):
        self.parquet_dir = parquet_dir
        self.calls: list[dict] = []

    def __call__(self, *, repo_id, filename, repo_type, local_dir, token, revision=None):
        self.calls.append({"repo_id": repo_id, "filename": filename, "repo_type": repo_type,
                           "token": token, "revision": revision})
        target = Path(local_dir) / filename
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.parquet_dir / filename, target)
        return str(target)


@pytest.fixture
def hub_layout(tmp_path) -> Path:
    """The fixture in the Hub's layout: main/<split>-00000-of-00001.parquet."""
    root = tmp_path / "hub"
    for split, name in datasets.GSM8K_HF_FILES.items():
        records = [json.loads(line) for line in (FIXTURE / f"{split}.jsonl").read_text().splitlines()]
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(records), root / name)
    return root


def verl_gsm8k_scorer(version: str | None = None):
    """verl's own scorer of a supported release (the default one when None), loaded by file path
    (importing the verl package needs torch). verl/utils/reward_score/gsm8k.py is byte for byte
    the same in 0.7.1 and 0.9.1 (compared 2026-12-06)."""
    from tools import verl_snapshot

    path = verl_snapshot.tree(version or verl_snapshot.verl_version()) / "utils" / "reward_score" / "gsm8k.py"
    if not path.is_file():
        skip_or_fail(f"{path} is missing (make setup installs every verl release in .verl-trees)")
    module_spec = importlib.util.spec_from_file_location("verl_reward_gsm8k", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module.compute_score


def run(tmp_path, framework="verl", **kwargs):
    kwargs.setdefault("source_dir", str(FIXTURE))
    kwargs.setdefault("model_downloader", FakeModelDownloader())
    return prep.prepare(framework, MODEL, "gsm8k", str(tmp_path / "data"), **kwargs)


def test_verl_parquet_matches_verls_preprocessing_and_scorer(tmp_path):
    compute_score = verl_gsm8k_scorer()
    result = run(tmp_path)
    assert result.steps == {"gsm8k-verl": "done", "model": "done"}
    data = tmp_path / "data" / "datasets" / "gsm8k"
    for split, truths in SPLIT_TRUTHS:
        table = pq.read_table(data / f"{split}.parquet")
        assert table.column_names == ["data_source", "prompt", "ability", "reward_model", "extra_info"]
        rows = table.to_pylist()
        assert [r["reward_model"]["ground_truth"] for r in rows] == truths
        raw = fixture_rows(split)
        for index, (row, source) in enumerate(zip(rows, raw)):
            assert row["data_source"] == "openai/gsm8k"
            assert row["ability"] == "math"
            assert row["reward_model"]["style"] == "rule"
            assert row["prompt"] == [{"role": "user", "content": source["question"] + " Let's think "
                                      "step by step and output the final answer after \"####\"."}]
            assert row["extra_info"] == {"split": split, "index": index, "answer": source["answer"],
                                         "question": source["question"]}
            truth = row["reward_model"]["ground_truth"]
            # verl's reward: the reference solution scores 1, a wrong final answer 0.
            assert compute_score(source["answer"], truth) == 1.0
            assert compute_score(f"Step by step.\n#### {truth}", truth) == 1.0
            assert compute_score("Step by step.\n#### 99999", truth) == 0


def test_nemo_rl_jsonl_has_the_bare_number(tmp_path):
    result = run(tmp_path, framework="nemo-rl")
    assert result.steps == {"gsm8k-nemo-rl": "done", "model": "done"}
    data = tmp_path / "data" / "datasets" / "gsm8k"
    for split, truths in SPLIT_TRUTHS:
        rows = [json.loads(line) for line in (data / f"{split}.jsonl").read_text().splitlines()]
        raw = fixture_rows(split)
        assert rows == [{"question": r["question"], "answer": t} for r, t in zip(raw, truths)]
    # The renderer points NeMo RL at exactly these files.
    assert prep.dataset_files("/data/datasets/gsm8k", "nemo-rl") == {
        "train": "/data/datasets/gsm8k/train.jsonl",
        "validation": "/data/datasets/gsm8k/validation.jsonl",
        "test": "/data/datasets/gsm8k/test.jsonl"}


def test_validation_is_a_fixed_slice_of_the_train_split():
    records = [{"question": f"question {i}", "answer": f"#### {i}"} for i in range(7473)]
    train, validation = prep.split_validation(records)
    assert len(validation) == datasets.GSM8K_VALIDATION_ROWS == 256
    assert len(train) == datasets.GSM8K_TRAINING_ROWS == 7217
    assert {r["question"] for r in train}.isdisjoint(r["question"] for r in validation)
    # The same rows whatever the file order; each part keeps the source order.
    _again_train, again_validation = prep.split_validation(list(reversed(records)))
    assert sorted(map(str, again_validation)) == sorted(map(str, validation))
    assert train == sorted(train, key=lambda r: int(r["answer"][5:]))


def test_second_run_does_nothing(tmp_path):
    downloader = FakeModelDownloader()
    run(tmp_path, model_downloader=downloader)
    data = tmp_path / "data"
    before = {p: p.stat().st_mtime_ns for p in data.rglob("*") if p.is_file()}
    again = run(tmp_path, model_downloader=downloader)
    assert again.steps == {"gsm8k-verl": "skipped", "model": "skipped"}
    assert len(downloader.calls) == 1
    assert {p: p.stat().st_mtime_ns for p in data.rglob("*") if p.is_file()} == before
    # Both frameworks on one /data: each prepares its own files, the model is shared.
    other = run(tmp_path, framework="nemo-rl", model_downloader=downloader)
    assert other.steps == {"gsm8k-nemo-rl": "done", "model": "skipped"}


def test_interrupted_model_download_is_redone(tmp_path):
    downloader = FakeModelDownloader(fail_first=True)
    with pytest.raises(ConnectionError):
        run(tmp_path, model_downloader=downloader)
    model_dir = tmp_path / "data" / "models" / "Qwen" / "Qwen2.5-7B-Instruct"
    assert (model_dir / "model-00001-of-00002.safetensors").exists()   # half a download...
    assert not (model_dir / prep.MARKER).exists()                      # ...never marked done
    # The dataset step finished and is not repeated; the model is downloaded again.
    again = run(tmp_path, model_downloader=downloader)
    assert again.steps == {"gsm8k-verl": "skipped", "model": "done"}
    assert len(downloader.calls) == 2
    assert (model_dir / "config.json").exists() and (model_dir / prep.MARKER).exists()


def test_download_without_config_json_is_not_marked(tmp_path):
    def empty_download(*, repo_id, local_dir, token, revision=None):
        pass

    with pytest.raises(prep.PrepareError, match=r"has no config.json"):
        run(tmp_path, model_downloader=empty_download)
    assert not (tmp_path / "data" / "models" / "Qwen" / "Qwen2.5-7B-Instruct" / prep.MARKER).exists()


def test_hub_source_downloads_once(tmp_path, hub_layout):
    files = FakeHubFiles(hub_layout)
    result = run(tmp_path, source_dir=None, file_downloader=files, token=TOKEN)
    assert result.steps["gsm8k-verl"] == "done"
    assert sorted(c["filename"] for c in files.calls) == sorted(datasets.GSM8K_HF_FILES.values())
    assert {(c["repo_id"], c["repo_type"], c["token"]) for c in files.calls} == {
        ("openai/gsm8k", "dataset", TOKEN)}
    source = tmp_path / "data" / "datasets" / "gsm8k" / "source"
    assert (source / prep.MARKER).exists()
    # NeMo RL on the same /data reuses the downloaded source.
    run(tmp_path, framework="nemo-rl", source_dir=None, file_downloader=files, token=TOKEN)
    assert len(files.calls) == 2
    rows = pq.read_table(tmp_path / "data" / "datasets" / "gsm8k" / "train.parquet").to_pylist()
    assert [r["reward_model"]["ground_truth"] for r in rows] == TRAIN_TRUTHS


def test_local_source_in_hub_layout(tmp_path, hub_layout):
    run(tmp_path, framework="nemo-rl", source_dir=str(hub_layout))
    rows = (tmp_path / "data" / "datasets" / "gsm8k" / "test.jsonl").read_text().splitlines()
    assert [json.loads(r)["answer"] for r in rows] == TEST_TRUTHS


def test_answer_without_final_number_names_the_row(tmp_path):
    source = tmp_path / "bad"
    source.mkdir()
    shutil.copyfile(FIXTURE / "test.jsonl", source / "test.jsonl")
    rows = (FIXTURE / "train.jsonl").read_text().splitlines()
    rows[2] = json.dumps({"question": "How many?", "answer": "No final answer here."})
    (source / "train.jsonl").write_text("\n".join(rows) + "\n")
    with pytest.raises(prep.PrepareError, match="gsm8k train row 2: no '#### <number>'"):
        run(tmp_path, source_dir=str(source))
    assert not (tmp_path / "data" / "datasets" / "gsm8k" / ".gke-grpo-verl-complete").exists()


def test_cli_reads_the_token_from_env_and_never_prints_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    downloader = FakeModelDownloader()
    argv = ["--framework", "verl", "--model", MODEL, "--dataset", "gsm8k",
            "--data-root", str(tmp_path / "data"), "--source-dir", str(FIXTURE)]
    assert prep.main(argv, model_downloader=downloader) == 0
    assert downloader.calls[0]["token"] == TOKEN

    def leaky(*, repo_id, local_dir, token, revision=None):
        raise PermissionError(f"401 Unauthorized for {repo_id} with token {token}")

    shutil.rmtree(tmp_path / "data" / "models")
    assert prep.main(argv, model_downloader=leaky) == 1
    captured = capsys.readouterr()
    output = captured.out + captured.err
    assert "[prepare] ready: gsm8k-verl done, model done" in output
    assert "401 Unauthorized for Qwen/Qwen2.5-7B-Instruct with token [HF_TOKEN]" in captured.err
    assert TOKEN not in output
    for path in (tmp_path / "data").rglob("*"):
        if path.is_file() and path.suffix in ("", ".json", ".jsonl"):
            assert TOKEN not in path.read_text(errors="ignore")


def test_cli_usage_errors_exit_2(capsys):
    assert prep.main(["--framework", "trl", "--model", MODEL]) == 2
    assert prep.main(["--framework", "verl", "--model", "../etc/passwd"]) == 1


MODEL_SHA = "a09a35458c702b33eeacc393d103063234e8bc28"
DATASET_SHA = "740312add88f781978c0658806c59bc2815b9866"


def test_revisions_reach_the_downloads_the_markers_and_the_directories(tmp_path, hub_layout):
    files, model = FakeHubFiles(hub_layout), FakeModelDownloader()
    result = run(tmp_path, source_dir=None, file_downloader=files, model_downloader=model,
                 model_revision=MODEL_SHA, dataset_revision=DATASET_SHA)
    assert result.steps == {"gsm8k-verl": "done", "model": "done"}
    assert {c["revision"] for c in files.calls} == {DATASET_SHA}
    assert [c["revision"] for c in model.calls] == [MODEL_SHA]
    model_dir = tmp_path / "data" / "models" / "Qwen" / f"Qwen2.5-7B-Instruct--{MODEL_SHA}"
    dataset_dir = tmp_path / "data" / "datasets" / f"gsm8k--{DATASET_SHA}"
    assert model.calls[0]["local_dir"] == str(model_dir)
    assert json.loads((model_dir / prep.MARKER).read_text())["revision"] == MODEL_SHA
    assert json.loads((dataset_dir / ".gke-grpo-verl-complete").read_text())["revision"] == DATASET_SHA
    assert json.loads((dataset_dir / "source" / prep.MARKER).read_text())["revision"] == DATASET_SHA
    # A marker of another revision (here: unpinned) does not count as done.
    assert not prep.marker_done(model_dir / prep.MARKER, None)
    assert prep.marker_done(model_dir / prep.MARKER, MODEL_SHA)
    # The renderers point at the same directories (jobs.layout is the one place).
    from jobs.contract.layout import DATA_LAYOUT
    assert DATA_LAYOUT.model_dir(MODEL, MODEL_SHA).endswith(f"Qwen2.5-7B-Instruct--{MODEL_SHA}")
    with pytest.raises(ValueError, match="40-character"):
        DATA_LAYOUT.model_dir(MODEL, "main")


def test_cli_passes_revisions_and_reads_the_token_file(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    token_file = tmp_path / "hf_api_token"
    token_file.write_text(TOKEN + "\n")
    downloader = FakeModelDownloader()
    argv = ["--framework", "nemo-rl", "--model", MODEL, "--data-root", str(tmp_path / "data"),
            "--source-dir", str(FIXTURE), "--hf-token-file", str(token_file),
            "--model-revision", MODEL_SHA]
    assert prep.main(argv, model_downloader=downloader) == 0
    assert downloader.calls[0]["token"] == TOKEN and downloader.calls[0]["revision"] == MODEL_SHA
    # No file: HF_TOKEN; neither: no token (public models).
    assert prep.read_hf_token(tmp_path / "missing") is None
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    assert prep.read_hf_token(tmp_path / "missing") == TOKEN
    assert HF_TOKEN_FILE == "/var/run/secrets/gke-grpo/hf/hf_api_token"


def test_revisions_are_part_of_the_run_identity():
    import dataclasses

    from tests.jobs.plan.test_preflight import DEV

    other = dataclasses.replace(DEV, model_revision="0" * 40)
    assert other.spec_hash != DEV.spec_hash and other.run_id != DEV.run_id
    assert dataclasses.replace(DEV, dataset_revision=None).spec_hash != DEV.spec_hash
    assert other.model_dir.endswith("--" + "0" * 40)
    assert DEV.dataset_dir == f"/data/datasets/gsm8k--{DATASET_SHA}"
    # A new attempt is the same run.
    assert DEV.with_attempt(4).spec_hash == DEV.spec_hash
