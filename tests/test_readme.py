"""README.md stays in step with the code: its config reference lists exactly the typed keys."""

from __future__ import annotations

import re
import typing

from pydantic import BaseModel

from components.config import AREAS, PROJECT, SCALAR_KEYS, SECRET_KEYS
from tests.conftest import ROOT


def _model_keys(model: type[BaseModel], prefix: str) -> set[str]:
    keys: set[str] = set()
    for name, field in model.model_fields.items():
        key = f"{prefix}.{field.alias or name}"
        keys.add(key)
        annotation = field.annotation
        candidates = [annotation, *typing.get_args(annotation)]
        for candidate in list(candidates):
            candidates += list(typing.get_args(candidate))
        nested = [c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)]
        if nested:
            is_list = typing.get_origin(annotation) is tuple or any(
                typing.get_origin(c) is tuple for c in typing.get_args(annotation))
            keys |= _model_keys(nested[0], key + ("[]" if is_list else ""))
    return keys


def typed_keys() -> set[str]:
    keys = {"gcp:project", "gcp:region"}
    keys |= {f"{PROJECT}:{k}" for k in [*SECRET_KEYS, *SCALAR_KEYS]}
    for area, model in AREAS.items():
        keys |= _model_keys(model, f"{PROJECT}:{area}")
    return keys


def readme_keys() -> set[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Config reference", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `([^`]+)` \|", section, flags=re.MULTILINE))


def test_config_reference_lists_exactly_the_typed_keys():
    documented, typed = readme_keys(), typed_keys()
    assert not typed - documented, f"undocumented keys: {sorted(typed - documented)}"
    assert not documented - typed, f"documented keys that do not exist: {sorted(documented - typed)}"


def test_readme_commands_exist_in_the_makefile():
    makefile = (ROOT / "Makefile").read_text()
    readme = (ROOT / "README.md").read_text()
    for target in re.findall(r"^make (\w[\w-]*)", readme, flags=re.MULTILINE):
        assert re.search(rf"^{target}:", makefile, flags=re.MULTILINE), target


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^make test$", ci, flags=re.MULTILINE)
