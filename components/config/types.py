"""Single-field rules as pydantic types: a value is checked where its field is declared, and a
bad one is reported by pydantic with the same words the hand-written rule used.

A type here raises ``ConfigRuleError``; components/config/loader.py prints its message as it
is. Only rules whose field nothing else reads are types: a bad value is dropped and the field
defaulted (loader._parse_area), so a rule that other keys' checks depend on (CIDRs, which the
overlap check reads; names the default bucket or derived names are built from; values inside a
list or a nested object, whose siblings would be dropped with them) stays in rules.py, where a
bad value does not hide the other problems.
"""

from __future__ import annotations

import re
from typing import Annotated, Callable

from pydantic import AfterValidator, WithJsonSchema
from pydantic_core import PydanticCustomError

from components.config.patterns import _DNS1123_LABEL, _GKE_VERSION, _RFC1035

# The error type of every rule here: its message is what the user sees, unchanged.
RULE_ERROR = "gke_grpo_rule"
_HUB_REVISION = r"^[0-9a-f]{40}$"


def _rule(accepts: Callable[[str], bool], allowed: str) -> AfterValidator:
    def check(value: str) -> str:
        if not accepts(value):
            # The message is a template for pydantic: a literal brace would be a placeholder.
            raise PydanticCustomError(RULE_ERROR, allowed.replace("{", "{{").replace("}", "}}"))
        return value
    return AfterValidator(check)


def _schema(pattern: str, max_length: int | None = None) -> WithJsonSchema:
    # The same rule for editors (docs/stack-config.schema.json); validation stays the rule's.
    schema = {"type": "string", "pattern": pattern}
    return WithJsonSchema(schema if max_length is None else {**schema, "maxLength": max_length})


KubernetesNamespace = Annotated[str, _rule(
    lambda v: bool(_DNS1123_LABEL.match(v)) and len(v) <= 63,
    "a Kubernetes namespace name: lowercase letters, digits and hyphens, at most 63 characters"),
    _schema(_DNS1123_LABEL.pattern, 63)]

RayClusterName = Annotated[str, _rule(
    lambda v: bool(_RFC1035.match(v)) and len(v) <= 40,
    "lowercase letters, digits and hyphens, starting with a letter, at most 40 characters "
    "(KubeRay derives service names from it)"), _schema(_RFC1035.pattern, 40)]

HubRevision = Annotated[str, _rule(
    lambda v: bool(re.match(_HUB_REVISION, v)),
    "a Hugging Face Hub commit sha: 40 lower-case hex characters (the model or dataset page, "
    "'Files and versions', History)"), _schema(_HUB_REVISION)]

# The minimum minor (data/gke-version-gates.yaml) stays a rule: the other version gates report
# on the same key and would be hidden by it.
GkeVersion = Annotated[str, _rule(
    lambda v: bool(_GKE_VERSION.match(v)),
    'a GKE version or prefix such as "1.33" or "1.33.5-gke.1308000"'), _schema(_GKE_VERSION.pattern)]
