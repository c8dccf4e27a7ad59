"""Data and model preparation on the shared mount, run by the GRPO job before training.

    python3 -m jobs.head.staging --framework verl|nemo-rl --model ID --dataset gsm8k
                           [--data-root /data] [--source-dir DIR]

It runs on the Ray head inside the framework image, so it imports the standard library only at
module level; pyarrow (parquet) and huggingface_hub (downloads) are imported where they are
needed. It never imports pulumi or components.

Every step is idempotent and writes its own completion marker LAST; a step whose marker exists
is skipped, so a restarted attempt (or a second run on the same /data) does no work twice:

    step            output                                        marker
    gsm8k-source    <datasets>/gsm8k/source/main/{train,test}-00000-of-00001.parquet
                                                                  source/.gke-grpo-complete
    gsm8k-verl      <datasets>/gsm8k/{train,validation,test}.parquet
                                                                  .gke-grpo-verl-complete
    gsm8k-nemo-rl   <datasets>/gsm8k/{train,validation,test}.jsonl
                                                                  .gke-grpo-nemo-rl-complete
    model           <models>/<org>/<name>/ (a Hugging Face snapshot)
                                                                  <model>/.gke-grpo-complete

Splits: ``validation`` is a held-out slice of GSM8K's TRAIN split (GSM8K_VALIDATION_ROWS rows,
chosen by content hash, so the same rows whatever the file order) and ``train`` is the rest of
it; the trainers validate (and rank nothing) on ``validation``. ``test`` is GSM8K's test split,
untouched, for a final evaluation only: no trainer reads it.

Revisions: ``--model-revision`` / ``--dataset-revision`` (Hub commit shas, gke-grpo:job.
modelRevision / datasetRevision) go into the download calls and the markers, and name the
directories (``<name>--<sha>``; Hub repo names cannot contain "--"), so a pinned run never reads
files of another revision. Unpinned, the Hub's current main is downloaded once and kept.

GSM8K comes from the Hugging Face Hub (openai/gsm8k, config "main", its two parquet files) or,
with --source-dir, from a local directory holding either that layout (main/*.parquet) or the
original openai/grade-school-math JSONL files (train.jsonl, test.jsonl).

The Hugging Face token is read from the file ``--hf-token-file`` (default HF_TOKEN_FILE, where
the head mounts the hf-secret Secret: the head has no credential in its environment, because
NeMo RL copies the driver's environment into the job's runtime env) or, when that file does not
exist, from the HF_TOKEN environment variable; it is passed to huggingface_hub and never printed
or written.

Exit codes: 0 every step done or skipped; 1 a step failed (the message says which); 2 usage.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import posixpath
import re
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jobs.contract.datasets import (
    DATASETS,
    FRAMEWORKS,
    GSM8K_HF_FILES,
    GSM8K_HF_REPO,
    GSM8K_SPLITS,
    GSM8K_VALIDATION_ROWS,
    SOURCE_SPLITS,
    dataset_files,
    step_marker,
)
from jobs.contract.layout import (
    CHECKPOINTS_DIR,
    DATASETS_DIR,
    HF_CACHE_DIR,
    HF_TOKEN_FILE,
    MODELS_DIR,
    MOUNT_PATH,
    DataLayout,
)
from jobs.contract.safe_files import RUN_RECORD, json_if_usable

# verl's own GSM8K preprocessing, examples/data_preprocess/gsm8k.py (verl-project/verl
# @63b2ae3a, read 2026-12-01): the same data_source, instruction, regex and row shape, so that
# verl's rule reward (verl/utils/reward_score/gsm8k.py, selected by data_source) scores it.
GSM8K_DATA_SOURCE = "openai/gsm8k"
GSM8K_INSTRUCTION = 'Let\'s think step by step and output the final answer after "####".'
_GSM8K_ANSWER = re.compile(r"#### (\-?[0-9\.\,]+)")

MARKER = ".gke-grpo-complete"
# Bump when a step's output format changes: an older marker then no longer counts as done.
# 2: the validation split held out of train; revisions recorded.
FORMAT_VERSION = 2

Downloader = Callable[..., Any]


class PrepareError(Exception):
    """A step failed; the message says which and why (never containing the token)."""


# ---------------------------------------------------------------------------------------------
# Where things go
# ---------------------------------------------------------------------------------------------


def layout_for(data_root: str = MOUNT_PATH) -> DataLayout:
    root = data_root.rstrip("/") or "/"
    return DataLayout(root=root, models=posixpath.join(root, MODELS_DIR),
                      datasets=posixpath.join(root, DATASETS_DIR),
                      hf_home=posixpath.join(root, HF_CACHE_DIR),
                      checkpoints=posixpath.join(root, CHECKPOINTS_DIR))


def marker_done(path: Path, revision: str | None = None) -> bool:
    """The step is done: its marker has this format and, for a pinned step, this revision."""
    content = json_if_usable(path, RUN_RECORD)
    return (isinstance(content, dict) and content.get("format") == FORMAT_VERSION
            and content.get("revision") == revision)


def write_marker(path: Path, **details: Any) -> None:
    content = {"format": FORMAT_VERSION, "completed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                         time.gmtime())}
    content.update(details)
    _write_atomic(path, json.dumps(content, sort_keys=True) + "\n")


def _write_atomic(path: Path, text_or_writer: Any) -> None:
    """Write beside the target, then rename over it: a reader sees the old file or the whole new
    one, never half of it (rename of a single file is atomic on Lustre and on gcsfuse)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        if callable(text_or_writer):
            text_or_writer(tmp)
        else:
            tmp.write_text(text_or_writer)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


