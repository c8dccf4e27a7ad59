"""The monitoring test harness works: a real Prometheus (tests/prometheus_server.py) scrapes a
real exporter in a loopback-only namespace and answers PromQL; promtool accepts a valid rule and
rejects broken PromQL; the PodMonitoring and Dashboard validators (tests/monitoring_schemas.py)
accept minimal valid objects and reject unknown fields.

The scrape runs inside a loopback-only network namespace (tests/jobs/ray_head.py InnerRun, no Ray
head started): Prometheus and the exporter listen on 127.0.0.1 there, as they will beside the
real Ray head of the monitoring tests.
"""

from __future__ import annotations

import copy
import http.server
import threading
from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest

from tests.conftest import skip_or_fail
from tests.jobs import ray_head
from tests.monitoring_schemas import validate_dashboard, validate_pod_monitoring
from tests.prometheus_server import (
    PrometheusError,
    PrometheusServer,
    free_loopback_port,
    prometheus_binary,
    promtool_check_expression,
    promtool_check_rules,
)

EXPOSITION = """\
# HELP gke_grpo_harness_steps_total Steps the harness exporter pretends to have trained.
# TYPE gke_grpo_harness_steps_total counter
gke_grpo_harness_steps_total{run="r1"} 42
# HELP gke_grpo_harness_gpus Fake GPUs.
# TYPE gke_grpo_harness_gpus gauge
gke_grpo_harness_gpus{node="worker-0",gpu="0"} 1
gke_grpo_harness_gpus{node="worker-0",gpu="1"} 1
"""


def _needs_prometheus(tool: str = "prometheus") -> None:
    if prometheus_binary(tool) is None:
        skip_or_fail(f"`{tool}` is not installed (apt-get install --no-install-recommends prometheus)")


# Started in the background when collection ends (tests/conftest.py); the outer test waits for it.
# Measured 2026-12-06 on the 2-core machine with a Ray head and its worker running beside it: the
# inner run 8 s in all (its pytest's start included), its test 5.4 s, nearly all of it Prometheus's
# 5 s tick before it scrapes a new target.
INNER = ray_head.InnerRun(__file__, "the Prometheus harness test", measured_seconds=12)

