"""The fabric gate (jobs/head/fabric_gate.py) for real: Ray actors on a REAL Ray cluster (the head of
tests/jobs/ray_head.py plus two more Ray nodes, every one on 127.0.0.1 with fake GPUs) joined
into one torch.distributed process group with the gloo backend, inside a network namespace that
has only loopback (nothing listens beyond 127.0.0.1).

Outside the namespace this module holds one test that re-runs it with pytest inside `unshare`;
inside it the scenarios share one cluster of 3 Ray nodes x 2 fake GPUs, stopped at the end
whatever happens. Message sizes are small (KiB to MiB): the arithmetic, the placement, the
rendezvous, the thresholds and the failure paths are what is checked, not loopback's speed.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time

import pytest

from tests.conftest import ROOT
from tests.jobs import ray_head
from tools import local_ray

EXTRA_NODES = 2
GPUS_PER_RAY_NODE = 2   # the head's FAKE_GPUS; the extra nodes get as many


# Started in the background when collection ends (tests/conftest.py); the outer test waits for it.
# Inner tests measured 2026-12-06 on the 2-core machine: 184 s in the whole suite alone; 423 s and
# 437 s in the whole suite with a second whole suite running beside it.
INNER = ray_head.InnerRun(__file__, "the health gate's Ray tests", measured_seconds=440, own_head=True)

if not ray_head.inside_namespace():

    def test_health_gate_in_a_loopback_only_namespace():
        INNER.check()

else:
    import ray

    from jobs.cli.health_view import health_status_rows, read_health
    from jobs.contract.exit_codes import ExitCode
    from jobs.contract.health import (
        RESULT_MARKER,
        HealthPlan,
        PublishedFigure,
        StoragePlan,
        busbw_factor,
        health_from_log,
    )
    from jobs.head.fabric_gate import fabric_gate
    from jobs.head.fabric_probe import CollectiveProbe

    KIB = 1024

    def start_extra_node() -> None:
        local_ray.join_node(num_gpus=GPUS_PER_RAY_NODE)

    @pytest.fixture(scope="module")
    def cluster():
        links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True).stdout
        assert [line.split(":")[1].strip() for line in links.splitlines()] == ["lo"], links
        try:
            ray_head.start_head()
            for _ in range(EXTRA_NODES):
                start_extra_node()
            ray.init(address=ray_head.GCS, logging_level="WARNING", log_to_driver=False)
            deadline = time.monotonic() + 60
            while len([n for n in ray.nodes() if n["Alive"]]) < 1 + EXTRA_NODES:
                assert time.monotonic() < deadline, ray.nodes()
                time.sleep(0.5)
            assert ray_head.non_loopback_listeners() == []
            yield
        finally:
            if ray.is_initialized():
                ray.shutdown()
            ray_head.stop_head()

    ALL_GPUS = (1 + EXTRA_NODES) * GPUS_PER_RAY_NODE

    def free_gpus() -> float:
        """The cluster's free GPUs once Ray has taken back what the gate released (resource
        updates reach the GCS asynchronously: wait for them, bounded)."""
        deadline = time.monotonic() + 20
        while ray.available_resources().get("GPU", 0) < ALL_GPUS and time.monotonic() < deadline:
            time.sleep(0.2)
        return ray.available_resources().get("GPU", 0)

    def gloo_plan(**changes) -> HealthPlan:
        fields = dict(mode="enforce", backend="gloo", machine_type="loopback",
                      sizes_bytes=(64 * KIB, 256 * KIB), warmup_iterations=1, iterations=3,
                      min_average_busbw_gbps=1e-6, published=(), placement_timeout_s=30,
                      timeout_s=120, env={"GLOO_SOCKET_IFNAME": "lo"},
                      # Loopback's timings are noise: never blame a node for its own speed here
                      # (the outlier rule has its own test in tests/jobs/head/test_fabric_gate.py).
                      intra_node_outlier_fraction=0.0,
                      sources={"min_average_busbw_gbps": "test"})
        fields.update(changes)
        return HealthPlan(**fields)

    def test_gate_places_one_node_per_bundle_rendezvous_and_busbw(cluster, tmp_path):
        storage = StoragePlan(directory=str(tmp_path / "probe"), size_bytes=4 * 1024 * KIB, streams=4,
                              kind="lustre", expected_write_gbps=1e6, expected_read_gbps=None,
                              expected_source="a figure no disk reaches", block_bytes=256 * KIB)
        published = PublishedFigure("all_gather", 2, 256 * KIB, 1e-6, "test figure")
        out = io.StringIO()
        result = fabric_gate(gloo_plan(storage=storage, published=(published,)), 2, 2,
                             tmp_path / "run", out=out)
        doc = read_health(tmp_path / "run" / "health.json")
        assert result.passed and result.exit_code == 0, out.getvalue()

        # placement: bundle i = all GPUs of one node, the two bundles on distinct nodes
        bundles = doc["placement"]["bundles"]
        assert doc["placement"]["strategy"] == "STRICT_SPREAD"
        assert [len(b["node_ids"]) for b in bundles] == [1, 1]
        assert bundles[0]["node_ids"] != bundles[1]["node_ids"]
        for b in bundles:   # two distinct fake GPUs of that node per bundle
            assert len({tuple(g) for g in b["gpu_ids"]}) == 2 and all(len(g) == 1 for g in b["gpu_ids"])

        # rendezvous: rank 0's node address, a port of its choosing, the whole world joined
        rendezvous = doc["rendezvous"]
        assert rendezvous["master_addr"] == "127.0.0.1"
        assert rendezvous["world_size"] == 4 and rendezvous["backend"] == "gloo"
        assert 0 < rendezvous["master_port"] < 65536

        # busbw as nccl-tests defines it, recomputed from what every rank reported
        assert len(doc["measurements"]) == 4           # 2 collectives x 2 sizes
        for m in doc["measurements"]:
            rows = [r for r in doc["per_rank"]
                    if r["collective"] == m["collective"] and r["size_bytes"] == m["size_bytes"]]
            assert sorted(r["rank"] for r in rows) == [0, 1, 2, 3]
            mean = sum(r["seconds"] for r in rows) / len(rows)
            algbw = m["size_bytes"] / 1e9 / mean
            assert m["algbw_gbps"] == pytest.approx(algbw, rel=1e-3)
            factor = {"all_reduce": 2 * 3 / 4, "all_gather": 3 / 4}[m["collective"]]
            assert busbw_factor(m["collective"], 4) == factor
            assert m["busbw_gbps"] == pytest.approx(algbw * factor, rel=1e-3)
            assert m["correct"] is True
        assert {m["size_bytes"] for m in doc["measurements"] if m["collective"] == "all_gather"} == \
            {64 * KIB, 256 * KIB}
        names = [c["name"] for c in doc["checks"]]
        assert any(n.startswith("all_gather busbw at 256 KiB") for n in names)
        assert all(c["passed"] for c in doc["checks"])

        # storage: written and read back from one worker, warned about (expected unreachable)
        assert doc["storage"]["bytes"] == 4 * 1024 * KIB and doc["storage"]["errors"] == []
        assert doc["storage"]["write_gbps"] > 0 and doc["storage"]["read_gbps"] > 0
        assert any("storage write" in w and "below 50%" in w for w in result.warnings)
        assert list((tmp_path / "probe").iterdir()) == []          # probe files removed

        # what the job log carries is what `gke-grpo status` shows
        logged = health_from_log(out.getvalue())
        assert logged["passed"] is True and logged["checks"] == doc["checks"]
        rows = dict(health_status_rows(logged)[:1])
        assert rows["health"].startswith("PASSED") and "2 node(s) x 2 GPUs" in rows["health"]
        # every actor is gone afterwards: the GPUs are free for the trainer
        assert free_gpus() == ALL_GPUS
        assert len({b["label"] for b in bundles}) == 2        # nodes told apart in messages

    def test_gate_below_threshold_fails_with_its_exit_code_and_names_the_nodes(cluster, tmp_path):
        out = io.StringIO()
        result = fabric_gate(gloo_plan(min_average_busbw_gbps=1e6, sizes_bytes=(64 * KIB,),
                                       iterations=2), 2, 2, tmp_path, out=out)
        assert not result.passed and result.exit_code == ExitCode.HEALTH_GATE_FAILED == 6
        doc = read_health(tmp_path / "health.json")
        assert doc["passed"] is False and all(not c["passed"] for c in doc["checks"])
        # 2 nodes: the one link cannot tell which end is bad, so both are named
        assert [n["node_index"] for n in doc["failed_nodes"]] == [0, 1]
        assert all(n["label"] in result.message for n in doc["failed_nodes"])
        assert "mean busbw" in result.message and "< 1e+06 GB/s" in result.message
        assert len(doc["localization"]["intra_node"]) == 2       # each node's own GPUs measured
        assert health_from_log(out.getvalue())["passed"] is False

    def test_warn_mode_reports_but_does_not_stop(cluster, tmp_path):
        result = fabric_gate(gloo_plan(mode="warn", min_average_busbw_gbps=1e6, sizes_bytes=(64 * KIB,),
                                       iterations=1, localize=False), 2, 1, tmp_path, out=io.StringIO())
        assert result.passed and result.exit_code == 0
        assert any("FAILED" in w and "mode warn" in w for w in result.warnings)
        rows = health_status_rows(read_health(tmp_path / "health.json"))
        assert rows[0][1].startswith("FAILED (mode warn: not enforced)")

    class SlowLinkProbe(CollectiveProbe):
        """A probe whose node 2 has a slow link: every collective it takes part in waits
        0.5 s before it starts (the other ranks of the group wait with it, as they would on a real link)."""
        SLOW_NODE = 2
        DELAY_S = 0.5

        def run_collective(self, collective, output, tensor, group):
            if self.node_index == self.SLOW_NODE:
                time.sleep(self.DELAY_S)
            super().run_collective(collective, output, tensor, group)

    def test_an_actor_reporting_a_slow_link_fails_the_gate_naming_its_node(cluster, tmp_path):
        # 1 MiB / 0.5 s is at most 0.0021 GB/s for every group with node 2, whatever the
        # machine; a healthy pair on loopback moves 1 MiB far faster than 0.005 GB/s (0.1-0.5 GB/s
        # measured by tools/bench_health.py on a loaded 2-core machine).
        size = 1024 * KIB
        plan = gloo_plan(min_average_busbw_gbps=0.005, sizes_bytes=(size,), collectives=("all_reduce",),
                         warmup_iterations=0, iterations=2)
        out = io.StringIO()
        result = fabric_gate(plan, 3, 1, tmp_path, probe_class=SlowLinkProbe, out=out)
        doc = read_health(tmp_path / "health.json")
        assert not result.passed and result.exit_code == ExitCode.HEALTH_GATE_FAILED, out.getvalue()
        pairs = {tuple(p["nodes"]): p for p in doc["localization"]["pairs"]}
        assert set(pairs) == {(0, 1), (1, 2), (0, 2)}
        assert pairs[(1, 2)]["slow"] and pairs[(0, 2)]["slow"]
        assert pairs[(1, 2)]["busbw_gbps"] <= size / 1e9 / SlowLinkProbe.DELAY_S
        assert not pairs[(0, 1)]["slow"], pairs
        assert doc["localization"]["suspect_nodes"] == [2]
        slow_label = doc["placement"]["bundles"][2]["label"]
        assert [n["label"] for n in doc["failed_nodes"]] == [slow_label]
        assert result.message.endswith(f"nodes: {slow_label}")
        rows = health_status_rows(health_from_log(out.getvalue()))
        assert ("", f"failed node {slow_label}") in rows

    class DyingProbe(CollectiveProbe):
        """Node 1's first GPU dies (its process exits) as the collectives start."""

        def world_tests(self, *args):
            if self.node_index == 1 and self.local_rank == 0:
                os._exit(1)
            return super().world_tests(*args)

    def test_an_actor_that_dies_fails_the_gate_naming_its_node(cluster, tmp_path):
        # The stage bound the other gate tests use: the rendezvous of four actors (each a Python
        # process importing torch) passed 60 s once with two suites and another Ray run beside.
        result = fabric_gate(gloo_plan(timeout_s=120), 2, 2, tmp_path, probe_class=DyingProbe,
                             out=io.StringIO())
        assert not result.passed and result.exit_code == ExitCode.HEALTH_GATE_FAILED
        assert "FAILED in world collectives: the actor(s) of rank 2 died" in result.message
        doc = read_health(tmp_path / "health.json")
        assert [n["node_index"] for n in doc["failed_nodes"]] == [1]
        assert doc["timings"]["teardown"] >= 0
        assert free_gpus() == ALL_GPUS

    def test_placement_that_cannot_be_met_fails_bounded(cluster, tmp_path):
        result = fabric_gate(gloo_plan(placement_timeout_s=3), 1 + EXTRA_NODES + 1, 1, tmp_path,
                             out=io.StringIO())
        assert not result.passed and result.exit_code == ExitCode.HEALTH_GATE_FAILED
        assert "FAILED in placement" in result.message and "STRICT_SPREAD" in result.message
        doc = read_health(tmp_path / "health.json")
        assert doc["error"]["stage"] == "placement"
        # the placement group is gone: nothing holds GPUs
        assert free_gpus() == ALL_GPUS

    def test_command_line_runs_the_gate_and_shows_it(cluster, tmp_path):
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"trainer": ["unused"], "health": gloo_plan(
            sizes_bytes=(64 * KIB,), iterations=1, collectives=("all_gather",)).to_dict()}))
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        run = subprocess.run([sys.executable, "-m", "jobs.head.fabric_gate", "--plan", str(plan),
                              "--nodes", "2", "--gpus-per-node", "1", "--run-dir", str(tmp_path / "run"),
                              "--address", ray_head.GCS], capture_output=True, text=True, env=env,
                             cwd="/", timeout=180)
        assert run.returncode == 0, run.stdout + run.stderr
        assert RESULT_MARKER in run.stdout and "PASSED" in run.stdout
        show = subprocess.run([sys.executable, "-m", "jobs", "health",
                               str(tmp_path / "run" / "health.json")],
                              capture_output=True, text=True, env=env, cwd="/", timeout=60)
        assert show.returncode == 0 and show.stdout.startswith("health      PASSED"), show.stdout
        # the workers ran the probe shipped by value: its module was never imported there (a jobs
        # package may be importable on this machine's workers, the project being installed in
        # the venv; on the cluster's workers it is not)
        doc = read_health(tmp_path / "run" / "health.json")
        assert doc["rendezvous"]["world_size"] == 2
        assert [b["probe_module_imported"] for b in doc["placement"]["bundles"]] == [False, False]

    def test_gate_as_a_ray_job_and_jobs_status_shows_its_result(cluster, tmp_path):
        """The gate run the way the run driver runs on the head: inside a Ray job. `gke-grpo status`
        (jobs/cli/main.py) reads the gate's result line back from that job's log."""
        from jobs.cli import main as cli
        from jobs.cli.ray_jobs import Runs
        from tests.jobs.cli.test_main import dev_spec

        spec = dev_spec(**{"gke-grpo:job.experimentName": "health-status"})
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"health": gloo_plan(
            sizes_bytes=(64 * KIB,), iterations=1, collectives=("all_reduce",)).to_dict()}))
        entry = (f"{sys.executable} -m jobs.head.fabric_gate --plan {plan} --nodes 2 --gpus-per-node 1 "
                 f"--run-dir {tmp_path / 'run'}")
        runs = Runs(ray_head.DASHBOARD)
        result = runs.submit(spec, entry, {"env_vars": {"PYTHONPATH": str(ROOT)}})
        assert runs.wait_terminal(result.attempt.submission_id, 180) == "SUCCEEDED", \
            runs.logs(result.attempt.submission_id)
        out, err = io.StringIO(), io.StringIO()
        code = cli.main(["status", "--address", ray_head.DASHBOARD, "--run-id", spec.run_id],
                        out=out, err=err)
        assert code == 0, out.getvalue() + err.getvalue()
        lines = out.getvalue().splitlines()
        health_line = next(line for line in lines if line.startswith("health "))
        assert health_line.startswith("health      PASSED") and "2 node(s) x 1 GPUs, gloo" in health_line
        assert any("ok  all_reduce mean busbw over 1 size(s)" in line for line in lines)
        assert (tmp_path / "run" / "health.json").exists()
