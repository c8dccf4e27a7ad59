"""Published GSM8K test-split scores to show beside a run's own (data/gsm8k-reference-scores.yaml,
sourced and dated there): its one typed loader."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

REFERENCE_SCORES_FILE = Path(__file__).resolve().parents[2] / "data" / "gsm8k-reference-scores.yaml"


@dataclass(frozen=True)
class ReferenceScore:
    model: str
    method: str
    accuracy_percent: float
    source: str


def reference_scores(model: str, path: Path = REFERENCE_SCORES_FILE) -> list[ReferenceScore]:
    """The published scores of ``model`` (any case), in the file's order."""
    data = yaml.safe_load(path.read_text())
    source = f"{data['source']}, read {data['read']}"
    return [ReferenceScore(str(row["model"]), str(row["method"]), float(row["accuracy"]), source)
            for row in data["scores"] if str(row["model"]).lower() == model.lower()]
