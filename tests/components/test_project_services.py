"""ProjectServices: a fresh project gets every API the stack calls, and nothing that calls an
API is created before it."""

from __future__ import annotations

import pytest

from components.config import load_stack_config
from components.project_services import required_services
from tests.conftest import preview_with, stack_config

P = "gke-grpo:"
SERVICE = "gcp:projects/service:Service"
BASE = {"compute.googleapis.com", "container.googleapis.com", "iam.googleapis.com",
        "cloudresourcemanager.googleapis.com", "monitoring.googleapis.com"}


@pytest.mark.parametrize("stack,extra", [
    ("dev", {"storage.googleapis.com"}),
    ("prod", {"lustre.googleapis.com", "servicenetworking.googleapis.com"}),
])
def test_every_api_the_stack_uses_is_enabled_and_never_disabled(stack, extra, request):
    result = request.getfixturevalue(f"{stack}_preview")
    services = result.by_type(SERVICE)
    assert {s.inputs["service"] for s in services} == BASE | extra
    assert set(required_services(load_stack_config(*stack_config(stack)).storage.kind)) == BASE | extra
    for service in services:
        # Destroying one stack must never turn an API off for the rest of the project.
        assert service.inputs["disableOnDestroy"] is False
        assert service.inputs["project"] == f"my-grpo-{stack}"


def test_lustre_on_the_dev_stack_enables_lustre_not_storage():
    result = preview_with("dev", {P + "storage": {"kind": "lustre"}})
    apis = {s.inputs["service"] for s in result.by_type(SERVICE)}
    assert {"lustre.googleapis.com", "servicenetworking.googleapis.com"} <= apis
    assert "storage.googleapis.com" not in apis


def test_everything_that_needs_an_api_waits_for_the_apis(stack_preview):
    services = {s.urn for s in stack_preview.by_type(SERVICE)}
    by_urn = {r.urn: r for r in stack_preview.resources}

    def waits_for_all_apis(resource, seen=()) -> bool:
        if services <= set(resource.dependencies):
            return True
        return any(waits_for_all_apis(by_urn[d], (*seen, resource.urn))
                   for d in resource.dependencies if d in by_urn and d not in seen)

    checked = 0
    for resource in stack_preview.resources:
        if resource.custom and resource.type.startswith("gcp:") and resource.type != SERVICE:
            assert waits_for_all_apis(resource), resource.name
            checked += 1
    assert checked >= 15
    # The roots call an API directly: they name every service among their own dependencies.
    for type_ in ("gcp:compute/network:Network", "gcp:container/cluster:Cluster",
                  "gcp:serviceaccount/account:Account"):
        for resource in stack_preview.by_type(type_):
            assert services <= set(resource.dependencies), resource.name


def test_built_from_its_own_args_alone():
    from components.project_services import ProjectServices, ProjectServicesArgs
    from tests.components.harness import build

    built = build(lambda: ProjectServices("apis", ProjectServicesArgs(project="p-1", storage_kind="lustre")))
    services = built.of_type(SERVICE)
    assert {s.inputs["service"] for s in services} == BASE | {"lustre.googleapis.com",
                                                             "servicenetworking.googleapis.com"}
    assert {s.inputs["project"] for s in services} == {"p-1"}
    assert len(built.value.services) == len(services)
