"""The KubeRay CRDs are vendored for the pinned chart version and applied from files: nothing is
fetched from GitHub at `pulumi up`."""

from __future__ import annotations

import pytest
import yaml

from components.config import DEFAULT_KUBERAY_CHART_VERSION
from components.kuberay_crds import CRD_PLURALS, ROOT, crd_files, vendored_chart_versions
from tests.conftest import SHARED, skip_or_fail
from tools.preview import render_json

KINDS = {"rayclusters": "RayCluster", "raycronjobs": "RayCronJob", "rayjobs": "RayJob",
         "rayservices": "RayService"}


# The C loader when PyYAML has it: the four files are 4 MB of YAML.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _crds(version):
    return {path: yaml.load((ROOT / path).read_text(), Loader=_LOADER) for path in crd_files(version)}


def test_the_default_chart_version_is_vendored_whole():
    assert DEFAULT_KUBERAY_CHART_VERSION in vendored_chart_versions()
    crds = _crds(DEFAULT_KUBERAY_CHART_VERSION)
    assert len(crds) == len(CRD_PLURALS) == 4
    for path, crd in crds.items():
        plural = path.rsplit("ray.io_", 1)[1].removesuffix(".yaml")
        assert crd["apiVersion"] == "apiextensions.k8s.io/v1" and crd["kind"] == "CustomResourceDefinition"
        assert crd["metadata"]["name"] == f"{plural}.ray.io"
        assert crd["spec"]["group"] == "ray.io" and crd["spec"]["names"]["kind"] == KINDS[plural]
        assert any(v["name"] == "v1" and v["served"] and v["storage"] for v in crd["spec"]["versions"])


@pytest.mark.parametrize("plural", ["rayclusters", "rayjobs"])
def test_vendored_schema_is_the_one_the_tests_validate_against(plural):
    reference = SHARED / "schemas" / "kuberay-v1.7.0" / f"ray.io_{plural}.yaml"
    if not reference.exists():
        skip_or_fail(f"{reference} is absent (shared/ is not beside the project)")
    vendored = _crds("1.7.0")[f"data/kuberay-crds/v1.7.0/ray.io_{plural}.yaml"]
    expected = yaml.load(reference.read_text(), Loader=_LOADER)

    def schema(crd):
        [v1] = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
        return v1["schema"]["openAPIV3Schema"]
    assert schema(vendored) == schema(expected)


def test_an_unvendored_version_has_no_files():
    with pytest.raises(ValueError, match=r"no vendored KubeRay CRDs for chart 1.7.1"):
        crd_files("1.7.1")


def test_the_preview_names_no_url(prod_preview):
    [group] = [r for r in prod_preview.resources if r.type == "kubernetes:yaml/v2:ConfigGroup"]
    for path in group.inputs["files"]:
        assert not path.startswith(("http://", "https://")) and (ROOT / path).is_file()
    assert "raw.githubusercontent.com" not in render_json(prod_preview)
