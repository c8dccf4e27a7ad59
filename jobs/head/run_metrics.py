"""The run driver's own metrics: a small Prometheus endpoint on the head, served while the driver
runs (jobs/head/driver.py), when the plan names a port (``metrics_port``).

    http://<head>:<metrics_port>/metrics

Every metric carries the run id (``run_id``); names are fixed (the dashboard's and the alerts'
PromQL read exactly these):

    gke_grpo_run_info{run_id, framework, attempt}       1
    gke_grpo_run_state{run_id, state}                   1 for the current state, 0 for the others
    gke_grpo_run_latest_step{run_id}                    the latest training step line's step
    gke_grpo_run_latest_step_timestamp_seconds{run_id}  unix time that line was seen
    gke_grpo_run_progress_timestamp_seconds{run_id}     that, or the current trainer start's, if later
    gke_grpo_run_steps_per_hour{run_id}                 this trainer start: (steps - 1) / (latest - first) * 3600
    gke_grpo_run_step_seconds{run_id}                   this trainer start: median time between step lines
    gke_grpo_run_restarts{run_id}                       trainer restarts of this attempt
    gke_grpo_run_gpu_nodes_requested{run_id}            the gang request's nodes while held, else 0
    gke_grpo_run_gpu_gang_held{run_id}                  1 while the holder confirmed the request
    gke_grpo_run_gpu_idle_seconds{run_id}               GPU-seconds up and held while no trainer runs steps
    gke_grpo_run_cost_so_far{run_id, currency}          GPU node-hours held x the plan's gpu_hourly_rate
    gke_grpo_run_driver_up{run_id}                      1

The step gauges are absent until there is a step (steps per hour and step seconds until the
current start has two), the cost while the plan has no rate. The states, from the driver's
records: preparing (driver_start, staging), waiting_for_gpus (gpu_wait_start), health_gate
(health_start), training (trainer_start), restarting (a restart decided: the backoff), after_training
(a completed trainer: export, evaluation), and at driver_end succeeded (exit 0), stopped (143
TERMINATED) or failed (any other exit).

How it is fed: ``serve_run_metrics`` makes ``RunDriverMetrics`` the listener of the driver's Records
(jobs/head/run_records.py), which tells it every record the driver writes (events.jsonl, a
restart) and every step line of the trainer's output (``Records.note_step``); driver_end stops the
endpoint, a failed run's after LINGER_SECONDS, so that the collector sees the failure. GPU idle: the gang's GPUs count idle while the gang is held and no trainer start has
logged its first step or it has exited (from the gang held to the first step of each start, and
from a trainer's exit to the next start's first step or the gang's release).

``prometheus_client`` is a dependency of Ray's ``ray[default]`` (Ray 2.54.0's metadata:
``Requires-Dist: prometheus_client>=0.7.1; extra == "default"``), so the framework images on the
head carry it; it is imported only when the plan asks for the endpoint. The endpoint never fails
the run: the library missing or the port taken is one line of the driver's log, and the run goes
on; a bug here is dropped by Records (the listener's errors never reach the driver).
"""

from __future__ import annotations

import itertools
import math
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from jobs.contract.exit_codes import ExitCode
from jobs.contract.run_plan import RunPlan
from jobs.head.run_records import Records, read_restarts

BIND_ADDRESS = "0.0.0.0"    # the head pod's NetworkPolicy says who reaches it; tests bind 127.0.0.1
RUN_STATES = ("preparing", "waiting_for_gpus", "health_gate", "training", "restarting", "after_training",
              "succeeded", "failed", "stopped")
STATE_OF_EVENT = {
    "driver_start": "preparing", "prepare_start": "preparing", "gpu_wait_start": "waiting_for_gpus",
    "health_start": "health_gate", "trainer_start": "training", "restart": "restarting",
    "export_start": "after_training", "evaluate_start": "after_training",
}
MAX_STATE_HISTORY = 1000
# (name, type, help, samples): a family with no samples is absent from the scrape.
Family = tuple[str, str, str, list[tuple[dict[str, str], float]]]


