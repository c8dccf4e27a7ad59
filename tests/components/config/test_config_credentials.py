"""Every free-text key of the stack config refuses a credential-shaped value, naming the key and
the kind of credential, never the value (components/config/types.py credential_problem: the run
plan's rule, jobs/contract/credentials.py). One case per key, found by walking the area models,
so a new string key is covered the day it is added."""

from __future__ import annotations

import typing
from typing import Any

import pytest
from pydantic import BaseModel

from components.config import ConfigError, load_stack_config
from components.config.keys import AREAS
from components.config.models.base import _OWN_CREDENTIAL_RULE
from components.config.types import credential_problem
from jobs.contract.credentials import secret_value_kind
from tests.conftest import stack_config

TOKEN = "hf_" + "PastedByMistake0123456789abcdefXYZ"
CASES_OF_OTHER_KINDS = ["sk-" + "proj-" + "a" * 24, "ghp_" + "b" * 36, "AKIA" + "C" * 16,
                        "api_key=" + "literal-value-1"]


def _holds_text(annotation: Any) -> bool:
    if annotation is str:
        return True
    if typing.get_origin(annotation) is typing.Literal:
        return all(isinstance(v, str) for v in typing.get_args(annotation))
    return any(_holds_text(arg) for arg in typing.get_args(annotation))


def _model_in(annotation: Any) -> tuple[type[BaseModel] | None, bool]:
    """The model an annotation holds, and whether inside a tuple (a list in the stack file)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    for arg in typing.get_args(annotation):
        model, listed = _model_in(arg)
        if model is not None:
            return model, listed or typing.get_origin(annotation) is tuple
    return None, False


def _text_keys(model: type[BaseModel], prefix: str) -> list[tuple[str, bool]]:
    """(dotted path, is a list of strings) of every free-text field under ``model``."""
    found = []
    for name, field in model.model_fields.items():
        if name in _OWN_CREDENTIAL_RULE:
            continue
        inner, listed = _model_in(field.annotation)
        path = f"{prefix}{field.alias}"
        if inner is not None:
            found += _text_keys(inner, f"{path}[0]." if listed else f"{path}.")
        elif _holds_text(field.annotation):
            found.append((path, typing.get_origin(field.annotation) is tuple))
    return found


TEXT_KEYS = [(area, path, listed) for area, model in AREAS.items() for path, listed in _text_keys(model, "")]


def _with_value(area: str, path: str, value: Any) -> dict[str, Any]:
    """The change that puts ``value`` at ``path`` (a list of objects gets one object)."""
    if "[0]." in path:
        outer, inner = path.split("[0].", 1)
        obj: dict[str, Any] = {}
        target = obj
        parts = inner.split(".")
        for part in parts[:-1]:
            target = target.setdefault(part, {})
        target[parts[-1]] = value
        return {f"gke-grpo:{area}.{outer}": [obj]}
    return {f"gke-grpo:{area}.{path}": value}


def test_the_walk_finds_the_keys_of_the_issue():
    keys = {f"{area}.{path}" for area, path, _ in TEXT_KEYS}
    assert {"job.export.hubRepo", "job.experimentName", "job.model", "cluster.name",
            "gpu.capacity[0].name", "cluster.masterAuthorizedNetworks[0].displayName",
            "storage.gcs.bucketName", "kuberay.image", "network.rdmaSubnetCidrs"} <= keys
    assert len(keys) >= 40


@pytest.mark.parametrize("area,path,listed", TEXT_KEYS, ids=[f"{a}.{p}" for a, p, _ in TEXT_KEYS])
def test_a_credential_in_a_free_text_key_is_refused_and_not_echoed(area, path, listed):
    stack = "prod" if area == "storage" and path.startswith("lustre") else "dev"
    value = f"me/{TOKEN}"
    raw, secrets = stack_config(stack, _with_value(area, path, [value] if listed else value))
    with pytest.raises(ConfigError) as err:
        load_stack_config(raw, secrets, stack)
    key = f"gke-grpo:{area}.{path}"
    mine = [p for p in err.value.problems if p.key == key]
    assert mine and "a Hugging Face token (hf_...)" in mine[0].allowed, str(err.value)
    text = str(err.value)
    assert TOKEN not in text and TOKEN[:12] not in text and "me/" not in text.split(key, 1)[1].split("\n", maxsplit=1)[0]


@pytest.mark.parametrize("value", CASES_OF_OTHER_KINDS)
def test_the_rule_is_the_run_plan_s(value):
    assert credential_problem(value) is not None and secret_value_kind(value) is not None
    assert secret_value_kind(value) in (credential_problem(value) or "")
    assert credential_problem(("ok", value)) == credential_problem(value)
    assert credential_problem("Qwen/Qwen2.5-7B-Instruct") is None and credential_problem(12) is None


@pytest.mark.parametrize("key", ["gcp:project", "gcp:region", "gke-grpo:environment"])
def test_a_credential_in_a_top_level_key_is_not_echoed(key):
    raw, secrets = stack_config("dev", {key: TOKEN})
    with pytest.raises(ConfigError) as err:
        load_stack_config(raw, secrets, "dev")
    assert key in str(err.value) and TOKEN not in str(err.value) and "(value hidden)" in str(err.value)
