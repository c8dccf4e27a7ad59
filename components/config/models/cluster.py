"""`gke-grpo:cluster`: the GKE cluster, its control-plane access, maintenance and the head's pool."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from components.config.facts import DEFAULT_GKE_MINOR
from components.config.models.base import _Area
from components.config.types import (
    AuthorizedCidr,
    ClusterName,
    ExclusionTime,
    GkeVersion,
    MaintenanceExclusionName,
    Recurrence,
    WindowTime,
    Zone,
)


class MaintenanceWindow(_Area):
    start_time: WindowTime = Field("2025-01-04T02:00:00Z", description="RFC 3339")
    end_time: WindowTime = Field("2025-01-04T10:00:00Z", description="RFC 3339")
    recurrence: Recurrence = Field("FREQ=WEEKLY;BYDAY=SA,SU", description="RFC 5545 RRULE")

class MaintenanceExclusion(_Area):
    name: MaintenanceExclusionName = Field(description="exclusion name")
    start_time: ExclusionTime = Field(description="RFC 3339")
    end_time: ExclusionTime = Field(description="RFC 3339")
    scope: Literal["NO_UPGRADES", "NO_MINOR_UPGRADES", "NO_MINOR_OR_NODE_UPGRADES"] = Field(
        "NO_MINOR_OR_NODE_UPGRADES",
        description="or `NO_UPGRADES`, `NO_MINOR_UPGRADES`",
    )

class HeadPool(_Area):
    """Standard clusters: the non-Spot CPU node pool that hosts the Ray head."""

    machine_type: str = Field(
        "c2-standard-16",
        description="the head pool's predefined machine type; the head's requests must fit it",
    )
    min_nodes: int = Field(1, ge=1, description="autoscaling minimum of the head pool")
    max_nodes: int = Field(
        3,
        ge=1,
        description="autoscaling maximum of the head pool (at least `minNodes`)",
    )
    disk_size_gb: int = Field(
        200,
        ge=50,
        le=65536,
        description="boot disk of the head pool's nodes, GB (50-65536)",
    )

class AuthorizedNetwork(_Area):
    cidr_block: AuthorizedCidr = Field(description="an IPv4 CIDR allowed to reach the control plane")
    display_name: str = Field(description="a label for it")

class ClusterConfig(_Area):
    name: ClusterName = Field(description="GKE cluster name (1-40 chars); every GCP name derives from it")
    mode: Literal["autopilot", "standard"] = Field(description="`autopilot` or `standard`")
    zone: Zone = Field(
        description="zone of the GPU nodes (and the RoCE profile); must lie in `gcp:region`",
    )
    release_channel: Literal["RAPID", "REGULAR", "STABLE"] = Field(
        "REGULAR",
        description="`RAPID`, `REGULAR` or `STABLE`",
    )
    # A GKE version or version prefix ("1.35", "1.35.1-gke.1396000") passed as
    # min_master_version; also decides the Kubernetes minor that manifests are validated for.
    min_master_version: GkeVersion = Field(
        DEFAULT_GKE_MINOR,
        description=("GKE version or prefix; checked against the GPU, flex-start and Lustre "
                     "minimums"),
    )
    # How kubectl, Pulumi and reviewers reach the control plane (docs/deploy.md): "dns" = the
    # DNS-based endpoint, authorized by IAM (container.clusters.connect), IP endpoints off;
    # "authorizedNetworks" = the IP endpoint, open only to masterAuthorizedNetworks.
    control_plane_access: Literal["dns", "authorizedNetworks"] = Field(
        "dns",
        description=("`dns` (DNS-based endpoint, IAM-authorized; IP endpoint private) or "
                     "`authorizedNetworks` (IP endpoint open to `masterAuthorizedNetworks` only); "
                     "[docs/deploy.md](docs/deploy.md)"),
    )
    master_authorized_networks: tuple[AuthorizedNetwork, ...] = Field(
        (),
        description=("required with `authorizedNetworks`, refused with `dns`; together at most "
                     "65,536 public IPv4 addresses (a /16; data/config-limits.yaml)"),
    )
    maintenance_window: MaintenanceWindow = Field(
        MaintenanceWindow(),
        description="the recurring window upgrades may use",
        json_schema_extra={"defaultText": "weekends"},
    )
    maintenance_exclusions: tuple[MaintenanceExclusion, ...] = Field(
        (),
        description="list of exclusions covering long runs",
    )
    head_pool: HeadPool | None = Field(
        None,
        description="the Ray head's non-Spot CPU pool; refused on Autopilot",
        json_schema_extra={"defaultText": "Standard: always created"},
    )
    # Omitted: on in prod, off in dev. Turn it off (and `pulumi up`) before destroying prod.
    deletion_protection: bool | None = Field(
        None,
        description="GKE deletion protection",
        json_schema_extra={"defaultText": "prod: true, dev: false"},
    )