class RunDriverMetrics:
    """The run's state as the driver's records tell it (any thread: one lock), and its values at
    a scrape (``families``). Standard library only; ``serve_run_metrics`` serves it."""

    def __init__(self, plan: RunPlan, attempt: int, clock: Callable[[], float] = time.time):
        self.plan, self.attempt, self.clock = plan, attempt, clock
        self.nodes = math.ceil(plan.gpus / plan.gpus_per_node)
        self._lock = threading.Lock()
        self.state = "preparing"
        self.history = ["preparing"]
        self.latest_step: int | None = None
        self.latest_step_at: float | None = None
        self.step_times: list[float] = []      # the step lines of the current trainer start
        self.restarts = 0
        self.held = False
        self.busy = False                      # the current start logged a step and has not exited
        self.busy_since = 0.0
        self.idle_gpu_seconds = 0.0            # accrued up to accrued_at
        self.held_node_seconds = 0.0
        self.accrued_at = clock()
        self.start_at: float | None = None     # the current trainer start
        # The gang's nodes are up: from a GPU wait that found them until the next wait or the end,
        # as the report's cost counts them (jobs/cli/run_cost.py: from gpu_wait_end).
        self.nodes_up = False
        self.on_end: Callable[[], None] | None = None

    # -- what the driver's records say -----------------------------------------------------------
    def __call__(self, record: dict[str, Any]) -> None:
        ended = False
        with self._lock:
            self._accrue(self.clock())
            ended = self._apply(str(record.get("event")), record)
        if ended and self.on_end is not None:
            self.on_end()

    def _apply(self, name: str, record: dict[str, Any]) -> bool:
        at = record.get("time")
        at = float(at) if isinstance(at, (int, float)) else self.clock()
        if name in STATE_OF_EVENT:
            self._enter(STATE_OF_EVENT[name])
        if name == "driver_start" and record.get("resumed"):
            self.restarts = sum(1 for r in read_restarts(self.plan.run_dir) if r.get("attempt") == self.attempt)
        elif name in ("gpu_request", "gpu_request_remade"):
            self.held = True
        elif name == "gpu_request_lost":
            self.held = self.nodes_up = False
        elif name == "trainer_start":
            self.busy, self.step_times, self.start_at = False, [], at
        elif name == "gpu_wait_start":
            self.nodes_up = False
        elif name == "gpu_wait_end":
            self.nodes_up = record.get("exit_code") == ExitCode.OK
        elif name in ("step", "first_step"):
            self._step(record, at)
        elif name == "trainer_exit":
            self._trainer_exit(record, at)
        elif name == "restart":
            self.restarts += 1
        elif name == "driver_end":
            code = record.get("exit_code")
            self._enter("succeeded" if code == ExitCode.OK else "stopped" if code == ExitCode.TERMINATED
                        else "failed")
            self.held = self.busy = self.nodes_up = False
            return True
        return False

    def _enter(self, state: str) -> None:
        if state != self.state:
            self.state = state
            if len(self.history) < MAX_STATE_HISTORY:
                self.history.append(state)

    def _step(self, record: dict[str, Any], at: float) -> None:
        if not self.busy:
            self.busy, self.busy_since = True, at
        step = record.get("step")
        if record.get("event") == "step" and isinstance(step, int):
            self.latest_step, self.latest_step_at = step, at
            self.step_times.append(at)

    def _trainer_exit(self, record: dict[str, Any], at: float) -> None:
        if self.busy and self.held and self.nodes_up and at < self.accrued_at:
            # Recorded after the exit was classified (the node query can take node_settle_seconds):
            # the GPUs idled since the exit.
            self.idle_gpu_seconds += self.plan.gpus * (self.accrued_at - max(at, self.busy_since))
        self.busy = False
        if record.get("reason") == "completed":
            self._enter("after_training")

    def _accrue(self, now: float) -> None:
        spent = max(0.0, now - self.accrued_at)
        if self.held and self.nodes_up:
            self.held_node_seconds += self.nodes * spent
            if not self.busy:
                self.idle_gpu_seconds += self.plan.gpus * spent
        self.accrued_at = max(self.accrued_at, now)

    # -- a scrape --------------------------------------------------------------------------------
    def families(self) -> list[Family]:
        with self._lock:
            self._accrue(self.clock())
            return self._families()

    def _families(self) -> list[Family]:
        plan = self.plan
        run = {"run_id": plan.run_id}

        def one(value: float | None) -> list[tuple[dict[str, str], float]]:
            return [] if value is None else [(run, float(value))]

        times = self.step_times
        gaps = [b - a for a, b in itertools.pairwise(times)]
        per_hour = (len(times) - 1) / (times[-1] - times[0]) * 3600 if len(times) > 1 and times[-1] > times[0] else None
        cost = None if plan.gpu_hourly_rate is None else [
            ({**run, "currency": plan.currency or "USD"}, self.held_node_seconds / 3600 * plan.gpu_hourly_rate)]
        return [
            ("gke_grpo_run_info", "gauge", "The run driver's run: its framework and attempt (1).",
             [({**run, "framework": plan.framework, "attempt": str(self.attempt)}, 1.0)]),
            ("gke_grpo_run_state", "gauge", "The run driver's state: 1 for the current one, 0 for the others.",
             [({**run, "state": s}, 1.0 if s == self.state else 0.0) for s in RUN_STATES]),
            ("gke_grpo_run_latest_step", "gauge", "The latest training step the trainer logged.",
             one(self.latest_step)),
            ("gke_grpo_run_latest_step_timestamp_seconds", "gauge",
             "Unix time the latest training step line was seen.", one(self.latest_step_at)),
            # What the no-progress alert watches: the latest step line, or the current trainer
            # start when it came later (a restart, or a start that has not logged a step yet).
            ("gke_grpo_run_progress_timestamp_seconds", "gauge",
             "Unix time of the latest step line or trainer start, whichever came later.",
             one(max((t for t in (self.latest_step_at, self.start_at) if t is not None), default=None))),
            ("gke_grpo_run_steps_per_hour", "gauge",
             "Training steps per hour of the current trainer start.", one(per_hour)),
            ("gke_grpo_run_step_seconds", "gauge",
             "Median seconds between step lines of the current trainer start.",
             one(statistics.median(gaps) if gaps else None)),
            # Gauges, not counters: managed Prometheus's exporter drops a counter's first sample
            # and exports it relative to it (prometheus-engine seriesCache.getResetAdjusted), so a
            # resumed driver's restarts would read 0 and idle time before the first scrape be lost.
            ("gke_grpo_run_restarts", "gauge", "Trainer restarts in this attempt.", one(self.restarts)),
            ("gke_grpo_run_gpu_nodes_requested", "gauge", "GPU nodes of the gang request while it is held, else 0.",
             one(self.nodes if self.held else 0)),
            ("gke_grpo_run_gpu_gang_held", "gauge", "1 while the gang holder confirmed the GPU request.",
             one(1 if self.held else 0)),
            ("gke_grpo_run_gpu_idle_seconds", "gauge",
             "GPU-seconds the run held while no trainer ran steps.", one(self.idle_gpu_seconds)),
            ("gke_grpo_run_cost_so_far", "gauge", "GPU node-hours held times the plan's hourly rate per node.",
             cost or []),
            ("gke_grpo_run_driver_up", "gauge", "1 while the run driver runs.", one(1)),
        ]


