"""Kubernetes objects as the program registers them, validated the way the API server would.

``validate_strict`` checks a manifest with kubernetes-validate in strict mode (unknown fields
are errors) against the schema of the cluster's Kubernetes minor. kubernetes-validate bundles
one schema set per minor (1.25 ... 1.37 in 1.37.0); a newer cluster minor than the newest
bundled is validated against the newest, and the version actually used is returned so a test
can say so.
"""

from __future__ import annotations

import re
from typing import Any

import kubernetes_validate
from kubernetes_validate import utils as kv_utils
from packaging.version import Version

_MINOR = re.compile(r"^v?(\d+)\.(\d+)(?:\..*)?$")


def schema_version(kubernetes_minor: str) -> str:
    """The newest bundled schema version not newer than ``kubernetes_minor`` ("1.34" ->
    "1.34.0"). Compared numerically and passed as an exact bundled version: the library
    itself compares "major.minor" strings, which would misorder e.g. 1.4 and 1.37."""
    match = _MINOR.match(kubernetes_minor.strip())
    if not match:
        raise ValueError(f"{kubernetes_minor!r} is not a Kubernetes version such as 1.34")
    wanted = Version(f"{match.group(1)}.{match.group(2)}")
    bundled = sorted({Version(v) for v in kv_utils.all_versions()})
    candidates = [v for v in bundled if (v.major, v.minor) <= (wanted.major, wanted.minor)]
    if not candidates:
        raise ValueError(f"kubernetes-validate {kv_utils.__version__} has no schema for "
                         f"Kubernetes {kubernetes_minor} or older (oldest: {bundled[0]})")
    return str(candidates[-1])


def validate_strict(manifest: dict[str, Any], kubernetes_minor: str) -> str:
    """Validate ``manifest`` in strict mode for ``kubernetes_minor``; return the schema version
    used. Raises ``kubernetes_validate.ValidationError`` (with the failing path) when invalid."""
    if "apiVersion" not in manifest or "kind" not in manifest:
        raise ValueError("manifest needs apiVersion and kind (see manifest_from_registration)")
    return kubernetes_validate.validate(manifest, schema_version(kubernetes_minor), strict=True)
