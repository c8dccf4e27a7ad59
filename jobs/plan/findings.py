"""A preflight finding: its own module so that jobs.preflight and jobs.memory_plan (which preflight
calls) both import it without an import circle."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Finding:
    level: Literal["error", "warning"]
    key: str
    message: str

    def __str__(self) -> str:
        return f"{self.level}: {self.key}: {self.message}"
