"""Ceilings of the stack config (data/config-limits.yaml): the largest RayJob deadline the API
accepts, the GKE node ceiling of a node pool, the real predefined shapes of the head pool's
machine, and the public address space the control plane's authorized networks may cover. One
small typed loader; components/config/types.py and rules.py apply them."""

from __future__ import annotations

import functools
import ipaddress
from dataclasses import dataclass
from pathlib import Path

import yaml

LIMITS_FILE = Path(__file__).resolve().parent.parent.parent / "data" / "config-limits.yaml"


@dataclass(frozen=True)
class ConfigLimits:
    active_deadline_seconds_max: int
    gpu_nodes_max: int
    head_machine_vcpus: dict[str, tuple[int, ...]]   # "<family>-<kind>" -> vCPU counts
    authorized_public_addresses_max: int
    non_public_ipv4: tuple[ipaddress.IPv4Network, ...]  # special-purpose blocks, not public space

    def public_addresses(self, cidrs: list[str]) -> int:
        """Public IPv4 addresses the ranges cover together: their union, less the special-purpose
        blocks (private, loopback, documentation, multicast...), counted once however the union
        is split or overlapped."""
        union = list(ipaddress.collapse_addresses(ipaddress.IPv4Network(c) for c in cidrs))
        for block in self.non_public_ipv4:
            kept: list[ipaddress.IPv4Network] = []
            for net in union:
                if net.subnet_of(block):
                    continue
                kept += list(net.address_exclude(block)) if block.subnet_of(net) else [net]
            union = kept
        return sum(net.num_addresses for net in ipaddress.collapse_addresses(union))

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
        authorized_public_addresses_max=int(data["authorized_networks_public_addresses_max"]["value"]),
        non_public_ipv4=tuple(ipaddress.IPv4Network(b) for b in data["non_public_ipv4"]["blocks"]),
    )
