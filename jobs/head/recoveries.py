"""A restart's recovery as the run driver records it (the ``recovery`` event, RECOVERY_FIELDS of
jobs/contract/records.py): seconds from the loss to the decision, the restart and the first new
step, and the steps redone.

    pending = PendingRecovery(...)               # decided: a restart on its way
    reached(pending, now, first_new_step)        # the restarted trainer logged a step
    not_reached(pending, started_at, why)        # it ended before one
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class PendingRecovery:
    """A restart on its way: completed (and recorded) when the restarted trainer logs a step."""
    restart: int
    from_start: int
    loss_at: float
    loss_source: str
    decided_at: float
    backoff_s: float
    last_step: int | None
    resumed_from_step: int | None
    restarted_at: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def _common(self, restarted: float) -> dict[str, Any]:
        return {"restart": self.restart, "from_start": self.from_start,
                "loss_at": round(self.loss_at, 3), "loss_source": self.loss_source,
                "decision_s": round(self.decided_at - self.loss_at, 3),
                "restart_s": round(restarted - self.loss_at, 3),
                "backoff_s": round(self.backoff_s, 3), "resumed_from_step": self.resumed_from_step}


def reached(pending: PendingRecovery, now: float, first_new_step: int) -> dict[str, Any]:
    """The recovery of a restart whose trainer logged ``first_new_step`` at ``now``."""
    redone = None
    if pending.last_step is not None:
        redone = max(0, pending.last_step - (pending.resumed_from_step or 0))
    return {**pending._common(pending.restarted_at or now), "first_step_s": round(now - pending.loss_at, 3),
            "steps_redone": redone, "first_new_step": first_new_step, **pending.extra}


def not_reached(pending: PendingRecovery, started_at: float, why: str) -> dict[str, Any]:
    """The recovery of a restart whose trainer (started at ``started_at``) ended before a step."""
    return {**pending._common(pending.restarted_at or started_at), "first_step_s": None,
            "steps_redone": None, "first_new_step": None,
            "outcome": f"the restarted start ended before a step ({why})"}
