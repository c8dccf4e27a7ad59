"""The health gate's result as the jobs CLI shows it (``jobs status``, ``jobs health``): from
``<run_dir>/health.json`` or the ``[health] result`` line of the job log.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def read_health(path: str | Path) -> dict:
    return json.loads(Path(path).read_text())


def health_status_rows(doc: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """Rows for ``jobs status`` (key, value) from health.json or its log summary."""
    if not doc:
        return []
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(doc["started"])) if doc.get("started") else "?"
    if doc.get("skipped"):
        return [("health", f"OFF (gke-grpo:job.healthGate), {when}: fabric and storage not measured")]
    state = "PASSED" if doc.get("passed") else "FAILED"
    if not doc.get("passed") and doc.get("enforced") is False:
        state = "FAILED (mode warn: not enforced)"
    rows = [("health", f"{state} {when}, {doc.get('nodes')} node(s) x {doc.get('gpus_per_node')} GPUs, "
                       f"{doc.get('backend')}, {doc.get('seconds', '?')}s")]
    for check in doc.get("checks", []):
        if "threshold_gbps" in check:
            mark = "ok" if check["passed"] else "LOW"
            rows.append(("", f"{mark:<4}{check['name']}: {check['measured_gbps']:.4g} GB/s "
                             f"(min {check['threshold_gbps']:.4g})"))
    if doc.get("error"):
        rows.append(("", f"error in {doc['error'].get('stage')}: {doc['error'].get('message')}"))
    for node in doc.get("failed_nodes", []):
        nics = f", NICs {','.join(node['nics'])}" if node.get("nics") else ""
        rows.append(("", f"failed node {node.get('label')}{nics}"))
    storage = doc.get("storage")
    if storage:
        def rate(key):
            value = storage.get(f"{key}_gbps")
            expected = storage.get(f"expected_{key}_gbps")
            text = "-" if value is None else f"{value:.2f} GB/s"
            return text + (f" (expected {expected:.2f})" if expected else "")
        rows.append(("storage", f"{storage.get('kind')}: write {rate('write')}, read {rate('read')}"))
    for warning in doc.get("warnings", []):
        rows.append(("", f"warning: {warning}"))
    return rows
