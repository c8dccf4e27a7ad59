"""The jobs CLI without a Ray cluster: entrypoint composition, the secrets guard, the GPU wait's
logic, the port-forward's lifecycle (a fake kubectl listening on 127.0.0.1 only), exit codes and
usage errors. Against a real Ray head: tests/jobs/cli/test_ray_jobs_ray.py."""

from __future__ import annotations

import io
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from components.config import load_stack_config
from components.run_spec import spec_from_config
from jobs.cli import main as cli
from jobs.cli import ray_jobs as runs
from jobs.cli.port_forward import PortForwardError, free_local_port, head_service, port_forward, process_alive
from jobs.cli.ray_jobs import SecretInJobError, check_no_secrets, run_entrypoint
from jobs.contract.exit_codes import ExitCode
from jobs.contract.run_plan import RUN_COMMAND
from jobs.contract.spec import GrpoSpec
from jobs.head import gpu_wait as wfg
from tests.conftest import ROOT, stack_config
from tests.jobs.hostile import fake_kubectl, kubectl_calls


def dev_spec(**changes) -> GrpoSpec:
    raw, secrets = stack_config("dev", changes)
    return spec_from_config(load_stack_config(raw, secrets, "dev"))


def write_config(tmp_path: Path, stack: str = "dev", **job_changes) -> Path:
    """A copy of Pulumi.<stack>.yaml with gke-grpo:job keys changed."""
    document = yaml.safe_load((ROOT / f"Pulumi.{stack}.yaml").read_text())
    document["config"]["gke-grpo:job"].update(job_changes)
    path = tmp_path / f"Pulumi.{stack}-{'-'.join(map(str, job_changes.values())) or 'copy'}.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


# ---- the entrypoint --------------------------------------------------------------------------

def test_the_cli_submits_the_run_drivers_one_command():
    spec = dev_spec()
    entry, runtime_env = cli.default_entrypoint(spec, None)
    # the same command as the Pulumi RayJob's (tests/components/test_grpo_job.py): one thing runs
    assert entry == run_entrypoint() == RUN_COMMAND
    assert shlex.split(entry) == entry.split(" ") == ["python3", "-m", "jobs.run", "--plan",
                                                      "/opt/gke-grpo/run/plan.json"]
    assert runtime_env["pip"]["packages"] == ["verl==0.9.1"]
    # nothing attempt-specific: every attempt runs the same command
    assert cli.default_entrypoint(spec.with_attempt(3), None)[0] == entry


# ---- secrets ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["HF_TOKEN", "WANDB_API_KEY", "HUGGING_FACE_HUB_TOKEN", "AWS_SECRET_ACCESS_KEY",
                                  "DB_PASSWORD", "DB_PASSPHRASE", "OPENAI_APIKEY", "my-token"])
def test_secret_like_env_names_are_refused(name):
    with pytest.raises(SecretInJobError, match=name):
        check_no_secrets("python3 train.py", {"env_vars": {name: "x"}})


def test_ordinary_env_and_entrypoints_pass():
    check_no_secrets(
        "python3 -m verl.trainer.main_ppo data.tokenizer=null actor_rollout_ref.rollout.max_num_batched_tokens=8192",
        {"env_vars": {"TOKENIZERS_PARALLELISM": "true", "NCCL_DEBUG": "WARN", "HF_HOME": "/data/huggingface_cache",
                      "VLLM_USE_V1": "1", "PYTHONHASHSEED": "0", "KEYRING_BACKEND": "x"}, "working_dir": "."},
        {"run_id": "r", "spec_hash": "ab" * 32, "attempt": "1"})


@pytest.mark.parametrize("entrypoint, runtime_env, metadata", [
    ("python3 x.py hf_token=hf_abcdefghijklmnopqrstuvwxyz0123456789", None, None),
    ("python3 x.py", {"env_vars": {"EXTRA": "hf_abcdefghijklmnopqrstuvwxyz0123456789"}}, None),
    ("python3 x.py --wandb_api_key=0123456789abcdef", None, None),
    ("python3 x.py", None, {"note": "password=hunter2"}),
    ("python3 x.py", {"pip": ["git+https://x:ghp_abcdefghijklmnopqrstuvwxyz0123@github.com/a/b"]}, None),
])
def test_secret_values_are_refused(entrypoint, runtime_env, metadata):
    with pytest.raises(SecretInJobError) as err:
        check_no_secrets(entrypoint, runtime_env, metadata)
    assert "Kubernetes Secrets" in str(err.value)
    assert "hunter2" not in str(err.value) and "hf_abcdef" not in str(err.value)  # never echoed