# ---------------------------------------------------------------------------------------------
# GSM8K: source readers and conversions
# ---------------------------------------------------------------------------------------------


def extract_gsm8k_answer(answer: str) -> str:
    """The number after "#### ", commas removed: verl's extract_solution (see GSM8K_INSTRUCTION)."""
    match = _GSM8K_ANSWER.search(answer)
    if match is None:
        raise ValueError("no '#### <number>' in the answer")
    return match.group(0).split("#### ")[1].replace(",", "")


def _read_parquet_records(path: Path) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq  # lazily: only when parquet is read

    table = pq.read_table(path, columns=["question", "answer"])
    return table.to_pylist()


def _read_jsonl_records(path: Path) -> list[dict[str, Any]]:
    records = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if line.strip():
                try:
                    records.append(json.loads(line))
                except ValueError as err:
                    raise PrepareError(f"{path}:{number}: not JSON ({err})") from None
    return records


class LocalSource:
    """GSM8K files in a local directory: the Hub layout (main/<split>-00000-of-00001.parquet)
    or the original openai/grade-school-math layout (<split>.jsonl)."""

    def __init__(self, directory: Path):
        self.directory = Path(directory)

    def describe(self) -> str:
        return f"local directory {self.directory}"

    def fetch(self) -> None:
        for split in SOURCE_SPLITS:
            if self._path(split) is None:
                raise PrepareError(f"{self.directory}: no {GSM8K_HF_FILES[split]} nor {split}.jsonl")

    def _path(self, split: str) -> Path | None:
        for candidate in (self.directory / GSM8K_HF_FILES[split], self.directory / f"{split}.jsonl"):
            if candidate.is_file():
                return candidate
        return None

    def read(self, split: str) -> list[dict[str, Any]]:
        path = self._path(split)
        if path is None:
            raise PrepareError(f"{self.directory}: no {GSM8K_HF_FILES[split]} nor {split}.jsonl")
        return _read_parquet_records(path) if path.suffix == ".parquet" else _read_jsonl_records(path)


class HubSource(LocalSource):
    """GSM8K downloaded once from the Hub into ``<datasets>/gsm8k/source`` (marker last)."""

    def __init__(self, directory: Path, token: str | None, downloader: Downloader | None = None,
                 revision: str | None = None):
        super().__init__(directory)
        self.token = token
        self.downloader = downloader
        self.revision = revision

    def describe(self) -> str:
        at = f" at {self.revision}" if self.revision else " (unpinned: the Hub's main)"
        return f"Hugging Face Hub dataset {GSM8K_HF_REPO}{at}"

    def fetch(self) -> None:
        marker = self.directory / MARKER
        if marker_done(marker, self.revision):
            _log(f"gsm8k-source: {self.directory} already complete, skipped")
            return
        download = self.downloader or _hf_hub_download()
        for split in SOURCE_SPLITS:
            _log(f"gsm8k-source: downloading {GSM8K_HF_REPO} {GSM8K_HF_FILES[split]}")
            download(repo_id=GSM8K_HF_REPO, filename=GSM8K_HF_FILES[split], repo_type="dataset",
                     revision=self.revision, local_dir=str(self.directory), token=self.token)
        super().fetch()
        write_marker(marker, step="gsm8k-source", repo=GSM8K_HF_REPO, revision=self.revision,
                     files=sorted(GSM8K_HF_FILES.values()))


def verl_rows(records: Iterable[dict[str, Any]], split: str) -> list[dict[str, Any]]:
    """GSM8K -> verl's parquet rows (examples/data_preprocess/gsm8k.py's make_map_fn)."""
    rows = []
    for index, record in enumerate(records):
        question, answer = record["question"], record["answer"]
        try:
            solution = extract_gsm8k_answer(answer)
        except ValueError as err:
            raise PrepareError(f"gsm8k {split} row {index}: {err}") from None
        rows.append({
            "data_source": GSM8K_DATA_SOURCE,
            "prompt": [{"role": "user", "content": question + " " + GSM8K_INSTRUCTION}],
            "ability": "math",
            "reward_model": {"style": "rule", "ground_truth": solution},
            "extra_info": {"split": split, "index": index, "answer": answer, "question": question},
        })
    return rows


