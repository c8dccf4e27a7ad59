"""The base of every area model: camelCase in the stack file, snake_case in Python, unknown
keys refused, frozen, strict types."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class _Area(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=False, extra="forbid", frozen=True,
        strict=True,
    )
