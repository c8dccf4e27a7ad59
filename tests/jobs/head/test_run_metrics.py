"""The run driver's own Prometheus endpoint (jobs/head/run_metrics.py): scraped while the driver runs
the fake trainer, its state sequence and end, the accounting of idle GPUs and cost on a fake
clock, the failures that must not fail the run, and the plan's three fields."""

from __future__ import annotations

import io
import json
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from jobs.contract.exit_codes import ExitCode
from jobs.contract.run_plan import plan_from_dict, plan_problems
from jobs.head import driver as driver_mod
from jobs.head import run_metrics
from jobs.head.run_metrics import RUN_STATES, RunDriverMetrics, serve_run_metrics
from jobs.head.run_records import Records
from tests.conftest import ROOT
from tests.jobs.head.test_driver import FakeHooks, make_plan

RUN = "exp-12345678"


class Holder:
    def __init__(self):
        self.released = 0

    def release(self):
        self.released += 1
        return 0


class GangHooks(FakeHooks):
    """FakeHooks with a confirmed gang request (the real holder: jobs/head/gpu_gang.py)."""

    def __init__(self, gpu_codes=(), dead=()):
        super().__init__(gpu_codes, dead)
        self.holder = Holder()

    def hold_gpus(self, plan, on_event=None, stop_seen=None):
        return self.holder


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(port: int) -> dict[tuple[str, frozenset], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=20) as answer:
        assert answer.status == 200
        assert answer.headers["Content-Type"].startswith("text/plain")
        text = answer.read().decode()
    return samples_of(text)


def samples_of(text: str) -> dict[tuple[str, frozenset], float]:
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(samples, name, **labels):
    return samples.get((name, frozenset({"run_id": RUN, **labels}.items())))


def rendered(metrics: RunDriverMetrics) -> dict[tuple[str, frozenset], float]:
    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry(auto_describe=False)
    registry.register(run_metrics._DriverMetricsCollector(metrics))
    return samples_of(generate_latest(registry).decode())


@pytest.fixture(autouse=True)
def loopback(monkeypatch):
    monkeypatch.setattr(run_metrics, "BIND_ADDRESS", "127.0.0.1")
    monkeypatch.setattr(run_metrics, "LINGER_SECONDS", 0.0)


class Running:
    """The driver in a thread, as `python3 -m jobs.run` runs it."""

    def __init__(self, plan, hooks):
        Path(plan.run_dir).mkdir(parents=True, exist_ok=True)
        self.out = io.StringIO()
        self.driver = driver_mod.Driver(plan, attempt=1, hooks=hooks, out=self.out)
        self.code: int | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        self.code = self.driver.run()

    def join(self, timeout=180.0) -> int:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), self.out.getvalue()
        assert self.code is not None
        return self.code


