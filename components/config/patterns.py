"""Name patterns, Kubernetes quantities and GKE version comparison: pure functions."""

from __future__ import annotations

import re

_LUSTRE_FILESYSTEM = re.compile(r"^[A-Za-z][A-Za-z0-9]{0,7}$")

# GCP resource names (networks, subnets, firewalls, addresses, Lustre instances): RFC 1035.
_RFC1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_PROJECT_ID = re.compile(r"^[a-z][-a-z0-9]{4,28}[a-z0-9]$")
_REGION = re.compile(r"^[a-z]+-[a-z]+[0-9]+$")
_ZONE = re.compile(r"^([a-z]+-[a-z]+[0-9]+)-[a-z]$")
_BUCKET = re.compile(r"^[a-z0-9][-a-z0-9_.]{1,61}[a-z0-9]$")
# Digits bounded: int() of an unbounded run of digits raises (Python's 4300-digit limit).
_GKE_VERSION = re.compile(r"^(\d{1,4})\.(\d{1,4})(?:\.(\d{1,4})(?:-gke\.(\d{1,12}))?)?$")
_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")


# At most 15 digits before and 9 after the point: float() of a longer number is inf, or
# rounds, and no sidecar limit needs more.
_QUANTITY = re.compile(r"^([0-9]{1,15}(?:\.[0-9]{1,9})?)(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$")
_QUANTITY_FACTORS = {
    None: 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
}


_CPU_QUANTITY = re.compile(r"^[0-9]{1,15}(\.[0-9]{1,9})?m?$")


def cpu_cores(quantity: str) -> float:
    """A Kubernetes CPU quantity ("8", "500m") in cores."""
    if not _CPU_QUANTITY.fullmatch(quantity.strip()):
        raise ValueError(f"{quantity!r} is not a Kubernetes CPU quantity such as 8 or 500m")
    quantity = quantity.strip()
    return float(quantity[:-1]) / 1000 if quantity.endswith("m") else float(quantity)


def quantity_bytes(quantity: str, key: str = "quantity") -> int:
    """A Kubernetes memory/storage quantity ("32Gi", "64G", "0") in bytes."""
    match = _QUANTITY.fullmatch(quantity.strip())
    if not match:
        raise ValueError(f"{key}: {quantity!r} is not a Kubernetes quantity such as 32Gi")
    return int(float(match.group(1)) * _QUANTITY_FACTORS[match.group(2)])



def _version_tuple(version: str) -> tuple[int, int, int, int] | None:
    match = _GKE_VERSION.fullmatch(version)
    if not match:
        return None
    major, minor, patch, gke = (int(part) if part is not None else 0 for part in match.groups())
    return major, minor, patch, gke


def version_at_least(version: str, minimum: str) -> bool:
    """True when every GKE version matching ``version`` (possibly a prefix such as "1.33")
    is at least ``minimum``."""
    have, need = _version_tuple(version), _version_tuple(minimum)
    if have is None or need is None:
        raise ValueError(f"not a GKE version: {version if have is None else minimum!r}")
    return have >= need

