"""Where things live under the shared mount (/data): models, datasets, the Hugging Face cache
and one checkpoint directory per run.

Standard library only: this module is imported on the Ray head by the job code as well as by
the Pulumi program (components/storage.py).
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass

MOUNT_PATH = "/data"
MODELS_DIR = "models"
DATASETS_DIR = "datasets"
# The tutorial's HF_HOME (shared/reference/tutorials.md §4), kept so its commands still apply.
HF_CACHE_DIR = "huggingface_cache"
CHECKPOINTS_DIR = "checkpoints"
# One directory per run: what its driver records (events.jsonl, restarts.jsonl, ...).
RUNS_DIR = "runs"

_SAFE_SEGMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_COMMIT_SHA = re.compile(r"^[0-9a-f]{40}$")


@dataclass(frozen=True)
class DataLayout:
    """Where things live under the shared mount. Plain paths, the same on both storage kinds.

    ``models/<org>/<name>``: a Hugging Face snapshot staged once as plain files (``hf download
    --local-dir``); ``datasets/<name>``: prepared data (parquet); ``huggingface_cache``: HF_HOME
    for the small files libraries fetch at run time; ``checkpoints/<run>``: one directory per run,
    written and resumed by every attempt of that run.
    """

    root: str = MOUNT_PATH
    models: str = f"{MOUNT_PATH}/{MODELS_DIR}"
    datasets: str = f"{MOUNT_PATH}/{DATASETS_DIR}"
    hf_home: str = f"{MOUNT_PATH}/{HF_CACHE_DIR}"
    checkpoints: str = f"{MOUNT_PATH}/{CHECKPOINTS_DIR}"
    runs: str = f"{MOUNT_PATH}/{RUNS_DIR}"

    def model_dir(self, model_id: str, revision: str | None = None) -> str:
        """``Qwen/Qwen2.5-32B-Instruct`` -> ``/data/models/Qwen/Qwen2.5-32B-Instruct``; pinned to
        a Hub commit: ``.../Qwen2.5-32B-Instruct--<sha>``."""
        return revision_dir(_join_checked(self.models, model_id, "model id"), revision)

    def dataset_dir(self, dataset: str, revision: str | None = None) -> str:
        return revision_dir(_join_checked(self.datasets, dataset, "dataset name"), revision)

    def run_checkpoint_dir(self, run: str) -> str:
        return _join_checked(self.checkpoints, run, "run name")

    def run_dir(self, run: str) -> str:
        """``runs/<run>``: the run driver's records (jobs/head/driver.py), one directory per run."""
        return _join_checked(self.runs, run, "run name")


def revision_dir(directory: str, revision: str | None) -> str:
    """A directory of one Hub revision: ``<dir>--<sha>`` (Hub repo names cannot contain "--",
    so this never names another repo); unpinned, the directory itself."""
    if revision is None:
        return directory
    if not _COMMIT_SHA.match(revision):
        raise ValueError(f"revision {revision!r}: expected a 40-character lower-case commit sha")
    return f"{directory}--{revision}"


def _join_checked(base: str, relative: str, what: str) -> str:
    # Names come from config; a "../" or an absolute path must never escape the layout.
    parts = relative.split("/")
    if not relative or not all(_SAFE_SEGMENT.match(part) for part in parts):
        raise ValueError(f"{what} {relative!r}: expected '/'-separated names of letters, digits, "
                         "'.', '_' and '-', each starting with a letter or digit")
    return posixpath.join(base, *parts)


DATA_LAYOUT = DataLayout()

# The hf-secret Secret's key hf_api_token, mounted read-only on the Ray head
# (components/head_credentials.py); data staging reads it (jobs/head/staging.py).
HF_TOKEN_FILE = "/var/run/secrets/gke-grpo/hf/hf_api_token"
