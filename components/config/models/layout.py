"""`gke-grpo:job.layout`: where rollouts and training run. `colocated` (the default): the same
GPUs generate with vLLM and then train, one after the other. `split`: a rollout pool and a trainer
pool of their own, each a Ray worker group on one capacity source, run by the framework's
asynchronous trainer (docs/layouts.md)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from components.config.models.base import _Area
from components.config.types import CapacityReference, PoolNodes


class PoolConfig(_Area):
    """One pool of a split layout: how many GPU nodes, and which source of ``gpu.capacity`` (or
    the one of ``gpu.provisioningModel``) they come from."""

    nodes: PoolNodes = Field(description="GPU nodes of this pool (≥ 1)")
    capacity: CapacityReference | None = Field(
        None,
        description=("the capacity source this pool draws from: `spot`, `flexStart`, "
                     "`reservation` (the stack's one reservation) or `reservation/<name>`; a "
                     "source of `gpu.capacity` (or `gpu.provisioningModel`'s)"),
        json_schema_extra={"defaultText": "the stack's first source"},
    )


class LayoutConfig(_Area):
    kind: Literal["colocated", "split"] = Field(
        "colocated",
        description=("`colocated`: rollouts and training on the same GPUs, in turn; `split`: "
                     "each on a pool of its own, at once "
                     "([docs/layouts.md](docs/layouts.md))"),
    )
    asynchronous_trainer: Literal["fully-async", "one-step-off", "async-grpo"] | None = Field(
        None,
        description=("split only: verl `fully-async` or `one-step-off`; NeMo RL `async-grpo`"),
        json_schema_extra={"defaultText": "verl `fully-async`, NeMo RL `async-grpo`"},
    )
    rollout: PoolConfig | None = Field(
        None, description="split only: the rollout (vLLM generation) pool",
        json_schema_extra={"defaultText": "required with `split`"})
    trainer: PoolConfig | None = Field(
        None, description="split only: the trainer pool",
        json_schema_extra={"defaultText": "required with `split`"})
    # How stale a rollout may be when it is trained on, in each framework's own terms.
    staleness_threshold: float | None = Field(
        None,
        description=("verl `fully-async` only: `async_training.staleness_threshold`, 0 or more "
                     "(how many samples beyond a sync's may be generated with older weights, as "
                     "a fraction of them)"),
        json_schema_extra={"defaultText": "verl's, 0.1"},
    )
    trigger_parameter_sync_step: int | None = Field(
        None,
        description=("verl `fully-async` only: `async_training.trigger_parameter_sync_step`, "
                     "trainer updates between two weight syncs to the rollout pool (≥ 1)"),
        json_schema_extra={"defaultText": "verl's, 4"},
    )
    max_trajectory_age_steps: int | None = Field(
        None,
        description=("NeMo RL only: `grpo.async_grpo.max_trajectory_age_steps`, the oldest "
                     "trajectory trained on, in steps (≥ 1)"),
        json_schema_extra={"defaultText": "NeMo RL's default, 1"},
    )
