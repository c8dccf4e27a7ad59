"""The base of every area model: camelCase in the stack file, snake_case in Python, unknown
keys refused, frozen, strict types."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator
from pydantic.alias_generators import to_camel

from components.config.types import refuse_credentials

# Not checked here: extraOverrides has the run plan's stricter rule in preflight (a credential
# name with any literal value, `+trainer.hf_token=x`), which names the item.
_OWN_CREDENTIAL_RULE = frozenset({"extra_overrides"})


class _Area(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=False, extra="forbid", frozen=True,
        strict=True,
    )

    @field_validator("*", mode="before")
    @classmethod
    def _no_credential(cls, value: Any, info: ValidationInfo) -> Any:
        # Before the field's own type: a token is refused as a credential, whatever else is wrong.
        if info.field_name in _OWN_CREDENTIAL_RULE:
            return value
        return refuse_credentials(value, info)
