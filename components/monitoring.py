"""Monitoring: what Google Cloud Managed Service for Prometheus scrapes of the Ray cluster and the
run driver (``PodMonitoring``, monitoring.googleapis.com/v1), the stack's Cloud Monitoring
dashboard and its alert policies, every query from components/monitoring_queries.py.

The cluster already runs the managed collectors (components/cluster.py: managed Prometheus and
the DCGM component); a ``PodMonitoring`` tells them what to scrape in its namespace. Scraped: the
Ray head's metrics export port, Ray's autoscaler (a sidecar of the head pod) and the run driver's
endpoint (jobs/head/run_metrics.py), and the GPU workers' metrics export port. Only the collectors
reach those ports (KubeRay's NetworkPolicy admits the managed-Prometheus namespace to them alone:
components/kuberay.py); nothing is scraped from outside the cluster.

The dashboard's JSON is built from typed parts (``Chart``, ``Tile``) and checked in tests against
the Dashboard schema of Google's published API definition (data/cloud-monitoring/). Alert
policies use PromQL conditions; Cloud Monitoring validates a condition's metric names when the
policy is created, and the driver's series exist only while a run runs, so that validation is
turned off (``disable_metric_validation``: the queries are run by a real Prometheus in tests
instead).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from components.monitoring_queries import Alert, Query, Scope, alerts, gpu_queries, run_queries
from components.ray_ports import AUTOSCALER_METRICS_PORT

if TYPE_CHECKING:
    from components.config import StackConfig

PODMONITORING_API = "monitoring.googleapis.com/v1"
SCRAPE_INTERVAL = "30s"
# Cloud Monitoring's dashboard grid (MosaicLayout): 48 columns; two charts a row.
GRID_COLUMNS, TILE_WIDTH, TILE_HEIGHT = 48, 24, 16


@dataclass(frozen=True)
class MonitoringArgs:
    project: str
    stack: str
    scope: Scope                       # the GKE cluster's name and the Ray namespace
    ray_cluster_name: str
    ray_metrics_port: int              # Ray's metrics export port on every Ray pod
    driver_metrics_port: int           # the run driver's endpoint on the head
    enabled: bool                      # the dashboard and the alert policies
    notification_channel: str | None
    stall_step_times: float
    stall_minimum_seconds: int
    idle_timeout_seconds: int          # the GPU workers' (components/ray_pods.py)
    idle_margin_seconds: int
    kubernetes_provider: k8s.Provider
    namespace: pulumi.Input[str]
    depends_on: list[pulumi.Resource]  # the PodMonitoring CRD comes with the cluster's managed Prometheus
    services: list[pulumi.Resource]    # the project's APIs (monitoring.googleapis.com)


def pod_monitoring_spec(ray_cluster_name: str, node_type: str, ports: list[int]) -> dict:
    """A PodMonitoring's spec: the Ray pods of one node type of this Ray cluster (KubeRay's own
    labels), each port scraped every 30 s over HTTP at /metrics."""
    return {
        "selector": {"matchLabels": {"ray.io/cluster": ray_cluster_name, "ray.io/node-type": node_type}},
        "endpoints": [{"port": port, "interval": SCRAPE_INTERVAL, "path": "/metrics"} for port in ports],
    }


@dataclass(frozen=True)
class Chart:
    """One dashboard chart: one or more queries drawn as lines."""
    title: str
    queries: tuple[Query, ...]
    unit: str

    def widget(self) -> dict:
        return {
            "title": self.title,
            "xyChart": {
                # Each series is named by its own labels (Cloud Monitoring's default for a PromQL
                # data set): a fixed legend would give every node the same name.
                "dataSets": [{"timeSeriesQuery": {"prometheusQuery": q.promql}, "plotType": "LINE"}
                             for q in self.queries],
                "yAxis": {"label": self.unit, "scale": "LINEAR"},
            },
        }


@dataclass(frozen=True)
class Section:
    title: str
    charts: tuple[Chart, ...]


def dashboard_sections(scope: Scope) -> tuple[Section, ...]:
    run = {q.name: q for q in run_queries(scope)}
    gpu = {q.name: q for q in gpu_queries(scope)}
    return (
        Section("Progress", (
            Chart("Training step", (run["latest_step"],), "step"),
            Chart("Steps per hour and step time", (run["steps_per_hour"], run["step_seconds"]), "steps/h, s"),
        )),
        Section("GPUs", (
            Chart("GPU nodes: up, pending, requested by the run",
                  (gpu["gpu_nodes_up"], gpu["gpu_nodes_pending"], gpu["gpu_nodes_requested"]), "nodes"),
            Chart("GPU utilisation per node (DCGM)", (gpu["gpu_utilization"],), "%"),
            Chart("GPU memory used per node (DCGM)", (gpu["gpu_memory_used"],), "MiB"),
            Chart("GPU power per node (DCGM)", (gpu["gpu_power"],), "W"),
        )),
        Section("Run state, restarts and cost", (
            Chart("Run state (1 = current)", (run["run_state"],), "state"),
            Chart("Trainer restarts", (run["restarts"],), "restarts"),
            Chart("Cost so far", (run["cost_so_far"],), "currency"),
            Chart("GPU-seconds idle", (run["gpu_idle_seconds"],), "GPU-s"),
        )),
    )


def dashboard_json(display_name: str, sections: tuple[Section, ...]) -> dict:
    """The Dashboard (Cloud Monitoring API v1): a mosaic of a section header (a collapsible group)
    and its charts, two a row."""
    tiles: list[dict] = []
    y = 0
    for section in sections:
        rows = (len(section.charts) + 1) // 2
        tiles.append({"xPos": 0, "yPos": y, "width": GRID_COLUMNS, "height": TILE_HEIGHT * rows + 4,
                      "widget": {"title": section.title, "collapsibleGroup": {"collapsed": False}}})
        for index, chart in enumerate(section.charts):
            tiles.append({"xPos": (index % 2) * TILE_WIDTH, "yPos": y + 4 + (index // 2) * TILE_HEIGHT,
                          "width": TILE_WIDTH, "height": TILE_HEIGHT, "widget": chart.widget()})
        y += TILE_HEIGHT * rows + 4
    return {"displayName": display_name, "mosaicLayout": {"columns": GRID_COLUMNS, "tiles": tiles}}


def alert_rules(alert_list: tuple[Alert, ...]) -> dict:
    """The alerts as a Prometheus rule group (what promtool checks; the policies carry the same
    expressions)."""
    return {"groups": [{"name": "gke-grpo", "rules": [
        {"alert": a.name, "expr": a.promql, "for": f"{a.for_seconds}s",
         "annotations": {"summary": a.title, "description": a.meaning}} for a in alert_list]}]}


def dashboard_url(project: str, dashboard_id: str) -> str:
    """The console page of a dashboard, from its id (``projects/<number>/dashboards/<id>``)."""
    return (f"https://console.cloud.google.com/monitoring/dashboards/builder/"
            f"{dashboard_id.rsplit('/', 1)[-1]}?project={project}")


class Monitoring(pulumi.ComponentResource):
    pod_monitorings: list[k8s.apiextensions.CustomResource]
    dashboard: gcp.monitoring.Dashboard | None
    alert_policies: list[gcp.monitoring.AlertPolicy]
    dashboard_url: pulumi.Output[str] | None

    def __init__(self, name: str, args: MonitoringArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gke-grpo:components:Monitoring", name, None, opts)
        k8s_opts = pulumi.ResourceOptions(parent=self, provider=args.kubernetes_provider,
                                          depends_on=list(args.depends_on))
        targets = {
            "head": [args.ray_metrics_port, AUTOSCALER_METRICS_PORT, args.driver_metrics_port],
            "worker": [args.ray_metrics_port],
        }
        self.pod_monitorings = [
            k8s.apiextensions.CustomResource(
                f"{name}-{node_type}",
                api_version=PODMONITORING_API, kind="PodMonitoring",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=f"{args.ray_cluster_name}-{node_type}",
                                                    namespace=args.namespace,
                                                    labels={"app.kubernetes.io/part-of": "gke-grpo"}),
                spec=pod_monitoring_spec(args.ray_cluster_name, node_type, ports),
                opts=k8s_opts)
            for node_type, ports in targets.items()
        ]
        self.dashboard, self.alert_policies, self.dashboard_url = None, [], None
        if args.enabled:
            layout = dashboard_json(f"gke-grpo {args.stack}: {args.scope.cluster}",
                                    dashboard_sections(args.scope))
            self.dashboard = gcp.monitoring.Dashboard(
                f"{name}-dashboard", project=args.project, dashboard_json=json.dumps(layout, sort_keys=True),
                opts=pulumi.ResourceOptions(parent=self, depends_on=list(args.services)))
            self.dashboard_url = self.dashboard.id.apply(lambda i: dashboard_url(args.project, i))
            found = alerts(args.scope, stall_step_times=args.stall_step_times,
                           stall_minimum_seconds=args.stall_minimum_seconds,
                           idle_timeout_seconds=args.idle_timeout_seconds,
                           idle_margin_seconds=args.idle_margin_seconds)
            self.alert_policies = [self._policy(name, args, alert) for alert in found]
        self.register_outputs({
            "pod_monitorings": [f"{args.ray_cluster_name}-{t}" for t in targets],
            "dashboard_url": self.dashboard_url,
            "alert_policies": [p.display_name for p in self.alert_policies],
        })

    def _policy(self, name: str, args: MonitoringArgs, alert: Alert) -> gcp.monitoring.AlertPolicy:
        condition = gcp.monitoring.AlertPolicyConditionConditionPrometheusQueryLanguageArgs(
            query=alert.promql, duration=f"{alert.for_seconds}s", evaluation_interval="60s",
            alert_rule=alert.name, rule_group="gke-grpo",
            labels={"stack": args.stack, "cluster": args.scope.cluster},
            disable_metric_validation=True)
        return gcp.monitoring.AlertPolicy(
            f"{name}-alert-{alert.name.replace('_', '-')}",
            project=args.project,
            display_name=f"gke-grpo {args.stack}: {alert.title}",
            combiner="OR",
            severity="ERROR" if alert.name == "run_failed" else "WARNING",
            conditions=[gcp.monitoring.AlertPolicyConditionArgs(
                display_name=alert.title, condition_prometheus_query_language=condition)],
            notification_channels=[args.notification_channel] if args.notification_channel else [],
            documentation=gcp.monitoring.AlertPolicyDocumentationArgs(
                content=alert.meaning, mime_type="text/markdown"),
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(args.services)))


def monitoring_args(config: StackConfig, *, kubernetes_provider: k8s.Provider, namespace: pulumi.Input[str],
                    depends_on: list[pulumi.Resource], services: list[pulumi.Resource]) -> MonitoringArgs:
    """The component's arguments from the validated stack config."""
    from components.ray_pods import IDLE_TIMEOUT_SECONDS, METRICS_PORT

    watch = config.monitoring
    return MonitoringArgs(
        project=config.project, stack=config.stack,
        scope=Scope(cluster=config.cluster.name, namespace=config.kuberay.namespace),
        ray_cluster_name=config.kuberay.ray_cluster_name, ray_metrics_port=METRICS_PORT,
        driver_metrics_port=watch.driver_metrics_port, enabled=watch.enabled,
        notification_channel=watch.notification_channel, stall_step_times=watch.stall_step_times,
        stall_minimum_seconds=watch.stall_minimum_seconds, idle_timeout_seconds=IDLE_TIMEOUT_SECONDS,
        idle_margin_seconds=watch.idle_margin_seconds, kubernetes_provider=kubernetes_provider,
        namespace=namespace, depends_on=depends_on, services=services)
