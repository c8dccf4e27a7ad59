"""What the report and `status` show of a run, read once from its directory (jobs/cli/report.py
collect_inputs fills it): the timeline, the TensorBoard metrics, goodput, cost, evaluation
results and, with --stack, the stack's spec and name."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jobs.cli.data_warnings import DataWarnings
from jobs.cli.goodput import Goodput
from jobs.cli.metrics import RunMetrics
from jobs.cli.recovery import CheckpointAdvice
from jobs.cli.run_cost import RunCost
from jobs.cli.run_identity import run_identity_warning
from jobs.cli.timeline import Timeline
from jobs.contract.spec import GrpoSpec


@dataclass
class ReportInputs:
    run_id: str
    run_dir: Path
    timeline: Timeline
    metrics: RunMetrics
    goodput: Goodput
    cost: RunCost | None = None
    preview_estimate: dict[str, Any] | None = None    # components/cost.py estimate_cost()
    planned_steps: int | None = None
    framework: str | None = None
    now: float = field(default_factory=time.time)
    eval_results: list[dict[str, Any]] = field(default_factory=list)   # jobs/cli/eval_results.py
    model: str | None = None
    advice: CheckpointAdvice | None = None     # Young-Daly beside the configured cadence
    spec: GrpoSpec | None = None               # the stack's run spec (--stack), for the summary
    stack: str | None = None                   # the stack's name, for the commands shown
    gpu_capacity: dict[str, Any] | None = None   # the stack output gpuCapacity (a split run's pools)
    dashboard_url: str | None = None             # the stack output dashboardUrl

    @property
    def identity_warning(self) -> str | None:
        """The loud note when the stack given is not this run's (jobs/cli/run_identity.py)."""
        return run_identity_warning(self.run_id, self.spec.run_id if self.spec else None, self.stack)

    def data_warnings(self) -> list[str]:
        """What the readers left out of the run directory, one line per kind of fault
        ("3 lines of events.jsonl skipped: time out of range")."""
        skipped = DataWarnings()
        skipped.extend(self.timeline.warnings)
        skipped.extend(self.metrics.warnings)
        return skipped.lines()
