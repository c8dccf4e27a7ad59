"""Loading a stack's config: shape errors from pydantic, then the rules, all problems at once."""

from __future__ import annotations

import contextlib
import difflib
import json
import re
from collections.abc import Mapping
from typing import Any, NamedTuple

from pydantic import BaseModel, ValidationError

from components.config.keys import AREAS, REQUIRED_AREAS, SCALAR_KEYS, SECRET_KEYS
from components.config.models import (
    ClusterConfig,
    GpuConfig,
    JobConfig,
    KubeRayConfig,
    MonitoringConfig,
    NetworkConfig,
    StorageConfig,
    _Area,
)
from components.config.models.base import lists_to_tuples
from components.config.patterns import _PROJECT_ID, _REGION
from components.config.problems import (
    _ABSENT,
    HIDDEN,
    NOT_SHOWN,
    PROJECT,
    ConfigError,
    Problem,
    _lookup,
)
from components.config.rules import _AreaModel, _Rules, area_of
from components.config.stack import StackConfig
from components.config.types import ACCEPT_AS_GIVEN, RULE_ERROR

# --------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------


def _user_key(area: str, loc: tuple) -> str:
    """A location as a user writes it: ``gke-grpo:network.rdmaSubnetCidrs[3]``."""
    key = f"{PROJECT}:{area}"
    for part in loc:
        key += f"[{part}]" if isinstance(part, int) else f".{part}"
    return key


def _known_keys(model: type[BaseModel], loc: tuple) -> list[str]:
    """The camelCase keys the stack file may use where ``loc`` points (its parent object)."""
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        field = next((f for f in model.model_fields.values() if f.alias == part), None)
        inner = _model_of(field.annotation) if field is not None else None
        if inner is None:
            return []
        model = inner
    return [f.alias for f in model.model_fields.values() if f.alias]


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The model an annotation holds: the type itself, or inside Optional/tuple/list."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _model_of(arg)
        if found is not None:
            return found
    return None


def unknown_key_hint(key: str, known: list[str]) -> str:
    """'unknown key; did you mean provisioningModel?' — the closest known key, case aside."""
    by_lower = {k.lower(): k for k in known}
    close = difflib.get_close_matches(key.lower(), list(by_lower), n=1, cutoff=0.75)
    if close:
        return f"unknown key; did you mean {by_lower[close[0]]}? (docs/config-reference.md)"
    return "unknown key (a typo?); see docs/config-reference.md"


def _allowed_from_pydantic(error: Any, model: type[BaseModel]) -> str:
    kind = error["type"]
    if kind == "extra_forbidden":
        loc = tuple(error["loc"])
        return unknown_key_hint(str(loc[-1]), _known_keys(model, loc))
    if kind == "missing":
        return "required"
    if kind == RULE_ERROR:
        return error["msg"]      # a single-field rule of components/config/types.py, verbatim
    return error["msg"][0].lower() + error["msg"][1:]


def _drop_path(loc: tuple) -> tuple:
    """What is dropped for an error at ``loc``: the key holding it, or, inside a list, the whole
    list (dropping one item would shift the others and make a count rule report a wrong count)."""
    for i, part in enumerate(loc):
        if isinstance(part, int):
            return loc[:i]
    return loc


def _without(value: dict, path: tuple) -> dict | None:
    """``value`` with the key at ``path`` removed; None when there is none to remove."""
    head, rest = path[0], path[1:]
    if head not in value:
        return None
    if not rest:
        return {k: v for k, v in value.items() if k != head}
    inner = value[head]
    if not isinstance(inner, dict):
        return None
    smaller = _without(inner, rest)
    return None if smaller is None else {**value, head: smaller}


def _with_parsed(value: dict, path: tuple, item: Any) -> dict:
    head, rest = path[0], path[1:]
    if not rest:
        return {**value, head: item}
    return {**value, head: _with_parsed(value.get(head) or {}, rest, item)}


