"""The jobs CLI under hostile conditions, without a Ray head: a dashboard that accepts and never
answers (a loopback TCP server; through a fake port-forward too), malformed addresses and
numbers, RAY_ADDRESS, signals sent to the CLI while its port-forward is open (SIGINT, SIGTERM,
SIGHUP: exit 130/143/129 and kubectl stopped; SIGKILL: kubectl dies with it, PR_SET_PDEATHSIG),
failed plot writes and a submission the dashboard answers with a 5xx. Against a real Ray head:
tests/jobs/cli/test_cli_hostile_ray.py."""

from __future__ import annotations

import io
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from jobs.cli import main as cli
from jobs.cli import ray_jobs as runs
from jobs.cli.ray_jobs import RetryPolicy
from jobs.contract.exit_codes import ExitCode
from tests.conftest import ROOT
from tests.jobs.hostile import (
    child_env,
    fake_kubectl,
    kubectl_pids,
    kubectl_port,
    listening,
    silent_server,
    wait_forward_gone,
    wait_until,
)

FAST = RetryPolicy(tries=3, base=0.05, cap=0.1, call_timeout=0.5, budget=2.0)
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def run_cli(*argv, retry=FAST):
    out, err = io.StringIO(), io.StringIO()
    code = cli.main([str(a) for a in argv], out=out, err=err, retry=retry)
    return code, out.getvalue(), err.getvalue()


# ---- a dashboard that accepts and never answers ------------------------------------------------

def test_silent_dashboard_is_exit_4_not_a_hang():
    with silent_server() as port:
        code, _, err = run_cli("list", "--address", f"http://127.0.0.1:{port}", "--run-id", "r")
    assert code == ExitCode.DASHBOARD_UNREACHABLE, err
    assert f"the Ray dashboard at http://127.0.0.1:{port} did not answer" in err
    assert "DashboardTimeout: no answer within 0.5s" in err and "Traceback" not in err


def test_silent_dashboard_with_the_default_limits_in_a_real_process():
    """`python -m jobs` with its default call timeout and retry budget: exit 4 on its own (the
    subprocess timeout only keeps a regression from hanging the suite)."""
    with silent_server() as port:
        proc = subprocess.run([sys.executable, "-m", "jobs", "status", "--address",
                               f"http://127.0.0.1:{port}", "--run-id", "r"], cwd=ROOT, env=child_env(),
                              capture_output=True, text=True, timeout=120)
    assert proc.returncode == ExitCode.DASHBOARD_UNREACHABLE, proc.stderr
    assert "did not answer" in proc.stderr and "Traceback" not in proc.stderr


def test_follow_ends_when_the_dashboard_stops_answering():
    class Quiet:
        """A log stream that stays silent while status calls never return."""
        async def tail_job_logs(self, submission_id):
            import asyncio
            await asyncio.sleep(3600)
            yield ""  # pragma: no cover

        def get_job_status(self, submission_id):
            import time
            time.sleep(3600)

    runner = runs.Runs("http://127.0.0.1:1", client_factory=lambda a: Quiet(), out=io.StringIO(),
                       err=io.StringIO(), retry=FAST)
    with pytest.raises(runs.DashboardUnreachable, match="did not answer"):
        runner.follow("r-attempt-1", status_every=0.2)


def test_a_status_probe_that_gives_up_as_the_stream_ends_is_not_a_crash():
    """The status probe runs beside the log stream. When it gave up (a port-forward restarting)
    just as the stream ended, it used to cancel the follow while it was already awaiting the probe
    in its cleanup: a bare CancelledError instead of the run's status. Seen beside a second
    suite (test_cli_hostile_ray: kubectl dropping mid-follow); here it happens every time."""
    import threading

    probing = threading.Event()

    class Restarting:
        """A stream that ends while the first status probe is failing; later probes answer."""
        calls = 0

        async def tail_job_logs(self, submission_id):
            import asyncio
            yield "line 00\n"
            while not probing.is_set():
                await asyncio.sleep(0.01)

        def get_job_status(self, submission_id):
            import time
            Restarting.calls += 1
            if Restarting.calls <= FAST.tries:
                probing.set()
                time.sleep(0.1)       # the stream ends meanwhile; the probe fails afterwards
                raise ConnectionRefusedError("port-forward restarting")
            return "SUCCEEDED"

    out = io.StringIO()
    runner = runs.Runs("http://127.0.0.1:1", client_factory=lambda a: Restarting(), out=out,
                       err=io.StringIO(), retry=FAST)
    assert runner.follow("r-attempt-1", status_every=0.05) == "SUCCEEDED"
    assert out.getvalue() == "line 00\n"


