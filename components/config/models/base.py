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
        if info.field_name not in _OWN_CREDENTIAL_RULE:
            refuse_credentials(value, info)
        # What a before-validator returns is validated as Python input, where strict mode takes
        # no list for a tuple: a JSON array (model_validate_json) arrives here as a list.
        return lists_to_tuples(value)


def lists_to_tuples(value: Any) -> Any:
    """Lists (YAML's and JSON's arrays) as tuples, deep: the models' sequences are tuples."""
    if isinstance(value, list):
        return tuple(lists_to_tuples(v) for v in value)
    if isinstance(value, dict):
        return {k: lists_to_tuples(v) for k, v in value.items()}
    return value
