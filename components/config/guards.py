"""Config rules against values no API would accept (issue 14) that read more than one key:
gcsfuse's file cache against the GPU machine's local SSD, and the head pool's machine against the
real predefined shapes (data/config-limits.yaml).

The single-field guards of issue 14 (finite numbers, model ids, the RayJob deadline's int32
ceiling, GKE's node ceiling, maintenance times and RRULEs that really parse) are pydantic types
(components/config/types.py, with components/config/timeformats.py).

``check_guards(rules)`` runs on components/config/rules.py's ``_Rules`` (the areas that parsed) and
reports through ``rules.add(key, given, allowed)``, so each problem names the key a user wrote.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Optional, Protocol

from components.config.limits import load_config_limits

if TYPE_CHECKING:
    from components.config.models import ClusterConfig, GpuConfig, JobConfig, StorageConfig


class _Rules(Protocol):
    """What the guards read of components/config/rules.py's ``_Rules`` (the areas that parsed,
    and its ``add``): a protocol, so guards.py and rules.py import each other in one direction."""
    cluster: Optional["ClusterConfig"]
    gpu: Optional["GpuConfig"]
    storage: Optional["StorageConfig"]
    job: Optional["JobConfig"]

    def add(self, key: str, given: Any, allowed: str, reads: tuple[str, ...] = ()) -> None: ...


def check_guards(rules: "_Rules") -> None:
    limits = load_config_limits()
    _check_gcs_cache(rules)
    _check_head_machine(rules, limits)


def _check_gcs_cache(rules: "_Rules") -> None:
    from components.config.machines import MACHINE_SHAPES
    from components.config.models import GcsStorage
    from components.config.sidecar import EPHEMERAL_HEADROOM_FRACTION, EPHEMERAL_HEADROOM_MIN_GIB

    s = rules.storage
    if s is None or s.kind != "gcs" or rules.gpu is None:
        return
    gcs = s.gcs or GcsStorage()
    shape = MACHINE_SHAPES[rules.gpu.type]
    cache = gcs.file_cache_size_gib
    headroom = max(EPHEMERAL_HEADROOM_MIN_GIB, math.ceil(cache * EPHEMERAL_HEADROOM_FRACTION))
    if cache > 0 and cache + headroom > shape.local_ssd_gib:
        rules.add("storage.gcs.fileCacheSizeGib", cache,
                  f"at most {int((shape.local_ssd_gib - EPHEMERAL_HEADROOM_MIN_GIB) / (1 + EPHEMERAL_HEADROOM_FRACTION)):,} GiB: "
                  f"the cache (plus its {EPHEMERAL_HEADROOM_FRACTION:.0%} headroom) lives in the "
                  f"sidecar's ephemeral storage, the {shape.local_ssd_gib:,} GiB of local SSD of "
                  f"{shape.machine_type}")


def _check_head_machine(rules: "_Rules", limits) -> None:
    from components.config.machines import predefined_machine

    c = rules.cluster
    if c is None or c.mode != "standard" or c.head_pool is None:
        return
    machine = c.head_pool.machine_type
    # An unreadable name is reported by components/config/rules.py; here: a readable one that is no shape.
    if predefined_machine(machine) is not None and not limits.head_machine_known(machine):
        rules.add("cluster.headPool.machineType", machine, "a real predefined machine type: "
                  + limits.head_machine_choices(machine) + " (data/config-limits.yaml)")
