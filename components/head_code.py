"""The jobs code the Ray head runs, as the head's ConfigMap and its mount: shared by KubeRay
(which mounts it on the head) and GrpoJob (whose run plan is one of its files), so neither
component imports the other.

What ships is the head's two packages, ``jobs/contract`` and ``jobs/head`` (plus ``jobs/head/driver.py``,
the RayJob's command), found by walking the folders: nothing lists head modules by hand. They
travel as one uncompressed zip archive in the ConfigMap's binaryData, put on the head's
PYTHONPATH (Python imports from a zip on sys.path: the zipimport module of the standard
library). One archive rather than one key per file because ConfigMap keys cannot hold "/", and a
volume that maps each key to a path would list every module in the RayCluster's pod template:
adding a head module would then change the pod template, which replaces the RayCluster (and
stops a live run) on the addon path. The archive keeps the pod template the same whatever the
code, and the kubelet still refreshes it when the ConfigMap changes.

The archive is byte-for-byte reproducible (sorted names, a fixed timestamp and mode, no
compression), so the offline preview and the golden files show one hash line for it.

Also the RayJob submitter pod's label, which KubeRay's NetworkPolicy admits to the dashboard
and GrpoJob puts on the submitter pod.
"""

from __future__ import annotations

import base64
import hashlib
import io
import zipfile
from pathlib import Path

JOBS_DIR = Path(__file__).resolve().parent.parent / "jobs"
# What the head imports: the contract and the head packages, and the driver's command module.
HEAD_PACKAGES = ("contract", "head")
HEAD_ENTRY_MODULES = ("__init__.py", "run.py")
HEAD_CODE_ROOT = "/opt/gke-grpo"
HEAD_CODE_CONFIGMAP = "grpo-jobs-code"
HEAD_CODE_ARCHIVE = "jobs-code.zip"
# The RayJob submitter pod's label: the only pod besides the operator admitted to the dashboard.
SUBMITTER_LABELS = {"gke-grpo/role": "rayjob-submitter"}
# zipfile's earliest representable time: the archive does not depend on when files were written.
_ARCHIVE_TIME = (1980, 1, 1, 0, 0, 0)


def head_code_paths(jobs_dir: Path = JOBS_DIR) -> list[Path]:
    """The source files that ship to the head, relative to the repository root, sorted."""
    files = [jobs_dir / name for name in HEAD_ENTRY_MODULES]
    for package in HEAD_PACKAGES:
        files += (jobs_dir / package).rglob("*.py")
    return sorted(path.relative_to(jobs_dir.parent) for path in files)


def head_code_archive(jobs_dir: Path = JOBS_DIR) -> bytes:
    """The head's code as a reproducible zip: ``jobs/...`` paths, stored uncompressed."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as archive:
        for relative in head_code_paths(jobs_dir):
            info = zipfile.ZipInfo(relative.as_posix(), date_time=_ARCHIVE_TIME)
            info.external_attr = 0o644 << 16
            archive.writestr(info, (jobs_dir.parent / relative).read_bytes())
    return buffer.getvalue()


def head_code_digest(jobs_dir: Path = JOBS_DIR) -> str:
    """``sha256:<hex>`` of the archive: what the offline preview shows in its place."""
    return "sha256:" + hashlib.sha256(head_code_archive(jobs_dir)).hexdigest()


def head_code_files(plan: str) -> tuple[dict[str, str], dict[str, str]]:
    """The head's jobs ConfigMap as (data, binaryData): the run plan as text, the code archive
    base64-encoded, as the Kubernetes API takes binaryData."""
    from jobs.contract.run_plan import PLAN_FILE

    return {PLAN_FILE: plan}, {HEAD_CODE_ARCHIVE: base64.b64encode(head_code_archive()).decode()}


def head_code_mount() -> tuple[list[dict], list[dict], list[dict]]:
    """Volumes, volume mounts and env that put the code archive on the head's PYTHONPATH and the
    run plan at jobs.contract.run_plan.PLAN_PATH. Whole-directory mounts (no subPath): the
    kubelet refreshes them when the ConfigMap changes, so new code and a new plan reach the head
    without a pod restart."""
    from jobs.contract.run_plan import PLAN_DIR, PLAN_FILE

    volumes = [
        {"name": "jobs-code", "configMap": {
            "name": HEAD_CODE_CONFIGMAP, "items": [{"key": HEAD_CODE_ARCHIVE, "path": HEAD_CODE_ARCHIVE}]}},
        {"name": "run-plan", "configMap": {
            "name": HEAD_CODE_CONFIGMAP, "items": [{"key": PLAN_FILE, "path": PLAN_FILE}]}},
    ]
    mounts = [{"name": "jobs-code", "mountPath": f"{HEAD_CODE_ROOT}/code", "readOnly": True},
              {"name": "run-plan", "mountPath": PLAN_DIR, "readOnly": True}]
    env = [{"name": "PYTHONPATH", "value": f"{HEAD_CODE_ROOT}/code/{HEAD_CODE_ARCHIVE}"}]
    return volumes, mounts, env
