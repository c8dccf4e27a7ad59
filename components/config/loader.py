"""Loading a stack's config: shape errors from pydantic, then the rules, all problems at once."""

from __future__ import annotations

import json
from typing import Any, Mapping, Optional

from pydantic import ValidationError

from components.config.keys import AREAS, REQUIRED_AREAS, SCALAR_KEYS, SECRET_KEYS
from components.config.models import _Area
from components.config.patterns import _PROJECT_ID, _REGION
from components.config.problems import (
    _ABSENT, HIDDEN, NOT_SHOWN, PROJECT, ConfigError, Problem, _lookup,
)
from components.config.rules import _Rules
from components.config.stack import StackConfig
from components.config.types import RULE_ERROR

# --------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------


def _user_key(area: str, loc: tuple) -> str:
    path = ".".join(str(part) for part in loc)
    return f"{PROJECT}:{area}" + (f".{path}" if path else "")


def _allowed_from_pydantic(error: dict) -> str:
    kind = error["type"]
    if kind == "extra_forbidden":
        return "unknown key (a typo?); see docs/config-reference.md"
    if kind == "missing":
        return "required"
    if kind == RULE_ERROR:
        return error["msg"]      # a single-field rule of components/config/types.py, verbatim
    return error["msg"][0].lower() + error["msg"][1:]


def _parse_area(area: str, raw_value: Any, problems: list[Problem]) -> Optional[_Area]:
    """Parse one area. On shape errors the offending top-level fields are reported, dropped and
    the rest parsed again, so that rules spanning several keys still run on what is valid and a
    user sees every problem at once. Returns None when nothing usable is left."""
    model = AREAS[area]
    if isinstance(raw_value, str):
        try:
            raw_value = json.loads(raw_value)
        except json.JSONDecodeError:
            problems.append(Problem(f"{PROJECT}:{area}", raw_value, "must be an object"))
            return None
    if not isinstance(raw_value, dict):
        problems.append(Problem(f"{PROJECT}:{area}", raw_value, "must be an object"))
        return None
    # Stack files are YAML: lists arrive as lists; strict mode would refuse them for tuples.
    remaining = _lists_to_tuples(raw_value)
    reported: set[tuple] = set()
    while True:
        try:
            return model.model_validate(remaining)
        except ValidationError as err:
            dropped = False
            for e in err.errors():
                loc = tuple(e["loc"])
                if loc not in reported:
                    reported.add(loc)
                    # An unknown key's value is never echoed (a mistyped credential).
                    given = HIDDEN if e["type"] == "extra_forbidden" else _lookup(raw_value, loc)
                    problems.append(Problem(_user_key(area, loc), given,
                                            _allowed_from_pydantic(e)))
                if loc and loc[0] in remaining:
                    remaining = {k: v for k, v in remaining.items() if k != loc[0]}
                    dropped = True
            if not dropped:
                return None


def _lists_to_tuples(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_lists_to_tuples(v) for v in value)
    if isinstance(value, dict):
        return {k: _lists_to_tuples(v) for k, v in value.items()}
    return value


