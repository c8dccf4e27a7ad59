"""The plan's ``capacity_end``: when the stack's capacity sources end on schedule, and the margin
the trainer saves by before (jobs/contract/capacity_end.py says how the driver uses them).

    capacity_end_margin(spec, lustre_tier_mbps_per_tib) -> (seconds, basis)
    capacity_end_plan(spec, flex_start_max_run_seconds=..., reservation_ends=..., ...) -> dict | None

The margin is the planner's checkpoint time: a checkpoint's size with optimizer state at the
storage's write throughput (jobs/plan/checkpoint_interval.py ``prior_checkpoint_seconds``, the
figure preflight's checkpoint-interval advice uses), rounded up to a whole second.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from jobs.contract.spec import GrpoSpec

# The margin when the planner has no checkpoint time (a model not in data/model-shapes.yaml, a
# storage without a write figure). An assumption of this project: ten minutes writes a 70B
# model's checkpoint with optimizer state (840 GB) at 1.4 GB/s.
DEFAULT_MARGIN_SECONDS = 600.0


def capacity_end_margin(spec: GrpoSpec, lustre_tier_mbps_per_tib: int | None = None) -> tuple[float, str]:
    """(seconds, basis): how long before its capacity ends a trainer must begin its last save."""
    from jobs.plan.checkpoint_interval import load_interruption_priors, prior_checkpoint_seconds
    from jobs.plan.model_shapes import shape_for

    shape = shape_for(spec.model)
    if shape is not None:
        seconds, basis = prior_checkpoint_seconds(load_interruption_priors(), shape.parameters,
                                                  spec.storage_kind, spec.storage_capacity_gib,
                                                  lustre_tier_mbps_per_tib)
        if seconds is not None:
            return float(math.ceil(seconds)), f"the planner's checkpoint time: {basis}"
        why = basis
    else:
        why = f"{spec.model} is not in data/model-shapes.yaml"
    return DEFAULT_MARGIN_SECONDS, f"no checkpoint time ({why}): {DEFAULT_MARGIN_SECONDS:.0f} s, an assumption"


def capacity_end_plan(spec: GrpoSpec, *, flex_start_max_run_seconds: int | None,
                      reservation_ends: Mapping[str, float],
                      lustre_tier_mbps_per_tib: int | None = None) -> dict[str, Any] | None:
    """The plan's ``capacity_end``: None when no source has a scheduled end (Spot, a reservation
    without an end time). ``flex_start_max_run_seconds``: the flex-start source's node lifetime
    (None: no flex-start source); ``reservation_ends``: reservation name -> its end, epoch seconds."""
    if flex_start_max_run_seconds is None and not reservation_ends:
        return None
    margin, basis = capacity_end_margin(spec, lustre_tier_mbps_per_tib)
    return {"margin_seconds": margin, "margin_basis": basis,
            "flex_start_max_run_seconds": (None if flex_start_max_run_seconds is None
                                           else float(flex_start_max_run_seconds)),
            "reservation_ends": [{"name": name, "ends_at": float(at)}
                                 for name, at in sorted(reservation_ends.items())]}