# ---- --address, RAY_ADDRESS and numbers, validated at once --------------------------------------

@pytest.mark.parametrize("address,phrase", [
    ("127.0.0.1:8265", "the scheme must be http or https"),
    ("ray://127.0.0.1:10001", "the scheme must be http or https"),
    ("ftp://127.0.0.1:8265", "the scheme must be http or https"),
    ("http://", "has no host"),
    ("http://127.0.0.1:0", "out of range"),
    ("http://127.0.0.1:99999", "Port out of range"),
    ("http://127.0.0.1:-1", "not a dashboard URL"),
    ("http://127.0.0.1:80a", "not a dashboard URL"),
    ("http://user:hunter2@127.0.0.1:8265", "credentials in the URL"),
    ("http://127.0.0.1:8265/api/jobs", "has a path"),
    ("http://127.0.0.1:8265 ; rm -rf /", "blanks or control characters"),
    ("http://[::1", "not a dashboard URL"),
])
def test_bad_addresses_are_exit_2_at_once(address, phrase, monkeypatch):
    def no_connection(*args, **kwargs):
        raise AssertionError("no connection may be attempted")
    monkeypatch.setattr(runs.Runs, "_with_retries", no_connection)
    code, _, err = run_cli("list", "--address", address, "--run-id", "r")
    assert code == ExitCode.USAGE, err
    assert "--address" in err and phrase in err, err
    assert "Traceback" not in err and "hunter2" not in err


