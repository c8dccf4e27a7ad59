"""The driver's GPU gang without Ray: held from the first GPU wait (after staging) to the end of
the driver, released on every way it ends, recorded with each trainer start; the GPU wait's
separate-nodes rule, its infeasible verdict and its placement record; the gang holder's process
released by a closed pipe, a signal or its parent's death (the request itself is faked: the real
one against Ray's autoscaler is tests/jobs/head/test_gpu_gang_ray.py)."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from jobs.contract.capacity import PLACEMENT_FILE
from jobs.contract.exit_codes import ExitCode
from jobs.head import driver as driver_mod
from jobs.head import gpu_wait as wfg
from tests.conftest import ROOT
from tests.jobs.head.test_driver import FakeHooks, drive, make_plan

PLACEMENT = {"gpu_nodes": [{"node_id": "n1", "node_name": "node-a", "source": "spot", "gpus": 2.0,
                            "address": "10.0.0.1"}], "capacity_sources": {"spot": 1}}


class FakeHolder:
    def __init__(self, log):
        self.log = log

    def release(self):
        self.log.append("release")
        return 0


class GangHooks(FakeHooks):
    def __init__(self, gpu_codes=()):
        super().__init__(gpu_codes)
        self.log: list[str] = []

    def hold_gpus(self, plan, on_event=None, stop_seen=None):
        self.log.append(f"hold {plan.gpus}")
        return FakeHolder(self.log)

    def wait_for_gpus(self, plan, timeout, run):
        self.log.append("wait")
        return super().wait_for_gpus(plan, timeout, run)

    def gpu_placement(self, plan):
        return PLACEMENT


@pytest.mark.parametrize("mode,gpu_codes,expected", [
    ("ok", (), ExitCode.OK),
    ("ok", (ExitCode.GPU_WAIT_TIMEOUT,), ExitCode.GPU_WAIT_TIMEOUT),
    ("ok", (ExitCode.GPU_GANG_INFEASIBLE,), ExitCode.GPU_GANG_INFEASIBLE),
    ("fail-early", (), ExitCode.BEFORE_FIRST_STEP),
    ("lost-once", (), ExitCode.OK),
])
def test_the_gang_is_held_once_and_released_whatever_the_end(tmp_path, mode, gpu_codes, expected):
    hooks = GangHooks(gpu_codes)
    code, out, events, _ = drive(make_plan(tmp_path, mode), hooks)
    assert code == expected, out
    # Held once, before the first wait; released once, at the end (restarts keep it).
    assert hooks.log[0] == "hold 2" and hooks.log.count("hold 2") == 1
    assert hooks.log[-1] == "release" and hooks.log.count("release") == 1
    names = [e["event"] for e in events]
    assert names.index("gpu_request") < names.index("gpu_wait_start")
    assert names[-1] == "driver_end" and events[-1]["gpu_release_exit_code"] == 0


def test_an_infeasible_gang_ends_with_its_own_code_and_message(tmp_path):
    code, out, _, _ = drive(make_plan(tmp_path, "ok"), GangHooks((ExitCode.GPU_GANG_INFEASIBLE,)))
    assert code == 17
    assert "FAILED (exit 17 GPU_GANG_INFEASIBLE): the Ray autoscaler can never provide the run's 2 GPUs" in out


def test_staging_runs_before_the_gang_is_asked_for(tmp_path):
    staged = tmp_path / "staged"
    plan = make_plan(tmp_path, "ok", prepare=driver_mod.Command(
        argv=(sys.executable, "-c", f"import pathlib; pathlib.Path({str(staged)!r}).write_text('x')")))
    code, _, events, _ = drive(plan, GangHooks())
    names = [e["event"] for e in events]
    assert code == 0 and names.index("prepare_end") < names.index("gpu_request")


def test_every_trainer_start_records_its_nodes_and_sources(tmp_path):
    code, _, events, _ = drive(make_plan(tmp_path, "lost-once"), GangHooks())
    starts = [e for e in events if e["event"] == "trainer_start"]
    assert code == 0 and len(starts) == 2
    for start in starts:
        assert start["gpu_nodes"] == PLACEMENT["gpu_nodes"]
        assert start["capacity_sources"] == {"spot": 1}


def test_a_stopped_driver_releases_the_gang(tmp_path):
    hooks = GangHooks()
    plan = make_plan(tmp_path, "ok")
    Path(plan.run_dir).mkdir(parents=True)
    driver = driver_mod.Driver(plan, attempt=1, hooks=hooks, out=io.StringIO())
    driver.stop_requested.set()
    assert driver.run() == ExitCode.TERMINATED
    assert hooks.log == []        # stopped before any wait: nothing was asked for


def test_default_hooks_read_the_placement_the_wait_wrote(tmp_path):
    plan = make_plan(tmp_path, "ok")
    Path(plan.run_dir).mkdir(parents=True)
    hooks = driver_mod.DefaultHooks()
    assert hooks.gpu_placement(plan) == {}
    (Path(plan.run_dir) / PLACEMENT_FILE).write_text(json.dumps(PLACEMENT))
    assert hooks.gpu_placement(plan) == PLACEMENT


# ---- the GPU wait -----------------------------------------------------------------------------

def _snapshot(*frees, gpus=8):
    nodes = tuple(wfg.GpuNode(f"10.0.0.{i}", gpus, True, free=free, node_id=f"n{i}",
                              labels={"cloud.google.com/gke-spot": "true", "gke-grpo/node-name": f"node-{i}"})
                  for i, free in enumerate(frees))
    return wfg.Snapshot(available=sum(frees), total=gpus * len(frees), nodes=nodes)


def test_the_gpus_must_be_free_on_separate_nodes():
    # 16 free GPUs, but spread 8 + 4 + 4: not two whole nodes yet.
    snaps = iter([_snapshot(8, 4, 4), _snapshot(8, 8, 0)])
    clock = {"t": 0.0}
    out = io.StringIO()
    code = wfg.wait_for_gpus(16, 60, 5, gpus_per_node=8, snapshot=lambda: next(snaps),
                             clock=lambda: clock["t"], sleep=lambda s: clock.__setitem__("t", clock["t"] + s),
                             out=out)
    assert code == ExitCode.OK and clock["t"] == 5


def test_an_infeasible_verdict_twice_in_a_row_ends_the_wait():
    verdicts = iter([True, False, True, True])
    clock = {"t": 0.0}
    out = io.StringIO()
    code = wfg.wait_for_gpus(24, 600, 2, gpus_per_node=8, snapshot=_snapshot,
                             clock=lambda: clock["t"], sleep=lambda s: clock.__setitem__("t", clock["t"] + s),
                             out=out, infeasible=lambda: next(verdicts))
    assert code == ExitCode.GPU_GANG_INFEASIBLE and clock["t"] == 6
    assert "[wait_for_gpus] INFEASIBLE: the Ray autoscaler reports it can never provide 3 GPU nodes of 8" in out.getvalue()


def test_the_placement_names_the_nodes_and_their_sources(tmp_path):
    out = io.StringIO()
    record = wfg.report_placement(_snapshot(8, 8, 0), 16, 8, str(tmp_path / "p.json"), out=out)
    assert record == json.loads((tmp_path / "p.json").read_text())
    assert [n["node_name"] for n in record["gpu_nodes"]] == ["node-0", "node-1"]
    assert record["capacity_sources"] == {"spot": 2}
    assert "[wait_for_gpus] GPUs from 2 x Spot" in out.getvalue()
    assert "[wait_for_gpus] NODES " in out.getvalue()


def test_the_placement_carries_each_nodes_creation_time():
    """The driver works a flex-start node's end out from it (jobs/contract/capacity_end.py)."""
    labels = {"cloud.google.com/gke-flex-start": "true", "gke-grpo/node-name": "node-f",
              "gke-grpo/node-created": "1800000000"}
    placed = wfg.GpuNode("10.0.0.9", 8, True, node_id="n9", labels=labels).placement()
    assert (placed["source"], placed["created_at"]) == ("flexStart", 1_800_000_000.0)
    unlabelled = wfg.GpuNode("10.0.0.8", 8, True, node_id="n8", labels={"gke-grpo/node-labels": "unreadable"})
    assert unlabelled.placement()["created_at"] is None


