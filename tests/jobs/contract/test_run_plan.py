"""The run plan's checks (jobs/contract/run_plan.py): one table of fields equal to RunPlan's, the
plans the Pulumi program writes pass them, and the single-value checks describe a bad value
without showing a secret. The hostile table is tests/jobs/test_hostile_inputs.py."""

from __future__ import annotations

import dataclasses
import json

import pytest

from jobs.contract.health import HEALTH_FIELDS, HealthPlan
from jobs.contract.run_plan import PLAN_FIELDS, RunPlan, plan_from_dict, plan_problems
from jobs.contract.safe_files import OversizedInteger
from jobs.contract.value_checks import credential_problems, given
from tests.conftest import ROOT
from tools.hostile_files import PLANTED_TOKEN


def test_every_plan_field_has_its_check_and_no_check_is_orphaned():
    assert set(PLAN_FIELDS) == {f.name for f in dataclasses.fields(RunPlan)}
    assert set(HEALTH_FIELDS) == {f.name for f in dataclasses.fields(HealthPlan)}


def _golden_plan(stack: str) -> dict:
    found = []

    def walk(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "plan.json":
                    found.append(json.loads(value))
                else:
                    walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)
    walk(json.loads((ROOT / "tests" / "golden" / f"{stack}.json").read_text()))
    [plan] = found
    return plan


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_plans_the_program_writes_pass(stack, monkeypatch):
    monkeypatch.delenv("GKE_GRPO_DATA_ROOT", raising=False)
    data = _golden_plan(stack)
    assert plan_problems(data) == []
    plan = plan_from_dict(data)
    assert json.loads(plan.to_json()) == data              # nothing lost or changed on the way


def test_a_bad_value_is_described_never_shown_when_it_looks_like_a_secret():
    assert given(True) == "true (a boolean)" and given(None) == "null"
    assert given(float("nan")) == "NaN" and given(float("-inf")) == "-Infinity"
    assert given(OversizedInteger(5000)) == "a 5000-digit integer"
    assert given(PLANTED_TOKEN) == "a string that looks like a credential (not shown)"
    assert given("x" * 61) == "a string of 61 characters" and given({}) == "an object"


def test_credentials_are_found_wherever_they_are_and_never_echoed():
    doc = {"trainer": {"argv": ["a", f"--hf={PLANTED_TOKEN}"], "env": {"WANDB_API_KEY": "abc"}},
           "health": {"env": {"OK": "$HF_TOKEN", "HF_TOKEN_PATH": "/var/run/x"}},
           PLANTED_TOKEN: 1}
    problems = credential_problems(doc, "")
    assert problems == sorted([
        "[redacted] holds what looks like a Hugging Face token (hf_...)",
        "trainer.argv[1] holds what looks like a Hugging Face token (hf_...)",
        "trainer.env.WANDB_API_KEY holds what looks like a credential assignment (WANDB_API_KEY=...)",
    ])
    assert PLANTED_TOKEN not in " ".join(problems)


def test_health_fractions_that_switch_a_rule_off_are_accepted():
    """0 is meaningful for two fractions: no node is an intra-node outlier, never warn about storage
    (jobs/head/fabric_verdict.py); the published fraction must stay above 0."""
    from jobs.contract.health import health_plan_problems

    storage = {"directory": "/data/runs/r/health-probe", "size_bytes": 1, "streams": 1, "kind": "gcs",
               "expected_write_gbps": None, "expected_read_gbps": None, "expected_source": "", "warn_fraction": 0}
    assert health_plan_problems({"intra_node_outlier_fraction": 0.0, "storage": storage}) == []
    assert health_plan_problems({"published_fraction": 0}) == [
        "published_fraction must be a number in (0, 1], got 0"]


CAPACITY_END = {"margin_seconds": 35.0, "margin_basis": "the planner's checkpoint time",
                "flex_start_max_run_seconds": 86400.0,
                "reservation_ends": [{"name": "r1", "ends_at": 1_800_000_000.0}]}


def test_a_capacity_end_round_trips_and_its_bad_values_are_named(monkeypatch):
    monkeypatch.delenv("GKE_GRPO_DATA_ROOT", raising=False)
    data = {**_golden_plan("dev"), "capacity_end": CAPACITY_END}
    assert plan_problems(data) == []
    assert plan_from_dict(data).capacity_end == CAPACITY_END
    bad = [
        ({**CAPACITY_END, "margin_seconds": -1}, "capacity_end.margin_seconds must be a finite number from 0"),
        ({**CAPACITY_END, "flex_start_max_run_seconds": float("inf")}, "capacity_end.flex_start_max_run_seconds"),
        ({**CAPACITY_END, "reservation_ends": [{"name": "r1", "ends_at": 1e300}]},
         "capacity_end.reservation_ends[0].ends_at must be a finite number above 0 up to 4,102,444,800"),
        ({**CAPACITY_END, "reservation_ends": [{"name": "r1"}]}, "missing keys: capacity_end.reservation_ends[0].ends_at"),
        ({k: v for k, v in CAPACITY_END.items() if k != "margin_basis"}, "missing keys: capacity_end.margin_basis"),
        ({**CAPACITY_END, "surprise": 1}, "unknown keys: capacity_end.surprise"),
        ("soon", "capacity_end must be an object"),
    ]
    for value, message in bad:
        problems = plan_problems({**data, "capacity_end": value})
        assert len(problems) == 1 and message in problems[0], (value, problems)
