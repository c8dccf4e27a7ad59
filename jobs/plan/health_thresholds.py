"""The health gate's thresholds and reference figures, sourced in data/health-gates.yaml: read by
the Pulumi program when it builds the run plan's "health" section (components/health_gate.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from jobs.contract.health import COLLECTIVES, PublishedFigure

HEALTH_GATES_FILE = Path(__file__).resolve().parents[2] / "data" / "health-gates.yaml"


@dataclass(frozen=True)
class HealthGates:
    min_average_busbw_gbps: float
    published_fraction: float
    published: dict[str, tuple[PublishedFigure, ...]]   # machine type -> figures
    storage_warn_fraction: float
    gcsfuse_write_gbps: float
    gcsfuse_read_gbps: float
    gcsfuse_streams: int
    gcsfuse_source: str
    lustre_source: str
    sources: dict[str, str]

    def lustre_gbps(self, tier_mbps_per_tib: int, capacity_gib: int) -> float:
        """Managed Lustre throughput: per-unit throughput x capacity (MB/s -> GB/s)."""
        return tier_mbps_per_tib * capacity_gib / 1024 / 1000


def load_health_gates(path: Path | None = None) -> HealthGates:
    doc = yaml.safe_load(Path(path or HEALTH_GATES_FILE).read_text())
    fabric, storage = doc["fabric"], doc["storage"]
    published = {machine: tuple(PublishedFigure(**dict(figure, source=" ".join(figure["source"].split())))
                                for figure in figures)
                 for machine, figures in fabric["published"].items()}
    for figures in published.values():
        for figure in figures:
            if figure.collective not in COLLECTIVES:
                raise ValueError(f"{path or HEALTH_GATES_FILE}: unknown collective {figure.collective!r}")
    gcsfuse = storage["gcsfuse"]
    return HealthGates(
        min_average_busbw_gbps=float(fabric["min_average_busbw_gbps"]["value"]),
        published_fraction=float(fabric["published_fraction"]["value"]),
        published=published,
        storage_warn_fraction=float(storage["warn_fraction"]["value"]),
        gcsfuse_write_gbps=float(gcsfuse["sequential_write_mbps"]) / 1000,
        gcsfuse_read_gbps=float(gcsfuse["sequential_read_mbps"]) / 1000,
        gcsfuse_streams=int(gcsfuse["streams"]),
        gcsfuse_source=" ".join(gcsfuse["source"].split()),
        lustre_source=" ".join(storage["lustre"]["source"].split()),
        sources={"min_average_busbw_gbps": " ".join(fabric["min_average_busbw_gbps"]["source"].split()),
                 "published_fraction": " ".join(fabric["published_fraction"]["source"].split())},
    )
