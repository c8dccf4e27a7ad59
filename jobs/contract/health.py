"""The health gate's contract: what the run plan carries under "health" (``HealthPlan``), the
result it leaves in ``<run_dir>/health.json`` and in one ``[health] result {...}`` log line, and
bus bandwidth as nccl-tests defines it (NVIDIA/nccl-tests doc/PERFORMANCE.md, v2.19.6):

    algbw = S / t          S: bytes of the whole array (all_gather: the gathered output)
    all_reduce busbw = algbw x 2(n-1)/n        all_gather busbw = algbw x (n-1)/n

with t each rank's time per iteration averaged over the ranks (nccl-tests src/common.cu,
``average = 1``).

The Pulumi program builds the plan (components/health_gate.py, thresholds from
jobs/plan/health_thresholds.py), the gate on the head measures (jobs/head/fabric_gate.py), and
the jobs CLI shows the result (jobs/cli/health_view.py). docs/health-gates.md.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from jobs.contract.value_checks import (
    Check,
    absolute_path,
    boolean,
    env_map,
    field_problems,
    fraction,
    given,
    integer,
    list_of,
    number,
    object_of,
    one_of,
    optional,
    seconds,
    string_map,
    text,
)

GIB = 1 << 30
MIB = 1 << 20
HEALTH_FILE = "health.json"
LOG_PREFIX = "[health]"
RESULT_MARKER = f"{LOG_PREFIX} result "
COLLECTIVES = ("all_gather", "all_reduce")
MODES = ("enforce", "warn", "off")


@dataclass
class GateResult:
    """What the gate answers the driver: passed (or warn mode), the exit code the attempt ends
    with when it did not, one line saying why, the whole health.json document and its warnings."""
    passed: bool
    exit_code: int
    message: str
    document: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


class HealthPlanError(ValueError):
    """The run plan's "health" section is not a valid health plan."""


@dataclass(frozen=True)
class PublishedFigure:
    collective: str
    nodes: int
    size_bytes: int
    busbw_gbps: float
    source: str
    read: str = ""            # when the source was read


@dataclass(frozen=True)
class StoragePlan:
    directory: str                  # where the probe writes (under the run dir on /data)
    size_bytes: int                 # all streams together: about one checkpoint shard
    streams: int
    kind: str                       # "lustre" | "gcs"
    expected_write_gbps: float | None
    expected_read_gbps: float | None
    expected_source: str
    warn_fraction: float = 0.5
    block_bytes: int = 8 * MIB


@dataclass(frozen=True)
class HealthPlan:
    mode: str = "enforce"                                   # enforce | warn | off
    backend: str = "nccl"                                   # nccl | gloo (tests)
    machine_type: str = ""
    collectives: tuple[str, ...] = COLLECTIVES
    sizes_bytes: tuple[int, ...] = (1 * GIB, 2 * GIB, 4 * GIB, 8 * GIB)
    warmup_iterations: int = 2
    iterations: int = 5
    min_average_busbw_gbps: float = 100.0
    published_fraction: float = 0.75
    published: tuple[PublishedFigure, ...] = ()
    localize: bool = True
    localize_size_bytes: int | None = None              # default: the largest size
    intra_node_outlier_fraction: float = 0.5
    placement_timeout_s: float = 300.0
    timeout_s: float = 900.0
    env: dict[str, str] = field(default_factory=dict)       # extra env of the probe actors
    nccl_debug_log: bool = True                             # NCCL INFO log, parsed for NICs
    storage: StoragePlan | None = None
    sources: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, raw: Any) -> HealthPlan:
        """A health plan from JSON (the run plan's "health" object, or a whole run plan holding
        one), checked field by field (``health_plan_problems``); HealthPlanError naming every
        bad key otherwise."""
        raw = raw.get("health", raw) if isinstance(raw, Mapping) else raw
        problems = health_plan_problems(raw)
        if problems:
            raise HealthPlanError("; ".join(problems))
        values = dict(raw)
        for key in ("collectives", "sizes_bytes"):
            if key in values:
                values[key] = tuple(values[key])
        if "published" in values:
            values["published"] = tuple(PublishedFigure(**p) for p in values["published"])
        if values.get("storage") is not None:
            values["storage"] = StoragePlan(**values["storage"])
        return cls(**values)

    def check(self) -> None:
        """HealthPlanError naming every bad field of a plan built in Python."""
        problems = health_plan_problems(self.to_dict())
        if problems:
            raise HealthPlanError("; ".join(problems))

    @property
    def localize_size(self) -> int:
        return self.localize_size_bytes or max(self.sizes_bytes)


# ---- the checks of a health plan, one per field -------------------------------------------------

