"""Every query of the dashboard and the alert policies (components/monitoring_queries.py), run by
a real Prometheus server (Debian's `prometheus`, tests/prometheus_server.py) against what really
exports those metrics here, in a loopback-only network namespace:

- a real Ray 2.54 head with Ray's own v2 autoscaler over fake GPU nodes (tools/fake_capacity.py),
  its metrics export port and the autoscaler's metrics server (port 44217, as in the head pod);
- the run driver's own endpoint (jobs/head/run_metrics.py, the real prometheus_client server),
  fed a stand-in run: the records the driver writes, at the times a run would write them;
- the series labels managed Prometheus adds (``cluster``, ``namespace``) set on the scrape.

Each query that should return series does, and each alert's condition holds exactly in the state
it is written for. DCGM's metric names cannot be exported here (no GPU): they are checked against
dcgm-exporter's default counters file at its pinned tag (data/dcgm-exporter/), and the test says
so."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from components.monitoring import AUTOSCALER_METRICS_PORT
from components.monitoring_queries import Scope, alerts, gpu_queries, run_queries
from tests.conftest import ROOT
from tests.jobs import ray_head

SCOPE = Scope(cluster="grpo-test", namespace="grpo")
DCGM_COUNTERS = sorted((ROOT / "data" / "dcgm-exporter").glob("*/default-counters.csv"))


def dcgm_names(query: str) -> set[str]:
    return set(re.findall(r"\bDCGM_FI_[A-Z0-9_]+", query))


def test_the_dcgm_names_are_dcgm_exporters_own():
    # No GPU here, so no DCGM exporter: the names are checked against dcgm-exporter's default
    # counters (the fields it exports, under their DCGM names), not run.
    [counters] = DCGM_COUNTERS
    with counters.open() as f:
        exported = {row[0].strip() for row in csv.reader(f) if row and not row[0].startswith("#")}
    used = set().union(*(dcgm_names(q.promql) for q in gpu_queries(SCOPE)))
    assert used == {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"}
    assert used <= exported


# Measured 2026-12-06 on the 2-core machine: the inner run 33 s alone (the head's start about
# 12 s of it); 80 s allowed for a loaded machine, x BOUND_MARGIN.
INNER = ray_head.InnerRun(__file__, "the dashboard's and alerts' queries on a real Prometheus",
                          measured_seconds=80, own_head=True)

if not ray_head.inside_namespace():

    def test_every_query_runs_on_prometheus_against_ray_and_the_driver():
        INNER.check()

else:
    import json
    import time

    from jobs.contract.run_plan import Command, RunPlan
    from jobs.head import run_metrics
    from tests.prometheus_server import PrometheusServer, free_loopback_port
    from tools import fake_capacity as fc
    from tools import local_ray

    RAY_METRICS_PORT = 8080
    GPUS_PER_NODE = 2
    # GPU nodes join 2 s after their "pod" is created; they stay (a long idle timeout) while the
    # request holds them.
    CLUSTER = fc.FakeCluster(sources=(fc.FakeSource("spot", {"cloud.google.com/gke-spot": "true"},
                                                    capacity=1, join_seconds=2.0),),
                             max_workers=2, gpus_per_node=GPUS_PER_NODE, idle_timeout_seconds=600)
    # An alert's state is reached within this (the autoscaler's 1 s period, a node's 2 s join,
    # Prometheus's 1 s scrape and its 5 s pick-up of new targets).
    REACHED_WITHIN = 90.0

    class Clock:
        """The stand-in run's time: now, except that steps can be put in the past."""
        def __init__(self):
            self.offset = 0.0

        def __call__(self) -> float:
            return time.time() + self.offset

    @pytest.fixture(scope="module")
    def exporters(tmp_path_factory):
        ray_head.only_loopback_links()
        work = tmp_path_factory.mktemp("monitoring")
        config = work / "autoscaling.json"
        config.write_text(json.dumps(CLUSTER.autoscaling_config(), indent=1))
        driver_port = free_loopback_port()
        plan = RunPlan(run_id="exp-monitor-1", attempt=1, framework="verl",
                       run_dir=str(work / "runs" / "exp-monitor-1"),
                       checkpoint_dir=str(work / "checkpoints" / "exp-monitor-1"), prepare=None,
                       gpus=2 * GPUS_PER_NODE, gpus_per_node=GPUS_PER_NODE, gpu_wait_seconds=600,
                       trainer=Command(argv=("true",)), deadline_seconds=None,
                       metrics_port=driver_port, gpu_hourly_rate=50.0, currency="USD")
        Path(plan.run_dir).mkdir(parents=True)
        clock = Clock()
        metrics = run_metrics.RunDriverMetrics(plan, 1, clock=clock)
        endpoint = None
        try:
            local_ray.start_head(num_cpus=CLUSTER.head_cpus, num_gpus=0,
                                 extra_args=[f"--autoscaling-config={config}",
                                             f"--metrics-export-port={RAY_METRICS_PORT}"],
                                 env=fc.fake_cluster_env(CLUSTER), timeout=300)
            endpoint = run_metrics.DriverMetricsEndpoint(metrics, driver_port, "127.0.0.1")
            jobs = {"ray": [f"127.0.0.1:{RAY_METRICS_PORT}"],
                    "autoscaler": [f"127.0.0.1:{AUTOSCALER_METRICS_PORT}"],
                    "driver": [f"127.0.0.1:{driver_port}"]}
            with PrometheusServer(jobs, labels={"cluster": SCOPE.cluster, "namespace": SCOPE.namespace}) as prom:
                assert ray_head.non_loopback_listeners() == []
                yield prom, metrics, clock, endpoint
        finally:
            if endpoint is not None:
                endpoint.stop()
            fc.stop_autoscaling_head(ray_head.NS_ENV)

    def feed(metrics, clock, event: str, **fields) -> None:
        metrics({"event": event, "time": clock(), **fields})

    def alert(name: str, **settings):
        chosen = {"stall_step_times": 5.0, "stall_minimum_seconds": 1800, "idle_timeout_seconds": 60,
                  "idle_margin_seconds": 600, **settings}
        return next(a for a in alerts(SCOPE, **chosen) if a.name == name)

    def holds(prom, promql: str) -> bool:
        return bool(prom.query(promql))

    def eventually(prom, promql: str, within: float = REACHED_WITHIN) -> list:
        return prom.wait_for_series(promql, timeout=within)

    def test_1_a_request_with_no_run_pends_then_its_nodes_are_up(exporters):
        prom, *_ = exporters
        from jobs.head.gpu_gang import GangRequest, gcs_address

        # A gang request of 2 nodes, as a driver makes it (the stand-in driver's endpoint is up,
        # in state preparing, until test 4 stops it).
        gang = GangRequest(gcs_address(fc.GCS))
        gang.request(2, GPUS_PER_NODE)
        # One source with room for one node: one node joins, the other pends for ever.
        pending = next(q for q in gpu_queries(SCOPE) if q.name == "gpu_nodes_pending")
        up = next(q for q in gpu_queries(SCOPE) if q.name == "gpu_nodes_up")
        eventually(prom, f"({pending.promql}) > 0")
        eventually(prom, f"({up.promql}) > 0")
        [series] = prom.query(up.promql)
        assert series["metric"]["NodeType"] == "gpu-workers"

    def test_2_the_run_queries_return_series_during_a_run(exporters):
        prom, metrics, clock, _ = exporters
        feed(metrics, clock, "driver_start", run_id="exp-monitor-1")
        feed(metrics, clock, "gpu_wait_start")
        feed(metrics, clock, "gpu_request", nodes=2)
        feed(metrics, clock, "gpu_wait_end", exit_code=0)
        feed(metrics, clock, "trainer_start")
        for step in range(1, 4):
            feed(metrics, clock, "step", step=step)
            time.sleep(0.2)
        for query in run_queries(SCOPE):
            series = eventually(prom, query.promql)
            assert all(s["metric"].get("run_id") == "exp-monitor-1" for s in series), query.name
        requested = next(q for q in gpu_queries(SCOPE) if q.name == "gpu_nodes_requested")
        assert float(eventually(prom, requested.promql)[0]["value"][1]) == 2
        [state] = prom.query(next(q for q in run_queries(SCOPE) if q.name == "run_state").promql)
        assert state["metric"]["state"] == "training"
        # A healthy run: no alert holds.
        for name in ("run_failed", "no_progress", "gpu_nodes_without_run", "gpu_request_without_run"):
            assert not holds(prom, alert(name).promql), name
        restarts = next(q for q in run_queries(SCOPE) if q.name == "restarts").promql
        feed(metrics, clock, "restart")
        eventually(prom, f"({restarts}) == 1")

    def test_3_no_step_for_longer_than_the_bound_is_no_progress(exporters):
        prom, metrics, clock, _ = exporters
        # The bound: 5 step times of the run's own (about 0.2 s), never below the minimum: with a
        # minimum of 60 s, a step line 61 s old is a stall, one 30 s old is not.
        stalled = alert("no_progress", stall_minimum_seconds=60).promql
        # A new trainer start (after test 2's restart): just begun, no stall whatever the last
        # step of the start before it.
        feed(metrics, clock, "trainer_start")
        assert not holds(prom, stalled)
        # The same start, put 70 s in the past, with two steps 61.4 s and 61.2 s ago.
        clock.offset = -70.0
        feed(metrics, clock, "trainer_start")
        for step, ago in ((4, 61.4), (5, 61.2)):
            clock.offset = -ago
            feed(metrics, clock, "step", step=step)
        clock.offset = 0.0
        eventually(prom, stalled)
        # The bound follows the run's own step time (its median gap, about 0.2 s here): 1000 of
        # them is 200 s, and a 61 s silence is within it.
        assert not holds(prom, alert("no_progress", stall_step_times=1000, stall_minimum_seconds=60).promql)

    def test_4_a_failed_run_is_seen_after_its_driver_went(exporters):
        prom, metrics, clock, endpoint = exporters
        failed = alert("run_failed").promql
        assert not holds(prom, failed)
        feed(metrics, clock, "driver_end", exit_code=19)
        eventually(prom, failed)
        endpoint.stop()            # the driver exits: its target goes down
        time.sleep(3)
        assert holds(prom, failed)            # the last ten minutes still show it

    def test_5_gpu_nodes_and_a_request_with_no_run_alert(exporters):
        prom, *_ = exporters
        # The driver is gone (test 4) and the stale request holds one node up and one pending.
        eventually(prom, alert("gpu_nodes_without_run").promql)
        eventually(prom, alert("gpu_request_without_run").promql)
        from jobs.head.gpu_gang import GangRequest, gcs_address
        GangRequest(gcs_address(fc.GCS)).clear()

    def test_6_every_expression_is_valid_promql_for_this_prometheus(exporters):
        prom, *_ = exporters
        for a in alerts(SCOPE, stall_step_times=5.0, stall_minimum_seconds=1800, idle_timeout_seconds=60,
                        idle_margin_seconds=600):
            prom.query(a.promql)              # PrometheusError on a parse error
        for q in (*run_queries(SCOPE), *gpu_queries(SCOPE)):
            prom.query(q.promql)
