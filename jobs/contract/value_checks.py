"""Checks of single JSON values, for the files the run's programs read (the run plan, the health
gate's plan): exact types, finite numbers, bounds, absolute paths. A check is a function
``(value, key) -> None`` that raises ``Invalid`` with one line naming the key; ``field_problems``
runs a table of them over an object and returns every problem at once.

    PLAN_FIELDS = {"gpus": integer(1, 1_000_000), "deadline_seconds": optional(seconds()), ...}
    field_problems(data, PLAN_FIELDS, required={"gpus"}) -> ["gpus must be a whole number ..."]

Exact means what JSON says: ``true`` is not the integer 1, ``1.0`` is not an integer (a count
given as 1.5 is a mistake, not a rounding), NaN and Infinity are not numbers, a 5,000-digit
integer is too long to be one (jobs/contract/safe_files.py keeps it as ``OversizedInteger``).
Messages describe a bad value by its type and, for short plain values, its text; a string that
looks like a credential is never shown (jobs/contract/credentials.py). Standard library only.
"""

from __future__ import annotations

import math
import posixpath
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from jobs.contract.credentials import looks_like_secret_name, redact, secret_value_kind
from jobs.contract.safe_files import OversizedInteger

Check = Callable[[Any, str], None]
# Longest budget in seconds a plan may give: an int32, as the RayJob's activeDeadlineSeconds
# (KubeRay v1.7.0 CRD) holds it.
MAX_SECONDS = 2**31 - 1
MAX_TEXT = 100_000
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class Invalid(ValueError):
    """One problem of one value: the message names its key."""


def given(value: Any) -> str:
    """A bad value as a message shows it: its JSON spelling when short and plain, else its kind."""
    if isinstance(value, str):
        return _given_text(value)
    if isinstance(value, (bool, int, float, OversizedInteger)):
        return _given_number(value)
    kinds = {type(None): "null", dict: "an object", list: "a list", tuple: "a list"}
    return kinds.get(type(value), type(value).__name__)


def _given_number(value: bool | float | OversizedInteger) -> str:
    if isinstance(value, bool):
        return f"{str(value).lower()} (a boolean)"
    if isinstance(value, OversizedInteger):
        return f"a {value.digits}-digit integer"
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
    text = repr(value)
    return text if len(text) <= 24 else f"a {len(text)}-digit integer"


def _given_text(value: str) -> str:
    if secret_value_kind(value):
        return "a string that looks like a credential (not shown)"
    shown = redact(value)
    return repr(shown) if len(shown) <= 60 and shown.isprintable() else f"a string of {len(value)} characters"


def _bound(value: float) -> str:
    return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"


def integer(low: int, high: int) -> Check:
    def check(value: Any, key: str) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise Invalid(f"{key} must be a whole number from {low:,} to {high:,}, got {given(value)}")
    return check


def number(*, above: float | None = None, low: float | None = None, high: float = 1e15) -> Check:
    """A finite int or float (not a boolean) > ``above`` (or >= ``low``) and <= ``high``."""
    def check(value: Any, key: str) -> None:
        ok = (not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
              and (above is None or value > above) and (low is None or value >= low) and value <= high)
        if not ok:
            bound = f"above {_bound(above)} " if above is not None else f"from {_bound(low)} " if low is not None else ""
            raise Invalid(f"{key} must be a finite number {bound}up to {_bound(high)}, got {given(value)}")
    return check


def seconds(high: float = MAX_SECONDS) -> Check:
    return number(above=0, high=high)


def fraction(*, zero_ok: bool = False) -> Check:
    """A number in (0, 1], or [0, 1] with ``zero_ok``."""
    def check(value: Any, key: str) -> None:
        ok = (not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
              and (value >= 0 if zero_ok else value > 0) and value <= 1)
        if not ok:
            raise Invalid(f"{key} must be a number in {'[0' if zero_ok else '(0'}, 1], got {given(value)}")
    return check


def boolean(value: Any, key: str) -> None:
    if not isinstance(value, bool):
        raise Invalid(f"{key} must be true or false, got {given(value)}")


def text(*, pattern: str | None = None, empty: bool = False, max_length: int = MAX_TEXT,
         meaning: str = "") -> Check:
    """A string without NUL or other control characters but tab; ``pattern`` must match it whole."""
    compiled = re.compile(pattern) if pattern else None

    def check(value: Any, key: str) -> None:
        if not isinstance(value, str):
            raise Invalid(f"{key} must be a string, got {given(value)}")
        if not value and not empty:
            raise Invalid(f"{key} must not be empty")
        if len(value) > max_length:
            raise Invalid(f"{key} must be at most {max_length:,} characters, got {len(value):,}")
        if any((ord(ch) < 32 and ch != "\t") or ch == "\x7f" for ch in value):
            raise Invalid(f"{key} must not contain control characters (NUL, newline ...)")
        if compiled is not None and not compiled.fullmatch(value):
            raise Invalid(f"{key} must be {meaning or f'of the form {pattern}'}, got {given(value)}")
    return check