def nemo_rl_rows(records: Iterable[dict[str, Any]], split: str) -> list[dict[str, Any]]:
    """GSM8K -> NeMo RL ResponseDataset JSONL rows: the question and the BARE number (the math
    verifier wraps the gold answer in \\boxed{} itself; shared/reference/grpo-frameworks.md)."""
    rows = []
    for index, record in enumerate(records):
        try:
            solution = extract_gsm8k_answer(record["answer"])
        except ValueError as err:
            raise PrepareError(f"gsm8k {split} row {index}: {err}") from None
        rows.append({"question": record["question"], "answer": solution})
    return rows


def split_validation(records: list[dict[str, Any]],
                     rows: int = GSM8K_VALIDATION_ROWS) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(train, validation): ``rows`` records of GSM8K's train split held out for validation
    (a tenth of a smaller split), chosen by the sha256 of the question, so the slice does not
    depend on the file's row order; both keep the source order."""
    if len(records) >= 10 * rows:
        count = rows
    elif len(records) > 1:
        count = max(1, len(records) // 10)
    else:
        count = 0
    ranked = sorted(range(len(records)),
                    key=lambda i: (hashlib.sha256(records[i]["question"].encode()).hexdigest(), i))
    held_out = set(ranked[:count])
    train = [r for i, r in enumerate(records) if i not in held_out]
    validation = [r for i, r in enumerate(records) if i in held_out]
    return train, validation


def _write_parquet(rows: list[dict[str, Any]], path: Path) -> None:
    import pyarrow as pa  # lazily
    import pyarrow.parquet as pq

    _write_atomic(path, lambda tmp: pq.write_table(pa.Table.from_pylist(rows), tmp))


def _write_jsonl(rows: list[dict[str, Any]], path: Path) -> None:
    _write_atomic(path, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))


def prepare_gsm8k(framework: str, dataset_dir: Path, source: LocalSource,
                  revision: str | None = None) -> str:
    marker = Path(step_marker(str(dataset_dir), framework))
    step = f"gsm8k-{framework}"
    if marker_done(marker, revision):
        _log(f"{step}: {dataset_dir} already complete, skipped")
        return "skipped"
    source.fetch()
    files = dataset_files(str(dataset_dir), framework)
    counts = {}
    source_train = source.read("train")
    for index, record in enumerate(source_train):  # name the row of the file, before the split
        try:
            extract_gsm8k_answer(record["answer"])
        except ValueError as err:
            raise PrepareError(f"gsm8k train row {index}: {err}") from None
    train, validation = split_validation(source_train)
    splits = {"train": train, "validation": validation, "test": source.read("test")}
    for split in GSM8K_SPLITS:
        records = splits[split]
        if framework == "verl":
            rows = verl_rows(records, split)
            _write_parquet(rows, Path(files[split]))
        else:
            rows = nemo_rl_rows(records, split)
            _write_jsonl(rows, Path(files[split]))
        counts[split] = len(rows)
        _log(f"{step}: wrote {files[split]} ({len(rows)} rows)")
    write_marker(marker, step=step, source=source.describe(), revision=revision, rows=counts)
    return "done"


# ---------------------------------------------------------------------------------------------
# Model
# ---------------------------------------------------------------------------------------------


def prepare_model(model: str, model_dir: Path, token: str | None,
                  downloader: Downloader | None = None, revision: str | None = None) -> str:
    """Download the model once into ``model_dir`` with ``snapshot_download(local_dir=...)``.

    Marker-last rather than download-to-temp-then-rename: renaming a directory is not atomic on
    Cloud Storage FUSE without hierarchical namespace (every object is copied, ~66 GB for a 32B
    model), while ``snapshot_download(local_dir=...)`` resumes an interrupted download file by
    file. The marker is written only after the download returned and config.json is present;
    the training command runs only after this script exited 0, and every later run checks the
    marker first, so a half download is never used: it is resumed (redone) by the next run.
    """
    marker = model_dir / MARKER
    if marker_done(marker, revision):
        _log(f"model: {model_dir} already complete, skipped")
        return "skipped"
    download = downloader or _snapshot_download()
    at = f" at {revision}" if revision else " (unpinned: the Hub's main)"
    _log(f"model: downloading {model}{at} into {model_dir}")
    model_dir.mkdir(parents=True, exist_ok=True)
    download(repo_id=model, revision=revision, local_dir=str(model_dir), token=token)
    if not (model_dir / "config.json").is_file():
        raise PrepareError(f"model: {model} downloaded into {model_dir} has no config.json")
    write_marker(marker, step="model", model=model, revision=revision)
    return "done"


