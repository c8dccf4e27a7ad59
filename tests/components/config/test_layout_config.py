"""gke-grpo:job.layout: a split layout's refusals, each naming its key, all in one message, with no
resource registered; and what a valid split derives."""

from __future__ import annotations

import pytest

from tests.conftest import DELETE, preview_with

P = "gke-grpo:"
RES = {"kind": "reservation", "name": "grpo-b200-reservation"}
SPOT = {"kind": "spot"}
# prod: Standard, B200, 4 nodes, NeMo RL v0.7.0; the waterfall form of its capacity.
PROD_LIST = {P + "gpu.provisioningModel": DELETE, P + "gpu.reservation": DELETE}


def split(rollout, trainer, **more):
    return {P + "job.layout": {"kind": "split", "rollout": rollout, "trainer": trainer, **more}}


def prod_split(rollout, trainer, capacity=(RES, SPOT), **more):
    return {**PROD_LIST, P + "gpu.capacity": list(capacity), **split(rollout, trainer, **more)}


INVALID = [
    ("pool-of-zero-nodes", "dev", split({"nodes": 0}, {"nodes": 2}),
     {P + "job.layout.rollout.nodes"}),
    ("pools-not-adding-up-to-the-nodes", "dev", split({"nodes": 1}, {"nodes": 2}),
     {P + "job.layout.rollout.nodes"}),
    ("pool-on-a-source-the-stack-lacks", "dev", split({"nodes": 1, "capacity": "flexStart"}, {"nodes": 1}),
     {P + "job.layout.rollout.capacity"}),
    ("pool-capacity-not-a-reference", "dev", split({"nodes": 1, "capacity": "on-demand"}, {"nodes": 1}),
     {P + "job.layout.rollout.capacity"}),
    ("more-nodes-than-the-source-holds", "prod",
     prod_split({"nodes": 3, "capacity": "spot"}, {"nodes": 1, "capacity": "spot"},
                capacity=(RES, {**SPOT, "maxNodes": 2})),
     {P + "job.layout.trainer.nodes"}),
    ("pools-on-two-sources-for-a-framework-that-cannot-steer", "prod",
     prod_split({"nodes": 2, "capacity": "spot"}, {"nodes": 2, "capacity": "reservation"}),
     {P + "job.layout.rollout.capacity"}),
    ("a-missing-pool", "dev", {P + "job.layout": {"kind": "split", "rollout": {"nodes": 2}}},
     {P + "job.layout.trainer"}),
    ("verl-trainer-on-nemo-rl", "prod", prod_split({"nodes": 2}, {"nodes": 2}, asynchronousTrainer="fully-async"),
     {P + "job.layout.asynchronousTrainer"}),
    ("negative-staleness", "dev", split({"nodes": 1}, {"nodes": 1}, stalenessThreshold=-0.5),
     {P + "job.layout.stalenessThreshold"}),
    ("no-weight-sync", "dev", split({"nodes": 1}, {"nodes": 1}, triggerParameterSyncStep=0),
     {P + "job.layout.triggerParameterSyncStep"}),
    ("verl-staleness-on-nemo-rl", "prod", prod_split({"nodes": 2}, {"nodes": 2}, stalenessThreshold=0.5),
     {P + "job.layout.stalenessThreshold"}),
    ("trajectory-age-zero", "prod", prod_split({"nodes": 2}, {"nodes": 2}, maxTrajectoryAgeSteps=0),
     {P + "job.layout.maxTrajectoryAgeSteps"}),
    ("nemo-rl-age-on-verl", "dev", split({"nodes": 1}, {"nodes": 1}, maxTrajectoryAgeSteps=2),
     {P + "job.layout.maxTrajectoryAgeSteps"}),
    ("split-and-generation-nodes", "prod",
     {**prod_split({"nodes": 2}, {"nodes": 2}), P + "job.colocatedGeneration": False, P + "job.generationNodes": 1},
     {P + "job.colocatedGeneration"}),
    ("pools-with-the-colocated-layout", "dev", {P + "job.layout": {"rollout": {"nodes": 1}}},
     {P + "job.layout.rollout"}),
]


@pytest.mark.parametrize("stack,changes,keys", [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
def test_a_bad_split_layout_names_its_key_and_registers_nothing(stack, changes, keys):
    result = preview_with(stack, changes)
    assert {problem.key for problem in result.problems} == keys, result.error
    assert result.register_calls == 0 and result.resources == []
    for key in keys:
        assert key in result.error
    assert "Traceback" not in result.error


def test_every_bad_key_of_a_layout_is_named_at_once():
    result = preview_with("dev", split({"nodes": 0, "capacity": "flexStart"}, {"nodes": 1},
                                       stalenessThreshold=-1, maxTrajectoryAgeSteps=3))
    assert {p.key for p in result.problems} == {
        P + "job.layout.rollout.nodes", P + "job.layout.rollout.capacity",
        P + "job.layout.stalenessThreshold", P + "job.layout.maxTrajectoryAgeSteps"}, result.error


def test_the_steering_refusal_says_why():
    result = preview_with("prod", prod_split({"nodes": 2, "capacity": "spot"},
                                             {"nodes": 2, "capacity": "reservation"}))
    assert "keep both pools on one source" in result.error


def test_a_release_without_the_asynchronous_trainer_is_refused_before_any_resource():
    # Release-dependent, so preflight's (jobs/plan/preflight/layout_rules.py), which runs before the
    # program registers anything (__main__.py require_preflight).
    result = preview_with("dev", {**split({"nodes": 1}, {"nodes": 1}, triggerParameterSyncStep=1),
                                  P + "job.release": "verl-0.7.1"})
    assert {p.key for p in result.problems} == {P + "job.layout.asynchronousTrainer"}, result.error
    assert "verl-0.9.1" in result.error
    assert result.register_calls == 0 and result.resources == []


def test_a_valid_split_registers_the_stack():
    result = preview_with("dev", split({"nodes": 1}, {"nodes": 1}, triggerParameterSyncStep=1))
    assert not result.problems, result.error
    assert result.register_calls > 0
