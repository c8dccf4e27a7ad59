"""components/monitoring.py: what managed Prometheus scrapes (PodMonitoring, checked against the
CRD vendored from GoogleCloudPlatform/prometheus-engine), the dashboard (checked against the
Dashboard schema of Google's published Cloud Monitoring API definition), the alert policies (their
PromQL checked by promtool), the NetworkPolicy that admits only the collector to the metrics ports,
and the config's refusals. The queries themselves run on a real Prometheus in
tests/components/test_monitoring_queries_prometheus.py."""

from __future__ import annotations

import json

import pytest
import yaml

from components.monitoring import AUTOSCALER_METRICS_PORT, alert_rules
from components.monitoring_queries import Scope, alerts, gpu_queries, run_queries
from tests.conftest import preview_with
from tests.monitoring_schemas import validate_dashboard, validate_pod_monitoring
from tests.prometheus_server import promtool_check_rules

P = "gke-grpo:"
SCOPE = Scope(cluster="grpo-dev", namespace="grpo")


def of_type(result, suffix: str) -> list:
    return [r for r in result.resources if r.type.endswith(suffix)]


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_pod_monitorings_scrape_the_head_the_autoscaler_the_driver_and_the_workers(stack, request):
    result = request.getfixturevalue(f"{stack}_preview")
    monitors = {r.inputs["metadata"]["name"]: r.inputs for r in of_type(result, ":PodMonitoring")}
    cluster = f"grpo-{stack}"
    assert set(monitors) == {f"{cluster}-head", f"{cluster}-worker"}
    for manifest in monitors.values():
        assert manifest["apiVersion"] == "monitoring.googleapis.com/v1"
        validate_pod_monitoring({**manifest, "metadata": {**manifest["metadata"], "namespace": "grpo"}})
    head = monitors[f"{cluster}-head"]["spec"]
    assert head["selector"]["matchLabels"] == {"ray.io/cluster": cluster, "ray.io/node-type": "head"}
    assert [e["port"] for e in head["endpoints"]] == [8080, AUTOSCALER_METRICS_PORT, 9464]
    worker = monitors[f"{cluster}-worker"]["spec"]
    assert [e["port"] for e in worker["endpoints"]] == [8080]


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_dashboard_is_valid_for_the_monitoring_api_and_uses_only_the_query_module(stack, request):
    result = request.getfixturevalue(f"{stack}_preview")
    [dashboard] = of_type(result, "monitoring/dashboard:Dashboard")
    layout = json.loads(dashboard.inputs["dashboardJson"])
    validate_dashboard(layout)
    scope = Scope(cluster=f"grpo-{stack}", namespace="grpo")
    written_once = {q.promql for q in (*run_queries(scope), *gpu_queries(scope))}
    used = {data["timeSeriesQuery"]["prometheusQuery"] for tile in layout["mosaicLayout"]["tiles"]
            for data in tile["widget"].get("xyChart", {}).get("dataSets", [])}
    assert used == written_once
    tiles = layout["mosaicLayout"]["tiles"]
    assert all(t["xPos"] + t["width"] <= layout["mosaicLayout"]["columns"] for t in tiles)


def test_every_alert_is_a_promql_policy_and_promtool_accepts_the_rules(dev_preview):
    policies = of_type(dev_preview, "monitoring/alertPolicy:AlertPolicy")
    expected = alerts(SCOPE, stall_step_times=5.0, stall_minimum_seconds=1800, idle_timeout_seconds=60,
                      idle_margin_seconds=600)
    assert len(policies) == len(expected) == 4
    by_rule = {p.inputs["conditions"][0]["conditionPrometheusQueryLanguage"]["alertRule"]: p.inputs for p in policies}
    for alert in expected:
        condition = by_rule[alert.name]["conditions"][0]["conditionPrometheusQueryLanguage"]
        assert condition["query"] == alert.promql
        assert condition["duration"] == f"{alert.for_seconds}s"
        # The driver's series exist only while a run runs: not validated at creation.
        assert condition["disableMetricValidation"] is True
        assert by_rule[alert.name]["documentation"]["content"] == alert.meaning
        assert by_rule[alert.name].get("notificationChannels", []) == []
    ok, output = promtool_check_rules(yaml.safe_dump(alert_rules(expected)))
    assert ok, output


def test_promtool_refuses_a_broken_rule():
    ok, output = promtool_check_rules(yaml.safe_dump({"groups": [{"name": "g", "rules": [
        {"alert": "x", "expr": "max by (run_id (gke_grpo_run_state)", "for": "0s"}]}]}))
    assert not ok and "parse error" in output


def test_a_notification_channel_reaches_every_policy():
    channel = "projects/my-grpo-dev/notificationChannels/1234567890"
    result = preview_with("dev", {P + "monitoring": {"notificationChannel": channel}})
    assert result.error is None, result.error
    for policy in of_type(result, "monitoring/alertPolicy:AlertPolicy"):
        assert policy.inputs["notificationChannels"] == [channel]