def load_stack_config(
    raw: Mapping[str, Any], secret_keys: set[str] | frozenset[str] = frozenset(), stack: str = "dev"
) -> StackConfig:
    """Validate a stack's whole config. ``raw`` maps full keys (``gke-grpo:gpu``,
    ``gcp:project``) to values as the Pulumi engine hands them over (objects as JSON strings
    or already parsed). Raises ``ConfigError`` listing every problem."""
    problems: list[Problem] = []

    for key in sorted(raw):
        namespace, _, name = key.partition(":")
        if namespace != PROJECT:
            continue
        if name not in AREAS and name not in SECRET_KEYS and name not in SCALAR_KEYS:
            known = sorted([*AREAS, *SECRET_KEYS, *SCALAR_KEYS])
            # Never echo an unknown key's value: it may be a mistyped credential (hf_token).
            problems.append(Problem(key, HIDDEN, "unknown key (a typo?); known keys: "
                                    + ", ".join(f"{PROJECT}:{k}" for k in known)))
    if "gcp:zone" in raw:
        problems.append(Problem("gcp:zone", raw["gcp:zone"],
                                f"not used: set the zone as {PROJECT}:cluster.zone"))

    project = raw.get("gcp:project", _ABSENT)
    region = raw.get("gcp:region", _ABSENT)
    if not isinstance(project, str) or not _PROJECT_ID.match(project):
        problems.append(Problem("gcp:project", project, "a GCP project id: 6-30 characters, "
                                "lowercase letters, digits and hyphens, starting with a letter"))
    if not isinstance(region, str) or not _REGION.match(region):
        problems.append(Problem("gcp:region", region, "a GCP region such as us-central1"))

    environment = raw.get(f"{PROJECT}:environment", _ABSENT)
    if environment not in ("dev", "prod"):
        problems.append(Problem(f"{PROJECT}:environment", environment,
                                'one of "dev", "prod" (prod protects data stores and the cluster)'))

    for name, required in SECRET_KEYS.items():
        key = f"{PROJECT}:{name}"
        if key not in raw:
            if required:
                problems.append(Problem(key, _ABSENT, f"required: pulumi config set --secret {key} <value>"))
        elif key not in secret_keys:
            # Never echo the value: it is a credential stored in plain text.
            problems.append(Problem(key, "(plain text, hidden)",
                                    f"must be a secret: pulumi config set --secret {key} <value>"))

    parsed: dict[str, Optional[_Area]] = {}
    for area in AREAS:
        key = f"{PROJECT}:{area}"
        if key in raw:
            parsed[area] = _parse_area(area, raw[key], problems)
        elif area in REQUIRED_AREAS:
            problems.append(Problem(key, _ABSENT, "required; see docs/config-reference.md"))
            parsed[area] = None
        else:
            parsed[area] = AREAS[area]()

    shape_keys = [p.key for p in problems]
    rule_problems: list[Problem] = []
    valid_region = region if isinstance(region, str) and _REGION.match(region) else None
    valid_project = project if isinstance(project, str) and _PROJECT_ID.match(project) else None
    _Rules(rule_problems, parsed, valid_region, valid_project).run()
    # A field that failed its shape check was dropped and defaulted: a rule about it would
    # report a value the user never gave.
    problems += [p for p in rule_problems if not any(
        p.key == k or p.key.startswith(k + ".") or k.startswith(p.key + ".") for k in shape_keys)]

    if problems:
        raise ConfigError(_hide_secret_values(problems, secret_keys))
    return StackConfig(
        stack=stack, project=project, region=region, environment=environment,
        has_wandb_key=f"{PROJECT}:wandbApiKey" in raw, **parsed,
    )


def _hide_secret_values(problems: list[Problem], secret_keys) -> list[Problem]:
    """Problems under a key set with --secret (decrypted for the program) never show a value."""
    secret = {k.replace(":config:", ":", 1) for k in secret_keys}
    return [Problem(p.key, HIDDEN, p.allowed)
            if p.given is not NOT_SHOWN and any(p.key == k or p.key.startswith((k + ".", k + "["))
                                               for k in secret) else p
            for p in problems]



def read_pulumi_config() -> tuple[dict[str, Any], set[str]]:
    """The whole config map of the running program and the keys that hold secrets.

    ``pulumi.Config`` only answers for keys one asks about; unknown-key detection needs the
    whole map, which the language host hands over either through ``set_all_config`` or the
    PULUMI_CONFIG environment variable (older CLIs).
    """
    from pulumi.runtime import config as runtime_config

    raw: dict[str, Any] = dict(runtime_config.get_config_env())
    raw.update(runtime_config.CONFIG.get())
    secret_keys = set(runtime_config.get_config_secret_keys_env())
    secret_keys.update(key for key in raw if runtime_config.is_config_secret(key))
    # Pulumi hands project keys over as "<project>:<key>"; old CLIs used "<project>:config:<key>".
    normalised = {key.replace(":config:", ":", 1): value for key, value in raw.items()}
    secret_keys = {key.replace(":config:", ":", 1) for key in secret_keys}
    return normalised, secret_keys
