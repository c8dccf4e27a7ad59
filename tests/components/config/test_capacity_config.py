"""gke-grpo:gpu.capacity, the ordered capacity sources: what the config refuses (each problem
names its key, all in one message, and no resource is registered) and what it derives."""

from __future__ import annotations

import pytest

from components.config import load_stack_config
from tests.conftest import DELETE, preview_with, stack_config

P = "gke-grpo:"
RES = {"kind": "reservation", "name": "grpo-b200-reservation"}
SPOT = {"kind": "spot"}
FLEX = {"kind": "flexStart", "maxRunDurationSeconds": 86400}
# prod (Standard, B200, 4 nodes) with the list instead of provisioningModel.
LIST = {P + "gpu.provisioningModel": DELETE, P + "gpu.reservation": DELETE}


def prod_with(capacity, **more):
    return {**LIST, P + "gpu.capacity": capacity, **more}


INVALID = [
    ("empty", "prod", prod_with([]), {P + "gpu.capacity"}),
    ("duplicate-source", "prod", prod_with([SPOT, RES, SPOT]), {P + "gpu.capacity[2]"}),
    ("duplicate-reservation", "prod", prod_with([RES, dict(RES)]), {P + "gpu.capacity[1]"}),
    ("reservation-without-name", "prod", prod_with([{"kind": "reservation"}, SPOT]), {P + "gpu.capacity[0].name"}),
    ("flex-start-over-7-days", "prod", prod_with([{"kind": "flexStart", "maxRunDurationSeconds": 8 * 86400}]),
     {P + "gpu.capacity[0].maxRunDurationSeconds"}),
    ("on-demand-is-no-source", "prod", prod_with([RES, {"kind": "onDemand"}]), {P + "gpu.capacity[1].kind"}),
    ("unknown-kind", "prod", prod_with([{"kind": "preemptible"}]), {P + "gpu.capacity[0].kind"}),
    ("name-on-spot", "prod", prod_with([{"kind": "spot", "name": "r"}]), {P + "gpu.capacity[0].name"}),
    ("duration-on-spot", "prod", prod_with([{"kind": "spot", "maxRunDurationSeconds": 3600}]),
     {P + "gpu.capacity[0].maxRunDurationSeconds"}),
    ("sources-cannot-reach-the-nodes", "prod", prod_with([{**RES, "maxNodes": 1}, {**SPOT, "maxNodes": 2}]),
     {P + "gpu.capacity"}),
    ("both-forms", "prod", {P + "gpu.capacity": [SPOT]}, {P + "gpu.provisioningModel", P + "gpu.reservation"}),
    ("neither-form", "prod", LIST, {P + "gpu.provisioningModel"}),
    ("min-nodes-with-a-list", "prod", prod_with([SPOT], **{P + "gpu.minNodes": 1}), {P + "gpu.minNodes"}),
    ("waterfall-on-autopilot", "dev", {P + "gpu.provisioningModel": DELETE, P + "gpu.capacity": [SPOT, FLEX]},
     {P + "gpu.capacity", P + "gpu.capacity[1].maxRunDurationSeconds"}),
    ("pool-setting-on-autopilot", "dev", {P + "gpu.provisioningModel": DELETE,
                                   P + "gpu.capacity": [{"kind": "spot", "maxNodes": 3}]},
     {P + "gpu.capacity[0].maxNodes"}),
    ("compute-class-needs-newer-gke", "prod", prod_with([RES, SPOT], **{P + "cluster.minMasterVersion": "1.30.2-gke.1000000"}),
     {P + "cluster.minMasterVersion"}),
    ("flex-start-source-needs-newer-gke", "prod", prod_with([FLEX], **{
        P + "cluster.minMasterVersion": "1.32.2-gke.1500000", P + "storage.lustre.legacyPort": True}),
     {P + "cluster.minMasterVersion"}),
    ("class-name-with-gke-prefix", "prod", prod_with([RES, SPOT], **{P + "cluster.name": "gke-grpo"}),
     {P + "cluster.name"}),
    ("two-sources-one-pool-name", "prod", prod_with([{**RES, "nodePool": "gpus"}, {**SPOT, "nodePool": "gpus"}]),
     {P + "gpu.capacity[1].nodePool"}),
    ("end-time-on-spot", "prod", prod_with([RES, {"kind": "spot", "endTime": "2027-01-01T00:00:00Z"}]),
     {P + "gpu.capacity[1].endTime"}),
    ("end-time-not-a-time", "prod", prod_with([{**RES, "endTime": "next friday"}]), {P + "gpu.capacity[0].endTime"}),
    # 20 checkpoints apart at the planner's 60 s a step: a node that lives 1,200 s never checkpoints.
    ("flex-start-ends-before-a-checkpoint", "prod",
     prod_with([RES, {"kind": "flexStart", "maxRunDurationSeconds": 1200}], **{P + "job.checkpointEverySteps": 20}),
     {P + "gpu.capacity[1].maxRunDurationSeconds"}),
    ("several-at-once", "prod", prod_with([{"kind": "reservation"}, {"kind": "flexStart", "maxRunDurationSeconds": 900000},
                                   {"kind": "onDemand"}, SPOT, SPOT]),
     {P + "gpu.capacity[0].name", P + "gpu.capacity[1].maxRunDurationSeconds", P + "gpu.capacity[2].kind",
      P + "gpu.capacity[4]"}),
]