def _snapshot_download() -> Downloader:
    try:
        from huggingface_hub import snapshot_download
    except ImportError as err:
        raise PrepareError("huggingface_hub is not installed in this image") from err
    return snapshot_download


def _hf_hub_download() -> Downloader:
    try:
        from huggingface_hub import hf_hub_download
    except ImportError as err:
        raise PrepareError("huggingface_hub is not installed in this image") from err
    return hf_hub_download


# ---------------------------------------------------------------------------------------------
# The whole preparation
# ---------------------------------------------------------------------------------------------


@dataclass
class PrepareResult:
    steps: dict[str, str] = field(default_factory=dict)   # step -> "done" | "skipped"


def prepare(framework: str, model: str, dataset: str = "gsm8k", data_root: str = MOUNT_PATH, *,
            model_revision: str | None = None, dataset_revision: str | None = None,
            source_dir: str | None = None, token: str | None = None,
            model_downloader: Downloader | None = None,
            file_downloader: Downloader | None = None) -> PrepareResult:
    if framework not in FRAMEWORKS:
        raise PrepareError(f"unknown framework {framework!r}: one of {', '.join(FRAMEWORKS)}")
    if dataset not in DATASETS:
        raise PrepareError(f"unknown dataset {dataset!r}: one of {', '.join(DATASETS)}")
    layout = layout_for(data_root)
    try:
        dataset_dir = Path(layout.dataset_dir(dataset, dataset_revision))
        model_dir = Path(layout.model_dir(model, model_revision))
    except ValueError as err:
        raise PrepareError(str(err)) from None
    if source_dir is not None:
        source: LocalSource = LocalSource(Path(source_dir))
    else:
        source = HubSource(dataset_dir / "source", token, file_downloader, dataset_revision)
    result = PrepareResult()
    result.steps[f"{dataset}-{framework}"] = prepare_gsm8k(framework, dataset_dir, source,
                                                           dataset_revision)
    result.steps["model"] = prepare_model(model, model_dir, token, model_downloader,
                                          model_revision)
    return result


def read_hf_token(path: Path = Path(HF_TOKEN_FILE)) -> str | None:
    """The token from the mounted Secret file, else from HF_TOKEN, else None (public models)."""
    try:
        token = path.read_text().strip()
    except FileNotFoundError:
        token = os.environ.get("HF_TOKEN", "").strip()
    return token or None


def _log(message: str) -> None:
    print(f"[prepare] {message}", flush=True)


def _redact(text: str, token: str | None) -> str:
    return text.replace(token, "[HF_TOKEN]") if token else text


def main(argv: list[str] | None = None, *, model_downloader: Downloader | None = None,
         file_downloader: Downloader | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m jobs.head.staging",
                                     description="Prepare GSM8K and the model on the shared mount "
                                                 "(idempotent; see the module docstring).")
    parser.add_argument("--framework", required=True, choices=FRAMEWORKS)
    parser.add_argument("--model", required=True, help="Hugging Face model id, e.g. Qwen/Qwen2.5-7B-Instruct")
    parser.add_argument("--dataset", default="gsm8k", choices=DATASETS)
    parser.add_argument("--data-root", default=MOUNT_PATH)
    parser.add_argument("--source-dir", default=None,
                        help="read GSM8K from this directory instead of the Hugging Face Hub")
    parser.add_argument("--model-revision", default=None,
                        help="Hub commit sha of the model (gke-grpo:job.modelRevision)")
    parser.add_argument("--dataset-revision", default=None,
                        help="Hub commit sha of openai/gsm8k (gke-grpo:job.datasetRevision)")
    parser.add_argument("--hf-token-file", default=HF_TOKEN_FILE,
                        help="file holding the Hugging Face token (the mounted hf-secret); "
                             "HF_TOKEN is read when it does not exist")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return 2 if exit_.code else 0
    token = read_hf_token(Path(args.hf_token_file))
    try:
        result = prepare(args.framework, args.model, args.dataset, args.data_root,
                         model_revision=args.model_revision,
                         dataset_revision=args.dataset_revision, source_dir=args.source_dir, token=token,
                         model_downloader=model_downloader, file_downloader=file_downloader)
    except PrepareError as err:
        print(f"[prepare] failed: {_redact(str(err), token)}", file=sys.stderr, flush=True)
        return 1
    except Exception as err:  # a download error: say what failed, never the token
        print(f"[prepare] failed: {type(err).__name__}: {_redact(str(err), token)}",
              file=sys.stderr, flush=True)
        return 1
    _log("ready: " + ", ".join(f"{step} {state}" for step, state in result.steps.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
