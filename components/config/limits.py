"""Ceilings of the stack config (data/config-limits.yaml): the largest RayJob deadline the API
accepts, the GKE node ceiling of a node pool, and the real predefined shapes of the head pool's
machine. One small typed loader; components/config/types.py and rules.py apply them."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import yaml

LIMITS_FILE = Path(__file__).resolve().parent.parent.parent / "data" / "config-limits.yaml"


@dataclass(frozen=True)
class ConfigLimits:
    active_deadline_seconds_max: int
    gpu_nodes_max: int
    head_machine_vcpus: dict[str, tuple[int, ...]]   # "<family>-<kind>" -> vCPU counts

    def head_machine_known(self, machine_type: str) -> bool:
        family, _, vcpus = machine_type.rpartition("-")
        return vcpus.isdigit() and int(vcpus) in self.head_machine_vcpus.get(family, ())

    def head_machine_choices(self, machine_type: str) -> str:
        family = machine_type.rpartition("-")[0]
        counts = self.head_machine_vcpus.get(family)
        if counts:
            return f"{family}-" + "|".join(str(c) for c in counts)
        return ", ".join(sorted(self.head_machine_vcpus)) + " (with their vCPU counts)"


@functools.cache
def load_config_limits(path: Path = LIMITS_FILE) -> ConfigLimits:
    data = yaml.safe_load(path.read_text())
    return ConfigLimits(
        active_deadline_seconds_max=int(data["ray_job_active_deadline_seconds_max"]["value"]),
        gpu_nodes_max=int(data["gpu_nodes_max"]["value"]),
        head_machine_vcpus={family: tuple(int(c) for c in counts)
                            for family, counts in data["head_machine_vcpus"]["shapes"].items()},
    )