@pytest.mark.parametrize("stack,changes,keys", [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
def test_a_bad_waterfall_names_every_key_and_registers_nothing(stack, changes, keys):
    result = preview_with(stack, changes)
    assert {problem.key for problem in result.problems} == keys, result.error
    assert result.register_calls == 0 and result.resources == []
    for key in keys:
        assert key in result.error


def test_refusals_say_why():
    messages = {case: preview_with(stack, changes).error for case, stack, changes, _ in INVALID[:10]}
    assert "at least one source" in messages["empty"]
    assert "repeats gpu.capacity[0]" in messages["duplicate-source"]
    assert "required for a reservation source" in messages["reservation-without-name"]
    assert "to 604800 (7 days" in messages["flex-start-over-7-days"]
    assert "a4-highgpu-8g has no plain on-demand capacity" in messages["on-demand-is-no-source"]
    assert "together they hold at most 3" in messages["sources-cannot-reach-the-nodes"]
    autopilot = preview_with("dev", {P + "gpu.provisioningModel": DELETE, P + "gpu.capacity": [SPOT, FLEX]}).error
    assert "managed DRANET" in autopilot and "Standard cluster" in autopilot


def test_capacity_that_ends_before_a_checkpoint_says_which_interval():
    case = next(c for c in INVALID if c[0] == "flex-start-ends-before-a-checkpoint")
    message = preview_with(case[1], case[2]).error
    assert ("gke-grpo:gpu.capacity[1].maxRunDurationSeconds: given 1200; longer than one checkpoint "
            "interval: job.checkpointEverySteps (20) x 60 s a step") in message
    assert "data/interruption-priors.yaml) = 1200 s" in message
    # One second longer than the interval is fine.
    ok = prod_with([RES, {"kind": "flexStart", "maxRunDurationSeconds": 1201}], **{P + "job.checkpointEverySteps": 20})
    assert load_stack_config(*stack_config("prod", ok)).capacity.sources[1].max_run_duration_seconds == 1201


def test_a_reservations_end_time_is_kept_with_its_source():
    config = load_stack_config(*stack_config("prod", prod_with([{**RES, "endTime": "2027-01-01T00:00:00Z"}, SPOT])))
    reserved, spot = config.capacity.sources
    assert reserved.reservation is not None and reserved.reservation.end_time == "2027-01-01T00:00:00Z"
    assert spot.reservation is None
    legacy = load_stack_config(*stack_config("prod", {P + "gpu.reservation.endTime": "2027-01-01T00:00:00Z"}))
    assert legacy.capacity.sources[0].reservation.end_time == "2027-01-01T00:00:00Z"
    # It names no pool: adding an end time replaces nothing.
    assert reserved.pool_name == load_stack_config(*stack_config("prod", prod_with([RES, SPOT]))).capacity.sources[0].pool_name


def test_the_default_is_the_one_source_of_provisioning_model():
    dev = load_stack_config(*stack_config("dev"))
    [spot] = dev.capacity.sources
    assert (spot.kind, spot.create_before_delete, dev.capacity.from_list) == ("spot", True, False)
    assert spot.pool_name.startswith("a3-ultragpu-8g-pool-") and spot.resource_suffix == ""
    prod = load_stack_config(*stack_config("prod"))
    [reserved] = prod.capacity.sources
    assert reserved.reservation is not None and reserved.reservation.name == "grpo-b200-reservation"
    # A reservation is billed either way: its pool holds the run's nodes.
    assert (reserved.min_nodes, reserved.initial_nodes, reserved.max_nodes) == (4, 4, 4)


def test_a_list_in_order_with_derived_pool_names():
    config = load_stack_config(*stack_config("prod", prod_with([RES, FLEX, SPOT])))
    plan = config.capacity
    assert [s.kind for s in plan.sources] == ["reservation", "flexStart", "spot"]
    # Spot and flex-start names end in the hash of their replacing fields; a reservation's is fixed.
    assert [s.pool_name[:-7] if s.create_before_delete else s.pool_name for s in plan.sources] == [
        "a4-highgpu-8g-res-grpo-b200-reservation", "a4-highgpu-8g-flex", "a4-highgpu-8g-spot"]
    assert [s.create_before_delete for s in plan.sources] == [False, True, True]
    assert plan.waterfall and plan.reach == 12
    assert config.compute_class_name == "grpo-prod-gpu"


def test_a_long_reservation_name_gets_a_stable_hashed_pool_name():
    long = {"kind": "reservation", "name": "a-very-long-reservation-name-for-b200", "block": "block-0001"}
    first = load_stack_config(*stack_config("prod", prod_with([long, SPOT]))).capacity.sources[0]
    again = load_stack_config(*stack_config("prod", prod_with([SPOT, long]))).capacity.sources[1]
    assert first.pool_name == again.pool_name and len(first.pool_name) <= 40


def test_a_replacing_change_renames_a_spot_pool_and_nothing_else_does():
    base = load_stack_config(*stack_config("prod", prod_with([RES, FLEX, SPOT]))).capacity.sources
    driver = load_stack_config(*stack_config("prod", dict(prod_with([RES, FLEX, SPOT]),
                                                          **{"gke-grpo:gpu.driverVersion": "LATEST"}))).capacity.sources
    more = load_stack_config(*stack_config("prod", dict(prod_with([RES, FLEX, SPOT]),
                                                        **{"gke-grpo:gpu.maxNodes": 6}))).capacity.sources
    assert [a.pool_name == b.pool_name for a, b in zip(base, driver, strict=True)] == [True, False, False]
    assert [a.pool_name for a in base] == [a.pool_name for a in more]   # autoscaling bounds: in place
    assert all(len(s.pool_name) <= 40 for s in base + driver)
