"""The Ray texts the run driver classifies (jobs/head/failures.py) are in every Ray version a
supported image carries (data/versions.yaml: 2.49.2, 2.54.0, 2.55.1): each text searched in
that version's own files, as installed in its environment (./venv, .venv-ray-<version>): the GCS
server, the raylet and _raylet.so (where the C++ side writes them), ray/exceptions.py and the
generated protobuf module (the exception and enum names). A text Ray no longer writes would leave
its failure unclassified on that image."""

from __future__ import annotations

import functools
import re
import subprocess
from pathlib import Path

import pytest

from jobs.head.failures import (
    CREATION_TASK_PATTERNS,
    NODE_DEATH_PATTERNS,
    OOM_PATTERNS,
    WORKER_DEATH_PATTERNS,
)
from tests.conftest import skip_or_fail
from tools.kuberay_scenarios import ray_python, supported_ray_versions

FILES = ("_raylet.so", "core/src/ray/raylet/raylet", "core/src/ray/gcs/gcs_server", "exceptions.py",
         "core/generated/common_pb2.py")
# Texts of one wording, and the versions that write it (the others write another pattern's).
OTHER_VERSIONS_ONLY = {
    "the node it was running on is dead or unavailable": {"2.54.0", "2.55.1"},
    r"Task failed due to the node \(where this task was running\)": {"2.49.2"},
}
# What Ray itself writes of OOM_PATTERNS (the rest are PyTorch's).
RAY_OOM = tuple(p for p in OOM_PATTERNS if "CUDA" not in p.pattern and "torch" not in p.pattern)


def literal(pattern: re.Pattern) -> bytes:
    """The pattern's text as Ray writes it (the patterns are literals with word bounds and
    escaped parentheses)."""
    text = pattern.pattern.replace(r"\b", "").replace(r"\.", ".").replace(r"\(", "(").replace(r"\)", ")")
    assert not re.search(r"[\\\[\]*+?{}|^$]", text), pattern.pattern     # a plain literal
    return text.encode()


@functools.cache
def ray_files(version: str) -> bytes:
    python = ray_python(version)
    if python is None:
        skip_or_fail(f"no environment with Ray {version} (make setup installs .venv-ray-{version})")
    package = subprocess.run([python, "-c", "import os, ray; print(os.path.dirname(ray.__file__))"],
                             capture_output=True, text=True, timeout=120, check=True).stdout.strip()
    found = [Path(package) / name for name in FILES]
    assert all(path.is_file() for path in found), [str(p) for p in found if not p.is_file()]
    # Python sources split a message over adjacent literals ("... of an error"\n " raised in ...").
    return b"\n".join(re.sub(rb'"\s*\n\s*"', b"", path.read_bytes()) if path.suffix == ".py"
                      else path.read_bytes() for path in found)


@pytest.mark.parametrize("version", supported_ray_versions())
def test_every_classified_ray_text_is_in_the_versions_own_files(version):
    files = ray_files(version)
    texts = (*NODE_DEATH_PATTERNS, *WORKER_DEATH_PATTERNS, *CREATION_TASK_PATTERNS)
    missing = [p.pattern for p in texts if literal(p) not in files and p.pattern not in OTHER_VERSIONS_ONLY]
    assert missing == []
    # A text kept for another version's wording is in at least one supported version.
    for pattern, versions in OTHER_VERSIONS_ONLY.items():
        assert (literal(re.compile(pattern)) in files) is (version in versions), (pattern, version)
    # The memory monitor's sentence changed in 2.55 (jobs/head/failures.py): one of them is there.
    assert [p.pattern for p in RAY_OOM if literal(p) in files], version


def test_the_search_can_fail():
    assert literal(re.compile(r"\bNodeDiedError\b")) == b"NodeDiedError"
    with pytest.raises(AssertionError):
        literal(re.compile(r"a.*b"))