def test_monitoring_off_keeps_the_collection_and_drops_the_dashboard_and_alerts():
    result = preview_with("dev", {P + "monitoring": {"enabled": False}})
    assert result.error is None, result.error
    assert not of_type(result, "monitoring/dashboard:Dashboard")
    assert not of_type(result, "monitoring/alertPolicy:AlertPolicy")
    assert len(of_type(result, ":PodMonitoring")) == 2
    assert result.outputs.get("dashboardUrl") is None


INVALID = [
    ("channel-is-an-email", {"notificationChannel": "oncall@example.com"}, P + "monitoring.notificationChannel"),
    ("channel-without-project", {"notificationChannel": "notificationChannels/123"}, P + "monitoring.notificationChannel"),
    ("bound-below-one-step-time", {"stallStepTimes": 0.5}, P + "monitoring.stallStepTimes"),
    ("minimum-below-one-step-time", {"stallMinimumSeconds": 10}, P + "monitoring.stallMinimumSeconds"),
    ("port-of-rays-metrics", {"driverMetricsPort": 8080}, P + "monitoring.driverMetricsPort"),
    ("port-of-the-gcs", {"driverMetricsPort": 6379}, P + "monitoring.driverMetricsPort"),
    ("port-in-rays-worker-range", {"driverMetricsPort": 12000}, P + "monitoring.driverMetricsPort"),
    ("privileged-port", {"driverMetricsPort": 80}, P + "monitoring.driverMetricsPort"),
]


@pytest.mark.parametrize("monitoring,key", [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
def test_bad_monitoring_input_names_its_key_and_registers_nothing(monitoring, key):
    result = preview_with("dev", {P + "monitoring": monitoring})
    assert {p.key for p in result.problems} == {key}, result.error
    assert result.register_calls == 0 and result.resources == []
    assert "Traceback" not in result.error


def test_the_run_driver_is_told_its_metrics_port():
    result = preview_with("dev", {P + "monitoring": {"driverMetricsPort": 9470}})
    assert result.error is None, result.error
    [monitor] = [r for r in of_type(result, ":PodMonitoring") if r.inputs["metadata"]["name"].endswith("-head")]
    assert 9470 in [e["port"] for e in monitor.inputs["spec"]["endpoints"]]


# ---- the NetworkPolicy, as Kubernetes evaluates it ----------------------------------------------

def _matches(selector: dict, labels: dict) -> bool:
    return all(labels.get(k) == v for k, v in (selector.get("matchLabels") or {}).items())


def admitted(policy_spec: dict, *, pod: dict, namespace: str, port: int, policy_namespace: str = "grpo") -> bool:
    """Whether a NetworkPolicy's ingress admits a connection from a pod (its labels and its
    namespace) to ``port`` of a selected pod: any rule whose `from` peer matches (a podSelector
    alone: pods of the policy's namespace; a namespaceSelector alone: every pod of the matching
    namespaces) and whose ports list the port (none listed: all) (Kubernetes NetworkPolicy
    semantics, networking.k8s.io/v1)."""
    namespace_labels = {"kubernetes.io/metadata.name": namespace}
    for rule in policy_spec["ingress"]:
        ports = [p["port"] for p in rule.get("ports", [])]
        if ports and port not in ports:
            continue
        for peer in rule.get("from", []):
            by_namespace = "namespaceSelector" in peer and "podSelector" not in peer
            by_pod = "podSelector" in peer and "namespaceSelector" not in peer
            if by_namespace and _matches(peer["namespaceSelector"], namespace_labels):
                return True
            if by_pod and namespace == policy_namespace and _matches(peer["podSelector"], pod):
                return True
    return False


@pytest.mark.parametrize("port", [8080, AUTOSCALER_METRICS_PORT, 9464])
def test_only_the_collector_reaches_the_metrics_ports_from_outside_the_ray_cluster(port, prod_preview):
    [policy] = of_type(prod_preview, "networking.k8s.io/v1:NetworkPolicy")
    spec = policy.inputs["spec"]
    assert admitted(spec, pod={"app.kubernetes.io/name": "collector"}, namespace="gke-gmp-system", port=port)
    # A pod of the workload namespace that is not a Ray pod, the RayJob submitter, and a pod of
    # any other namespace: refused.
    assert not admitted(spec, pod={"app": "notebook"}, namespace="grpo", port=port)
    assert not admitted(spec, pod={"gke-grpo/role": "rayjob-submitter"}, namespace="grpo", port=port)
    assert not admitted(spec, pod={"app.kubernetes.io/name": "collector"}, namespace="default", port=port)
    # The Ray cluster's own pods reach every port (Ray's own traffic).
    assert admitted(spec, pod={"ray.io/cluster": "grpo-prod"}, namespace="grpo", port=port)


def test_the_collector_reaches_no_other_port(prod_preview):
    [policy] = of_type(prod_preview, "networking.k8s.io/v1:NetworkPolicy")
    for port in (6379, 8265, 10001):
        assert not admitted(policy.inputs["spec"], pod={}, namespace="gke-gmp-system", port=port)


def test_the_driver_port_cannot_be_the_autoscalers():
    result = preview_with("dev", {P + "monitoring": {"driverMetricsPort": 44217}})
    assert {p.key for p in result.problems} == {P + "monitoring.driverMetricsPort"}, result.error
    assert "autoscaler metrics" in result.error
