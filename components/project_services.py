"""ProjectServices: the Google APIs this stack uses as resources, enabled as resources.

A fresh project has almost nothing enabled: without these the first network, cluster or bucket
fails with "API has not been used in project". Every component that calls an API depends on
these. `disable_on_destroy=False`: destroying one stack must never turn an API off for
everything else in the project (pulumi-gcp 10.2.0 projects.Service docstring: disabling can
break other resources that use it).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from components.config import StackConfig

# API -> why the stack needs it.
BASE_SERVICES = {
    "compute.googleapis.com": "VPCs, subnets, firewalls, Cloud Router and NAT, GPU VMs",
    "container.googleapis.com": "the GKE cluster and its node pools",
    "iam.googleapis.com": "the nodes' service account",
    # organizations.get_project (the project number in the Workload Identity principal) and
    # project-level IAM grants go through the Resource Manager API.
    "cloudresourcemanager.googleapis.com": "the project-number lookup and project IAM grants",
    "monitoring.googleapis.com": "the Cloud Monitoring dashboard and alert policies",
}
STORAGE_SERVICES = {
    "gcs": {"storage.googleapis.com": "the shared Cloud Storage bucket"},
    "lustre": {
        "lustre.googleapis.com": "the Managed Lustre instance",
        "servicenetworking.googleapis.com": "private services access for Lustre",
    },
}


def required_services(storage_kind: str) -> dict[str, str]:
    """Every API the stack's resources and invokes call, with the reason."""
    return {**BASE_SERVICES, **STORAGE_SERVICES[storage_kind]}


@dataclass(frozen=True)
class ProjectServicesArgs:
    project: str
    storage_kind: str    # "gcs" or "lustre": which storage APIs to enable


def project_services_args(config: StackConfig) -> ProjectServicesArgs:
    return ProjectServicesArgs(project=config.project, storage_kind=config.storage.kind)


class ProjectServices(pulumi.ComponentResource):
    services: list[gcp.projects.Service]
    by_api: dict[str, gcp.projects.Service]

    def __init__(self, name: str, args: ProjectServicesArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gke-grpo:components:ProjectServices", name, None, opts)
        self.by_api: dict[str, gcp.projects.Service] = {
            api: gcp.projects.Service(
                f"{name}-{api.split('.')[0]}",
                project=args.project,
                service=api,
                disable_on_destroy=False,
                # Services that depend on this one stay enabled too.
                disable_dependent_services=False,
                opts=pulumi.ResourceOptions(parent=self),
            )
            for api in sorted(required_services(args.storage_kind))
        }
        self.services = list(self.by_api.values())
        self.register_outputs({"services": [s.service for s in self.services]})