# ---- the holder's process ---------------------------------------------------------------------

def _fake_holder(tmp_path: Path) -> Path:
    """A stand-in `ray` package first on PYTHONPATH: the GCS client records each request (the
    holder's own code, GangRequest included, runs unchanged)."""
    shim = tmp_path / "shim"
    (shim / "ray" / "_private").mkdir(parents=True)
    (shim / "ray" / "__init__.py").write_text(
        "import os, time\n"
        "if os.environ.get('GANG_SHIM_MODE') == 'hang-import':\n    time.sleep(600)\n"
        "from ray import _raylet\n")
    (shim / "ray" / "_private" / "__init__.py").write_text("")
    (shim / "ray" / "_private" / "services.py").write_text(
        "def canonicalize_bootstrap_address_or_die(address):\n    return '127.0.0.1:6379'\n")
    # GANG_SHIM_MODE: "ok"; "unreachable" (no GCS answers); "no-api" (a Ray whose GCS client has
    # no resource request call); "hang" (the client never connects); "hang-import" (importing Ray
    # never ends); "hang-request" (the request call never returns).
    (shim / "ray" / "_raylet.py").write_text(textwrap.dedent(f"""
        import json, os, time
        GCS_AUTOSCALER_V2_ENABLED_KEY = "__autoscaler_v2_enabled"
        GCS_AUTOSCALER_STATE_NAMESPACE = "__autoscaler"
        MODE = os.environ.get("GANG_SHIM_MODE", "ok")
        class GcsClient:
            def __init__(self, address):
                assert address == "127.0.0.1:6379"
                if MODE == "unreachable":
                    raise ConnectionError("Failed to connect to GCS at 127.0.0.1:6379")
                if MODE == "hang":
                    time.sleep(600)
                if MODE == "no-api":
                    self.request_cluster_resource_constraint = None
            def internal_kv_get(self, key, namespace=None, timeout=None):
                return b"1" if (key, namespace) == (b"__autoscaler_v2_enabled", b"__autoscaler") else None
            def request_cluster_resource_constraint(self, bundles, selectors, counts, timeout_s=None):
                # (its docstring, below, names label_selectors as Ray 2.54's does)
                if MODE == "hang-request":
                    time.sleep(600)
                with open({str(tmp_path / "requests.jsonl")!r}, "a") as f:
                    f.write(json.dumps([bundles, selectors, counts]) + "\\n")
            request_cluster_resource_constraint.__doc__ = "(self, bundles, label_selectors, count_array)"
    """))
    return shim


