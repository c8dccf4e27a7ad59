"""`gke-grpo:storage`: /data on Cloud Storage FUSE or Managed Lustre."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from components.config.models.base import _Area
from components.config.types import (
    BucketName,
    CpuQuantity,
    LustreFilesystem,
    LustreInstanceId,
    LustreThroughputTier,
    MetadataCacheTtlSeconds,
    Quantity,
    RetiredPeeringPrefixLength,
    SoftDeleteRetentionDays,
)


class GcsStorage(_Area):
    bucket_name: BucketName | None = Field(
        None,
        description="the checkpoint and data bucket",
        json_schema_extra={"defaultText": "`<cluster name>-<project>`"},
    )
    hierarchical_namespace: bool = Field(
        True,
        description="atomic directory renames for checkpoint writers",
    )
    # Default: "<cluster name>-<project>" (the tutorial's naming, unique per project).
    # Omitted: 0 (off) in dev, where rotated checkpoints would otherwise stay billed for 7
    # days after deletion; 7 in prod (StackConfig.soft_delete_retention_days).
    soft_delete_retention_days: SoftDeleteRetentionDays | None = Field(
        None,
        description="0 (off) or 7-90; see [docs/deploy.md](docs/deploy.md#4-soft-delete)",
        json_schema_extra={"defaultText": "dev: 0 (off), prod: 7"},
    )
    skip_bucket_access_check: bool = Field(
        False,
        description="true hides IAM mistakes until the first I/O",
    )
    file_cache_size_gib: int = Field(
        500,
        ge=0,
        description="gcsfuse file cache on the node's local SSD",
    )
    metadata_cache_ttl_seconds: MetadataCacheTtlSeconds = Field(
        600,
        description="gcsfuse metadata cache TTL (-1: never expire)",
    )
    # gcsfuse sidecar resources (Kubernetes quantities). Omitted: computed by SharedStorage
    # from the cluster mode and the file cache size ("0", unlimited, is Standard-only).
    sidecar_cpu_limit: CpuQuantity | None = Field(
        None,
        description="gcsfuse sidecar CPU limit",
        json_schema_extra={"defaultText": "computed"},
    )
    sidecar_memory_limit: Quantity | None = Field(
        None,
        description="gcsfuse sidecar memory limit",
        json_schema_extra={"defaultText": "computed"},
    )
    sidecar_ephemeral_storage_limit: Quantity | None = Field(
        None,
        description="must exceed the file cache",
        json_schema_extra={"defaultText": "computed"},
    )

class LustreStorage(_Area):
    # Default: "<cluster name>-lustre".
    instance_id: LustreInstanceId | None = Field(
        None,
        description="the Managed Lustre instance id",
        json_schema_extra={"defaultText": "`<cluster name>-lustre`"},
    )
    filesystem: LustreFilesystem = Field("lustrefs", description="1-8 letters or digits")
    capacity_gib: int = Field(
        18_000,
        description="checked against the tier's minimum, maximum and step",
    )
    throughput_tier: LustreThroughputTier = Field(500, description="MB/s per TiB: 125, 250, 500 or 1000")
    # Replaced by network.lustrePeeringCidr (its prefix length); refused when set.
    peering_prefix_length: RetiredPeeringPrefixLength | None = Field(
        None,
        description="refused: replaced by `network.lustrePeeringCidr`",
    )
    # True: the legacy LNet port 6988 on the cluster's Lustre CSI driver, the instance created
    # with gke_support_enabled, and the firewall opening 6988 - one choice, applied to all three.
    legacy_port: bool = Field(
        False,
        description="LNet port 6988 (cluster, instance and firewall together)",
    )

class StorageConfig(_Area):
    kind: Literal["gcs", "lustre"] = Field(description="`gcs` or `lustre`")
    gcs: GcsStorage | None = Field(
        None,
        description="Cloud Storage FUSE settings (only with `kind: gcs`)",
        json_schema_extra={"defaultText": "defaults"},
    )
    lustre: LustreStorage | None = Field(
        None,
        description="Managed Lustre settings (only with `kind: lustre`)",
        json_schema_extra={"defaultText": "defaults"},
    )
    # The data stores are protected in every stack: a change that would replace or delete the
    # bucket or the Lustre instance is refused before anything changes, unless this is true for
    # that one update (components/replacements.py; docs/storage.md "Replacing a data store").
    allow_data_loss: bool = Field(
        False,
        description=("true for ONE update that replaces or deletes the bucket or the Lustre "
                     "instance on purpose, with every object in it: lifts their protection; "
                     "remove it again afterwards ([docs/storage.md](docs/storage.md))"),
    )
