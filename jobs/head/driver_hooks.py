"""What the run driver (jobs/head/driver.py) runs outside itself, each a stoppable child process
(``run``: the driver's ``run_child``) or a small file read: the defaults, and the protocol tests
fake.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from jobs.contract.capacity import PLACEMENT_FILE
from jobs.contract.layouts import pool_arguments
from jobs.contract.run_plan import PYTHON, RunPlan
from jobs.contract.safe_files import RUN_RECORD, json_if_usable
from jobs.head.failures import DeadNode

HEALTH_PLAN_FILE = "health-plan.json"     # the gate's settings, beside its health.json

# run(argv, capture=False) -> (exit code, captured stdout): a child the driver can stop.
Runner = Callable[..., tuple[int, str]]


class Hooks(Protocol):
    """What the driver runs outside itself, each through ``run`` (a stoppable child process);
    tests inject fakes, the defaults are below."""

    def wait_for_gpus(self, plan: RunPlan, timeout: float, run: Runner) -> int: ...

    def fabric_gate(self, plan: RunPlan, run_dir: Path, reuse_on_same_nodes: bool,
                    run: Runner) -> int: ...

    def prune_checkpoints(self, checkpoint_dir: Path, keep: int) -> list[Path]: ...

    def dead_nodes(self, since: float, run: Runner) -> tuple[list[DeadNode], str | None]: ...


class DefaultHooks:
    def hold_gpus(self, plan: RunPlan, on_event: Callable[..., None] | None = None,
                  stop_seen: Callable[[int | None], bool] | None = None):
        """Ask for the whole gang, see the request confirmed (GangRequestError otherwise) and
        hold it (a child process that dies with the driver, made again if it dies first;
        jobs/head/gpu_gang.py); the returned holder's release() clears the request."""
        from jobs.head.gpu_gang import GangHolder
        return GangHolder.start(math.ceil(plan.gpus / plan.gpus_per_node), plan.gpus_per_node,
                                pools=plan.pool_list, on_event=on_event, stop_seen=stop_seen)

    def wait_for_gpus(self, plan: RunPlan, timeout: float, run: Runner) -> int:
        return run([PYTHON, "-m", "jobs.head.gpu_wait", "--gpus", str(plan.gpus),
                    "--gpus-per-node", str(plan.gpus_per_node),
                    "--timeout-seconds", str(max(timeout, 1.0)),
                    "--poll-seconds", str(plan.gpu_poll_seconds), "--check-gang",
                    *pool_arguments(plan.pool_list),
                    "--placement-file", str(Path(plan.run_dir) / PLACEMENT_FILE)])[0]

    def gpu_placement(self, plan: RunPlan) -> dict:
        """The nodes and capacity sources the last GPU wait found ({} if unknown)."""
        doc = json_if_usable(Path(plan.run_dir) / PLACEMENT_FILE, RUN_RECORD)
        return doc if isinstance(doc, dict) else {}

    def fabric_gate(self, plan: RunPlan, run_dir: Path, reuse_on_same_nodes: bool,
                    run: Runner) -> int:
        settings = run_dir / HEALTH_PLAN_FILE
        settings.write_text(json.dumps(plan.health, sort_keys=True, indent=1) + "\n")
        return run([PYTHON, "-m", "jobs.head.fabric_gate", "--plan", str(settings),
                    "--nodes", str(plan.gpus // max(plan.gpus_per_node, 1)),
                    "--gpus-per-node", str(plan.gpus_per_node), "--run-dir", str(run_dir),
                    *(["--reuse-on-same-nodes"] if reuse_on_same_nodes else [])])[0]

    def prune_checkpoints(self, checkpoint_dir, keep):
        from jobs.head.checkpoints import prune_verl_checkpoints
        return prune_verl_checkpoints(checkpoint_dir, keep)

    def dead_nodes(self, since: float, run: Runner) -> tuple[list[DeadNode], str | None]:
        code, out = run([PYTHON, "-m", "jobs.head.node_deaths", "--since", f"{since:.3f}"],
                        capture=True)
        try:
            answer = json.loads(out.strip().splitlines()[-1])
            nodes = [DeadNode(str(n["node_id"]), str(n["address"]), str(n["reason"]),
                              str(n["message"]), n.get("died_at")) for n in answer["dead"]]
        except (ValueError, IndexError, KeyError, TypeError):
            return [], f"the node query exited {code} without an answer: {out.strip()[-300:]}"
        return nodes, answer.get("error")
