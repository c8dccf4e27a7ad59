"""The vendored KubeRay CRDs (data/kuberay-crds/v<chart version>/), applied from files.

Paths are relative to the project root, where Pulumi runs the program: the preview stays the
same on every machine and nothing is fetched at `pulumi up`.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CRD_DIR = "data/kuberay-crds"
# Order of the chart's crds/ folder; RayCronJob's CRD exists from KubeRay 1.6.0.
CRD_PLURALS = ("rayclusters", "raycronjobs", "rayjobs", "rayservices")


def vendored_chart_versions() -> list[str]:
    """Chart versions whose four CRD files are all in the repository."""
    base = ROOT / CRD_DIR
    versions = []
    for folder in sorted(base.glob("v*")) if base.is_dir() else []:
        version = folder.name[1:]
        if re.fullmatch(r"\d+\.\d+\.\d+", version) and all(
                (folder / f"ray.io_{plural}.yaml").is_file() for plural in CRD_PLURALS):
            versions.append(version)
    return versions


def crd_files(chart_version: str) -> list[str]:
    """The CRD files of ``chart_version``, relative to the project root."""
    if chart_version not in vendored_chart_versions():
        raise ValueError(f"no vendored KubeRay CRDs for chart {chart_version} under {CRD_DIR}/")
    return [f"{CRD_DIR}/v{chart_version}/ray.io_{plural}.yaml" for plural in CRD_PLURALS]