def test_submit_refuses_secrets_before_any_call():
    class Exploding:
        def __getattr__(self, name):
            raise AssertionError(f"no call expected, got {name}")

    runner = runs.Runs("http://127.0.0.1:1", client_factory=lambda address: Exploding())
    with pytest.raises(SecretInJobError):
        runner.submit(dev_spec(), "python3 x.py", {"env_vars": {"HF_TOKEN": "hf_x"}})


# ---- the GPU wait ----------------------------------------------------------------------------

class FakeCluster:
    """Snapshots over a fake clock: a GPU node joins at each time in `joins`."""

    def __init__(self, joins, gpus_per_node=8, busy=0.0):
        self.now = 0.0
        self.joins, self.gpn, self.busy = joins, gpus_per_node, busy

    def clock(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds

    def snapshot(self):
        nodes = tuple(wfg.GpuNode(f"10.0.0.{i + 1}", self.gpn, True)
                      for i, t in enumerate(self.joins) if t <= self.now)
        total = sum(n.gpus for n in nodes)
        return wfg.Snapshot(available=max(0.0, total - self.busy), total=total, nodes=nodes)


def test_wait_for_gpus_ready_when_nodes_join():
    cluster, out = FakeCluster(joins=[0, 95]), io.StringIO()
    code = wfg.wait_for_gpus(16, timeout=600, poll=10, gpus_per_node=8, snapshot=cluster.snapshot,
                             clock=cluster.clock, sleep=cluster.sleep, out=out)
    assert code == ExitCode.OK and cluster.now == 100
    lines = out.getvalue().splitlines()
    assert lines[0] == "[wait_for_gpus] 8/16 GPUs available (GPU nodes 1/2), elapsed 0s of 600s"
    assert "[wait_for_gpus] 16/16 GPUs available (GPU nodes 2/2), elapsed 100s of 600s" in lines
    assert lines[-1] == "[wait_for_gpus] ready: 16 GPUs available after 100s"
    assert len(lines) < 8            # printed on change and once a minute, not every poll


def test_wait_for_gpus_timeout_names_missing_nodes():
    cluster, out = FakeCluster(joins=[0, 10_000]), io.StringIO()
    code = wfg.wait_for_gpus(16, timeout=60, poll=25, gpus_per_node=8, snapshot=cluster.snapshot,
                             clock=cluster.clock, sleep=cluster.sleep, out=out)
    assert code == ExitCode.GPU_WAIT_TIMEOUT == 3 and cluster.now == 60      # the last sleep is clipped
    text = out.getvalue()
    assert f"{wfg.TIMEOUT_MARKER}: 8 of the 16 GPUs this run needs are available after 60s." in text
    assert "GPU nodes joined: 1 of 2; missing 1 node(s) (8 GPUs)." in text
    assert "Spot or flex-start capacity not granted yet" in text and "pending" in text
    assert "node 10.0.0.1: 8 GPUs, alive" in text


def test_wait_for_gpus_timeout_when_gpus_are_busy():
    cluster, out = FakeCluster(joins=[0, 0], busy=8), io.StringIO()
    assert wfg.wait_for_gpus(16, 5, 1, snapshot=cluster.snapshot, clock=cluster.clock,
                             sleep=cluster.sleep, out=out) == 3
    assert "All 16 GPUs have joined but only 8 are free" in out.getvalue()


def test_wait_for_gpus_usage_errors():
    assert wfg.main(["--gpus", "0", "--timeout-seconds", "5"]) == ExitCode.USAGE
    assert wfg.main(["--timeout-seconds", "5"]) == ExitCode.USAGE


# ---- the port-forward ------------------------------------------------------------------------

def test_port_forward_waits_for_the_port_and_always_stops(tmp_path):
    kubectl, log = fake_kubectl(tmp_path, "listen")
    port = free_local_port()
    with port_forward("grpo", head_service("grpo-dev"), local_port=port, kubectl=str(kubectl),
                      context="gke_p_z_c") as address:
        assert address == f"http://127.0.0.1:{port}"
        import urllib.request
        assert urllib.request.urlopen(address, timeout=5).read() == b"ok"
        (argv, pid), = kubectl_calls(log)
        assert argv == ["--context", "gke_p_z_c", "port-forward", "-n", "grpo", "svc/grpo-dev-head-svc",
                        f"{port}:8265", "--address", "127.0.0.1"]
        assert process_alive(pid)
    _assert_gone(pid)

    for exc in (RuntimeError("boom"), KeyboardInterrupt()):
        with pytest.raises(type(exc)), port_forward("grpo", "svc", kubectl=str(kubectl)):
            raise exc
        _assert_gone(kubectl_calls(log)[-1][1])


def _assert_gone(pid: int) -> None:
    deadline = time.monotonic() + 5
    while process_alive(pid):
        try:   # reaped by Popen.wait in the context manager; a zombie still answers kill(0)
            with open(f"/proc/{pid}/stat") as f:
                if f.read().split(") ")[1].startswith("Z"):
                    return
        except FileNotFoundError:
            return
        assert time.monotonic() < deadline, f"kubectl {pid} still running"
        time.sleep(0.05)


def _assert_none_runs(program: str) -> None:
    """No live process (zombies aside) has `program` in its command line, within 5 s."""
    deadline = time.monotonic() + 5
    while True:
        running = []
        for proc in Path("/proc").iterdir():
            try:
                if proc.name.isdigit() and program in (proc / "cmdline").read_bytes().decode(errors="replace") \
                        and not (proc / "stat").read_text().split(") ")[1].startswith("Z"):
                    running.append(proc.name)
            except (OSError, IndexError):
                continue
        if not running:
            return
        assert time.monotonic() < deadline, f"{program} still running: {running}"
        time.sleep(0.05)


def test_port_forward_errors_are_clear_and_bounded(tmp_path):
    kubectl, _ = fake_kubectl(tmp_path, "fail")
    with (pytest.raises(PortForwardError, match=r'exited with code 1: error: services "nope-head-svc" not found'),
          port_forward("grpo", "nope-head-svc", kubectl=str(kubectl))):
        pytest.fail("entered")
    hang, _ = fake_kubectl(tmp_path, "hang")
    start = time.monotonic()
    with (pytest.raises(PortForwardError, match=r"did not open 127.0.0.1"),
          port_forward("grpo", "svc", kubectl=str(hang), ready_timeout=1.0)):
        pytest.fail("entered")
    assert time.monotonic() - start < 5
    # By its command line, not its log: on a loaded machine the fake can be killed at the 1 s bound
    # before it has written its pid.
    _assert_none_runs(str(hang))
    with (pytest.raises(PortForwardError, match="not found: install kubectl"),
          port_forward("grpo", "svc", kubectl=str(tmp_path / "no-such-kubectl"))):
        pass


def test_kubectl_s_noise_never_reaches_the_user(tmp_path):
    kubectl, _ = fake_kubectl(tmp_path, "no-cluster")
    err = io.StringIO()
    code = cli.main(["list", "--stack", "dev", "--kubectl", str(kubectl)], out=io.StringIO(), err=err)
    assert code == ExitCode.DASHBOARD_UNREACHABLE
    lines = err.getvalue().splitlines()
    assert not any("memcache.go" in line or line.startswith("E1206") for line in lines), lines
    [error] = [line for line in lines if line.startswith("[gke-grpo] error:")]
    assert ("exited with code 1: The connection to the server localhost:8080 was refused - did you "
            "specify the right host or port?; check the cluster credentials") in error


def test_cli_port_forward_failure_is_exit_4(tmp_path):
    kubectl, _ = fake_kubectl(tmp_path, "fail")
    err = io.StringIO()
    code = cli.main(["list", "--stack", "dev", "--kubectl", str(kubectl)], out=io.StringIO(), err=err)
    assert code == ExitCode.DASHBOARD_UNREACHABLE
    assert "port-forward svc/grpo-dev-head-svc -n grpo" in err.getvalue()
    assert "exited with code 1" in err.getvalue()
    # the hint is the stack's own command (output getCredentials), not a placeholder
    assert "(`gcloud container clusters get-credentials grpo-dev --location us-central1 --project " \
           "my-grpo-dev --dns-endpoint`), the namespace 'grpo'" in err.getvalue()


def test_the_unreachable_dashboard_hint_names_the_namespace():
    from jobs.cli.ray_jobs import Runs

    hint = str(Runs("http://127.0.0.1:9", namespace="grpo")._unreachable(OSError("refused"), 1))
    assert "kubectl get raycluster,pods -n grpo`" in hint


# ---- CLI usage -------------------------------------------------------------------------------

def run_cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    return cli.main(list(argv), out=out, err=err), out.getvalue(), err.getvalue()


def test_usage_errors_exit_2(tmp_path):
    code, _, err = run_cli()
    assert code == ExitCode.USAGE and "submit" in err
    assert run_cli("status")[0] == ExitCode.USAGE                              # no target
    assert run_cli("frobnicate")[0] == ExitCode.USAGE                          # argparse
    assert run_cli("submit", "--address", "http://127.0.0.1:1")[0] == ExitCode.USAGE   # no spec
    code, _, err = run_cli("status", "--stack", "nosuchstack")
    assert code == ExitCode.USAGE and "Pulumi.nosuchstack.yaml" in err
    bad = write_config(tmp_path, framework="tensorflow")
    code, _, err = run_cli("list", "--stack", "dev", "--config-file", str(bad), "--address", "http://127.0.0.1:1")
    assert code == ExitCode.USAGE and "gke-grpo:job.framework" in err
    code, _, err = run_cli("plot", "--log", str(tmp_path / "missing.log"), "--out", str(tmp_path / "x.png"))
    assert code == ExitCode.USAGE and "cannot read" in err


def test_plot_command_from_log_files(tmp_path):
    fixtures = Path(__file__).resolve().parents[1] / "fixtures"
    code, out, _ = run_cli("plot", "--log", str(fixtures / "nemo_rl_console.log"), "--out", str(tmp_path / "n.png"))
    assert code == ExitCode.OK and (tmp_path / "n.png").stat().st_size > 10_000
    assert "5 steps (1..5); reward 0.2812 -> 0.5156; response length 402.1 -> 342.2" in out
    empty = tmp_path / "empty.log"
    empty.write_text("nothing here\n")
    code, _, err = run_cli("plot", "--log", str(empty), "--out", str(tmp_path / "e.png"))
    assert code == ExitCode.USAGE and "no training step" in err


def test_preflight_dispatches_to_jobs_preflight(monkeypatch):
    seen = []
    from jobs.cli import preflight

    monkeypatch.setattr(preflight, "main", lambda argv: seen.append(argv) or 7)
    assert cli.main(["preflight", "--stack", "dev", "--json"]) == 7
    assert seen == [["--stack", "dev", "--json"]]


def test_python_dash_m_jobs_entry_point():
    proc = subprocess.run([sys.executable, "-m", "jobs", "--help"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0
    for command in ("submit", "attach", "logs", "status", "list", "stop", "plot", "preflight"):
        assert command in proc.stdout
    assert "3 GPU wait timeout" in proc.stdout


# ---- following (a fake Job Submission client: the real one is in test_runs_ray.py) -------------

class FlakyClient:
    """tail_job_logs drops the connection once mid-stream; the next stream replays the log from
    its start, as Ray's does (it tails the log file from the beginning)."""

    LOG = ("step:1 - critic/score/mean:0.1 - resp", "onse_length/mean:11\n", "step:2 - critic/score/mean:0.2",
           " - response_length/mean:22\n", "done\n")

    def __init__(self):
        self.streams = 0

    async def tail_job_logs(self, submission_id):
        import aiohttp
        self.streams += 1
        for i, chunk in enumerate(self.LOG):
            if self.streams == 1 and i == 3:
                raise aiohttp.ClientConnectionError("port-forward dropped")
            yield chunk

    def get_job_status(self, submission_id):
        return "SUCCEEDED"


def test_follow_reconnects_without_repeating_logs():
    client, out, err = FlakyClient(), io.StringIO(), io.StringIO()
    runner = runs.Runs("http://127.0.0.1:1", client_factory=lambda address: client, out=out, err=err,
                       retry=runs.RetryPolicy(tries=3, base=0.01, cap=0.01))
    assert runner.follow("r-attempt-1", status_every=60) == "SUCCEEDED"
    assert client.streams == 2
    assert out.getvalue() == "".join(FlakyClient.LOG)          # each character exactly once
    assert "log stream of r-attempt-1 interrupted (ClientConnectionError); reconnecting" in err.getvalue()
    assert "r-attempt-1: SUCCEEDED" in err.getvalue()
    assert "step 2, reward 0.2000, response length 22.0" in err.getvalue()


def test_follow_gives_up_after_bounded_retries():
    class Dead(FlakyClient):
        async def tail_job_logs(self, submission_id):
            raise ConnectionRefusedError("refused")
            yield  # pragma: no cover

    runner = runs.Runs("http://127.0.0.1:1", client_factory=lambda address: Dead(), out=io.StringIO(),
                       err=io.StringIO(), retry=runs.RetryPolicy(tries=3, base=0.01, cap=0.01))
    with pytest.raises(runs.DashboardUnreachable, match="did not answer after 3 tries"):
        runner.follow("r-attempt-1", status_every=60)


def test_ctrl_c_while_following_detaches_with_130(monkeypatch):
    attempt = runs.Attempt("r-attempt-1", 1, "RUNNING")
    monkeypatch.setattr(runs.Runs, "attempts", lambda self, run: [attempt])

    def interrupted(self, submission_id, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(runs.Runs, "follow", interrupted)
    code, _, err = run_cli("attach", "--address", "http://127.0.0.1:1", "--run-id", "r")
    assert code == ExitCode.INTERRUPTED == 130
    assert "the attempt keeps running on the cluster" in err


def test_prepare_step_matches_jobs_prepare_flags(capsys):
    import json

    from components.grpo_job import run_plan
    from jobs.contract.run_plan import plan_from_dict
    from jobs.head import staging as prepare
    raw, secrets = stack_config("dev")
    config = load_stack_config(raw, secrets, "dev")
    plan = plan_from_dict(json.loads(run_plan(spec_from_config(config), config)))
    assert prepare.main(["--help"]) == 0
    usage = capsys.readouterr().out
    spec = spec_from_config(config)
    assert plan.prepare.argv == ("python3", "-m", "jobs.head.staging", "--framework", "verl",
                                 "--model", "Qwen/Qwen2.5-7B-Instruct", "--dataset", "gsm8k",
                                 "--model-revision", spec.model_revision,
                                 "--dataset-revision", spec.dataset_revision)
    assert spec.model_revision and spec.dataset_revision   # the dev stack pins both
    for flag in (a for a in plan.prepare.argv if a.startswith("--")):
        assert flag in usage, flag


def test_dashboard_error_answers_are_clean_exit_codes(monkeypatch):
    def missing(self, submission_id, number=0):
        raise RuntimeError(f"Request failed with status code 404: Job {submission_id} does not exist.")
    monkeypatch.setattr(runs.Runs, "attempt_info", missing)
    code, _, err = run_cli("logs", "--address", "http://127.0.0.1:1", "--submission-id", "nope")
    assert code == ExitCode.USAGE and "Job nope does not exist" in err and "Traceback" not in err

    def broken(self, run):
        raise RuntimeError("Request failed with status code 500: internal error.")
    monkeypatch.setattr(runs.Runs, "attempts", broken)
    code, _, err = run_cli("list", "--address", "http://127.0.0.1:1", "--run-id", "r")
    assert code == ExitCode.DASHBOARD_UNREACHABLE and "answered with an error" in err
