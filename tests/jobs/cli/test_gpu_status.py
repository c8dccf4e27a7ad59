"""`gke-grpo status`'s GPU rows (jobs/cli/gpu_status.py), the capacity source of a node's labels
(jobs/contract/capacity.py) and a run's cost priced per source (jobs/cli/run_cost.py), from the
shapes Ray 2.54's dashboard returns (``GET /api/v0/nodes?detail=1``: {"data": {"result":
{"result": [...]}}}) and the lines the gang holder prints. Against a real Ray autoscaler:
tests/jobs/head/test_gpu_gang_ray.py."""

from __future__ import annotations

import pytest

from jobs.cli.gpu_status import gpu_nodes, gpu_worker_rows, start_sources_rows
from jobs.cli.run_cost import run_cost
from jobs.cli.timeline import timeline_from_rows
from jobs.contract.capacity import count_sources, describe_sources, gang_held, provisioning_model_of, source_of
from jobs.plan.prices import hourly_rate, parse_price_table

TABLE = parse_price_table({"as_of": "2026-12-01", "currency": "USD", "region": "r", "machines": {
    "m": {"on_demand_per_hour": 20.0, "on_demand_source": "a", "spot_per_hour": 10.0, "spot_source": "b",
          "flex_start_per_hour": None, "flex_start_source": "c", "whole_machine": True}}})


def node(node_id, labels, state="ALIVE", gpus=8):
    return {"node_id": node_id, "state": state, "node_ip": "10.0.0.1",
            "resources_total": {"CPU": 200, "GPU": gpus} if gpus else {"CPU": 8}, "labels": labels}


STATE = {"result": True, "data": {"result": {"total": 4, "result": [
    node("head", {"ray.io/node-id": "head"}, gpus=0),
    node("a", {"cloud.google.com/gke-spot": "true", "gke-grpo/node-name": "node-a"}),
    node("b", {"cloud.google.com/reservation-name": "r1", "gke-grpo/node-name": "node-b"}),
    node("c", {"cloud.google.com/gke-spot": "true"}, state="DEAD"),
]}}}
HELD = '[gpu_gang] HELD {"autoscaler": "v2", "gpus_per_node": 8, "nodes": 3}\n'
RELEASED = '[gpu_gang] RELEASED {"reason": "the driver ended (its pipe closed)"}\n'


@pytest.mark.parametrize("labels,source", [
    ({"cloud.google.com/gke-spot": "true"}, "spot"),
    ({"cloud.google.com/reservation-name": "r1", "cloud.google.com/gke-spot": "false"}, "reservation:r1"),
    ({"cloud.google.com/gke-flex-start": "true"}, "flexStart"),
    ({"cloud.google.com/gke-provisioning": "spot"}, "spot"),
    ({"gke-grpo/node-labels": "unreadable"}, "unknown"),
    ({}, "unknown"),
])
def test_the_source_of_a_node_from_the_labels_gke_sets(labels, source):
    assert source_of(labels) == source


def test_the_dashboards_node_list_gives_the_alive_gpu_nodes():
    nodes = gpu_nodes(STATE)
    assert [(n["node_id"], n["node_name"], n["source"]) for n in nodes] == [
        ("a", "node-a", "spot"), ("b", "node-b", "reservation:r1")]
    assert gpu_nodes({"result": False, "msg": "x"}) == [] and gpu_nodes("garbage") == []


def test_workers_up_of_requested_while_the_attempt_holds_its_gang():
    rows = dict(gpu_worker_rows(gpu_nodes(STATE), HELD, live=True, capacity={"idleTimeoutSeconds": 60}))
    assert rows["GPU workers"] == "2 up of 3 requested, 1 pending"
    assert rows["GPU nodes"] == "1 x reservation r1, 1 x Spot (node-a, node-b)"


def test_released_workers_are_releasing_then_zero():
    rows = dict(gpu_worker_rows(gpu_nodes(STATE), HELD + RELEASED, live=False, capacity={"idleTimeoutSeconds": 60}))
    assert rows["GPU workers"].startswith("2 releasing (no run holds them: each goes after 60 s idle")
    assert dict(gpu_worker_rows([], HELD + RELEASED, live=False))["GPU workers"] == "0"


def test_a_request_an_ended_attempt_never_released_is_called_out():
    text = dict(gpu_worker_rows(gpu_nodes(STATE), HELD, live=False))["GPU workers"]
    assert "WARNING: a GPU request for 3 nodes stands with no live run" in text
    assert "`gke-grpo release-gpus` clears it" in text
    assert gang_held(HELD) == {"autoscaler": "v2", "gpus_per_node": 8, "nodes": 3}
    assert gang_held(HELD + RELEASED) is None and gang_held("") is None


