"""Autopilot's per-pod maximum requests per GPU shape (data/autopilot-gpu-limits.yaml).

One small typed loader; the config rules refuse a GPU worker pod above its row, and the KubeRay
component sizes the default worker to fit it. A row is either published (confirmed) or, where
Google's table could not be read, derived conservatively from the node: its allocatable less the
system DaemonSets' reserve (the data file says how and why); the preview exports the bound with
``confirmed: false`` then (``autopilot_limit_output``).
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
        return ("a conservative bound derived from the node (allocatable less the system "
                "DaemonSets' reserve); Autopilot's published row is unconfirmed, see "
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


def autopilot_limit_output(gpu_type: str, gpus: int) -> dict | None:
    """The bound a GPU worker pod is sized against, as the stack exports it (Autopilot only)."""
    limit = pod_limit_for(gpu_type, gpus)
    if limit is None:
        return None
    return {"gpuType": gpu_type, "gpus": gpus, "cpu": limit.cpu, "memoryGib": limit.memory_gib,
            "ephemeralStorageGib": limit.ephemeral_storage_gib, "confirmed": limit.confirmed,
            "source": limit.source}


@functools.cache
def general_purpose_ephemeral_storage_gib(path: Path = DATA_FILE) -> float:
    """Ephemeral storage a pod without local SSD may request on Autopilot (the Ray head)."""
    return float(yaml.safe_load(path.read_text())["general_purpose"]["ephemeral_storage_gib"])