if not ray_head.inside_namespace():

    def test_prometheus_scrapes_an_exporter_in_a_loopback_namespace():
        INNER.check()

    def test_promtool_accepts_a_valid_rule_and_rejects_broken_promql():
        _needs_prometheus("promtool")
        good = """\
groups:
- name: gke-grpo
  rules:
  - alert: GpuWorkersMissing
    expr: sum(ray_node_gpus_available) < 16
    for: 10m
    labels: {severity: page}
"""
        ok, output = promtool_check_rules(good)
        assert ok, output
        assert "SUCCESS: 1 rules found" in output
        ok, output = promtool_check_rules(good.replace("sum(ray_node_gpus_available) < 16",
                                                       "sum(ray_node_gpus_available < 16"))
        assert not ok
        assert "unclosed left parenthesis" in output, output
        assert promtool_check_expression('avg by (Hostname, gpu) (avg_over_time(DCGM_FI_DEV_GPU_UTIL[5m]))')[0]
        ok, output = promtool_check_expression("rate(ray_tasks[5m]) by (State)")
        assert not ok and "parse error" in output, output

    POD_MONITORING: dict[str, Any] = {
        "apiVersion": "monitoring.googleapis.com/v1", "kind": "PodMonitoring",
        "metadata": {"name": "ray-workers", "namespace": "ray"},
        "spec": {"selector": {"matchLabels": {"ray.io/node-type": "worker"}},
                 "endpoints": [{"port": "metrics", "interval": "30s"}]},
    }

    def test_validate_pod_monitoring_accepts_a_minimal_one_and_rejects_unknown_fields():
        validate_pod_monitoring(POD_MONITORING)
        validate_pod_monitoring({**POD_MONITORING, "kind": "ClusterPodMonitoring"})
        unknown = copy.deepcopy(POD_MONITORING)
        unknown["spec"]["endpoints"][0]["scrapeInterval"] = "30s"
        with pytest.raises(jsonschema.ValidationError, match="'scrapeInterval' was unexpected"):
            validate_pod_monitoring(unknown)
        bad = {"interval": "30 seconds", "timeout": "1m", "port": 0}
        for key, message in (("interval", "is not a 'duration'"), ("timeout", "must not be greater"),
                             ("port", "Port is required")):
            endpoint = {"port": "metrics", "interval": "30s", key: bad[key]}
            manifest = {**POD_MONITORING, "spec": {**POD_MONITORING["spec"], "endpoints": [endpoint]}}
            with pytest.raises(jsonschema.ValidationError, match=message):
                validate_pod_monitoring(manifest)
        with pytest.raises(jsonschema.ValidationError, match="'selector' is a required property"):
            validate_pod_monitoring({**POD_MONITORING, "spec": {"endpoints": POD_MONITORING["spec"]["endpoints"]}})

    DASHBOARD: dict[str, Any] = {
        "displayName": "gke-grpo dev",
        "gridLayout": {"columns": "2", "widgets": [{
            "title": "GPUs available",
            "xyChart": {"dataSets": [{"plotType": "LINE", "minAlignmentPeriod": "60s", "timeSeriesQuery": {
                "prometheusQuery": "sum(ray_node_gpus_available)", "unitOverride": "1"}}]},
        }]},
    }

    def test_validate_dashboard_accepts_a_minimal_one_and_rejects_unknown_fields():
        validate_dashboard(DASHBOARD)
        validate_dashboard({**DASHBOARD, "gridLayout": {**DASHBOARD["gridLayout"], "columns": 2}})  # int64 as a number
        unknown = copy.deepcopy(DASHBOARD)
        unknown["gridLayout"]["widgets"][0]["xyChart"]["dataSets"][0]["timeSeriesQuery"]["promQL"] = "up"
        with pytest.raises(jsonschema.ValidationError, match="'promQL' was unexpected"):
            validate_dashboard(unknown)
        wrong_enum = copy.deepcopy(DASHBOARD)
        wrong_enum["gridLayout"]["widgets"][0]["xyChart"]["dataSets"][0]["plotType"] = "LINES"
        with pytest.raises(jsonschema.ValidationError, match="'LINES' is not one of"):
            validate_dashboard(wrong_enum)
        with pytest.raises(jsonschema.ValidationError, match="displayName is required"):
            validate_dashboard({"gridLayout": DASHBOARD["gridLayout"]})
        with pytest.raises(jsonschema.ValidationError, match="is not valid under any of the given schemas"):
            validate_dashboard({**DASHBOARD, "gridLayout": {**DASHBOARD["gridLayout"], "columns": "two"}})

else:

    class _Exporter(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = EXPOSITION.encode()
            self.send_response(200 if self.path == "/metrics" else 404)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:   # quiet
            pass

    @pytest.fixture
    def exporter() -> Iterator[str]:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", free_loopback_port()), _Exporter)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"127.0.0.1:{server.server_address[1]}"
        finally:
            server.shutdown()
            server.server_close()

    def test_prometheus_scrapes_a_stdlib_exporter(exporter):
        _needs_prometheus()
        ray_head.only_loopback_links()
        with PrometheusServer({"harness": [exporter]}) as prom:
            assert ray_head.non_loopback_listeners() == []
            series = prom.wait_for_series('gke_grpo_harness_gpus{job="harness"}')
            assert sorted(s["metric"]["gpu"] for s in series) == ["0", "1"]
            assert {s["metric"]["instance"] for s in series} == {exporter}
            [total] = prom.query("sum(gke_grpo_harness_gpus)")
            assert total["value"][1] == "2"
            [up] = prom.query('up{job="harness"}')
            assert up["value"][1] == "1"
            assert prom.query("gke_grpo_no_such_metric") == []
            with pytest.raises(PrometheusError, match="bad_data"):
                prom.query("sum(gke_grpo_harness_gpus")
            [target] = prom.targets()
            assert target["health"] == "up", target
            data_dir, proc = prom._dir, prom._proc
        assert proc is not None and proc.poll() is not None, "prometheus still running after stop()"
        assert data_dir is not None and not data_dir.exists()
