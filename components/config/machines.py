"""The GPU machines and predefined Compute Engine shapes (data/gpu-machines.yaml): one small
typed loader. Allocatable follows GKE's reservation formula (shared/reference/
pulumi-and-kuberay.md, "Machines, capacity and Lustre"); see MachineShape.allocatable_*."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

MACHINES_FILE = Path(__file__).resolve().parent.parent.parent / "data" / "gpu-machines.yaml"


@dataclass(frozen=True)
class MachineShape:
    gpu_type: str
    machine_type: str
    gpu_display_name: str
    gpus: int
    rdma_nics: int
    vcpus: int
    memory_gib: float
    local_ssd_gib: int
    nccl_tuner_file: str
    min_gke_version: str

    @property
    def allocatable_cpu(self) -> float:
        """vCPUs left for pods after GKE's CPU reservation (6% of core 1, 1% of core 2,
        0.5% of cores 3-4, 0.25% above)."""
        reserved = 0.06 + 0.01 + 2 * 0.005 + (self.vcpus - 4) * 0.0025
        return self.vcpus - reserved

    @property
    def allocatable_memory_gib(self) -> float:
        """Memory left for pods after GKE's reservation (25% of the first 4 GiB, 20% of the
        next 4, 10% of the next 8, 6% of the next 112, 2% above 128 GiB) and the 100 MiB
        eviction threshold."""
        m = self.memory_gib
        reserved = 0.25 * min(m, 4) + 0.20 * min(max(m - 4, 0), 4) + 0.10 * min(max(m - 8, 0), 8)
        reserved += 0.06 * min(max(m - 16, 0), 112) + 0.02 * max(m - 128, 0)
        return m - reserved - 100 / 1024


@functools.cache
def load_gpu_machines(path: Path = MACHINES_FILE) -> dict[str, MachineShape]:
    """gpu.type -> its machine, in the file's order."""
    data = yaml.safe_load(path.read_text())
    return {
        gpu_type: MachineShape(
            gpu_type=gpu_type, machine_type=str(row["machine_type"]),
            gpu_display_name=str(row["gpu_display_name"]), gpus=int(row["gpus"]),
            rdma_nics=int(row["rdma_nics"]), vcpus=int(row["vcpus"]),
            memory_gib=row["memory_gib"], local_ssd_gib=int(row["local_ssd_gib"]),
            nccl_tuner_file=str(row["nccl_tuner_file"]), min_gke_version=str(row["min_gke_version"]),
        )
        for gpu_type, row in data["machines"].items()
    }


@functools.cache
def load_memory_per_vcpu(path: Path = MACHINES_FILE) -> dict[tuple[str, str], int]:
    """(family, kind) -> GiB of memory per vCPU of the predefined <family>-<kind>-<vCPUs>."""
    data = yaml.safe_load(path.read_text())["memory_per_vcpu"]["gib"]
    return {(family, kind): int(gib) for family, kinds in data.items() for kind, gib in kinds.items()}


MACHINE_SHAPES: dict[str, MachineShape] = load_gpu_machines()


def predefined_machine(machine_type: str) -> tuple[int, float] | None:
    """(vCPUs, GiB) of a predefined <family>-<kind>-<vCPUs> machine type, None if unknown."""
    memory_per_vcpu = load_memory_per_vcpu()
    match = re.fullmatch(r"^([a-z0-9]+)-(standard|highmem|highcpu)-(\d+)$", machine_type)
    if not match or (match.group(1), match.group(2)) not in memory_per_vcpu:
        return None
    vcpus = int(match.group(3))
    return vcpus, vcpus * memory_per_vcpu[(match.group(1), match.group(2))]