HELD = [[{"GPU": 8.0}], [{}], [4]]
CLEARED = [[], [], []]


def _requests(tmp_path: Path) -> list:
    path = tmp_path / "requests.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _wait(predicate, timeout=30):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline
        time.sleep(0.05)


@pytest.mark.parametrize("how", ["pipe", "sigterm", "parent-killed"])
def test_the_holder_clears_the_request_however_the_driver_goes(tmp_path, how):
    shim = _fake_holder(tmp_path)
    env = dict(os.environ, PYTHONPATH=f"{shim}:{ROOT}")
    hold = [sys.executable, "-m", "jobs.head.gpu_gang", "hold", "--nodes", "4", "--gpus-per-node", "8"]
    if how == "parent-killed":
        # A parent that starts the holder and is then SIGKILLed: PR_SET_PDEATHSIG fires.
        parent = subprocess.Popen([sys.executable, "-c", (
            "import subprocess, sys, time; subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE); "
            "time.sleep(600)"), *hold], env=env)
        _wait(lambda: _requests(tmp_path) == [HELD])
        parent.kill()
        parent.wait()
    else:
        holder = subprocess.Popen(hold, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True)
        _wait(lambda: _requests(tmp_path) == [HELD])
        if how == "pipe":
            holder.stdin.close()
        else:
            holder.send_signal(signal.SIGTERM)
        out = holder.stdout.read()
        holder.wait(timeout=30)
        assert holder.returncode == 0
        assert '[gpu_gang] HELD {"autoscaler": "v2", "gpus_per_node": 8, "nodes": 4}' in out
        assert "[gpu_gang] RELEASED" in out
    _wait(lambda: _requests(tmp_path) == [HELD, CLEARED])


def test_the_request_fits_both_ray_versions_of_the_images():
    """Ray 2.54 (verl's image) takes label selectors, Ray 2.49.2 (NeMo RL's) does not: the
    compiled signatures, as ray/_raylet.so of each wheel documents them."""
    from jobs.head.gpu_gang import GangRequest

    calls = []

    class Client:
        def __init__(self, doc):
            self.request_cluster_resource_constraint = _Method(doc, calls)

    for doc in ("InnerGcsClient.request_cluster_resource_constraint(self, vector[unordered_map"
                "[string,double]] bundles: c_vector[...], vector[unordered_map[string,string]] "
                "label_selectors: c_vector[...], vector[int64_t] count_array: c_vector[int64_t], "
                "timeout_s=None)",
                "InnerGcsClient.request_cluster_resource_constraint(self, vector[unordered_map"
                "[string,double]] bundles: c_vector[...], vector[int64_t] count_array: "
                "c_vector[int64_t], timeout_s=None)"):
        gang = GangRequest.__new__(GangRequest)
        gang.client, gang.v2 = Client(doc), True
        gang.request(4, 8)
        gang.clear()
    assert calls == [([{"GPU": 8.0}], [{}], [4]), ([], [], []), ([{"GPU": 8.0}], [4]), ([], [])]


class _Method:
    def __init__(self, doc, calls):
        self.__doc__, self.calls = doc, calls

    def __call__(self, *args, timeout_s=None):
        self.calls.append(args)
