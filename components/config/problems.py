"""A problem of the stack config and the error that lists them all."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import pulumi

PROJECT = "gke-grpo"

@dataclass(frozen=True)
class Problem:
    """One thing wrong with the stack config: the key as a user writes it, the value given
    (``None`` when absent) and what would be accepted."""

    key: str
    given: Any
    allowed: str
    # Other keys (as written, with the gke-grpo: prefix) the rule compared this one with: a rule
    # about a key whose value was refused (and defaulted) would report a value nobody gave.
    reads: tuple[str, ...] = field(default=(), compare=False, repr=False)

    def __str__(self) -> str:
        # Nothing secret is ever echoed (jobs/contract/credentials.py) and echoed values are cut short.
        from jobs.contract.credentials import looks_like_secret_name, looks_like_secret_value, redact
        from jobs.plan.stack_file import truncate

        key = truncate(redact(self.key), 160)
        if self.given is NOT_SHOWN:
            return f"{key}: {redact(self.allowed)}"
        if self.given is _ABSENT:
            given = "(not set)"
        elif self.given is HIDDEN or looks_like_secret_name(re.split(r"[.:]", self.key)[-1].split("[")[0]) \
                or looks_like_secret_value(_as_json_text(self.given)):
            given = "(value hidden)"    # a credential, not even its redacted remainder
        else:
            try:
                given = truncate(redact(json.dumps(self.given, default=str)), 120)
            except (ValueError, RecursionError):
                given = "(a value that cannot be shown)"
        return f"{key}: given {given}; {redact(self.allowed)}"


def _as_json_text(value: Any) -> str:
    try:
        return json.dumps(value, default=str)
    except (ValueError, RecursionError):
        return ""


class _Absent:
    def __repr__(self) -> str:
        return "(not set)"


_ABSENT = _Absent()
# For problems whose message already says what was given (the job preflight's findings).
NOT_SHOWN = object()
# For values never to be echoed: secrets (--secret), unknown keys (a typo of hfToken).
HIDDEN = object()


class ConfigError(pulumi.RunError):
    """The stack config is invalid; ``problems`` lists every problem found.

    A ``pulumi.RunError``: the Pulumi CLI prints its message alone, without a Python traceback.
    """

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        lines = [f"  - {p}" for p in problems]
        noun = "problem" if len(problems) == 1 else "problems"
        super().__init__(f"the stack config has {len(problems)} {noun}:\n" + "\n".join(lines))



def _lookup(raw: Any, loc: tuple) -> Any:
    value = raw
    for part in loc:
        try:
            value = value[part]
        except (KeyError, IndexError, TypeError):
            return _ABSENT
    return value
