"""The generated config reference (docs/config-reference.md) and the stack file's JSON schema
(docs/stack-config.schema.json) stay in step with the config models: both are what
`python -m tools.config_reference` writes, and the reference lists exactly the typed keys."""

from __future__ import annotations

import copy
import json
import re
import typing

import jsonschema
import pytest
import yaml
from pydantic import BaseModel

from components.config import AREAS, PROJECT, SCALAR_KEYS, SECRET_KEYS
from tests.conftest import ROOT
from tools import config_reference


def _model_keys(model: type[BaseModel], prefix: str) -> set[str]:
    # Walks the models independently of tools/config_reference.py, so a key the generator
    # skipped is caught here.
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


def reference_keys() -> list[str]:
    text = config_reference.REFERENCE_FILE.read_text()
    return re.findall(r"^\| `([^`]+)` \|", text, flags=re.MULTILINE)


def test_config_reference_is_what_the_generator_writes():
    assert config_reference.REFERENCE_FILE.read_text() == config_reference.reference_markdown(), (
        "docs/config-reference.md is stale: run python -m tools.config_reference")


def test_stack_schema_is_what_the_generator_writes():
    assert config_reference.SCHEMA_FILE.read_text() == config_reference.schema_text(), (
        "docs/stack-config.schema.json is stale: run python -m tools.config_reference")


def test_config_reference_lists_exactly_the_typed_keys():
    documented = reference_keys()
    assert len(documented) == len(set(documented)), "a key is listed twice"
    typed = typed_keys()
    assert not typed - set(documented), f"undocumented keys: {sorted(typed - set(documented))}"
    assert not set(documented) - typed, (
        f"documented keys that do not exist: {sorted(set(documented) - typed)}")


def test_every_documented_key_has_a_meaning():
    for key, default, meaning in config_reference.reference_rows():
        assert meaning.strip(), key
        assert default.strip(), key


def test_the_check_mode_reports_a_stale_file(tmp_path, monkeypatch, capsys):
    stale = tmp_path / "config-reference.md"
    stale.write_text("old\n")
    monkeypatch.setattr(config_reference, "REFERENCE_FILE", stale)
    monkeypatch.setattr(config_reference, "SCHEMA_FILE", tmp_path / "schema.json")
    monkeypatch.setattr(config_reference, "ROOT", tmp_path)
    assert config_reference.main(["--check"]) == 1
    assert stale.read_text() == "old\n"
    assert "config-reference.md" in capsys.readouterr().err
    assert config_reference.main([]) == 0
    assert config_reference.main(["--check"]) == 0


def _schema_errors(document: dict) -> list[str]:
    schema = json.loads(config_reference.SCHEMA_FILE.read_text())
    validator = jsonschema.Draft202012Validator(schema)
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(document)]


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_committed_stack_files_match_the_schema(stack):
    document = yaml.safe_load((ROOT / f"Pulumi.{stack}.yaml").read_text())
    # The stack files leave the secrets to `pulumi config set --secret`.
    assert _schema_errors(document) == []


@pytest.mark.parametrize("change,path", [
    (("gke-grpo:gpu", "nodess", 1), "gke-grpo:gpu"),               # a typo of a field
    (("gke-grpo:clustr", None, {"name": "x"}), "config"),         # a typo of an area
    (("gke-grpo:network", "rdmaMtu", 9000), "gke-grpo:network"),   # above the maximum
    (("gke-grpo:cluster", "mode", "hybrid"), "gke-grpo:cluster"),  # not an enumeration value
    (("gke-grpo:kuberay", "namespace", "Bad_NS"), "gke-grpo:kuberay"),  # a typed field's rule
])
def test_the_schema_flags_what_the_models_refuse(change, path):
    document = copy.deepcopy(yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text()))
    area, field, value = change
    if field is None:
        document["config"][area] = value
    else:
        document["config"][area][field] = value
    errors = _schema_errors(document)
    assert errors and any(path in error for error in errors), errors


def test_readme_commands_exist_in_the_makefile():
    makefile = (ROOT / "Makefile").read_text()
    readme = (ROOT / "README.md").read_text()
    for target in re.findall(r"^make (\w[\w-]*)", readme, flags=re.MULTILINE):
        assert re.search(rf"^{target}:", makefile, flags=re.MULTILINE), target


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^make test$", ci, flags=re.MULTILINE)


def test_make_help_lists_every_target_with_its_purpose():
    import shutil
    import subprocess

    from tests.conftest import ROOT

    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    makefile = (ROOT / "Makefile").read_text()
    [phony] = re.findall(r"^\.PHONY: (.+)$", makefile, flags=re.MULTILINE)
    done = subprocess.run(["make", "-s", "--no-print-directory", "help"], cwd=ROOT, capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    listed = {line.split()[1]: line for line in done.stdout.splitlines() if line.startswith("  make ")}
    assert set(listed) == set(phony.split())
    assert all(len(line.split(None, 2)) == 3 for line in listed.values())   # each says what it does
    assert "make cli" in (ROOT / "README.md").read_text() and "make demo" in (ROOT / "README.md").read_text()
