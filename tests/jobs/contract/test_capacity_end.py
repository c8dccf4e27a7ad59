"""When a run's GPU capacity ends (jobs/contract/capacity_end.py): each node's end from its source
and creation time, the gang's first end, and NeMo RL's duration format, read back by NeMo RL
v0.5.0's own TimeoutChecker (nemo_rl/utils/timer.py, committed verbatim as
data/nemo-rl-0.5.0/utils/timer.py.txt)."""

from __future__ import annotations

import types

import pytest

from jobs.contract import capacity_end as ce
from jobs.contract.capacity import NODE_CREATED_LABEL
from tests.conftest import ROOT

CREATED = 1_800_000_000.0
ENDS = {"margin_seconds": 60.0, "margin_basis": "test", "flex_start_max_run_seconds": 86400.0,
        "reservation_ends": [{"name": "r1", "ends_at": CREATED + 5000}]}


def node(name, source, created=CREATED):
    return {"node_name": name, "source": source, "created_at": created}


def timer_module():
    """nemo_rl/utils/timer.py at v0.5.0, as a module (it needs numpy, nothing of NeMo RL)."""
    source = (ROOT / "data" / "nemo-rl-0.5.0" / "utils" / "timer.py.txt").read_text()
    module = types.ModuleType("nemo_rl_timer_v050")
    exec(compile(source, "nemo_rl/utils/timer.py", "exec"), module.__dict__)
    return module


def test_the_creation_label_is_epoch_seconds_or_nothing():
    assert ce.node_created_at({NODE_CREATED_LABEL: "1800000000"}) == CREATED
    for bad in ("", "2026-12-01T10:00:00Z", "-5", "1e9", "9" * 13, "²", "१८००००००००", "5" * 12):
        assert ce.node_created_at({NODE_CREATED_LABEL: bad}) is None, bad
    assert ce.node_created_at({}) is None


def test_a_flex_start_node_ends_its_run_duration_after_its_creation_less_the_boot():
    end = ce.node_end(node("n1", "flexStart"), ENDS)
    assert end is not None
    # Never later than the VM's real end: the Node is created after the VM entered RUNNING.
    assert end.ends_at == CREATED + 86400 - ce.FLEX_START_BOOT_ALLOWANCE_SECONDS
    assert end.ends_at < CREATED + 86400
    assert "maxRunDurationSeconds 86400" in end.basis


def test_a_reservation_node_ends_with_its_reservation_and_spot_never():
    assert ce.node_end(node("n1", "reservation:r1"), ENDS).ends_at == CREATED + 5000
    assert ce.node_end(node("n1", "reservation:other"), ENDS) is None     # no end configured
    assert ce.node_end(node("n1", "spot"), ENDS) is None
    assert ce.node_end(node("n1", "flexStart", created=None), ENDS) is None
    # One name in two projects: the earlier end.
    two = {**ENDS, "reservation_ends": [{"name": "r1", "ends_at": 9e8}, {"name": "r1", "ends_at": 8e8}]}
    assert ce.node_end(node("n1", "reservation:r1"), two).ends_at == 8e8


def test_the_gang_ends_with_its_first_node_and_names_what_it_cannot_know():
    nodes = [node("a", "flexStart"), node("b", "reservation:r1"), node("c", "spot"),
             node("d", "flexStart", created=CREATED - 4000), node("e", "unknown", None)]
    gang = ce.gang_end(nodes, ENDS)
    assert gang.first.node == "b" and gang.ends_at == CREATED + 5000        # the reservation first
    assert gang.unknown == ("e",)
    later = {**ENDS, "reservation_ends": [{"name": "r1", "ends_at": CREATED + 200_000}]}
    gang = ce.gang_end(nodes, later)
    assert gang.first.node == "d" and gang.ends_at == CREATED - 4000 + 86400 - 300
    none = ce.gang_end([node("c", "spot")], ENDS)
    assert none.first is None and none.ends_at is None and none.unknown == ()
    # Without a flex-start source, a node whose source is unknown may still be a reserved node
    # that ends first: it is named. A flex-start node without a creation time is not one here.
    reservation_only = {**ENDS, "flex_start_max_run_seconds": None}
    assert ce.gang_end([node("e", "unknown", None)], reservation_only).unknown == ("e",)
    assert ce.gang_end([node("c", "spot")], reservation_only).unknown == ()


@pytest.mark.parametrize("seconds,text", [
    (0, "00:00:00:00"), (-30, "00:00:00:00"), (59.99, "00:00:00:59"), (3600, "00:01:00:00"),
    (86400 * 6 + 3600 * 23 + 60 * 59 + 59, "06:23:59:59"), (86400 * 120, "120:00:00:00"),
])
def test_nemo_rls_duration_is_rounded_down_and_read_back_by_its_own_parser(seconds, text):
    assert ce.save_by_duration(seconds) == text
    assert timer_module().convert_to_seconds(text) == max(0, int(seconds // 1))


def test_nemo_rls_timeout_checker_saves_at_the_duration_the_driver_gives(monkeypatch):
    """TimeoutChecker(timeout, fit_last_save_time=True), as grpo_train builds it: no save before
    the duration less the mean step, a save once the next step would pass it, and only once."""
    timer = timer_module()
    clock = {"t": 1000.0}
    monkeypatch.setattr(timer.time, "time", lambda: clock["t"])
    checker = timer.TimeoutChecker(timeout=ce.save_by_duration(3600), fit_last_save_time=True)
    checker.start_iterations()
    saves = []
    for _ in range(70):
        clock["t"] += 60.0               # one 60 s step
        checker.mark_iteration()
        saves.append(checker.check_save())
    first = saves.index(True)
    # After 59 steps (3,540 s) another step would reach 3,600 s: it saves then, before the end.
    assert first == 58 and (first + 1) * 60 + 60 >= 3600 > (first + 1) * 60
    assert saves.count(True) == 1
    assert timer.TimeoutChecker(timeout=None, fit_last_save_time=True).check_save() is False
