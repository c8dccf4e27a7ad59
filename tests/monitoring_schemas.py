"""Monitoring objects validated against their publishers' own definitions, strictly.

- PodMonitoring / ClusterPodMonitoring (monitoring.googleapis.com/v1): the CRDs of
  GoogleCloudPlatform/prometheus-engine, vendored in data/prometheus-engine/<tag>/ (SOURCE.md
  there). As tests/crd_schemas.py does for KubeRay: the openAPIV3Schema is JSON Schema with
  Kubernetes extensions; unknown fields, which the API server prunes silently, are errors here.
  Of the CRD's CEL rules (`x-kubernetes-validations`, which jsonschema cannot run) the ones a
  scrape config can break are checked by hand: a duration's syntax, port != 0, timeout <= interval.
- Dashboard (Cloud Monitoring API v1): the API's discovery document, vendored in
  data/cloud-monitoring/monitoring.v1.json (SOURCE.md there), turned into a JSON Schema with
  additionalProperties false everywhere.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from tests.conftest import ROOT
from tests.crd_schemas import _strict

PROMETHEUS_ENGINE_TAG = "v0.17.2"
PROMETHEUS_ENGINE_CRDS = ROOT / "data" / "prometheus-engine" / PROMETHEUS_ENGINE_TAG
CLOUD_MONITORING_V1 = ROOT / "data" / "cloud-monitoring" / "monitoring.v1.json"

_CRD_FILES = {"PodMonitoring": "monitoring.googleapis.com_podmonitorings.yaml",
              "ClusterPodMonitoring": "monitoring.googleapis.com_clusterpodmonitorings.yaml"}

# A Go/Prometheus duration as the operator parses it (model.ParseDuration): "30s", "1m30s", "500ms".
_PROM_DURATION = re.compile(r"^(\d+y)?(\d+w)?(\d+d)?(\d+h)?(\d+m)?(\d+s)?(\d+ms)?$")
_UNIT_SECONDS = {"y": 365 * 86400, "w": 7 * 86400, "d": 86400, "h": 3600, "m": 60, "s": 1, "ms": 0.001}


def _duration_seconds(text: str) -> float | None:
    if not text or not _PROM_DURATION.match(text):
        return None
    return sum(int(number) * _UNIT_SECONDS[unit] for number, unit in re.findall(r"(\d+)(ms|[ywdhms])", text))


_CRD_FORMATS = jsonschema.FormatChecker(formats=())


@_CRD_FORMATS.checks("duration")
def _is_prometheus_duration(value: object) -> bool:
    return not isinstance(value, str) or _duration_seconds(value) is not None


@functools.cache
def _monitoring_crd_validator(kind: str) -> jsonschema.Validator:
    crd = yaml.safe_load((PROMETHEUS_ENGINE_CRDS / _CRD_FILES[kind]).read_text())
    [version] = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    schema = _strict(copy.deepcopy(version["schema"]["openAPIV3Schema"]))
    schema["properties"]["apiVersion"] = {"const": "monitoring.googleapis.com/v1"}
    schema["properties"]["kind"] = {"const": kind}
    schema["properties"]["metadata"] = {"type": "object"}
    schema["required"] = sorted({*schema.get("required", []), "apiVersion", "kind", "metadata", "spec"})
    return jsonschema.Draft7Validator(schema, format_checker=_CRD_FORMATS)


def _endpoint_rules(manifest: dict[str, Any]) -> list[str]:
    """The CRD's CEL rules on an endpoint that a config can break (prometheus-engine's
    ScrapeEndpoint): port is not 0, timeout is not longer than interval."""
    problems = []
    for index, endpoint in enumerate((manifest.get("spec") or {}).get("endpoints") or []):
        if endpoint.get("port") == 0:
            problems.append(f"spec.endpoints[{index}].port: Port is required (not 0)")
        interval = _duration_seconds(str(endpoint.get("interval", "")))
        timeout = _duration_seconds(str(endpoint.get("timeout", "")))
        if interval is not None and timeout is not None and timeout > interval:
            problems.append(f"spec.endpoints[{index}]: scrape timeout ({endpoint['timeout']}) must not be "
                            f"greater than scrape interval ({endpoint['interval']})")
    return problems


def validate_pod_monitoring(manifest: dict[str, Any]) -> None:
    """Raise jsonschema.ValidationError (with its path) when a PodMonitoring or
    ClusterPodMonitoring does not fit prometheus-engine's CRD (strict: unknown fields fail)."""
    kind = manifest.get("kind")
    if kind not in _CRD_FILES:
        raise jsonschema.ValidationError(f"kind {kind!r} is not one of {sorted(_CRD_FILES)}")
    errors = sorted(_monitoring_crd_validator(kind).iter_errors(manifest), key=lambda e: list(e.path))
    if errors:
        raise errors[0]
    problems = _endpoint_rules(manifest)
    if problems:
        raise jsonschema.ValidationError("; ".join(problems))