class _DriverMetricsCollector:
    """RunDriverMetrics as prometheus_client's custom collector: the values at each scrape."""

    def __init__(self, metrics: RunDriverMetrics):
        self.metrics = metrics

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        for name, kind, help_text, samples in self.metrics.families():
            if not samples:
                continue
            make = CounterMetricFamily if kind == "counter" else GaugeMetricFamily
            family = make(name, help_text, labels=list(samples[0][0]))
            for labels, value in samples:
                family.add_metric(list(labels.values()), value)
            yield family


class DriverMetricsEndpoint:
    """The HTTP server (a daemon thread) that renders the registry at /metrics."""

    def __init__(self, metrics: RunDriverMetrics, port: int, host: str):
        from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

        registry = CollectorRegistry(auto_describe=False)
        registry.register(_DriverMetricsCollector(metrics))

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.split("?")[0] not in ("/", "/metrics"):
                    self.send_error(404)
                    return
                body = generate_latest(registry)
                self.send_response(200)
                self.send_header("Content-Type", CONTENT_TYPE_LATEST)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass                      # no line in the driver's log per scrape

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True
        self.address = f"http://{host}:{self.server.server_address[1]}/metrics"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.2},
                                       name="run-metrics", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# How long a failed run's driver keeps serving after its end (its gang already released: driver_end
# comes after the release): the collector scrapes every 30 s (components/monitoring.py), and the
# failed-run alert looks for the "failed" state over the last ten minutes, so one scrape of it is
# enough. A succeeded or stopped run ends at once.
LINGER_SECONDS = 45.0


def _linger_then_stop(metrics: RunDriverMetrics, endpoint: DriverMetricsEndpoint) -> None:
    if metrics.state == "failed":
        time.sleep(LINGER_SECONDS)
    endpoint.stop()


def serve_run_metrics(plan: RunPlan, attempt: int, records: Records, say: Callable[[str], None], *,
                      host: str | None = None) -> RunDriverMetrics | None:
    """Serve the run's metrics on ``plan.metrics_port`` until the driver's driver_end record, fed
    by ``records``; None (and one line said) when the plan has no port or the endpoint cannot
    start: the run goes on either way."""
    if plan.metrics_port is None:
        return None
    metrics = RunDriverMetrics(plan, attempt)
    where = f"{BIND_ADDRESS if host is None else host}:{plan.metrics_port}"
    try:
        endpoint = DriverMetricsEndpoint(metrics, plan.metrics_port, BIND_ADDRESS if host is None else host)
    except ImportError as exc:
        say(f"metrics: no endpoint on {where} (prometheus_client is not installed: {exc}); the run goes on")
        return None
    except OSError as exc:
        say(f"metrics: no endpoint on {where} ({exc.strerror or exc}); the run goes on")
        return None
    metrics.on_end = lambda: _linger_then_stop(metrics, endpoint)
    records.listener = metrics
    say(f"metrics: serving {endpoint.address}")
    return metrics
