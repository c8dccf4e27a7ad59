"""GKE versions the config rules gate features on (data/gke-version-gates.yaml): one small
typed loader."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import yaml

GATES_FILE = Path(__file__).resolve().parent.parent.parent / "data" / "gke-version-gates.yaml"


@dataclass(frozen=True)
class GkeVersionGates:
    default_minor: str          # the default cluster.minMasterVersion
    minimum_minor: str          # A3 Ultra and A4 GPU nodes need at least this minor
    flex_start: str             # flex-start GPU node pools
    compute_class: str          # custom ComputeClasses (the capacity waterfall)
    lustre_modern_port: str     # the Lustre CSI driver on LNet port 988
    lustre_csi: str             # the Lustre CSI driver addon


@functools.cache
def load_gke_version_gates(path: Path = GATES_FILE) -> GkeVersionGates:
    data = yaml.safe_load(path.read_text())
    return GkeVersionGates(**{name: str(data[name]["value"]) for name in (
        "default_minor", "minimum_minor", "flex_start", "compute_class", "lustre_modern_port",
        "lustre_csi")})