def test_the_last_starts_gpus_come_from_the_log_and_the_records():
    log = HELD + ('[wait_for_gpus] NODES {"capacity_sources": {"spot": 2}, "gpu_nodes": '
                  '[{"node_name": "node-a"}, {"node_name": "node-c"}]}\n')
    assert dict(gpu_worker_rows([], log, live=True))["GPUs from"] == "2 x Spot (node-a, node-c)"
    timeline = timeline_from_rows([
        {"time": 1, "event": "trainer_start", "attempt": 1, "start": 0, "gpu_nodes": [{"node_name": "x"}],
         "capacity_sources": {"reservation:r1": 1}}])
    assert start_sources_rows(timeline) == [("GPUs from", "attempt 1 start 0: 1 x reservation r1 (x)")]
    assert describe_sources(count_sources([{"source": "spot"}, {"source": "spot"}])) == "2 x Spot"


def test_each_node_is_priced_at_its_own_sources_rate():
    events = [
        {"time": 0, "event": "driver_start", "attempt": 1, "start": 0},
        {"time": 100, "event": "gpu_wait_end", "attempt": 1, "start": 0},
        {"time": 100, "event": "trainer_start", "attempt": 1, "start": 0,
         "capacity_sources": {"reservation:r1": 1, "spot": 1}},
        # a lost node replaced by Spot: the second start runs on two Spot nodes
        {"time": 3700, "event": "gpu_wait_end", "attempt": 1, "start": 1},
        {"time": 3700, "event": "trainer_start", "attempt": 1, "start": 1, "capacity_sources": {"spot": 2}},
        {"time": 7300, "event": "driver_end", "attempt": 1, "start": 1},
    ]
    machine = TABLE.machines["m"]
    cost = run_cost(timeline_from_rows(events), nodes=2, rate=hourly_rate(machine, "reservation"),
                    currency="USD", prices_as_of="x", provisioning_model="reservation", now=9999,
                    rate_of=lambda s: hourly_rate(machine, provisioning_model_of(s, "reservation")))
    # 1 h reserved (20/h) + 1 h Spot + 2 h Spot (10/h)
    assert cost.by_source == pytest.approx({"reservation:r1": 1.0, "spot": 3.0})
    assert cost.so_far == pytest.approx(20 + 30) and cost.node_hours == pytest.approx(4.0)
    assert not cost.committed
    assert "1.00 reservation r1 x 20.00 USD, 3.00 Spot x 10.00 USD" in cost.describe()


def test_starts_recorded_without_sources_count_the_stacks_first_source():
    events = [{"time": 0, "event": "gpu_wait_end", "attempt": 1, "start": 0},
              {"time": 0, "event": "trainer_start", "attempt": 1, "start": 0},
              {"time": 3600, "event": "driver_end", "attempt": 1, "start": 0}]
    cost = run_cost(timeline_from_rows(events), nodes=2, rate=hourly_rate(TABLE.machines["m"], "spot"),
                    currency="USD", prices_as_of="x", provisioning_model="spot", now=9999)
    assert cost.node_hours == pytest.approx(2.0) and cost.so_far == pytest.approx(20.0)


# ---- `gke-grpo release-gpus`: one command that clears a standing request ----------------------

class FakeRuns:
    def __init__(self, live=False, status="SUCCEEDED"):
        from types import SimpleNamespace

        self.attempt = SimpleNamespace(number=2, submission_id="run-1-attempt-2", status="RUNNING", live=live)
        self.final, self.submitted = status, []

    def attempts(self, run_id):
        return [self.attempt]

    def _call(self, what, method, **kwargs):
        self.submitted.append((method, kwargs))

    def wait_terminal(self, submission_id, timeout):
        return self.final

    def logs(self, submission_id):
        return '[gpu_gang] RELEASED {"reason": "released by hand"}\n'


@pytest.mark.parametrize("live,status,code", [(False, "SUCCEEDED", 0), (False, "FAILED", 1), (True, None, 2)])
def test_release_gpus_runs_the_holders_release_on_the_head_unless_the_run_is_live(live, status, code):
    import io
    from types import SimpleNamespace

    from jobs.cli.live_commands import RELEASE_ENTRYPOINT, cmd_release_gpus

    runs, out, err = FakeRuns(live, status), io.StringIO(), io.StringIO()
    result = cmd_release_gpus(runs, SimpleNamespace(run_id="run-1"), SimpleNamespace(wait_seconds=5), out, err)
    assert result == code
    if live:
        assert runs.submitted == [] and "`gke-grpo stop` ends the attempt and releases it" in err.getvalue()
        return
    [(method, kwargs)] = runs.submitted
    assert method == "submit_job" and kwargs["entrypoint"] == RELEASE_ENTRYPOINT == \
        "python3 -m jobs.head.gpu_gang release"
    assert kwargs["submission_id"].startswith("gke-grpo-release-gpus-")
    assert "[gpu_gang] RELEASED" in out.getvalue() and f": {status}" in out.getvalue()
