"""Whether a run directory belongs to the stack given beside it.

    run_identity_warning("exp-1111", "exp-2222", "prod") -> "run exp-1111 is not stack prod's run ..."

A run directory's run id is the one its driver recorded (``run_id`` of the driver_start events,
jobs/head/driver.py), else the folder's name; the stack's is the run id its spec would deploy
(``runId``, jobs.contract.spec.GrpoSpec.run_id). When they differ, what the command takes from
the stack (machine type and rates, planned steps, model, resume command) describes another run:
`status` and `report` say so loudly instead of pricing one run at another stack's rates.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def recorded_run_id(driver_starts: Iterable[dict[str, Any]], folder_name: str) -> str:
    """The run id the driver wrote into the run's driver_start events (the latest one that
    names one), else the folder's name."""
    found = [str(extra["run_id"]) for extra in driver_starts
             if isinstance(extra.get("run_id"), str) and extra["run_id"]]
    return found[-1] if found else folder_name


def run_identity_warning(run_dir_run_id: str | None, stack_run_id: str | None,
                         stack: str | None = None) -> str | None:
    """A one-line warning when the run directory's run id is not the stack's, else None (also
    None when either is unknown: nothing to compare)."""
    if not run_dir_run_id or not stack_run_id or run_dir_run_id == stack_run_id:
        return None
    name = f"stack {stack}" if stack else "the stack given"
    return (f"run {run_dir_run_id} is not {name}'s run ({stack_run_id}): the costs use {name}'s "
            f"machine rates and its planned steps and settings, which may not be this run's; give "
            f"the stack that deployed {run_dir_run_id}, or no --stack")
