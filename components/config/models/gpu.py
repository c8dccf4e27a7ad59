"""`gke-grpo:gpu`: the GPU machines, how many, and where their capacity comes from."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from components.config.models.base import _Area
from components.config.types import (
    FlexStartRunSeconds,
    GpuNodes,
    MaxGpuNodes,
    MinGpuNodes,
    NodePoolName,
    ProjectId,
    ReservationBlock,
    ReservationEndTime,
    ReservationName,
)

END_TIME_TEXT = ("when the reservation ends, RFC 3339 UTC (its deleteAtTime, or a calendar-mode "
                 "reservation's end): each trainer start is told, so it saves a checkpoint before "
                 "([docs/gpu-capacity.md](docs/gpu-capacity.md#capacity-that-ends-on-schedule))")


class Reservation(_Area):
    name: ReservationName = Field(description="reservation name")
    block: ReservationBlock | None = Field(None, description="one block of the reservation (Standard only)")
    # Shared reservations owned by another project.
    project: ProjectId | None = Field(
        None,
        description="owner of a shared reservation (Standard only)",
        json_schema_extra={"defaultText": "this project"},
    )
    end_time: ReservationEndTime | None = Field(
        None, description=END_TIME_TEXT, json_schema_extra={"defaultText": "no scheduled end"})


class CapacitySource(_Area):
    """One source of GPU nodes in ``gpu.capacity``, tried in list order."""

    # Checked by the rules rather than typed as an enumeration, so "onDemand" gets a message that
    # explains why these machines cannot have it.
    kind: str = Field(description="`reservation`, `flexStart` or `spot`")
    name: ReservationName | None = Field(
        None, description="reservation only: the reservation's name",
        json_schema_extra={"defaultText": "required with `reservation`"})
    block: ReservationBlock | None = Field(
        None, description="reservation only: one block of the reservation (Standard only)")
    project: ProjectId | None = Field(
        None, description="reservation only: owner of a shared reservation (Standard only)",
        json_schema_extra={"defaultText": "this project"})
    end_time: ReservationEndTime | None = Field(
        None, description="reservation only: " + END_TIME_TEXT,
        json_schema_extra={"defaultText": "no scheduled end"})
    # Bounds checked by the rules (components/config/gpu_rules.py), not the type: a refused type
    # would drop the whole list and hide the other sources' problems.
    max_run_duration_seconds: int | None = Field(
        None, description="flexStart only: the longest a node lives, 600 to 604800 (7 days; "
        "Standard only), and longer than one checkpoint interval (`job.checkpointEverySteps` x "
        "the planner's step time); each trainer start is told its node's end", json_schema_extra={"defaultText": "GKE's default, 7 days",
                                             "minimum": 600, "maximum": 604800})
    max_nodes: MaxGpuNodes | None = Field(
        None, description="Standard only: the most nodes this source's node pool may have (a "
        "reservation's pool is held at this size)",
        json_schema_extra={"defaultText": "`gpu.maxNodes`; a reservation: `gpu.nodes`"})
    node_pool: NodePoolName | None = Field(
        None, description="Standard only: this source's GKE node pool name; `<machine>-pool` "
        "keeps the pool of a former `provisioningModel` config, whatever its kind "
        "([docs/gpu-capacity.md](docs/gpu-capacity.md#moving-from-provisioningmodel-to-capacity))",
        json_schema_extra={"defaultText": "derived from the source: `<machine>-spot-<hash>`, "
                           "`<machine>-flex-<hash>`, `<machine>-res-<name>`"})


class GpuConfig(_Area):
    type: Literal["nvidia-b200", "nvidia-h200-141gb"] = Field(
        description="`nvidia-b200` or `nvidia-h200-141gb`",
    )
    # Checked by _check_gpu rather than typed as an enumeration, so "on-demand" gets a
    # message that explains why these machines cannot have it.
    provisioning_model: str | None = Field(
        None, description="`reservation`, `spot` or `flex-start`: the one capacity source (or "
        "give `capacity` instead)", json_schema_extra={"defaultText": "required without `capacity`"})
    capacity: tuple[CapacitySource, ...] | None = Field(
        None, description="capacity sources in order of preference (a GKE ComputeClass tries "
        "them in this order): each `{kind: reservation, name, block?, project?, endTime?}`, "
        "`{kind: flexStart, maxRunDurationSeconds?}` or `{kind: spot}`, plus `maxNodes?`, `nodePool?`; "
        "instead of `provisioningModel` (docs/gpu-capacity.md)",
        json_schema_extra={"defaultText": "the one source of `provisioningModel`"})
    nodes: GpuNodes = Field(description="GPU nodes the run uses (≥ 1): the one owner of the node count")
    machine_type: str | None = Field(
        None,
        description="Standard only; must match the GPU",
        json_schema_extra={"defaultText": "derived from `type`"},
    )
    min_nodes: MinGpuNodes | None = Field(
        None,
        description="Standard only, with `provisioningModel`: the pool's minimum; ≤ `nodes`; 0 "
        "with flex-start",
        json_schema_extra={"defaultText": "`nodes` with a reservation (held: it is paid for "
                           "anyway), else 0"},
    )
    max_nodes: MaxGpuNodes | None = Field(
        None,
        description="Standard only; ≥ `nodes`",
        json_schema_extra={"defaultText": "`nodes`"},
    )
    reservation: Reservation | None = Field(
        None,
        description="the reservation to consume",
        json_schema_extra={"defaultText": "required with `reservation`"},
    )
    max_run_duration_seconds: FlexStartRunSeconds | None = Field(
        None,
        description="flex-start only; at most 604800 (7 days), and longer than one checkpoint "
        "interval (`job.checkpointEverySteps` x the planner's step time); each trainer start is "
        "told its node's end",
    )
    auto_repair: bool | None = Field(
        None,
        description="Standard only; must be false with flex-start",
        json_schema_extra={"defaultText": "true; false for flex-start"},
    )
    compact_placement: bool | None = Field(
        None,
        description="Standard only; also with flex-start (A3 Ultra and A4 support it)",
        json_schema_extra={"defaultText": "false"},
    )
    disk_size_gb: int | None = Field(
        None,
        ge=100,
        le=65536,
        description="Standard only; Hyperdisk boot disk",
        json_schema_extra={"defaultText": "500"},
    )
    driver_version: Literal["DEFAULT", "LATEST"] = Field(
        "DEFAULT",
        description="GPU driver GKE installs: `DEFAULT` or `LATEST`",
    )