def test_ray_address_is_honoured_and_validated(monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", "auto")
    code, _, err = run_cli("list", "--run-id", "r")
    assert code == ExitCode.USAGE and "RAY_ADDRESS" in err and "scheme" in err
    with silent_server() as port:
        monkeypatch.setenv("RAY_ADDRESS", f"http://127.0.0.1:{port}/")
        code, _, err = run_cli("list", "--run-id", "r")
        assert code == ExitCode.DASHBOARD_UNREACHABLE and f"http://127.0.0.1:{port} did not answer" in err
        # --address wins over RAY_ADDRESS
        code, _, err = run_cli("list", "--run-id", "r", "--address", "http://127.0.0.1:1")
        assert code == ExitCode.DASHBOARD_UNREACHABLE and "http://127.0.0.1:1 did not answer" in err


@pytest.mark.parametrize("flag,value", [
    ("--wait-timeout", "inf"), ("--wait-timeout", "nan"), ("--wait-timeout", "0"), ("--wait-timeout", "-5"),
    ("--wait-timeout", "1e400"), ("--wait-timeout", "soon"), ("--status-every", "0"), ("--status-every", "-inf"),
    ("--status-every", "NaN"), ("--local-port", "70000"), ("--local-port", "0"), ("--attempt", "x"),
])
def test_numbers_must_be_finite_and_positive(flag, value, capsys):
    code, _, _ = run_cli("submit", "--stack", "dev", "--address", "http://127.0.0.1:1", f"{flag}={value}")
    assert code == ExitCode.USAGE
    err = capsys.readouterr().err           # argparse writes its own usage error
    assert flag in err and "Traceback" not in err


# ---- plot: a failed write is exit 1 with the path --------------------------------------------------

def test_plot_write_failure_is_exit_1_with_the_path():
    """A write that fails after the checks (a full device): exit 1, the path and the reason. An
    --out that cannot be written at all (under a file, a directory) is refused before any work
    with exit 2: tests/jobs/test_hostile_inputs.py."""
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full on this system")
    code, _, err = run_cli("plot", "--log", FIXTURES / "verl_console.log", "--out", "/dev/full")
    assert code == 1, err
    assert "cannot write the plot to /dev/full: No space left on device" in err and "Traceback" not in err


# ---- submit: a 5xx after the job may have been created ---------------------------------------------

class FlakySubmit:
    """submit_job answers 500 after (created=True) or without (False) storing the job."""

    def __init__(self, created: bool):
        self.created, self.jobs = created, {}

    def list_jobs(self):
        return list(self.jobs.values())

    def submit_job(self, *, entrypoint, submission_id, runtime_env=None, metadata=None):
        if self.created:
            import types
            self.jobs[submission_id] = types.SimpleNamespace(
                submission_id=submission_id, status="PENDING", metadata=metadata, message="",
                start_time=None, end_time=None, driver_exit_code=None)
        raise RuntimeError("Request failed with status code 500: [Errno 28] No space left on device.")

    def get_job_info(self, submission_id):
        if submission_id not in self.jobs:
            raise RuntimeError(f"Request failed with status code 404: Job {submission_id} does not exist.")
        return self.jobs[submission_id]


@pytest.mark.parametrize("created", [True, False])
def test_submit_checks_the_submission_id_after_an_error(created, monkeypatch):
    from tests.jobs.cli.test_main import dev_spec
    client = FlakySubmit(created)
    spec = dev_spec()
    out, err = io.StringIO(), io.StringIO()
    runner = runs.Runs("http://127.0.0.1:1", client_factory=lambda a: client, out=out, err=err, retry=FAST)
    if created:
        result = runner.submit(spec, "python3 x.py", {})
        assert result.action == "submitted" and result.attempt.submission_id == spec.submission_id(1)
        assert "answered the submission" in err.getvalue() and "but the attempt exists (PENDING)" in err.getvalue()
    else:
        with pytest.raises(runs.SubmitFailed, match="nothing was submitted") as exc:
            runner.submit(spec, "python3 x.py", {})
        assert exc.value.exit_code == ExitCode.DASHBOARD_UNREACHABLE
        assert "No space left on device" in str(exc.value)
        assert client.jobs == {}



class DroppedSubmit(FlakySubmit):
    """The dashboard closes the connection without an answer `drops` times, storing nothing (as a
    head under load did: http.client.RemoteDisconnected through requests' ConnectionError)."""

    def __init__(self, drops: int):
        super().__init__(created=False)
        self.drops, self.calls = drops, 0

    def submit_job(self, *, entrypoint, submission_id, runtime_env=None, metadata=None):
        self.calls += 1
        if self.calls <= self.drops:
            raise ConnectionError("('Connection aborted.', RemoteDisconnected('Remote end closed "
                                  "connection without response'))")
        import types
        self.jobs[submission_id] = types.SimpleNamespace(
            submission_id=submission_id, status="PENDING", metadata=metadata, message="",
            start_time=None, end_time=None, driver_exit_code=None)


@pytest.mark.parametrize("drops,submitted", [(1, True), (2, True), (3, False)])
def test_a_dropped_submission_of_a_job_that_does_not_exist_is_made_again(drops, submitted):
    from tests.jobs.cli.test_main import dev_spec
    client, spec, err = DroppedSubmit(drops), dev_spec(), io.StringIO()
    runner = runs.Runs("http://127.0.0.1:1", client_factory=lambda a: client, out=io.StringIO(), err=err,
                       retry=FAST)
    if submitted:
        result = runner.submit(spec, "python3 x.py", {})
        assert result.action == "submitted" and list(client.jobs) == [spec.submission_id(1)]
        assert err.getvalue().count("the dashboard has no such job; submitting again") == drops
    else:                                           # FAST allows 3 tries: the last error stands
        with pytest.raises(runs.SubmitFailed, match="nothing was submitted"):
            runner.submit(spec, "python3 x.py", {})
        assert client.calls == FAST.tries and client.jobs == {}

# ---- signals while the port-forward is open ------------------------------------------------------

def _cli_with_silent_forward(tmp_path):
    kubectl, log = fake_kubectl(tmp_path, "silent")
    # SIGINT as a terminal gives it: a suite started in the background (`pytest &`) has SIGINT
    # ignored, its children inherit that, and Python then installs no KeyboardInterrupt handler.
    # A handled signal is reset to its default across exec, an ignored one is not.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        proc = subprocess.Popen([sys.executable, "-m", "jobs", "list", "--stack", "dev", "--kubectl", str(kubectl)],
                                cwd=ROOT, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    finally:
        signal.signal(signal.SIGINT, previous)
    # kubectl is up and the CLI sits in a dashboard call that will not be answered.
    wait_until(lambda: kubectl_pids(log) and listening(kubectl_port(log)), 60, "the fake port-forward")
    return proc, log


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_signals_stop_the_cli_and_its_port_forward(sig, code, tmp_path):
    proc, log = _cli_with_silent_forward(tmp_path)
    try:
        import time
        time.sleep(0.5)                     # into the dashboard call
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code, err
    assert "Traceback" not in err and "keeps running on the cluster" in err
    (pid,) = kubectl_pids(log)
    wait_forward_gone([pid], kubectl_port(log), 10, f"kubectl {pid} to exit and its port to close")


def test_sigkill_takes_the_port_forward_with_it(tmp_path):
    proc, log = _cli_with_silent_forward(tmp_path)
    proc.kill()
    proc.wait(timeout=30)
    (pid,) = kubectl_pids(log)
    wait_forward_gone([pid], kubectl_port(log), 10,
                      f"kubectl {pid} to die with the CLI (PR_SET_PDEATHSIG) and its port to close")