_BYTES = integer(1, 2**40)          # a collective of at most 1 TiB
_GBPS = number(above=0, high=1e6)
PUBLISHED_FIELDS: dict[str, Check] = {
    "collective": one_of(*COLLECTIVES), "nodes": integer(1, 100_000), "size_bytes": _BYTES,
    "busbw_gbps": _GBPS, "source": text(), "read": text(empty=True),
}
STORAGE_FIELDS: dict[str, Check] = {
    "directory": absolute_path, "size_bytes": integer(1, 2**50), "streams": integer(1, 1024),
    "kind": one_of("lustre", "gcs"), "expected_write_gbps": optional(_GBPS),
    "expected_read_gbps": optional(_GBPS), "expected_source": text(empty=True),
    "warn_fraction": fraction(zero_ok=True), "block_bytes": integer(1, 2**34),    # 0: never warn
}
HEALTH_FIELDS: dict[str, Check] = {
    "mode": one_of(*MODES),
    "backend": one_of("nccl", "gloo"),
    "machine_type": text(empty=True, max_length=100),
    "collectives": list_of(one_of(*COLLECTIVES), min_length=1, max_length=len(COLLECTIVES)),
    "sizes_bytes": list_of(_BYTES, min_length=1, max_length=64),
    "warmup_iterations": integer(0, 1000),
    "iterations": integer(1, 100_000),
    "min_average_busbw_gbps": number(low=0, high=1e6),
    "published_fraction": fraction(),
    "published": list_of(object_of(PUBLISHED_FIELDS, required=("collective", "nodes", "size_bytes",
                                                               "busbw_gbps", "source")), max_length=1000),
    "localize": boolean,
    "localize_size_bytes": optional(_BYTES),
    "intra_node_outlier_fraction": fraction(zero_ok=True),     # 0: no node is an outlier
    "placement_timeout_s": seconds(),
    "timeout_s": seconds(),
    "env": env_map,
    "nccl_debug_log": boolean,
    "storage": optional(object_of(STORAGE_FIELDS, required=tuple(
        f.name for f in dataclasses.fields(StoragePlan) if f.default is dataclasses.MISSING))),
    "sources": string_map,
}


def health_plan_problems(raw: Any, where: str = "") -> list[str]:
    """Every problem of a health plan's JSON, each naming its key (prefixed by ``where``)."""
    if not isinstance(raw, Mapping):
        return [f"{where.rstrip('.') or 'the health plan'} must be an object, got {given(raw)}"]
    return field_problems(raw, HEALTH_FIELDS, where=where, what="health plan")


# ---- bus bandwidth, as nccl-tests defines it ------------------------------------------------------

def busbw_factor(collective: str, ranks: int) -> float:
    """nccl-tests' correction from algorithm to bus bandwidth (doc/PERFORMANCE.md, "Summary";
    src/all_reduce.cu AllReduceGetBw, src/all_gather.cu AllGatherGetBw at v2.19.6)."""
    if ranks < 1:
        raise ValueError("ranks must be >= 1")
    if collective == "all_reduce":
        return 2 * (ranks - 1) / ranks
    if collective == "all_gather":
        return (ranks - 1) / ranks
    raise ValueError(f"unknown collective {collective!r}")


def algbw_gbps(size_bytes: int, seconds: float) -> float:
    """S/t in GB/s (10^9 bytes: nccl-tests divides by 1.0E9)."""
    return size_bytes / 1e9 / seconds


def busbw_gbps(collective: str, size_bytes: int, seconds: float, ranks: int) -> float:
    return algbw_gbps(size_bytes, seconds) * busbw_factor(collective, ranks)


def element_count(collective: str, size_bytes: int, ranks: int, element_bytes: int = 4) -> int:
    """Elements of each rank's *input* for a collective over S bytes: all_reduce reduces S on
    every rank; all_gather's S is the gathered output (nccl-tests: sendcount x size x n), so
    every rank sends S/n. Rounded down to whole elements."""
    if collective == "all_reduce":
        return max(1, size_bytes // element_bytes)
    return max(1, size_bytes // (element_bytes * ranks))


def effective_size(collective: str, size_bytes: int, ranks: int, element_bytes: int = 4) -> int:
    """The bytes actually moved once the size is rounded to whole elements per rank."""
    count = element_count(collective, size_bytes, ranks, element_bytes)
    return count * element_bytes * (1 if collective == "all_reduce" else ranks)


# ---- results ----------------------------------------------------------------------------------

def health_log_summary(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The part of health.json that the job log carries (no per-rank rows)."""
    keep = ("version", "mode", "passed", "enforced", "skipped", "started", "ended", "seconds", "timings",
            "nodes", "gpus_per_node", "backend", "machine_type", "checks", "failed_nodes",
            "warnings", "message", "error")
    out = {k: doc[k] for k in keep if k in doc}
    if "storage" in doc:
        s = doc["storage"]
        out["storage"] = {k: s.get(k) for k in ("kind", "bytes", "write_gbps", "read_gbps",
                                                "expected_write_gbps", "expected_read_gbps")}
    return out


def health_from_log(text: str) -> dict[str, Any] | None:
    """The last gate result a job log carries (``[health] result {...}``), or None."""
    found: dict[str, Any] | None = None
    for line in text.splitlines():
        index = line.find(RESULT_MARKER)
        if index < 0:
            continue
        try:
            found = json.loads(line[index + len(RESULT_MARKER):])
        except json.JSONDecodeError:
            continue
    return found