class _ParsedArea(NamedTuple):
    area: _Area | None
    refused: tuple[str, ...]     # user keys whose given value was not used


def _parse_area(area: str, raw_value: Any, problems: list[Problem]) -> _ParsedArea:
    """Parse one area; every problem pydantic finds is reported (the first pass finds them all).

    To let the rules spanning several keys still run on what is valid, a refused value is then
    dropped and the area parsed again: an optional key takes its default; a required one that
    only broke a single-field rule (components/config/types.py) is kept as given, with the rules
    accepting it (types.ACCEPT_AS_GIVEN); a required one of the wrong shape takes the object that
    holds it with it. The keys whose values were not used are returned, so that rules reading
    them are not reported (a rule about a default would report a value nobody gave)."""
    key = f"{PROJECT}:{area}"
    try:
        if isinstance(raw_value, str):
            # Not JSON, or a number past Python's 4300-digit limit: reported below, the value
            # given is not an object.
            with contextlib.suppress(ValueError):
                raw_value = json.loads(raw_value)
        if not isinstance(raw_value, dict):
            problems.append(Problem(key, raw_value, "must be an object"))
            return _ParsedArea(None, (key,))
        return _parse_object(area, raw_value, problems)
    except RecursionError:
        problems.append(Problem(key, HIDDEN, _TOO_DEEP))
        return _ParsedArea(None, (key,))


# No area nests more than three levels; the bound is Python's recursion limit, far beyond it.
_TOO_DEEP = "nested too deeply: no key of the stack config nests more than a few levels"


def _parse_object(area: str, raw_value: dict, problems: list[Problem]) -> _ParsedArea:
    model = AREAS[area]
    # Stack files are YAML: lists arrive as lists; strict mode would refuse them for tuples.
    given = lists_to_tuples(raw_value)
    remaining = given
    reported: set[tuple] = set()
    broke_a_rule: set[tuple] = set()     # paths dropped for a single-field rule only
    refused: set[tuple] = set()
    kept_as_given = False
    while True:
        try:
            parsed = model.model_validate(remaining, context={ACCEPT_AS_GIVEN: kept_as_given})
            return _ParsedArea(parsed, tuple(sorted(_user_key(area, path) for path in refused)))
        except ValidationError as err:
            changed = False
            for e in err.errors():
                loc = tuple(e["loc"])
                if loc not in reported:
                    reported.add(loc)
                    shown = _lookup(raw_value, loc)
                    # An unknown key's value is echoed only when neither it nor its name looks
                    # like a credential (a mistyped hfToken must not print the token).
                    if e["type"] == "extra_forbidden" and _may_hold_a_credential(str(loc[-1]), shown):
                        shown = HIDDEN
                    problems.append(Problem(_user_key(area, loc), shown, _allowed_from_pydantic(e, model)))
                path = _drop_path(loc)
                if e["type"] == "missing" and path in broke_a_rule:
                    # Required: put the value back; the rules accept it on the next parse.
                    remaining = _with_parsed(remaining, path, _lookup(given, path))
                    broke_a_rule.discard(path)
                    kept_as_given = changed = True
                    continue
                while path:
                    smaller = _without(remaining, path)
                    if smaller is not None:
                        remaining, changed = smaller, True
                        refused.add(path)
                        if e["type"] == RULE_ERROR and path == loc:
                            broke_a_rule.add(path)
                        break
                    path = path[:-1]     # already gone (required): drop what holds it
            if not changed:
                return _ParsedArea(None, (f"{PROJECT}:{area}",))


