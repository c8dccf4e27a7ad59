"""Custom resources validated against the KubeRay CRD schemas in ../shared/schemas.

The CRDs' openAPIV3Schema is JSON Schema with Kubernetes extensions. The API server prunes
unknown fields silently; here they are errors (as kubernetes-validate's strict mode), except
under `x-kubernetes-preserve-unknown-fields`.
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from tests.conftest import SHARED, skip_or_fail

SCHEMA_DIR = SHARED / "schemas" / "kuberay-v1.7.0"


def _strict(schema: Any) -> Any:
    if isinstance(schema, dict):
        schema = {k: _strict(v) for k, v in schema.items()}
        if "properties" in schema and "additionalProperties" not in schema \
                and not schema.get("x-kubernetes-preserve-unknown-fields"):
            schema["additionalProperties"] = False
        return schema
    if isinstance(schema, list):
        return [_strict(item) for item in schema]
    return schema


@functools.cache
def _validator(file_name: str) -> jsonschema.Validator:
    path = SCHEMA_DIR / file_name
    if not path.exists():
        skip_or_fail(f"the KubeRay CRD schema {path} is absent (shared/ is not beside the project)")
    crd = yaml.safe_load(path.read_text())
    [version] = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    schema = _strict(copy.deepcopy(version["schema"]["openAPIV3Schema"]))
    # apiVersion/kind/metadata are the API server's business; the spec is what we check.
    schema["properties"]["metadata"] = {"type": "object"}
    return jsonschema.Draft7Validator(schema)


def validate_custom_resource(manifest: dict[str, Any]) -> None:
    """Raise jsonschema.ValidationError (with its path) when `manifest` does not fit its CRD."""
    file_name = {"RayCluster": "ray.io_rayclusters.yaml", "RayJob": "ray.io_rayjobs.yaml"}[manifest["kind"]]
    errors = sorted(_validator(file_name).iter_errors(manifest), key=lambda e: list(e.path))
    if errors:
        raise errors[0]


def schema_path(kind: str) -> Path:
    return SCHEMA_DIR / {"RayCluster": "ray.io_rayclusters.yaml", "RayJob": "ray.io_rayjobs.yaml"}[kind]
