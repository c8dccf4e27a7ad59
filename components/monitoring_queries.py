"""Every PromQL query of the stack's dashboard and alert policies, written once (docs/
metrics-and-report.md, "Watching a run live"). Pure: components/monitoring.py builds the
dashboard and the policies from these; tests run each one on a real Prometheus server against a
real Ray head, its autoscaler and the run driver's endpoint (tests/components/
test_monitoring_queries_prometheus.py), and check the alert rules with promtool.

What is queried, and who exports it:
- ``gke_grpo_run_*``: the run driver's own endpoint on the head (jobs/head/run_metrics.py), one
  series set per run (label ``run_id``);
- ``autoscaler_active_nodes`` / ``autoscaler_pending_nodes`` by ``NodeType`` (a Ray worker group):
  Ray's autoscaler, a sidecar of the head pod, on port 44217 (ray/autoscaler/_private/
  constants.py AUTOSCALER_METRIC_PORT; KubeRay's entry passes the head's IP as ``monitor_ip``, so
  its metrics server is on: ray/autoscaler/_private/kuberay/run_autoscaler.py, Ray 2.49.2, 2.54.0,
  2.55.1). Not ``autoscaler_cluster_resources`` / ``autoscaler_pending_resources``: those are set
  only for resources some instance has and never set back to 0 (ray/autoscaler/v2/
  metrics_reporter.py report_resources, 2.54.0), so they keep a node's GPUs after it is gone;
  the node counts are set for every group on every round (report_instances);
- ``DCGM_FI_DEV_*``: GKE's managed DCGM exporter on each GPU node (the cluster's DCGM monitoring
  component; names checked against dcgm-exporter's default counters, data/dcgm-exporter/).

Managed Service for Prometheus labels every series with its ``cluster`` and ``namespace`` (of the
scraped pod); the queries select this stack's by them (``Scope``).
"""

from __future__ import annotations

from dataclasses import dataclass

from jobs.contract.layouts import POOL_GROUPS

# The Ray worker groups that hold GPU nodes (components/ray_pods.py GPU_GROUP and a split
# layout's pool groups): every stack's, so a query does not change with the layout.
GPU_GROUPS = ("gpu-workers", *POOL_GROUPS.values())
GPU_GROUP_MATCH = "|".join(GPU_GROUPS)


@dataclass(frozen=True)
class Scope:
    """Which stack's series: its GKE cluster and the Ray cluster's namespace."""
    cluster: str
    namespace: str

    @property
    def pods(self) -> str:
        """Series scraped from this stack's Ray pods (the driver's and Ray's)."""
        return f'cluster="{self.cluster}", namespace="{self.namespace}"'

    @property
    def nodes(self) -> str:
        """Series of this cluster's nodes, whatever namespace the exporter runs in (DCGM)."""
        return f'cluster="{self.cluster}"'


@dataclass(frozen=True)
class Query:
    name: str            # stable id: a tile's and a test's
    title: str           # the chart's title
    promql: str
    unit: str            # the y axis


@dataclass(frozen=True)
class Alert:
    name: str
    title: str
    promql: str
    for_seconds: int     # how long the condition holds before the alert fires
    meaning: str         # what it means and what to do (the policy's documentation)


def run_queries(scope: Scope) -> tuple[Query, ...]:
    """Progress, state, restarts and cost: the run driver's metrics."""
    s = scope.pods
    return (
        Query("latest_step", "Training step", f"max by (run_id) (gke_grpo_run_latest_step{{{s}}})", "step"),
        Query("steps_per_hour", "Steps per hour",
              f"max by (run_id) (gke_grpo_run_steps_per_hour{{{s}}})", "steps/h"),
        Query("step_seconds", "Step time (median of the current start)",
              f"max by (run_id) (gke_grpo_run_step_seconds{{{s}}})", "s"),
        Query("run_state", "Run state", f"max by (run_id, state) (gke_grpo_run_state{{{s}}}) == 1", "state"),
        Query("restarts", "Trainer restarts (this attempt)",
              f"max by (run_id) (gke_grpo_run_restarts{{{s}}})", "restarts"),
        Query("cost_so_far", "Cost so far (GPU nodes held)",
              f"max by (run_id, currency) (gke_grpo_run_cost_so_far{{{s}}})", "currency"),
        Query("gpu_idle_seconds", "GPU-seconds idle (up and held, no step running)",
              f"max by (run_id) (gke_grpo_run_gpu_idle_seconds{{{s}}})", "GPU-s"),
    )


