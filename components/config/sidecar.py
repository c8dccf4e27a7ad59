"""The gcsfuse sidecar's resource limits: shared by the config rules (what fits a node) and
components/storage.py (the pod annotations), so the config package need not import storage.

The bracketed references ([PERF], [TRBL], [WHCFG]) are the sources listed at the top of
components/storage.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from components.config.models import GcsStorage
from components.config.patterns import cpu_cores, quantity_bytes

# Sidecar resources when the config leaves them unset. Standard: "0" removes the limit so
# gcsfuse may use the node's idle CPU and memory (Standard only [TRBL]; [PERF] recommends it).
# Autopilot refuses "0" and needs explicit limits (also the requests: an unset request copies
# the limit [WHCFG]); the values are a budget taken from the pod's share of the node.
STANDARD_SIDECAR_CPU = "0"
STANDARD_SIDECAR_MEMORY = "0"
AUTOPILOT_SIDECAR_CPU = "8"
AUTOPILOT_SIDECAR_MEMORY = "32Gi"
# The file cache is an emptyDir on node ephemeral storage (Local SSD on A3 Ultra and A4 [PERF]),
# counted against the sidecar's ephemeral-storage limit, which must exceed it [PERF]. The
# headroom also holds files staged when a write cannot stream (non-sequential writes).
EPHEMERAL_HEADROOM_MIN_GIB = 50
EPHEMERAL_HEADROOM_FRACTION = 0.10

@dataclass(frozen=True)
class SidecarLimits:
    cpu: str
    memory: str
    ephemeral_storage: str

    def budget(self) -> tuple[float, float]:
        """CPU cores and GiB the sidecar takes from its pod's node ("0", unlimited, reserves
        nothing up front)."""
        return cpu_cores(self.cpu), quantity_bytes(self.memory) / 2**30


def gcsfuse_sidecar_limits(gcs: GcsStorage, autopilot: bool) -> SidecarLimits:
    """The gcsfuse sidecar's limits: config values when set, otherwise per cluster mode."""
    headroom = max(EPHEMERAL_HEADROOM_MIN_GIB,
                   math.ceil(gcs.file_cache_size_gib * EPHEMERAL_HEADROOM_FRACTION))
    return SidecarLimits(
        cpu=gcs.sidecar_cpu_limit or (AUTOPILOT_SIDECAR_CPU if autopilot else STANDARD_SIDECAR_CPU),
        memory=gcs.sidecar_memory_limit or (
            AUTOPILOT_SIDECAR_MEMORY if autopilot else STANDARD_SIDECAR_MEMORY),
        ephemeral_storage=gcs.sidecar_ephemeral_storage_limit
        or f"{gcs.file_cache_size_gib + headroom}Gi",
    )


# The Ray head mounts /data too but reads little through it (the data-preparation step writes
# the model with streaming writes; the driver reads a tokenizer and small parquet files): its
# sidecar gets a small budget, not the GPU workers' (an unset request copies the limit, so the
# workers' 550Gi of ephemeral storage would never fit the head's node).
HEAD_SIDECAR_STANDARD = SidecarLimits(cpu="0", memory="0", ephemeral_storage="50Gi")
# Autopilot: a pod without local SSD gets at most 10 GiB of ephemeral storage, sidecars
# included (data/autopilot-gpu-limits.yaml); the head's claim has no file cache, so the sidecar
# needs little (staging of the rare non-streaming write).
HEAD_SIDECAR_AUTOPILOT = SidecarLimits(cpu="1", memory="4Gi", ephemeral_storage="4Gi")
