"""RFC 3339 times and RFC 5545 recurrence rules, as GKE's maintenance policy takes them: pure
functions, used by the config's types (components/config/types.py) and rules."""

from __future__ import annotations

import datetime as _dt
import re

_RFC3339 = re.compile(r"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.\d+)?(Z|[+-]\d{2}:\d{2})$")


def rfc3339(value: str) -> _dt.datetime | None:
    """An RFC 3339 date-time (``2025-01-04T02:00:00Z``, offsets allowed) -> aware datetime, or
    None when it does not parse (format or calendar: month 13, Feb 30, hour 24)."""
    if not isinstance(value, str) or not _RFC3339.fullmatch(value):
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
            if (signed and not (low <= abs(number) <= high)) or (not signed and not low <= number <= high):
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


def rrule_problem(rule: str) -> str | None:
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
