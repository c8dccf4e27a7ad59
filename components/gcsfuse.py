"""Cloud Storage FUSE for the shared volume: the gcsfuse sidecar's limits and annotations and
the PersistentVolume's mount options, as pure functions of the storage config. Used by
SharedStorage (components/storage.py) and by the config rules that size the GPU worker.

Facts relied on, all looked up 2026-12-01 (collected in the project's storage research notes):
  [PERF]   docs.cloud.google.com/kubernetes-engine/docs/how-to/cloud-storage-fuse-csi-driver-perf
           (page "Last updated 2026-04-10")
  [PARAMS] GoogleCloudPlatform/gcsfuse cfg/params.yaml (defaults, machine-based optimizations)
  [TRBL]   GoogleCloudPlatform/gcs-fuse-csi-driver docs/troubleshooting.md (sidecar "0" values)
  [WHCFG]  GoogleCloudPlatform/gcs-fuse-csi-driver pkg/webhook/config.go (sidecar annotations)
  [REL]    GoogleCloudPlatform/gcs-fuse-csi-driver docs/releases.md (feature -> GKE version)
"""

from __future__ import annotations

from components.config import GcsStorage, quantity_bytes, version_at_least
from components.config.sidecar import SidecarLimits  # with the config: its rules size pods with them

# --------------------------------------------------------------------------------------------
# Cloud Storage FUSE
# --------------------------------------------------------------------------------------------

GCSFUSE_DRIVER = "gcsfuse.csi.storage.gke.io"
BUCKET_ROLE = "roles/storage.objectUser"
# Cloud Storage has no capacity: Kubernetes requires the field on a PV and checks only that the
# claim asks for no more. Nominal, and the same on PV and PVC.
GCS_NOMINAL_CAPACITY = "1Ti"

# Streaming writes buffer 32 MiB blocks in the sidecar's memory ([PARAMS] write.block-size-mb).
WRITE_BLOCK_MIB = 32
# GKE's own choice for a3-ultragpu-8g / a4-highgpu-8g ("high-performance" machine group,
# [PARAMS] write.global-max-blocks), used when the sidecar's memory is unlimited.
UNLIMITED_MEMORY_WRITE_BLOCKS = 1600
# Bounded metadata caches: the stat and type caches live in the sidecar's memory, which is
# capped on Autopilot (-1, "unlimited", is how the sidecar OOMs). 1024/128 MiB are GKE's
# machine-based values for A3/A4 ([PARAMS]); 1024 MiB holds ~630,000 entries of ~1,688 bytes.
STAT_CACHE_MIB = 1024
TYPE_CACHE_MIB = 128
# HNS-less buckets: a directory rename copies every object below it; NeMo RL renames
# tmp_step_N -> step_N. 200000 is the value of the aiml-checkpointing profile ([PARAMS]).
RENAME_DIR_LIMIT = 200_000
# Kernel read-ahead for the FUSE mount, as in Google's inference recipe [PERF].
READ_AHEAD_KB = 1024
# Minimum GKE versions of the options below ([REL], [PERF]): older nodes refuse them.
STREAMING_WRITES_MIN_GKE = "1.32.1-gke.1753001"
READ_AHEAD_MIN_GKE = "1.32.2-gke.1297001"

def gcsfuse_pod_annotations(limits: SidecarLimits) -> dict[str, str]:
    # Exact keys from the sidecar injection webhook [WHCFG]; they belong on the pod template.
    return {
        "gke-gcsfuse/volumes": "true",
        "gke-gcsfuse/cpu-limit": limits.cpu,
        "gke-gcsfuse/memory-limit": limits.memory,
        "gke-gcsfuse/ephemeral-storage-limit": limits.ephemeral_storage,
    }


def write_global_max_blocks(memory_limit: str) -> int:
    """Streaming-write blocks the sidecar may hold: half of a finite memory limit (the rest is
    for the metadata caches and download buffers), or GKE's A3/A4 value when unlimited."""
    limit = quantity_bytes(memory_limit, "gke-grpo:storage.gcs.sidecarMemoryLimit")
    if limit == 0:
        return UNLIMITED_MEMORY_WRITE_BLOCKS
    return max(4, limit // 2 // (WRITE_BLOCK_MIB * 2**20))


def gcsfuse_mount_options(gcs: GcsStorage, limits: SidecarLimits, gke_version: str) -> list[str]:
    """PV mountOptions (config-file key form, accepted by GKE [PERF]); README explains each.

    Stated explicitly even where GKE's machine-based auto-config would pick the same value: it
    skips nodes older than 1.33.2-gke.4655000 and 1.34.1-gke.1431000 to 1.34.1-gke.3403001
    [PERF], and a stated value reads the same in every preview.
    """
    options = [
        # Directories that exist only as object prefixes (uploads by `gcloud storage cp -r` to a
        # flat bucket) are listed and traversable.
        "implicit-dirs",
        # Metadata cache ON with a finite TTL (the tutorial's ttl-secs:0 disables it): stat
        # results are reused for this long; files changed from another node show up after it.
        f"metadata-cache:ttl-secs:{gcs.metadata_cache_ttl_seconds}",
        # No negative cache: a file another pod just created (a checkpoint marker) is visible
        # at once instead of "not found" for the default 5 s.
        "metadata-cache:negative-ttl-secs:0",
        f"metadata-cache:stat-cache-max-size-mb:{STAT_CACHE_MIB}",
        f"metadata-cache:type-cache-max-size-mb:{TYPE_CACHE_MIB}",
    ]
    if gcs.file_cache_size_gib > 0:
        options += [
            # Bounded by config: -1 ("the whole volume") lets the cache fill the node's disk.
            f"file-cache:max-size-mb:{gcs.file_cache_size_gib * 1024}",
            # safetensors loaders read by range; without this those reads bypass the cache and
            # every load goes back to Cloud Storage.
            "file-cache:cache-file-for-range-read:true",
            # Large shards download in parallel chunks. Stated because the gcsfuse default
            # (false in params.yaml) and its CLI doc ("on with the file cache") disagree.
            # Needs the file cache: GKE refuses the mount otherwise [PERF].
            "file-cache:enable-parallel-downloads:true",
        ]
    if version_at_least(gke_version, STREAMING_WRITES_MIN_GKE):
        options += [
            # Checkpoints stream to Cloud Storage as they are written instead of being staged
            # whole on the node's disk first [PERF].
            "write:enable-streaming-writes:true",
            f"write:global-max-blocks:{write_global_max_blocks(limits.memory)}",
        ]
    if not gcs.hierarchical_namespace:
        # Without HNS a directory rename is a copy of every object below it and gcsfuse
        # refuses it by default (limit 0). HNS renames folders atomically instead [PERF].
        options.append(f"file-system:rename-dir-limit:{RENAME_DIR_LIMIT}")
    if version_at_least(gke_version, READ_AHEAD_MIN_GKE):
        options.append(f"read_ahead_kb={READ_AHEAD_KB}")
    return options
