"""Where a run's Hugging Face exports and evaluation results live, and what makes an export
complete: shared by the export and evaluation stages on the head, the CLI and the serve
manifest.

    /data/exports/<run-id>/step-<n>/          config.json, *.safetensors, tokenizer files, and
                                              .gke-grpo-export-complete (written LAST)
    /data/runs/<run-id>/eval/base/eval.json   the base model on the GSM8K test split
    /data/runs/<run-id>/eval/step-<n>/eval.json   the export of step n

An export directory is complete only when its marker exists, parses, and every file it lists
is there with the size it records: a directory a crash left half-written (no marker) or one
whose files were changed afterwards is never taken for a finished export. The evaluation
results sit in the run's directory so that ``gke-grpo report --fetch`` and ``status`` find them with
the rest of the run.

Standard library only.
"""

from __future__ import annotations

import json
import posixpath
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jobs.contract.layout import MOUNT_PATH
from jobs.contract.records import run_dir

EXPORTS_DIR = "exports"
EXPORTS_ROOT = f"{MOUNT_PATH}/{EXPORTS_DIR}"
EXPORT_MARKER = ".gke-grpo-export-complete"
EXPORT_FORMAT = 1
EVAL_DIR = "eval"
EVAL_FILE = "eval.json"
BASE_LABEL = "base"
# One line per evaluated model in the Ray job's log (jobs/head/evaluate.py), read back by `status`.
EVAL_RESULT_MARKER = "[jobs.evaluate] RESULT "
_STEP_LABEL = re.compile(r"^step-(\d+)$")
# What a Hugging Face model directory needs to be loaded by transformers and vLLM.
REQUIRED_FILES = ("config.json",)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json")


class ExportError(Exception):
    """A bad request or an incomplete checkpoint/export: one clear, user-facing line."""


def step_label(step: int) -> str:
    return f"step-{step}"


def parse_step_label(label: str) -> int | None:
    match = _STEP_LABEL.match(label)
    return int(match.group(1)) if match else None


def export_dir(run_id: str, step: int, root: str | Path = EXPORTS_ROOT) -> Path:
    """``<root>/<run-id>/step-<n>``; the run id is checked like a run directory's name."""
    run_dir(run_id)          # raises ValueError for a name that could escape the root
    if step < 0:
        raise ValueError(f"step {step}: a checkpoint step is >= 0")
    return Path(root) / run_id / step_label(step)


def eval_result_path(run_directory: str | Path, label: str) -> Path:
    """``<run dir>/eval/<label>/eval.json`` for ``base`` or ``step-<n>``."""
    if label != BASE_LABEL and parse_step_label(label) is None:
        raise ValueError(f"evaluation label {label!r}: 'base' or 'step-<n>'")
    return Path(run_directory) / EVAL_DIR / label / EVAL_FILE


def serve_model_path(run_id: str, step: int) -> str:
    """The export's path as the serving pod sees it (the same mount)."""
    return posixpath.join(EXPORTS_ROOT, run_id, step_label(step))


@dataclass(frozen=True)
class ExportState:
    complete: bool
    reason: str                    # why not complete ("" when complete)
    marker: dict[str, Any] | None


def export_state(directory: str | Path) -> ExportState:
    """Whether ``directory`` holds a finished export, and if not, why not (one phrase)."""
    path = Path(directory)
    if not path.is_dir():
        return ExportState(False, f"{path} does not exist", None)
    marker_path = path / EXPORT_MARKER
    try:
        marker = json.loads(marker_path.read_text())
    except FileNotFoundError:
        return ExportState(False, f"{path} exists but has no {EXPORT_MARKER} (a half-written "
                           "export: the export writes its marker last)", None)
    except (OSError, ValueError) as exc:
        return ExportState(False, f"{marker_path} is unreadable ({exc})", None)
    if not isinstance(marker, dict) or marker.get("format") != EXPORT_FORMAT \
            or not isinstance(marker.get("files"), dict):
        return ExportState(False, f"{marker_path} is not an export marker of format "
                           f"{EXPORT_FORMAT}", None)
    for name, size in sorted(marker["files"].items()):
        try:
            actual = (path / name).stat().st_size
        except OSError:
            return ExportState(False, f"{path}: {name} is listed in its marker but missing",
                               marker)
        if actual != size:
            return ExportState(False, f"{path}: {name} has {actual} bytes, its marker says "
                               f"{size}", marker)
    return ExportState(True, "", marker)


def missing_model_files(directory: str | Path) -> list[str]:
    """What a directory lacks to be a loadable Hugging Face model: config.json, weights in
    safetensors, a tokenizer."""
    path = Path(directory)
    missing = [name for name in REQUIRED_FILES if not (path / name).is_file()]
    if not any(path.glob("*.safetensors")):
        missing.append("*.safetensors")
    if not any((path / name).is_file() for name in TOKENIZER_FILES):
        missing.append("tokenizer (" + " | ".join(TOKENIZER_FILES) + ")")
    return missing
