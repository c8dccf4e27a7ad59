"""A split run's trainer that hangs after losing a node: stopped, so the driver restarts it.

A colocated trainer fails when a node leaves (Ray's actor death reaches its driver). The
asynchronous trainers of a split layout can wait instead: NeMo RL's asynchronous GRPO waits for
trajectories with no timeout once a generation worker is gone (nemo_rl/algorithms/grpo.py
async_grpo_train at v0.7.0: the replay-buffer wait loop, lines 3661-3703), and verl 0.9.1's
fully-async trainer syncs weights to rollout replicas that may be dead (docs/layouts.md). So while
such a trainer runs, the driver asks the cluster every ``every`` seconds which nodes died since
the start began (jobs/head/node_deaths.py, read-only; nodes drained for being idle are not
counted); once one did, the trainer has ``grace`` seconds (or twice its longest gap between step
lines) to end by itself or log a new step, else the driver stops it and classifies the start
with the dead node (jobs/head/failures.py: NODE_LOST, restarted from the last checkpoint).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from jobs.head.failures import DeadNode

# How often the cluster is asked (one short child process each time) and how long a trainer may
# go without a new step after a node of its run died: five minutes, or twice the longest gap
# between two of its step lines so far, whichever is longer (verl's fully-async trainer logs a step
# only at each weight sync, every trigger_parameter_sync_step local steps).
EVERY_SECONDS = 60.0
GRACE_SECONDS = 300.0
GAP_FACTOR = 2.0


class NodeLossWatch:
    def __init__(self, dead_nodes: Callable[[float], Sequence[DeadNode]], since: float, *,
                 every: float | None = None, grace: float | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.dead_nodes, self.since, self.clock = dead_nodes, since, clock
        self.every = EVERY_SECONDS if every is None else every
        self.grace = GRACE_SECONDS if grace is None else grace
        self.next_query = clock() + self.every
        self.lost_at: float | None = None       # when a dead node was first seen (clock)
        self.steps_at_loss = 0
        self.lost: list[DeadNode] = []
        self.reason = ""
        self.steps_seen, self.last_step_at, self.longest_gap = 0, clock(), 0.0

    @property
    def bound(self) -> float:
        return max(self.grace, GAP_FACTOR * self.longest_gap)

    def stalled(self, steps: int) -> bool:
        """True once a node died and the trainer logged no step for ``grace`` seconds since."""
        now = self.clock()
        if steps > self.steps_seen:
            if self.steps_seen:
                self.longest_gap = max(self.longest_gap, now - self.last_step_at)
            self.steps_seen, self.last_step_at = steps, now
        if self.lost_at is None:
            if now < self.next_query:
                return False
            self.next_query = now + self.every
            self.lost = [n for n in self.dead_nodes(self.since)
                         if n.died_at is not None and n.died_at >= self.since]
            if self.lost:
                self.lost_at, self.steps_at_loss = now, steps
            return False
        if steps > self.steps_at_loss:          # it trains on without the node: fine
            self.lost_at, self.lost = None, []
            return False
        if now - self.lost_at < self.bound:
            return False
        self.reason = (f"no training step for {self.bound:.0f}s since a node of the run was lost "
                       f"({'; '.join(n.describe() for n in self.lost)}): stopping the trainer to "
                       "restart it from its last checkpoint")
        return True
