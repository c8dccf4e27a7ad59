"""The supported-versions table: every image pinned, every consumer in step with it."""

from __future__ import annotations

import re

import pytest

from jobs.plan.image_refs import image_reference_problem
from jobs.plan.versions import load_versions
from tests.conftest import ROOT
from tools.golden import golden_path


def test_no_floating_tag_in_the_table():
    table = load_versions()
    for row in table.images:
        assert image_reference_problem(row.image) is None, row.image
        assert row.sources.keys() >= row.confirmed.keys(), f"{row.id}: every fact needs a source"
        assert all("2026-" in source for source in row.sources.values()), f"{row.id}: sources need dates"
    for name, entry in table.system_images.items():
        if "image" in entry:
            assert image_reference_problem(entry["image"]) is None, name
        assert "read 2026-" in entry["source"]


@pytest.mark.parametrize("reference,problem", [
    ("verlai/verl:vllm011.latest", "floating"), ("fluent/fluent-bit:latest", "floating"),
    ("quay.io/kuberay/operator:nightly", "floating"), ("busybox", "no tag"),
    ("localhost:5000/image", "no tag"), ("nvcr.io/nvidia/nemo-rl:v0.5.0", None),
    ("gke.gcr.io/pause:3.8@sha256:880e63f9", None),
])
def test_floating_tags_are_recognised(reference, problem):
    found = image_reference_problem(reference)
    assert (found is None) if problem is None else (problem in found)


def test_ray_client_pin_is_the_table_s():
    requirements = (ROOT / "requirements-cli.txt").read_text()
    [pin] = re.findall(r"^ray\[default\]==(\S+)$", requirements, flags=re.MULTILINE)
    assert pin == load_versions().ray_client


def test_every_image_the_program_deploys_is_pinned():
    for stack in ("dev", "prod"):
        text = golden_path(stack).read_text()
        images = set(re.findall(r'"image": "([^"]+)"', text))
        assert images, stack
        for image in images:
            assert image_reference_problem(image) is None, f"{stack}: {image}"
        tags = set(re.findall(r'"tag": "([^"]+)"', text))
        assert "latest" not in tags and "nightly" not in tags


def test_the_program_reads_the_same_table():
    """components/versions.py re-exports the jobs/ reader: one table, one loader."""
    import components.versions as program_side
    import jobs.plan.versions as job_side

    assert program_side.load_versions is job_side.load_versions
    assert program_side.VERSIONS_FILE == job_side.VERSIONS_FILE
