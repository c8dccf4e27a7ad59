"""The datasets a run trains on, as every program names them: the frameworks, the GSM8K splits
and their row counts, and the prepared files each framework reads. Data staging on the head
writes these files (jobs/head/staging.py); the renderers and preflight plan with them.
"""

from __future__ import annotations

import posixpath

FRAMEWORKS = ("verl", "nemo-rl")
DATASETS = ("gsm8k",)

# GSM8K on the Hub: dataset openai/gsm8k, config "main", one parquet file per split (the repo's
# file list: main/train-00000-of-00001.parquet, main/test-00000-of-00001.parquet; read
# 2026-12-01 from the search index, e.g. Hub file listings quoted in public code). 7,473 train and
# 1,319 test rows (shared/reference/grpo-frameworks.md).
GSM8K_HF_REPO = "openai/gsm8k"
GSM8K_HF_FILES = {"train": "main/train-00000-of-00001.parquet",
                  "test": "main/test-00000-of-00001.parquet"}
SOURCE_SPLITS = ("train", "test")                 # the splits GSM8K ships
GSM8K_SPLITS = ("train", "validation", "test")     # the splits prepared for the trainers
GSM8K_TRAIN_ROWS = 7473
GSM8K_TEST_ROWS = 1319
# Held out of the train split for validation during training: NeMo RL's grpo_math_1B.yaml
# validates on max_val_samples = 256 prompts (v0.5.0), so one validation pass reads them all.
GSM8K_VALIDATION_ROWS = 256
# What one epoch of training reads.
GSM8K_TRAINING_ROWS = GSM8K_TRAIN_ROWS - GSM8K_VALIDATION_ROWS


def dataset_files(dataset_dir: str, framework: str) -> dict[str, str]:
    """The prepared files a framework reads: split -> path. The renderers use this too, so the
    paths are written down once."""
    if framework == "verl":
        return {split: posixpath.join(dataset_dir, f"{split}.parquet") for split in GSM8K_SPLITS}
    if framework == "nemo-rl":
        return {split: posixpath.join(dataset_dir, f"{split}.jsonl") for split in GSM8K_SPLITS}
    raise ValueError(f"unknown framework {framework!r}")


def step_marker(dataset_dir: str, framework: str) -> str:
    return posixpath.join(dataset_dir, f".gke-grpo-{framework}-complete")