def one_of(*choices: str) -> Check:
    def check(value: Any, key: str) -> None:
        if not isinstance(value, str) or value not in choices:
            raise Invalid(f"{key} {given(value)} is not one of {', '.join(choices)}")
    return check


def absolute_path(value: Any, key: str) -> None:
    """An absolute, normalized POSIX path: no ``..``, ``.`` or ``//`` that could lead elsewhere."""
    text(max_length=4096)(value, key)
    if not value.startswith("/") or posixpath.normpath(value) != value or value.startswith("//"):
        raise Invalid(f"{key} must be an absolute, normalized path (no '..', '.' or '//'), "
                      f"got {given(value)}")


def optional(check: Check) -> Check:
    def maybe(value: Any, key: str) -> None:
        if value is not None:
            check(value, key)
    return maybe


def list_of(item: Check, *, min_length: int = 0, max_length: int = 100_000) -> Check:
    def check(value: Any, key: str) -> None:
        if not isinstance(value, (list, tuple)):     # tuples: a plan built in Python
            raise Invalid(f"{key} must be a list, got {given(value)}")
        if not value and min_length == 1:
            raise Invalid(f"{key} must be a non-empty list (at most {max_length:,} items)")
        if not min_length <= len(value) <= max_length:
            raise Invalid(f"{key} must have {min_length:,} to {max_length:,} items, got {len(value):,}")
        for i, element in enumerate(value):
            item(element, f"{key}[{i}]")
    return check


def env_map(value: Any, key: str) -> None:
    """Environment variables: names a shell accepts -> strings (no NUL: it cannot be passed)."""
    if not isinstance(value, dict):
        raise Invalid(f"{key} must be an object of names to strings, got {given(value)}")
    problems = []
    for name, item in value.items():
        shown = redact(name)[:60]
        if not _ENV_NAME.fullmatch(name) or len(name) > 256:
            problems.append(f"{key}: {shown!r} is not an environment variable name")
        elif not isinstance(item, str):
            problems.append(f"{key}.{shown} must be a string, got {given(item)}")
        elif "\x00" in item or len(item) > MAX_TEXT:
            problems.append(f"{key}.{shown} must be at most {MAX_TEXT:,} characters without NUL")
    if problems:
        raise Invalid("; ".join(problems))


def string_map(value: Any, key: str) -> None:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise Invalid(f"{key} must be an object of names to strings, got {given(value)}")


def field_problems(data: Mapping[str, Any], fields: Mapping[str, Check], *, where: str = "",
                   required: Iterable[str] = (), what: str = "") -> list[str]:
    """Every problem of an object checked against a field table: unknown keys, missing required
    keys, and each field's own check. ``where`` prefixes every key (``health.``); ``what`` names
    the object in the unknown/missing lines ("unknown plan keys: ...")."""
    problems = []
    noun = f"{what} keys" if what else "keys"
    unknown = sorted(str(k) for k in data if k not in fields)
    if unknown:
        problems.append(f"unknown {noun}: {', '.join(where + redact(k)[:60] for k in unknown)}")
    missing = [f"{where}{k}" for k in required if k not in data]
    if missing:
        problems.append(f"missing {noun}: {', '.join(missing)}")
    for name, check in fields.items():
        if name in data:
            try:
                check(data[name], f"{where}{name}")
            except Invalid as err:
                problems.append(str(err))
    return problems


def object_of(fields: Mapping[str, Check], *, required: Iterable[str] = ()) -> Check:
    """A nested object checked against its own field table."""
    needed = tuple(required)

    def check(value: Any, key: str) -> None:
        if not isinstance(value, dict):
            raise Invalid(f"{key} must be an object, got {given(value)}")
        problems = field_problems(value, fields, where=f"{key}.", required=needed)
        if problems:
            raise Invalid("; ".join(problems))
    return check


def credential_problems(value: Any, key: str) -> list[str]:
    """Where a JSON document carries something credential-shaped: a token anywhere (a string, an
    object key), or an object entry whose name says credential and whose value is a literal
    (``"HF_TOKEN": "..."``: the credential rule's ``name=value``). The value is never shown."""
    problems: list[str] = []
    stack: list[tuple[Any, str]] = [(value, key)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, dict):
            for name, child in item.items():
                name_text = str(name)
                shown = f"{where}.{redact(name_text)[:60]}" if where else redact(name_text)[:60]
                kind = secret_value_kind(name_text)
                if kind is None and isinstance(child, str) and child and looks_like_secret_name(name_text) \
                        and not child.startswith("$"):
                    kind = f"a credential assignment ({redact(name_text)[:60]}=...)"
                if kind:
                    problems.append(f"{shown} holds what looks like {kind}")
                    continue
                stack.append((child, shown))
        elif isinstance(item, list):
            stack.extend((child, f"{where}[{i}]") for i, child in enumerate(item))
        elif isinstance(item, str):
            kind = secret_value_kind(item)
            if kind:
                problems.append(f"{where} holds what looks like {kind}")
    return sorted(problems)