# ---- Cloud Monitoring (discovery documents) ------------------------------------------------------

# google-duration: "3.5s", "60s" (protobuf Duration's JSON form); google-datetime: RFC 3339.
_GOOGLE_DURATION = r"^-?\d+(\.\d{1,9})?s$"
_GOOGLE_DATETIME = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$"
_INT64 = r"^-?\d+$"


def _discovery_property(prop: dict[str, Any]) -> dict[str, Any]:
    """One discovery-document property (or items/additionalProperties) as JSON Schema."""
    if "$ref" in prop:
        return {"$ref": f"#/definitions/{prop['$ref']}"}
    kind, fmt = prop.get("type"), prop.get("format")
    out: dict[str, Any]
    if kind == "any" or kind is None:
        out = {}
    elif kind == "object":
        out = {"type": "object", "properties": {k: _discovery_property(v) for k, v in prop.get("properties", {}).items()},
               "additionalProperties": (_discovery_property(prop["additionalProperties"])
                                        if "additionalProperties" in prop else False)}
    elif kind == "array":
        out = {"type": "array", "items": _discovery_property(prop.get("items", {}))}
    elif kind == "string" and fmt in ("int64", "uint64"):
        # int64 travels as a JSON string in Google's APIs, which accept a number too.
        out = {"anyOf": [{"type": "integer"}, {"type": "string", "pattern": _INT64}]}
    elif kind == "string":
        out = {"type": "string"}
        if fmt == "google-duration":
            out["pattern"] = _GOOGLE_DURATION
        elif fmt == "google-datetime":
            out["pattern"] = _GOOGLE_DATETIME
    elif kind in ("integer", "number", "boolean"):
        out = {"type": kind}
    else:
        raise ValueError(f"discovery type {kind!r} is not handled")
    if "enum" in prop:
        out["enum"] = prop["enum"]
    return out


@functools.cache
def _discovery_validator(document: Path, root: str) -> jsonschema.Validator:
    schemas = json.loads(document.read_text())["schemas"]
    definitions: dict[str, Any] = {}
    pending = [root]
    while pending:                  # `root` and every schema it references, transitively
        name = pending.pop()
        if name in definitions:
            continue
        definitions[name] = _discovery_property(schemas[name])
        pending.extend(re.findall(r'"#/definitions/([^"]+)"', json.dumps(definitions[name])))
    return jsonschema.Draft7Validator({"definitions": definitions, "$ref": f"#/definitions/{root}"})


def validate_dashboard(dashboard_json: dict[str, Any]) -> None:
    """Raise jsonschema.ValidationError (with its path) when `dashboard_json` (the JSON of
    gcp.monitoring.Dashboard's dashboard_json, the API's camelCase field names) is not a Dashboard
    of Cloud Monitoring API v1 (strict: unknown fields fail)."""
    validator = _discovery_validator(CLOUD_MONITORING_V1, "Dashboard")
    errors = sorted(validator.iter_errors(dashboard_json), key=lambda e: list(e.absolute_path))
    if errors:
        raise errors[0]
    if not dashboard_json.get("displayName"):
        raise jsonschema.ValidationError("displayName is required (the API's `Required.`)")
