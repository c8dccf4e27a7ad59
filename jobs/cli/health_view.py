"""The health gate's result as the jobs CLI shows it (``gke-grpo status``, ``gke-grpo health``): from
``<run_dir>/health.json`` or the ``[health] result`` line of the job log.

health.json is read through the one safe reader (a regular UTF-8 JSON file of at most 16 MiB,
jobs/contract/safe_files.py) and shown as data, not trust: a field of the wrong type or an absurd
number (a start time of 1e308, a bandwidth that is a string) is shown as "?" or left out, never
a crash, and only ``"passed": true`` counts as passed.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jobs.contract.credentials import redact
from jobs.contract.records import time_problem
from jobs.contract.safe_files import HEALTH_RESULT, read_json


def read_health(path: str | Path) -> Any:
    """health.json's value (UnusableFile when it cannot be read or is not JSON)."""
    return read_json(path, HEALTH_RESULT)


def gate_passed(doc: Mapping[str, Any]) -> bool:
    return doc.get("passed") is True


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) and abs(value) < 1e15 else None


def _text(value: Any, limit: int = 120) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)) or \
            (isinstance(value, int) and abs(value) >= 10**15):
        return "?"
    shown = redact(" ".join(str(value).split()))
    return shown if len(shown) <= limit else shown[:limit] + "..."


def _objects(value: Any) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _gbps(value: Any, digits: str = ".4g") -> str:
    number = _number(value)
    return "?" if number is None else format(number, digits)


def health_status_rows(doc: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """Rows for ``gke-grpo status`` (key, value) from health.json or its log summary."""
    if not doc or not isinstance(doc, Mapping):
        return []
    started = doc.get("started")
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started)) if started and not time_problem(started) else "?"
    if doc.get("skipped") is True:
        return [("health", f"OFF (gke-grpo:job.healthGate), {when}: fabric and storage not measured")]
    state = "PASSED" if gate_passed(doc) else "FAILED"
    if not gate_passed(doc) and doc.get("enforced") is False:
        state = "FAILED (mode warn: not enforced)"
    seconds = _number(doc.get("seconds"))
    rows = [("health", f"{state} {when}, {_text(doc.get('nodes'))} node(s) x {_text(doc.get('gpus_per_node'))} "
                       f"GPUs, {_text(doc.get('backend'))}, {'?' if seconds is None else f'{seconds:g}'}s")]
    for check in _objects(doc.get("checks")):
        if "threshold_gbps" in check:
            mark = "ok" if check.get("passed") is True else "LOW"
            rows.append(("", f"{mark:<4}{_text(check.get('name'))}: {_gbps(check.get('measured_gbps'))} GB/s "
                             f"(min {_gbps(check.get('threshold_gbps'))})"))
    error = doc.get("error")
    if error:
        error = error if isinstance(error, dict) else {"message": error}
        rows.append(("", f"error in {_text(error.get('stage'))}: {_text(error.get('message'), 300)}"))
    for node in _objects(doc.get("failed_nodes")):
        nics = node.get("nics")
        nics_text = f", NICs {','.join(_text(n, 40) for n in nics)}" if isinstance(nics, list) and nics else ""
        rows.append(("", f"failed node {_text(node.get('label'))}{nics_text}"))
    storage = doc.get("storage")
    if isinstance(storage, dict) and storage:
        def rate(key: str) -> str:
            value = _number(storage.get(f"{key}_gbps"))
            expected = _number(storage.get(f"expected_{key}_gbps"))
            text = "-" if value is None else f"{value:.2f} GB/s"
            return text + (f" (expected {expected:.2f})" if expected else "")
        rows.append(("storage", f"{_text(storage.get('kind'))}: write {rate('write')}, read {rate('read')}"))
    warnings = doc.get("warnings")
    for warning in warnings if isinstance(warnings, list) else []:
        rows.append(("", f"warning: {_text(warning, 300)}"))
    return rows
