"""Config rules against values no API would accept (issue 14): non-finite numbers, ceilings from
data/config-limits.yaml, model ids, gcsfuse's file cache against the node's local SSD, real head
machine shapes, and maintenance windows and exclusions whose times and RRULE really parse.

``check_guards(rules)`` runs on components/config/rules.py's ``_Rules`` (the areas that parsed) and
reports through ``rules.add(key, given, allowed)``, so each problem names the key a user wrote.
Pure functions; ``rrule_problem`` and ``rfc3339`` are usable on their own.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from typing import TYPE_CHECKING, Any, Optional, Protocol

from components.config.limits import load_config_limits

if TYPE_CHECKING:
    from components.config.models import ClusterConfig, GpuConfig, JobConfig, StorageConfig


class _Rules(Protocol):
    """What the guards read of components/config/rules.py's ``_Rules`` (the areas that parsed,
    and its ``add``): a protocol, so guards.py and rules.py import each other in one direction."""
    cluster: Optional["ClusterConfig"]
    gpu: Optional["GpuConfig"]
    storage: Optional["StorageConfig"]
    job: Optional["JobConfig"]

    def add(self, key: str, given: Any, allowed: str) -> None: ...

# Hugging Face repo ids: huggingface_hub's validate_repo_id (huggingface_hub/utils/_validators.py,
# 1.33.0 as installed, read 2026-12-01): "[\w\-.]+" names, at most one "/", no "--" or "..",
# not starting or ending with "-" or ".", at most 96 characters. We also require the org: the
# model is staged under /data/models/<org>/<name> (jobs/layout.py).
_HF_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9_.-]*[A-Za-z0-9])?"
_HF_REPO_ID = re.compile(rf"^{_HF_NAME}/{_HF_NAME}$")
HF_REPO_ID_MAX = 96

_RFC3339 = re.compile(r"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.\d+)?(Z|[+-]\d{2}:\d{2})$")


def rfc3339(value: str) -> Optional[_dt.datetime]:
    """An RFC 3339 date-time (``2025-01-04T02:00:00Z``, offsets allowed) -> aware datetime, or
    None when it does not parse (format or calendar: month 13, Feb 30, hour 24)."""
    if not isinstance(value, str) or not _RFC3339.match(value):
        return None
    try:
        return _dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


# RFC 5545 section 3.3.10 (RECUR value): the rule parts and their values.
_DAY = r"(?:[+-]?(?:[1-9]|[1-4][0-9]|5[0-3]))?(?:MO|TU|WE|TH|FR|SA|SU)"
_FREQS = ("SECONDLY", "MINUTELY", "HOURLY", "DAILY", "WEEKLY", "MONTHLY", "YEARLY")


def _int_list(low: int, high: int, signed: bool):
    def check(value: str) -> bool:
        for item in value.split(","):
            if not re.fullmatch(r"[+-]?\d{1,3}" if signed else r"\d{1,2}", item):
                return False
            number = int(item)
            if signed and not (low <= abs(number) <= high) or not signed and not low <= number <= high:
                return False
        return True
    return check


_PARTS = {
    "FREQ": lambda v: v in _FREQS,
    "UNTIL": lambda v: bool(re.fullmatch(r"\d{8}(T\d{6}Z?)?", v)) and _until_parses(v),
    "COUNT": lambda v: bool(re.fullmatch(r"[1-9]\d{0,8}", v)),
    "INTERVAL": lambda v: bool(re.fullmatch(r"[1-9]\d{0,8}", v)),
    "BYSECOND": _int_list(0, 60, False),
    "BYMINUTE": _int_list(0, 59, False),
    "BYHOUR": _int_list(0, 23, False),
    "BYDAY": lambda v: all(re.fullmatch(_DAY, d) for d in v.split(",")),
    "BYMONTHDAY": _int_list(1, 31, True),
    "BYYEARDAY": _int_list(1, 366, True),
    "BYWEEKNO": _int_list(1, 53, True),
    "BYMONTH": _int_list(1, 12, False),
    "BYSETPOS": _int_list(1, 366, True),
    "WKST": lambda v: v in ("MO", "TU", "WE", "TH", "FR", "SA", "SU"),
}


def _until_parses(value: str) -> bool:
    try:
        _dt.datetime.strptime(value[:8], "%Y%m%d")
        if len(value) > 8:
            _dt.datetime.strptime(value[9:15], "%H%M%S")
    except ValueError:
        return False
    return True


def rrule_problem(rule: str) -> Optional[str]:
    """Why ``rule`` is not an RFC 5545 RRULE value (``FREQ=WEEKLY;BYDAY=SA,SU``), or None."""
    if not isinstance(rule, str) or not rule or len(rule) > 1000:
        return "an RRULE of at most 1000 characters"
    seen: set[str] = set()
    for part in rule.split(";"):
        name, eq, value = part.partition("=")
        if not eq or not value:
            return f"rule part {part[:40]!r} is not NAME=VALUE"
        if name not in _PARTS:
            return f"{name[:40]!r} is not an RRULE part (" + ", ".join(_PARTS) + ")"
        if name in seen:
            return f"{name} is given twice"
        seen.add(name)
        if not _PARTS[name](value):
            return f"{name}={value[:40]} is not a valid {name} value"
    if "FREQ" not in seen:
        return "FREQ is required"
    if {"COUNT", "UNTIL"} <= seen:
        return "COUNT and UNTIL are mutually exclusive"
    return None


def check_guards(rules: "_Rules") -> None:
    limits = load_config_limits()
    _check_maintenance(rules)
    _check_gpu(rules, limits)
    _check_gcs_cache(rules)
    _check_head_machine(rules, limits)
    _check_job(rules, limits)


def _check_maintenance(rules: "_Rules") -> None:
    from components.config.patterns import _RFC3339 as _WRITTEN_AS_UTC   # the format config.py checks

    c = rules.cluster
    if c is None:
        return
    window = c.maintenance_window
    # The format is checked by components/config/rules.py; here: that a well-formed time is a real one.
    for field, value in (("startTime", window.start_time), ("endTime", window.end_time)):
        if _WRITTEN_AS_UTC.match(value) and rfc3339(value) is None:
            rules.add(f"cluster.maintenanceWindow.{field}", value,
                      "a real RFC 3339 time (month 01-12, a day of that month, hour 00-23)")
    if window.recurrence.startswith("FREQ="):
        problem = rrule_problem(window.recurrence)
        if problem:
            rules.add("cluster.maintenanceWindow.recurrence", window.recurrence,
                      f"an RFC 5545 RRULE such as FREQ=WEEKLY;BYDAY=SA,SU ({problem})")
    for i, exclusion in enumerate(c.maintenance_exclusions):
        key = f"cluster.maintenanceExclusions[{i}]"
        start, end = rfc3339(exclusion.start_time), rfc3339(exclusion.end_time)
        for field, value, parsed in (("startTime", exclusion.start_time, start),
                                     ("endTime", exclusion.end_time, end)):
            if _WRITTEN_AS_UTC.match(value) and parsed is None:
                rules.add(f"{key}.{field}", value, "a real RFC 3339 time (month 01-12, a day "
                          "of that month, hour 00-23)")
        if start is not None and end is not None and end <= start:
            rules.add(f"{key}.endTime", exclusion.end_time,
                      f"a time after {key}.startTime ({exclusion.start_time}): an exclusion "
                      "ends after it starts")


def _check_gpu(rules: "_Rules", limits) -> None:
    g = rules.gpu
    if g is None:
        return
    ceiling = limits.gpu_nodes_max
    for key, value in (("nodes", g.nodes), ("maxNodes", g.max_nodes), ("minNodes", g.min_nodes)):
        if value is not None and value > ceiling:
            rules.add(f"gpu.{key}", value, f"at most {ceiling:,}: GKE's limit of nodes per node "
                      "pool zone (data/config-limits.yaml)")


def _check_gcs_cache(rules: "_Rules") -> None:
    from components.config.machines import MACHINE_SHAPES
    from components.config.models import GcsStorage
    from components.config.sidecar import EPHEMERAL_HEADROOM_FRACTION, EPHEMERAL_HEADROOM_MIN_GIB

    s = rules.storage
    if s is None or s.kind != "gcs" or rules.gpu is None:
        return
    gcs = s.gcs or GcsStorage()
    shape = MACHINE_SHAPES[rules.gpu.type]
    cache = gcs.file_cache_size_gib
    headroom = max(EPHEMERAL_HEADROOM_MIN_GIB, math.ceil(cache * EPHEMERAL_HEADROOM_FRACTION))
    if cache > 0 and cache + headroom > shape.local_ssd_gib:
        rules.add("storage.gcs.fileCacheSizeGib", cache,
                  f"at most {int((shape.local_ssd_gib - EPHEMERAL_HEADROOM_MIN_GIB) / (1 + EPHEMERAL_HEADROOM_FRACTION)):,} GiB: "
                  f"the cache (plus its {EPHEMERAL_HEADROOM_FRACTION:.0%} headroom) lives in the "
                  f"sidecar's ephemeral storage, the {shape.local_ssd_gib:,} GiB of local SSD of "
                  f"{shape.machine_type}")


def _check_head_machine(rules: "_Rules", limits) -> None:
    from components.config.machines import predefined_machine

    c = rules.cluster
    if c is None or c.mode != "standard" or c.head_pool is None:
        return
    machine = c.head_pool.machine_type
    # An unreadable name is reported by components/config/rules.py; here: a readable one that is no shape.
    if predefined_machine(machine) is not None and not limits.head_machine_known(machine):
        rules.add("cluster.headPool.machineType", machine, "a real predefined machine type: "
                  + limits.head_machine_choices(machine) + " (data/config-limits.yaml)")


def _check_job(rules: "_Rules", limits) -> None:
    j = rules.job
    if j is None:
        return
    for key, value in (("learningRate", j.learning_rate), ("klLossCoef", j.kl_loss_coef),
                       ("rolloutGpuMemoryUtilization", j.rollout_gpu_memory_utilization)):
        if isinstance(value, float) and not math.isfinite(value):
            rules.add(f"job.{key}", str(value), "a finite number (not .inf or .nan)")
    if j.active_deadline_seconds > limits.active_deadline_seconds_max:
        rules.add("job.activeDeadlineSeconds", j.active_deadline_seconds,
                  f"at most {limits.active_deadline_seconds_max:,} (the RayJob field is an int32)")
    model = j.model
    if (len(model) > HF_REPO_ID_MAX or not _HF_REPO_ID.match(model) or "--" in model
            or ".." in model or model.endswith(".git")):
        rules.add("job.model", model, "a Hugging Face model id <org>/<name> (letters, digits, '-', "
                  "'_' and '.'; no '..', '--' or .git; at most 96 characters), such as "
                  "Qwen/Qwen2.5-7B-Instruct")