def load_stack_config(
    raw: Mapping[str, Any], secret_keys: set[str] | frozenset[str] = frozenset(), stack: str = "dev"
) -> StackConfig:
    """Validate a stack's whole config. ``raw`` maps full keys (``gke-grpo:gpu``,
    ``gcp:project``) to values as the Pulumi engine hands them over (objects as JSON strings
    or already parsed). Raises ``ConfigError`` listing every problem."""
    problems = _unused_key_problems(raw)

    project = raw.get("gcp:project", _ABSENT)
    region = raw.get("gcp:region", _ABSENT)
    if not isinstance(project, str) or not _PROJECT_ID.fullmatch(project):
        problems.append(Problem("gcp:project", project, "a GCP project id: 6-30 characters, "
                                "lowercase letters, digits and hyphens, starting with a letter"))
    if not isinstance(region, str) or not _REGION.fullmatch(region):
        problems.append(Problem("gcp:region", region, "a GCP region such as us-central1"))

    environment = raw.get(f"{PROJECT}:environment", _ABSENT)
    if environment not in ("dev", "prod"):
        problems.append(Problem(f"{PROJECT}:environment", environment,
                                'one of "dev", "prod" (prod protects the cluster from deletion)'))

    problems += _secret_problems(raw, secret_keys)

    parsed: dict[str, _Area | None] = {}
    refused: list[str] = []
    for area in AREAS:
        key = f"{PROJECT}:{area}"
        if key in raw:
            parsed[area], refused_keys = _parse_area(area, raw[key], problems)
            refused += refused_keys
        elif area in REQUIRED_AREAS:
            problems.append(Problem(key, _ABSENT, "required; see docs/config-reference.md"))
            parsed[area] = None
        else:
            parsed[area] = AREAS[area]()

    not_used = [p.key for p in problems] + refused
    rule_problems: list[Problem] = []
    valid_region = region if isinstance(region, str) and _REGION.fullmatch(region) else None
    valid_project = project if isinstance(project, str) and _PROJECT_ID.fullmatch(project) else None
    _Rules(rule_problems, parsed, valid_region, valid_project).run()
    # A refused value was dropped (and defaulted) or kept only to check its siblings: a rule
    # about it, or comparing another key with it, would report a value the user never gave.
    problems += [p for p in rule_problems if not _about_refused_values(p, not_used)]

    if problems:
        raise ConfigError(_hide_secret_values(problems, secret_keys))
    return StackConfig(
        stack=stack, project=project, region=region, environment=environment,
        has_wandb_key=f"{PROJECT}:wandbApiKey" in raw,
        cluster=_parsed(parsed, "cluster", ClusterConfig), gpu=_parsed(parsed, "gpu", GpuConfig),
        network=_parsed(parsed, "network", NetworkConfig),
        storage=_parsed(parsed, "storage", StorageConfig),
        kuberay=_parsed(parsed, "kuberay", KubeRayConfig), job=_parsed(parsed, "job", JobConfig),
        monitoring=_parsed(parsed, "monitoring", MonitoringConfig),
    )


def _unused_key_problems(raw: Mapping[str, Any]) -> list[Problem]:
    """Keys of the project that the program does not read, and gcp:zone (the zone is a cluster key)."""
    problems = []
    for key in sorted(raw):
        namespace, _, name = key.partition(":")
        if namespace != PROJECT:
            continue
        if name not in AREAS and name not in SECRET_KEYS and name not in SCALAR_KEYS:
            known = sorted([*AREAS, *SECRET_KEYS, *SCALAR_KEYS])
            value = raw[key]
            hint = unknown_key_hint(name, known)
            if "did you mean" in hint:
                hint = hint.replace("did you mean ", f"did you mean {PROJECT}:")
            else:
                hint = "unknown key (a typo?); known keys: " + ", ".join(f"{PROJECT}:{k}" for k in known)
            # Echoed only when neither the name nor the value looks like a credential (hf_token).
            problems.append(Problem(key, HIDDEN if _may_hold_a_credential(name, value) else value, hint))
    if "gcp:zone" in raw:
        problems.append(Problem("gcp:zone", raw["gcp:zone"],
                                f"not used: set the zone as {PROJECT}:cluster.zone"))
    return problems


