"""Values no API accepts are refused up front, naming the key (the types of
components/config/types.py and the rules of rules.py, with data/config-limits.yaml), and the
RRULE / RFC 3339 parsers of components/config/timeformats.py on their own."""

from __future__ import annotations

import pytest

from components.config import ConfigError, load_stack_config
from components.config.limits import load_config_limits
from components.config.timeformats import rfc3339, rrule_problem
from tests.conftest import stack_config

TOKEN = "hf_" + "Zq9" * 12


def problems(stack: str, changes: dict) -> str:
    raw, secrets = stack_config(stack, changes)
    with pytest.raises(ConfigError) as err:
        load_stack_config(raw, secrets, stack)
    return str(err.value)


@pytest.mark.parametrize("stack,changes,key,phrase", [
    ("dev", {"gke-grpo:job.learningRate": float("inf")}, "job.learningRate", "a finite number"),
    ("dev", {"gke-grpo:job.klLossCoef": float("nan")}, "job.klLossCoef", "a finite number"),
    ("dev", {"gke-grpo:job.rolloutGpuMemoryUtilization": float("-inf")}, "job.rolloutGpuMemoryUtilization", "finite"),
    ("dev", {"gke-grpo:job.activeDeadlineSeconds": 2**31}, "job.activeDeadlineSeconds", "at most 2,147,483,647"),
    ("dev", {"gke-grpo:gpu.nodes": 1001}, "gpu.nodes", "at most 1,000"),
    ("prod", {"gke-grpo:gpu.maxNodes": 10**9}, "gpu.maxNodes", "at most 1,000"),
    ("dev", {"gke-grpo:storage.gcs": {"fileCacheSizeGib": 12_000}}, "storage.gcs.fileCacheSizeGib", "local SSD"),
    ("prod", {"gke-grpo:cluster.headPool": {"machineType": "c2-standard-7"}}, "cluster.headPool.machineType",
     "c2-standard-4|8|16|30|60"),
    ("prod", {"gke-grpo:cluster.headPool": {"machineType": "n2-standard-1000"}}, "cluster.headPool.machineType",
     "a real predefined machine type"),
    ("dev", {"gke-grpo:job.model": "Qwen/../../etc"}, "job.model", "Hugging Face model id"),
    ("dev", {"gke-grpo:job.model": "Qwen/x; rm -rf /"}, "job.model", "Hugging Face model id"),
    ("dev", {"gke-grpo:job.model": "$(curl evil)"}, "job.model", "Hugging Face model id"),
    ("dev", {"gke-grpo:job.model": "Qwen--x/y"}, "job.model", "Hugging Face model id"),
    ("dev", {"gke-grpo:job.dataset": "../gsm8k"}, "job.dataset", "gsm8k"),
    ("dev", {"gke-grpo:cluster.maintenanceWindow": {"startTime": "2025-02-30T02:00:00Z"}},
     "cluster.maintenanceWindow.startTime", "a real RFC 3339 time"),
    ("dev", {"gke-grpo:cluster.maintenanceWindow": {"endTime": "2025-01-04T24:00:00Z"}},
     "cluster.maintenanceWindow.endTime", "a real RFC 3339 time"),
    ("dev", {"gke-grpo:cluster.maintenanceWindow": {"recurrence": "FREQ=WEEKLY;BYDAY=SX"}},
     "cluster.maintenanceWindow.recurrence", "BYDAY=SX is not a valid BYDAY value"),
    ("dev", {"gke-grpo:cluster.maintenanceWindow": {"recurrence": "FREQ=FORTNIGHTLY"}},
     "cluster.maintenanceWindow.recurrence", "FREQ=FORTNIGHTLY"),
    ("dev", {"gke-grpo:cluster.maintenanceExclusions": [
        {"name": "freeze", "startTime": "2026-12-20T00:00:00Z", "endTime": "2026-12-10T00:00:00Z"}]},
     "cluster.maintenanceExclusions[0].endTime", "an exclusion ends after it starts"),
    ("dev", {"gke-grpo:cluster.maintenanceExclusions": [
        {"name": "freeze", "startTime": "2026-13-01T00:00:00Z", "endTime": "2026-12-10T00:00:00Z"}]},
     "cluster.maintenanceExclusions[0].startTime", "a real RFC 3339 time"),
])
def test_values_no_api_accepts_are_refused_naming_the_key(stack, changes, key, phrase):
    text = problems(stack, changes)
    line = next((l for l in text.splitlines() if f"gke-grpo:{key}:" in l), None)
    assert line is not None, text
    assert phrase in line, text


def test_an_invalid_start_blames_the_start_not_the_end():
    text = problems("dev", {"gke-grpo:cluster.maintenanceWindow": {
        "startTime": "2025-13-40T02:00:00Z", "endTime": "2025-01-04T10:00:00Z"}})
    assert "maintenanceWindow.startTime" in text and "maintenanceWindow.endTime" not in text, text


@pytest.mark.parametrize("rule", ["FREQ=WEEKLY;BYDAY=SA,SU", "FREQ=DAILY", "FREQ=MONTHLY;BYDAY=1SU",
                                  "FREQ=WEEKLY;INTERVAL=2;BYDAY=MO;WKST=SU", "FREQ=DAILY;UNTIL=20271231T000000Z",
                                  "FREQ=YEARLY;BYMONTH=1,7;BYMONTHDAY=-1"])
def test_valid_rrules(rule):
    assert rrule_problem(rule) is None


@pytest.mark.parametrize("rule,why", [
    ("BYDAY=SA", "FREQ is required"), ("FREQ=WEEKLY;FREQ=DAILY", "given twice"),
    ("FREQ=DAILY;COUNT=3;UNTIL=20270101", "mutually exclusive"), ("FREQ=DAILY;BYHOUR=24", "BYHOUR=24"),
    ("FREQ=DAILY;UNTIL=20271332", "UNTIL"), ("FREQ=DAILY;", "NAME=VALUE"), ("FREQ=DAILY;X-NAME=1", "not an RRULE part"),
])
def test_invalid_rrules(rule, why):
    assert why in rrule_problem(rule)


def test_rfc3339_parses_real_times_only():
    assert rfc3339("2025-01-04T02:00:00Z").isoformat() == "2025-01-04T02:00:00+00:00"
    assert rfc3339("2024-02-29T00:00:00+05:30") is not None
    for bad in ("2025-02-29T00:00:00Z", "2025-01-04 02:00:00Z", "2025-01-04T02:00:00", "", "2025-01-04T25:00:00Z"):
        assert rfc3339(bad) is None


def test_limits_file_values():
    limits = load_config_limits()
    assert limits.active_deadline_seconds_max == 2**31 - 1
    assert limits.gpu_nodes_max == 1000
    assert limits.head_machine_known("c2-standard-16") and not limits.head_machine_known("c2-standard-12")
