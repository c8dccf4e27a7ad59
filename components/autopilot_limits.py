"""Autopilot's per-pod maximum requests per GPU shape (data/autopilot-gpu-limits.yaml).

One small typed loader; the config rules refuse a GPU worker pod above its row, and the KubeRay
component sizes the default worker to fit it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import yaml

DATA_FILE = Path(__file__).resolve().parent.parent / "data" / "autopilot-gpu-limits.yaml"
SOURCE_PAGE = "GKE 'Resource requests in Autopilot', read 2026-12-01"


@dataclass(frozen=True)
class PodLimit:
    gpu_type: str
    gpus: int
    cpu: float
    memory_gib: float
    ephemeral_storage_gib: float
    confirmed: bool

    @property
    def source(self) -> str:
        if self.confirmed:
            return f"Autopilot's published maximum ({SOURCE_PAGE})"
        return ("the machine's own total; Autopilot's published row is unconfirmed, see "
                "data/autopilot-gpu-limits.yaml")


@functools.cache
def load_pod_limits(path: Path = DATA_FILE) -> dict[tuple[str, int], PodLimit]:
    raw = yaml.safe_load(path.read_text())
    limits: dict[tuple[str, int], PodLimit] = {}
    for gpu_type, rows in raw["gpus"].items():
        for row in rows:
            limit = PodLimit(gpu_type=gpu_type, gpus=int(row["gpus"]), cpu=float(row["cpu"]),
                             memory_gib=float(row["memory_gib"]),
                             ephemeral_storage_gib=float(row["ephemeral_storage_gib"]),
                             confirmed=bool(row["confirmed"]))
            limits[(gpu_type, limit.gpus)] = limit
    return limits


def pod_limit_for(gpu_type: str, gpus: int) -> PodLimit | None:
    return load_pod_limits().get((gpu_type, gpus))


@functools.cache
def general_purpose_ephemeral_storage_gib(path: Path = DATA_FILE) -> float:
    """Ephemeral storage a pod without local SSD may request on Autopilot (the Ray head)."""
    return float(yaml.safe_load(path.read_text())["general_purpose"]["ephemeral_storage_gib"])