def gpu_queries(scope: Scope) -> tuple[Query, ...]:
    """The GPU nodes: up against the run's request (Ray's autoscaler and the driver), and DCGM's
    utilisation, memory and power per node."""
    s, n = scope.pods, scope.nodes
    return (
        Query("gpu_nodes_up", "GPU nodes up (Ray worker groups)",
              f'sum by (NodeType) (autoscaler_active_nodes{{{s}, NodeType=~"{GPU_GROUP_MATCH}"}})', "nodes"),
        Query("gpu_nodes_pending", "GPU nodes pending (asked for, not in Ray yet)",
              f'sum by (NodeType) (autoscaler_pending_nodes{{{s}, NodeType=~"{GPU_GROUP_MATCH}"}})', "nodes"),
        Query("gpu_nodes_requested", "GPU nodes the run's gang request holds",
              f"max by (run_id) (gke_grpo_run_gpu_nodes_requested{{{s}}})", "nodes"),
        Query("gpu_utilization", "GPU utilisation per node (DCGM)",
              f"avg by (Hostname) (DCGM_FI_DEV_GPU_UTIL{{{n}}})", "%"),
        Query("gpu_memory_used", "GPU memory used per node (DCGM)",
              f"sum by (Hostname) (DCGM_FI_DEV_FB_USED{{{n}}})", "MiB"),
        # Power from the energy counter (mJ), as Google's own GKE DCGM dashboard computes it
        # (GoogleCloudPlatform/monitoring-dashboard-samples dashboards/google-kubernetes-engine/
        # nvidia-dcgm-prometheus.json): whether GKE's managed set exports DCGM_FI_DEV_POWER_USAGE
        # is not confirmed, the energy counter is in both lists.
        Query("gpu_power", "GPU power per node (DCGM)",
              f"sum by (Hostname) (rate(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{{n}}}[5m])) / 1000", "W"),
    )


def alerts(scope: Scope, *, stall_step_times: float, stall_minimum_seconds: int,
           idle_timeout_seconds: int, idle_margin_seconds: int) -> tuple[Alert, ...]:
    s = scope.pods
    no_run = f"unless on () (max(gke_grpo_run_driver_up{{{s}}}) > 0)"
    gpu_groups = f'NodeType=~"{GPU_GROUP_MATCH}"'
    # The driver serves its end state for a minute after the run ends, then goes with the
    # driver: a failure is looked for over the last ten minutes, not only in the newest sample.
    failed = f'max by (run_id) (max_over_time(gke_grpo_run_state{{{s}, state="failed"}}[10m])) == 1'
    # Progress: the latest step line, or the current trainer start if later (a restart, or a start
    # that has not logged a step yet, is not a stall of the old start's last step). The bound: the
    # run's own median step time (from the driver) times the factor, never below the minimum;
    # before two steps of the start, the minimum alone.
    progress = f"max by (run_id) (gke_grpo_run_progress_timestamp_seconds{{{s}}})"
    bound = (f"clamp_min((max by (run_id) (gke_grpo_run_step_seconds{{{s}}}) * {stall_step_times:g})"
             f" or on (run_id) (0 * {progress}), {stall_minimum_seconds})")
    stalled = (f"(time() - {progress}) > on (run_id) {bound}"
               f' and on (run_id) (max by (run_id) (gke_grpo_run_state{{{s}, state="training"}}) == 1)')
    idle_for = idle_timeout_seconds + idle_margin_seconds
    return (
        Alert("run_failed", "GRPO run failed", failed, 0,
              "The run driver ended the run as failed (exit code other than 0 and not a stop). "
              "`gke-grpo status` and `gke-grpo logs` name the cause; the report's restarts and "
              "its last trainer exit say what happened (docs/troubleshooting.md)."),
        Alert("no_progress", "GRPO run makes no progress", stalled, 0,
              f"The trainer is running but logged no step for {stall_step_times:g} of its own "
              f"step times (at least {stall_minimum_seconds} s) since its latest step or its "
              "start: a hang (NCCL, a lost rollout node of a split run, storage, a start that "
              "never reaches its first step). Look at `gke-grpo logs`, then stop it "
              "(`gke-grpo stop`) and submit again: the next attempt resumes from the checkpoint."),
        Alert("gpu_nodes_without_run", "GPU nodes up with no run",
              f"sum(autoscaler_active_nodes{{{s}, {gpu_groups}}}) > 0 {no_run}", idle_for,
              f"GPU nodes have been in the Ray cluster for {idle_for} s (the workers' idle "
              "timeout plus the margin) with no run driver's metrics: they are billed. First "
              "confirm with `gke-grpo status` that no run is live (a run whose driver serves no "
              "metrics, one started before this stack had them or whose port was taken, looks "
              "the same here). Then it is a stale gang request: `python3 -m jobs.head.gpu_gang "
              "release` on the head clears it (docs/gpu-capacity.md)."),
        Alert("gpu_request_without_run", "GPU request standing with no run",
              f"sum(autoscaler_pending_nodes{{{s}, {gpu_groups}}}) > 0 {no_run}", idle_for,
              "The Ray autoscaler is still bringing up GPU nodes although no run driver serves "
              "its metrics: a gang request outlived its run. Confirm with `gke-grpo status` that "
              "no run is live, then clear it (`python3 -m jobs.head.gpu_gang release` on the "
              "head) before capacity arrives and is billed."),
    )
