"""`gke-grpo:monitoring`: what Google Cloud Managed Service for Prometheus collects of the Ray
cluster and the run driver, the stack's Cloud Monitoring dashboard and its alert policies
(components/monitoring.py, docs/metrics-and-report.md)."""

from __future__ import annotations

from pydantic import Field

from components.config.models.base import _Area
from components.config.types import (
    AlertMinimumSeconds,
    DriverMetricsPort,
    NotificationChannelName,
    StepTimesFactor,
)


class MonitoringConfig(_Area):
    enabled: bool = Field(
        True, description="the dashboard and the alert policies (the metrics are collected either way)")
    notification_channel: NotificationChannelName | None = Field(
        None,
        description=("the alerts' notification channel, "
                     "`projects/<project>/notificationChannels/<id>` (created in the console or "
                     "with `gcloud beta monitoring channels create`)"),
        json_schema_extra={"defaultText": "none: the policies exist and show in the console"},
    )
    stall_step_times: StepTimesFactor = Field(
        5.0,
        description=("the no-progress alert fires when no step came for this many of the run's "
                     "own step times (its median, from the driver's metrics), ≥ 1"),
    )
    stall_minimum_seconds: AlertMinimumSeconds = Field(
        1800,
        description=("and never sooner than this, at least one step time of the planner "
                     "(data/interruption-priors.yaml)"),
    )
    idle_margin_seconds: int = Field(
        600, ge=0, le=86400,
        description=("GPU nodes up with no run alert: after the GPU workers' idle timeout plus "
                     "this margin"),
    )
    driver_metrics_port: DriverMetricsPort = Field(
        9464,
        description=("the run driver's metrics port on the Ray head (1024-65535, none of Ray's "
                     "own ports)"),
    )