def wait_for(what, timeout=120.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = what()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError("timed out")


def test_the_endpoint_serves_the_run_while_the_driver_trains(tmp_path):
    port = free_port()
    plan = make_plan(tmp_path, "long", metrics_port=port, gpu_hourly_rate=12.5, currency="USD")
    hooks = GangHooks()
    running = Running(plan, hooks)

    def stepped():
        try:
            samples = scrape(port)
        except (urllib.error.URLError, ConnectionError):
            return None
        step = value(samples, "gke_grpo_run_latest_step")
        return samples if step is not None and step >= 4 else None

    samples = wait_for(stepped)
    now = time.time()
    assert value(samples, "gke_grpo_run_info", framework="verl", attempt="1") == 1
    assert {s: value(samples, "gke_grpo_run_state", state=s) for s in RUN_STATES} == {
        s: float(s == "training") for s in RUN_STATES}
    assert now - 30 < value(samples, "gke_grpo_run_latest_step_timestamp_seconds") <= now
    # 0.3 s a step, more under load (exact values: the fake-clock test below); lines read in a
    # burst by a loaded machine can shorten a gap.
    assert 300 < value(samples, "gke_grpo_run_steps_per_hour") < 36_000
    assert 0.1 < value(samples, "gke_grpo_run_step_seconds") < 10
    assert value(samples, "gke_grpo_run_restarts") == 0
    assert value(samples, "gke_grpo_run_gpu_nodes_requested") == 1
    assert value(samples, "gke_grpo_run_gpu_gang_held") == 1
    assert value(samples, "gke_grpo_run_gpu_idle_seconds") > 0   # held before the first step
    assert value(samples, "gke_grpo_run_cost_so_far", currency="USD") > 0
    assert value(samples, "gke_grpo_run_driver_up") == 1
    # While the trainer steps, the gang is not idle: the counter stands still.
    time.sleep(1.0)
    later = scrape(port)
    assert value(later, "gke_grpo_run_gpu_idle_seconds") == pytest.approx(
        value(samples, "gke_grpo_run_gpu_idle_seconds"), abs=0.5)
    assert value(later, "gke_grpo_run_latest_step") > value(samples, "gke_grpo_run_latest_step")
    (Path(plan.checkpoint_dir) / "finish").write_text("x")
    assert running.join() == ExitCode.OK, running.out.getvalue()

    metrics = running.driver.records.listener
    assert isinstance(metrics, RunDriverMetrics)
    assert metrics.history == ["preparing", "waiting_for_gpus", "training", "after_training", "succeeded"]
    end = rendered(metrics)
    assert value(end, "gke_grpo_run_state", state="succeeded") == 1
    assert value(end, "gke_grpo_run_gpu_gang_held") == 0 and value(end, "gke_grpo_run_gpu_nodes_requested") == 0
    # Stopped with the driver: nothing listens any more.
    with pytest.raises((urllib.error.URLError, ConnectionError)):
        scrape(port)
    lines = [line for line in running.out.getvalue().splitlines() if "metrics:" in line]
    assert lines == [f"[jobs.run] metrics: serving http://127.0.0.1:{port}/metrics"]


def test_a_restart_is_counted_and_its_states_follow(tmp_path):
    port = free_port()
    plan = make_plan(tmp_path, "lost-once", metrics_port=port)
    running = Running(plan, GangHooks(dead=[[]]))
    assert running.join() == ExitCode.OK, running.out.getvalue()
    metrics = running.driver.records.listener
    assert metrics.history == ["preparing", "waiting_for_gpus", "training", "restarting", "waiting_for_gpus",
                               "training", "after_training", "succeeded"]
    end = rendered(metrics)
    assert value(end, "gke_grpo_run_restarts") == 1
    assert value(end, "gke_grpo_run_latest_step") == 2
    assert ("gke_grpo_run_cost_so_far", frozenset({"run_id": RUN, "currency": "USD"})) not in end   # no rate


@pytest.mark.parametrize("mode,code,state", [("ok", ExitCode.OK, "succeeded"),
                                             ("oom", ExitCode.OUT_OF_MEMORY, "failed")])
def test_the_end_state_follows_the_exit(tmp_path, mode, code, state):
    running = Running(make_plan(tmp_path, mode, metrics_port=free_port()), GangHooks())
    assert running.join() == code
    assert running.driver.records.listener.state == state


def test_a_stopped_driver_ends_stopped(tmp_path):
    port = free_port()
    plan = make_plan(tmp_path, "long", metrics_port=port)
    running = Running(plan, GangHooks())
    wait_for(lambda: running.driver.records.listener is not None
             and running.driver.records.listener.latest_step is not None)
    running.driver.stop_requested.set()
    assert running.join() == ExitCode.TERMINATED
    assert running.driver.records.listener.history[-1] == "stopped"


def test_a_port_already_taken_does_not_fail_the_run(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        running = Running(make_plan(tmp_path, "ok", metrics_port=port), GangHooks())
        assert running.join() == ExitCode.OK
    lines = [line for line in running.out.getvalue().splitlines() if "metrics:" in line]
    assert lines == [f"[jobs.run] metrics: no endpoint on 127.0.0.1:{port} (Address already in use); "
                     "the run goes on"]
    assert running.driver.records.listener is None


def test_a_plan_without_a_port_starts_no_endpoint(tmp_path):
    running = Running(make_plan(tmp_path, "ok"), GangHooks())
    assert running.join() == ExitCode.OK
    assert running.driver.records.listener is None
    assert "metrics:" not in running.out.getvalue()
    assert not any(t.name == "run-metrics" for t in threading.enumerate())


def test_the_driver_imports_and_runs_without_prometheus_client(tmp_path):
    script = f"""
import sys
sys.modules["prometheus_client"] = None          # import prometheus_client: ImportError
import jobs.head.driver, jobs.head.driver_main, jobs.run
assert not any(m.startswith("prometheus_client") for m in sys.modules if sys.modules[m] is not None)
from pathlib import Path
from tests.jobs.head.test_driver import FakeHooks, drive, make_plan
code, out, events, _ = drive(make_plan(Path({str(tmp_path)!r}), "ok", metrics_port=9));
print(code); print(out)
"""
    # metrics_port 9 is below 1024 for the plan's check, not for a plan built in Python: the
    # import fails before any bind.
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    first, *rest = done.stdout.splitlines()
    assert first == "0", done.stdout
    lines = [line for line in rest if "metrics:" in line]
    assert len(lines) == 1 and "prometheus_client is not installed" in lines[0], done.stdout
    assert lines[0].endswith("the run goes on")


# ---- the accounting, on a fake clock ---------------------------------------------------------------

class Clock:
    def __init__(self):
        self.now = 1_000.0

    def __call__(self):
        return self.now


def feed(metrics: RunDriverMetrics, clock: Clock, at: float, event: str, **fields):
    clock.now = at
    metrics({"time": at, "event": event, "attempt": 1, "start": 0, **fields})


def test_idle_gpus_cost_and_step_rates_on_a_fake_clock(tmp_path):
    plan = make_plan(tmp_path, "ok", gpus=16, gpus_per_node=8, gpu_hourly_rate=30.0, currency="EUR",
                     metrics_port=9100)
    clock = Clock()
    metrics = RunDriverMetrics(plan, 2, clock=clock)
    feed(metrics, clock, 1000, "driver_start", resumed=False)
    early = rendered(metrics)
    for absent in ("gke_grpo_run_latest_step", "gke_grpo_run_steps_per_hour", "gke_grpo_run_step_seconds"):
        assert value(early, absent) is None
    assert value(early, "gke_grpo_run_gpu_idle_seconds") == 0
    assert value(early, "gke_grpo_run_cost_so_far", currency="EUR") == 0
    feed(metrics, clock, 1100, "gpu_request", gpus=16)          # held: 2 nodes, 16 GPUs
    feed(metrics, clock, 1100, "gpu_wait_start")
    feed(metrics, clock, 1200, "gpu_wait_end", exit_code=0)
    feed(metrics, clock, 1200, "trainer_start")
    feed(metrics, clock, 1300, "step", step=11)                 # 100 s idle: up since the GPU wait
    feed(metrics, clock, 1300, "first_step", step=11)
    feed(metrics, clock, 1310, "step", step=12)
    feed(metrics, clock, 1330, "step", step=13)
    feed(metrics, clock, 1340, "step", step=14)
    clock.now = 1400
    s = rendered(metrics)
    assert value(s, "gke_grpo_run_info", framework="verl", attempt="2") == 1
    assert value(s, "gke_grpo_run_latest_step") == 14
    assert value(s, "gke_grpo_run_latest_step_timestamp_seconds") == 1340
    assert value(s, "gke_grpo_run_steps_per_hour") == pytest.approx(3 / 40 * 3600)
    assert value(s, "gke_grpo_run_step_seconds") == 10          # gaps 10, 20, 10
    # Idle and cost count from the GPU wait that found the nodes (1200), not from the request
    # (1100): as the report's cost does (jobs/cli/run_cost.py), nothing is billed while they come.
    assert value(s, "gke_grpo_run_gpu_idle_seconds") == 16 * 100
    assert value(s, "gke_grpo_run_cost_so_far", currency="EUR") == pytest.approx(2 * 200 / 3600 * 30)
    assert value(s, "gke_grpo_run_progress_timestamp_seconds") == 1340
    assert value(s, "gke_grpo_run_gpu_nodes_requested") == 2
    # The exit is recorded 30 s late (the node query settled): idle from the exit on.
    clock.now = 1450
    metrics({"time": 1420, "event": "trainer_exit", "attempt": 1, "start": 0, "reason": "node_lost"})
    assert value(rendered(metrics), "gke_grpo_run_gpu_idle_seconds") == 16 * (100 + 30)
    feed(metrics, clock, 1450, "restart", reason="node_lost")
    feed(metrics, clock, 1500, "gpu_wait_start")
    feed(metrics, clock, 1500, "gpu_wait_end", exit_code=0)
    feed(metrics, clock, 1500, "trainer_start")
    s = rendered(metrics)
    assert value(s, "gke_grpo_run_restarts") == 1
    assert value(s, "gke_grpo_run_steps_per_hour") is None      # a new start: its own rate
    assert value(s, "gke_grpo_run_latest_step") == 14           # the run's latest step stays
    assert value(s, "gke_grpo_run_gpu_idle_seconds") == 16 * (100 + 80)
    # A restarted start with no step yet: progress is its start, not the old start's last step.
    assert value(s, "gke_grpo_run_progress_timestamp_seconds") == 1500
    feed(metrics, clock, 1600, "gpu_request_lost", holder_exit_code=1)
    feed(metrics, clock, 1700, "gpu_request_remade", times=1)   # held again, no wait found its nodes: no cost
    feed(metrics, clock, 1800, "driver_end", exit_code=int(ExitCode.DEADLINE))
    clock.now = 5000
    s = rendered(metrics)
    assert value(s, "gke_grpo_run_gpu_idle_seconds") == 16 * (100 + 80 + 100)
    assert value(s, "gke_grpo_run_cost_so_far", currency="EUR") == pytest.approx(2 * 400 / 3600 * 30)
    assert value(s, "gke_grpo_run_state", state="failed") == 1
    assert sum(value(s, "gke_grpo_run_state", state=x) for x in RUN_STATES) == 1
    assert metrics.history == ["preparing", "waiting_for_gpus", "training", "restarting", "waiting_for_gpus",
                               "training", "failed"]


@pytest.mark.parametrize("code,state", [(0, "succeeded"), (143, "stopped"), (12, "failed"), (None, "failed")])
def test_the_end_state_of_each_exit(tmp_path, code, state):
    metrics = RunDriverMetrics(make_plan(tmp_path, "ok"), 1)
    metrics({"time": time.time(), "event": "driver_end", "exit_code": code})
    assert metrics.state == state


def test_a_resumed_driver_counts_the_attempts_earlier_restarts(tmp_path):
    plan = make_plan(tmp_path, "ok", metrics_port=9100)
    Path(plan.run_dir).mkdir(parents=True)
    records = Records(Path(plan.run_dir), 1)
    for attempt in (1, 1, 2):
        Records(Path(plan.run_dir), attempt).restart(reason="node_lost", exit_code=1, last_checkpoint_step=1,
                                                     start=0)
    metrics = RunDriverMetrics(plan, 1)
    records.listener = metrics
    records.event("driver_start", 2, resumed=True)
    assert metrics.restarts == 2
    records.restart(reason="node_lost", exit_code=1, last_checkpoint_step=2, start=2)
    assert metrics.restarts == 3 and metrics.state == "restarting"


def test_a_listener_that_raises_never_stops_a_record(tmp_path):
    records = Records(tmp_path, 1)
    records.listener = lambda record: 1 / 0
    records.event("driver_start", 0)
    records.note_step(0, 3)
    assert json.loads((tmp_path / "events.jsonl").read_text())["event"] == "driver_start"


def test_serve_without_a_port_says_nothing_and_returns_none(tmp_path):
    said: list[str] = []
    plan = make_plan(tmp_path, "ok")
    assert serve_run_metrics(plan, 1, Records(tmp_path, 1), said.append) is None and said == []


# ---- the plan's fields ---------------------------------------------------------------------------

def test_the_plan_fields_are_checked_and_left_out_when_unset(tmp_path, monkeypatch):
    monkeypatch.setenv("GKE_GRPO_DATA_ROOT", str(tmp_path))
    plan = make_plan(tmp_path, "ok")
    data = json.loads(plan.to_json())
    assert not {"metrics_port", "gpu_hourly_rate", "currency"} & set(data)     # plans stay as they were
    full = {**data, "metrics_port": 9100, "gpu_hourly_rate": 31.2, "currency": "USD"}
    parsed = plan_from_dict(full)
    assert (parsed.metrics_port, parsed.gpu_hourly_rate, parsed.currency) == (9100, 31.2, "USD")
    assert json.loads(parsed.to_json()) == full
    for key, bad, message in [
        ("metrics_port", 80, "metrics_port must be a whole number from 1,024 to 65,535, got 80"),
        ("metrics_port", 9100.0, "metrics_port must be a whole number"),
        ("metrics_port", True, "metrics_port must be a whole number"),
        ("gpu_hourly_rate", -1, "gpu_hourly_rate must be a finite number from 0"),
        ("gpu_hourly_rate", float("nan"), "gpu_hourly_rate must be a finite number"),
        ("currency", "usd", "currency must be a currency code such as USD, got 'usd'"),
    ]:
        problems = plan_problems({**full, key: bad})
        assert len(problems) == 1 and message in problems[0], (key, problems)


def test_a_failed_run_keeps_serving_its_end_state_for_the_collector(tmp_path, monkeypatch):
    # The failed-run alert (components/monitoring_queries.py) needs one scrape of "failed": the
    # endpoint lingers after driver_end (the gang already released), a succeeded run's does not.
    monkeypatch.setattr(run_metrics, "LINGER_SECONDS", 3.0)
    port = free_port()
    running = Running(make_plan(tmp_path, "oom", metrics_port=port), GangHooks())
    wait_for(lambda: running.driver.records.listener is not None
             and running.driver.records.listener.state == "failed")
    seen = scrape(port)
    assert value(seen, "gke_grpo_run_state", state="failed") == 1
    assert value(seen, "gke_grpo_run_gpu_gang_held") == 0
    assert running.join() == ExitCode.OUT_OF_MEMORY
