"""Where rollouts and training run (``gke-grpo:job.layout``), as every runtime sees it: the pool
names, the Ray worker group and Ray custom resource of each pool, and what each framework's
asynchronous trainers accept. Stdlib only: the program, the planner and the head's driver all read
it (docs/layouts.md).

A split layout's pools are two Ray worker groups. Each GPU node of a pool advertises one unit of
its pool's custom resource (``rayStartParams.resources``), so a request that names the resource
(the driver's gang request; a framework's placement group that carries it) can only be met by that
pool's nodes.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from dataclasses import dataclass

COLOCATED, SPLIT = "colocated", "split"
POOLS = ("rollout", "trainer")
# Ray worker group of each pool (the colocated layout's one group stays ``gpu-workers``).
POOL_GROUPS = {"rollout": "rollout-workers", "trainer": "trainer-workers"}
# Ray custom resource each node of a pool advertises: one unit per node.
POOL_RESOURCES = {"rollout": "gke_grpo_rollout_pool", "trainer": "gke_grpo_trainer_pool"}

# The asynchronous trainers of each framework, the default first.
ASYNCHRONOUS_TRAINERS: dict[str, tuple[str, ...]] = {
    "verl": ("fully-async", "one-step-off"),
    "nemo-rl": ("async-grpo",),
}

@dataclass(frozen=True)
class FrameworkLayoutFacts:
    pools_steerable: bool        # its placement groups can be bound to one pool's nodes
    why_not_steerable: str       # said when a split layout puts its pools on two sources


FRAMEWORK_SETTINGS = {
    # verl 0.9.1 verl/single_controller/ray/base.py: RayResourcePool takes an accelerator_type
    # and adds it to each bundle (lines 121 and 149-150), but ResourcePoolManager.
    # create_resource_pool (lines 203-213) never passes one, and the fully-async main builds its
    # trainer_pool and rollout pools through it (verl/experimental/separation/utils.py line 59,
    # verl/workers/rollout/replica.py lines 199-207): its bundles are {"CPU": n, "GPU": 1} and may
    # land on any GPU node.
    "verl": FrameworkLayoutFacts(
        pools_steerable=False,
        why_not_steerable=(
            "verl 0.9.1 cannot bind its rollout and trainer placement groups to one pool's nodes "
            "(ResourcePoolManager never passes RayResourcePool's accelerator_type: verl/"
            "single_controller/ray/base.py lines 203-213), so a trainer could land on the rollout "
            "source's nodes; keep both pools on one source (docs/layouts.md)"),
    ),
    "nemo-rl": FrameworkLayoutFacts(
        pools_steerable=False,
        why_not_steerable=(
            "NeMo RL cannot bind its generation and training placement groups to one pool's "
            "nodes (docs/layouts.md), so training could land on the rollout source's nodes; keep "
            "both pools on one source"),
    ),
}


@dataclass(frozen=True)
class Pool:
    """One pool of a split run as the driver asks for it."""
    name: str                    # rollout | trainer
    nodes: int

    @property
    def resource(self) -> str:
        return POOL_RESOURCES[self.name]

    @property
    def group(self) -> str:
        return POOL_GROUPS[self.name]


def pool_argument(text: str) -> Pool:
    """``--pool NAME:NODES`` of the head's gang holder and GPU wait (an argparse type)."""
    name, _, nodes = text.partition(":")
    if name not in POOL_RESOURCES or not nodes.isdigit() or int(nodes) < 1:
        raise argparse.ArgumentTypeError(f"a pool is {' or '.join(POOL_RESOURCES)}:<nodes>, got {text!r}")
    return Pool(name, int(nodes))


def pool_arguments(pools: Iterable[Pool]) -> list[str]:
    """The ``--pool NAME:NODES`` arguments that ``pool_argument`` reads back."""
    return [arg for pool in pools for arg in ("--pool", f"{pool.name}:{pool.nodes}")]


# NeMo RL's asynchronous GRPO loop prints this when it reached grpo.max_num_steps and returns; on
# any error it prints ASYNC_LOOP_ERROR_TEXT and the traceback and returns normally too, so the
# process exits 0 either way (nemo_rl/algorithms/grpo.py async_grpo_train: lines 4314-4325 at
# v0.7.0 81aa43dd, lines 2594-2605 at v0.5.0 6c708930). The driver takes an exit 0 for a completed
# run only after this line (jobs/contract/run_plan.py completion_text).
NEMO_RL_ASYNC_COMPLETION_TEXT = "Max number of steps has been reached, stopping training early"
NEMO_RL_ASYNC_LOOP_ERROR_TEXT = "Error in async loop:"


def completion_text(framework: str, asynchronous_trainer: str | None) -> str | None:
    """The line a trainer start must print for its exit 0 to be a completed run (None: exit 0 is)."""
    if framework == "nemo-rl" and asynchronous_trainer == "async-grpo":
        return NEMO_RL_ASYNC_COMPLETION_TEXT
    return None
