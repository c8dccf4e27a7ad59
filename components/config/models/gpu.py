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
    ProjectId,
    ReservationBlock,
    ReservationName,
)


class Reservation(_Area):
    name: ReservationName = Field(description="reservation name")
    block: ReservationBlock | None = Field(None, description="one block of the reservation (Standard only)")
    # Shared reservations owned by another project.
    project: ProjectId | None = Field(
        None,
        description="owner of a shared reservation (Standard only)",
        json_schema_extra={"defaultText": "this project"},
    )

class GpuConfig(_Area):
    type: Literal["nvidia-b200", "nvidia-h200-141gb"] = Field(
        description="`nvidia-b200` or `nvidia-h200-141gb`",
    )
    # Checked by _check_gpu rather than typed as an enumeration, so "on-demand" gets a
    # message that explains why these machines cannot have it.
    provisioning_model: str = Field(description="`reservation`, `spot` or `flex-start`")
    nodes: GpuNodes = Field(description="GPU nodes the run uses (≥ 1): the one owner of the node count")
    machine_type: str | None = Field(
        None,
        description="Standard only; must match the GPU",
        json_schema_extra={"defaultText": "derived from `type`"},
    )
    min_nodes: MinGpuNodes | None = Field(
        None,
        description="Standard only; ≤ `nodes`; 0 with flex-start",
        json_schema_extra={"defaultText": "0"},
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
        description="flex-start only; at most 604800 (7 days)",
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
