"""A real Prometheus server (the `prometheus` binary, 2.42 on Debian 12 and in CI) for the tests
of the monitoring the stack creates, and promtool's checks of PromQL.

The server binds 127.0.0.1 on a free port, scrapes the static targets the caller names every
second, and keeps its data in a temporary directory it removes when it stops. Tests that scrape a
real Ray head run it inside their loopback-only namespace (tests/jobs/ray_head.py), where
127.0.0.1 is the only address there is.

    with PrometheusServer({"ray-head": ["127.0.0.1:8080"]}) as prom:
        prom.wait_for_series('ray_node_cpu_count{job="ray-head"}', timeout=SCRAPED_WITHIN)
        series = prom.query("sum(ray_node_cpu_count)")
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import yaml

PROMETHEUS = "/usr/bin/prometheus"
PROMTOOL = "/usr/bin/promtool"
# From start to /-/ready: 0.10 s on the 2-core machine with a Ray head beside it (2026-12-06,
# Prometheus 2.42); the bound is far above it, for a CI machine loaded by a whole suite.
READY_WITHIN = 30.0
# The first sample of a target scraped every second: 5.6-6.1 s after start on the same machine and
# day (Prometheus applies discovered targets on a 5 s tick). The
# callers' bound for a first sample, five times that.
SCRAPED_WITHIN = 30.0
# SIGTERM to exit: under 0.05 s on the same machine and day.
STOP_WITHIN = 15.0


class PrometheusError(RuntimeError):
    """The server did not start, stop or answer as expected (its log tail is in the message)."""


def prometheus_binary(name: str = "prometheus") -> str | None:
    """The path of `prometheus` or `promtool`, or None where the Debian package is not installed."""
    preferred = PROMETHEUS if name == "prometheus" else PROMTOOL
    return preferred if Path(preferred).exists() else shutil.which(name)


def free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def scrape_config(jobs: dict[str, list[str]], *, metrics_path: str = "/metrics",
                  scrape_interval: str = "1s", labels: dict[str, str] | None = None) -> dict[str, Any]:
    """prometheus.yml: one job per name, each scraping its static targets ("host:port"), every
    series given ``labels`` (as managed Prometheus adds ``cluster`` and ``namespace``)."""
    static = {"labels": dict(labels)} if labels else {}
    return {"global": {"scrape_interval": scrape_interval, "scrape_timeout": scrape_interval,
                       "evaluation_interval": scrape_interval},
            "scrape_configs": [{"job_name": job, "metrics_path": metrics_path,
                                "static_configs": [{"targets": list(targets), **static}]}
                               for job, targets in jobs.items()]}


class PrometheusServer:
    """`prometheus` on 127.0.0.1:<free port>, scraping `jobs` ({job name: ["host:port", ...]})."""

    def __init__(self, jobs: dict[str, list[str]], *, metrics_path: str = "/metrics",
                 scrape_interval: str = "1s", labels: dict[str, str] | None = None) -> None:
        self.jobs = jobs
        self.config = scrape_config(jobs, metrics_path=metrics_path, scrape_interval=scrape_interval,
                                    labels=labels)
        self.port = 0
        self._dir: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> PrometheusServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self, ready_within: float = READY_WITHIN) -> None:
        binary = prometheus_binary()
        if binary is None:
            raise PrometheusError("`prometheus` is not installed (apt-get install prometheus)")
        self._dir = Path(tempfile.mkdtemp(prefix="gke-grpo-prometheus-"))
        config = self._dir / "prometheus.yml"
        config.write_text(yaml.safe_dump(self.config, sort_keys=False))
        self.port = free_loopback_port()
        log = (self._dir / "prometheus.log").open("wb")
        self._proc = subprocess.Popen(
            [binary, f"--config.file={config}", f"--storage.tsdb.path={self._dir / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--storage.tsdb.retention.time=1h",
             "--web.enable-lifecycle", "--log.level=warn"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()
        deadline = time.monotonic() + ready_within
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise PrometheusError(f"prometheus exited {self._proc.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as reply:
                    if reply.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.1)
        self.stop()
        raise PrometheusError(f"prometheus not ready within {ready_within}s")

    def log_tail(self, chars: int = 3000) -> str:
        path = self._dir / "prometheus.log" if self._dir else None
        return path.read_text(errors="replace")[-chars:] if path and path.exists() else ""

    def stop(self) -> None:
        """Terminate, wait, kill if it must; then remove the data directory."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=STOP_WITHIN)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=STOP_WITHIN)
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def _api(self, path: str, params: dict[str, str]) -> Any:
        url = f"{self.url}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=10) as reply:
                body = json.load(reply)
        except urllib.error.HTTPError as error:      # 400/422: a bad query; the body says why
            body = json.loads(error.read() or b"{}")
        if body.get("status") != "success":
            raise PrometheusError(f"{path} {params}: {body.get('errorType')}: {body.get('error')}")
        return body["data"]

    def query(self, promql: str) -> list[dict[str, Any]]:
        """An instant query now: [{"metric": {labels}, "value": [t, "v"]}, ...] for a vector;
        a scalar or string comes back as one entry with an empty "metric"."""
        data = self._api("query", {"query": promql})
        if data["resultType"] in ("scalar", "string"):
            return [{"metric": {}, "value": data["result"]}]
        return list(data["result"])

    def targets(self) -> list[dict[str, Any]]:
        """The active targets with their health ("up", "down", "unknown") and last error."""
        return list(self._api("targets", {"state": "active"})["activeTargets"])

    def wait_for_series(self, promql: str, timeout: float = SCRAPED_WITHIN) -> list[dict[str, Any]]:
        """`query(promql)` once it returns at least one series; PrometheusError after `timeout`
        (with the targets' health, which says why a target gave nothing)."""
        deadline = time.monotonic() + timeout
        while True:
            series = self.query(promql)
            if series:
                return series
            if time.monotonic() > deadline:
                health = [(t["labels"].get("job"), t["scrapeUrl"], t["health"], t["lastError"]) for t in self.targets()]
                raise PrometheusError(f"no series for {promql!r} within {timeout}s; targets: {health}")
            time.sleep(0.25)


def promtool_check_rules(rules_yaml_text: str) -> tuple[bool, str]:
    """`promtool check rules` on a rules file's text (groups of recording/alerting rules): whether
    it passed, and promtool's output (which names the bad expression and why)."""
    binary = prometheus_binary("promtool")
    if binary is None:
        raise PrometheusError("`promtool` is not installed (apt-get install prometheus)")
    with tempfile.TemporaryDirectory(prefix="gke-grpo-promtool-") as tmp:
        path = Path(tmp) / "rules.yml"
        path.write_text(rules_yaml_text)
        done = subprocess.run([binary, "check", "rules", str(path)], capture_output=True, text=True, timeout=60)
    return done.returncode == 0, (done.stdout + done.stderr).strip()


def promtool_check_expression(promql: str) -> tuple[bool, str]:
    """Whether one PromQL expression parses, by promtool 2.42 (which has no `check query`): the
    expression as the one rule of a group. Dashboard queries with Cloud Monitoring's template
    variables (`${__interval}`) need them substituted first."""
    rules = {"groups": [{"name": "expression", "rules": [{"record": "gke_grpo:expression", "expr": promql}]}]}
    return promtool_check_rules(yaml.safe_dump(rules, sort_keys=False))
