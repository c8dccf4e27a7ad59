"""Managed Lustre performance tiers (data/lustre-tiers.yaml): one small typed loader."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import yaml

TIERS_FILE = Path(__file__).resolve().parent.parent.parent / "data" / "lustre-tiers.yaml"


@dataclass(frozen=True)
class LustreTier:
    minimum_gib: int
    maximum_gib: int
    step_gib: int
    threshold_gib: int | None = None
    step_above_gib: int | None = None

    def capacity_problem(self, capacity: int) -> str | None:
        if not self.minimum_gib <= capacity <= self.maximum_gib:
            return f"between {self.minimum_gib} and {self.maximum_gib} GiB"
        if self.threshold_gib is None or capacity <= self.threshold_gib:
            if capacity % self.step_gib:
                return (f"a multiple of {self.step_gib} GiB"
                        + (f" up to {self.threshold_gib} GiB" if self.threshold_gib else ""))
        elif self.step_above_gib is not None and (capacity - self.threshold_gib) % self.step_above_gib:
            return (f"{self.threshold_gib} GiB plus a multiple of {self.step_above_gib} GiB "
                    f"above {self.threshold_gib} GiB")
        return None


@functools.cache
def load_lustre_tiers(path: Path = TIERS_FILE) -> dict[int, LustreTier]:
    """Throughput tier (MB/s per TiB) -> its capacity rule, in the file's order."""
    tiers = yaml.safe_load(path.read_text())["tiers"]
    return {
        int(tier): LustreTier(
            minimum_gib=int(row["minimum_gib"]), maximum_gib=int(row["maximum_gib"]),
            step_gib=int(row["step_gib"]),
            threshold_gib=None if row.get("threshold_gib") is None else int(row["threshold_gib"]),
            step_above_gib=None if row.get("step_above_gib") is None else int(row["step_above_gib"]),
        )
        for tier, row in tiers.items()
    }


LUSTRE_TIERS: dict[int, LustreTier] = load_lustre_tiers()