def _secret_problems(raw: Mapping[str, Any], secret_keys: set[str] | frozenset[str]) -> list[Problem]:
    """A required secret that is missing, or a credential stored in plain text."""
    problems = []
    for name, required in SECRET_KEYS.items():
        key = f"{PROJECT}:{name}"
        if key not in raw:
            if required:
                problems.append(Problem(key, _ABSENT, f"required: pulumi config set --secret {key} <value>"))
        elif key not in secret_keys:
            # Never echo the value: it is a credential stored in plain text.
            problems.append(Problem(key, "(plain text, hidden)",
                                    f"must be stored as a secret (pulumi config set --secret {key} <value>)"))
    return problems


def _parsed(parsed: dict[str, _Area | None], name: str, model: type[_AreaModel]) -> _AreaModel:
    value = area_of(parsed, name, model)
    if value is None:    # impossible: an area that did not parse has a problem
        raise AssertionError(f"{PROJECT}:{name} did not parse")
    return value


def _inside(key: str, outer: str) -> bool:
    """``key`` is ``outer`` or lies inside it (``x.y.z`` in ``x.y``, ``x.list[2]`` in ``x.list``)."""
    return key == outer or key.startswith((outer + ".", outer + "["))


def _about_refused_values(problem: Problem, refused: list[str]) -> bool:
    """A rule problem that would describe a value nobody gave: its own key's value was refused
    (dropped and defaulted, or kept only to check its siblings), or a key it read was refused or
    holds a refused value. A problem about an object whose part was refused stands (``storage.gcs``
    "only with kind gcs" is true whatever its bucketName); a rule that judges the parts names
    them in ``reads``."""
    return any(_inside(problem.key, key) or any(_inside(read, key) or _inside(key, read) for read in problem.reads)
               for key in refused)


def _hide_secret_values(problems: list[Problem], secret_keys) -> list[Problem]:
    """Problems under a key set with --secret (decrypted for the program) never show a value,
    neither as the value given nor inside the message (a CIDR's "10.4.0.1/14 has host bits set",
    an RRULE's "BYDAY=... is not valid")."""
    secret = {k.replace(":config:", ":", 1) for k in secret_keys}
    return [Problem(p.key, HIDDEN, _without_parts_of(p.allowed, p.given), p.reads)
            if p.given is not NOT_SHOWN and any(_inside(p.key, k) for k in secret) else p
            for p in problems]


def _without_parts_of(text: str, value: Any) -> str:
    """``text`` with every part of ``value`` (each string or number in it, and each run of four
    or more letters, digits or underscores of those) replaced by "(hidden)"."""
    leaves: list[str] = []

    def walk(item: Any) -> None:
        if isinstance(item, dict):
            for inner in item.values():
                walk(inner)
        elif isinstance(item, (list, tuple)):
            for inner in item:
                walk(inner)
        elif isinstance(item, (str, int, float)) and not isinstance(item, bool):
            leaves.append(str(item))

    walk(value)
    parts = {leaf for leaf in leaves if len(leaf) >= 4}
    parts.update(run for leaf in leaves for run in re.findall(r"[A-Za-z0-9_]{4,}", leaf))
    for part in sorted(parts, key=len, reverse=True):
        text = text.replace(part, "(hidden)")
    return text


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


# Typos of these are hidden too: `hfTokn` is a mistyped credential even if no rule of
# jobs/contract/credentials.py recognises the misspelling.
_CREDENTIAL_LIKE = (*(k.lower() for k in SECRET_KEYS), "token", "secret", "password", "apikey", "passwd")


def _may_hold_a_credential(name: str, value: Any) -> bool:
    from jobs.contract.credentials import looks_like_secret_name, looks_like_secret_value

    if looks_like_secret_name(name) or difflib.get_close_matches(name.lower(), _CREDENTIAL_LIKE, n=1, cutoff=0.7):
        return True
    if isinstance(value, str) and value[:1] in "{[":
        with contextlib.suppress(ValueError, RecursionError):
            value = json.loads(value)        # the engine hands objects over as JSON text
    if isinstance(value, dict | list | tuple):
        return True          # an object's leaves are not checked one by one: hide it whole
    return looks_like_secret_value(value)
