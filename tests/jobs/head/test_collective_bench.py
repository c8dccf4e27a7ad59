"""The fabric gate's measurement without Ray (jobs/head/collective_bench.py under torchrun): the
same timing function as the gate's Ray actors, run for real with gloo on this machine's CPU, and
the figures it measured on an H200 (data/collective-bench-h200-1gpu.json) read back against the
parser and the bus-bandwidth arithmetic."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from jobs.contract.health import busbw_factor
from jobs.head import collective_bench, collective_timing, fabric_probe
from jobs.head.nccl_log import nccl_nics
from tests.conftest import ROOT

H200_FIGURES = ROOT / "data" / "collective-bench-h200-1gpu.json"
FIXTURES = ROOT / "tests" / "jobs" / "fixtures" / "nccl"


def test_the_gate_and_torchrun_time_with_the_same_function():
    assert fabric_probe.time_collective is collective_timing.time_collective
    assert collective_bench.time_collective is collective_timing.time_collective
    # The probe's own hook, which a test overrides to slow one node, is the same call too.
    assert fabric_probe.run_collective is collective_timing.run_collective


def test_torchrun_measures_every_collective_and_size_with_gloo(tmp_path):
    """Two ranks on this machine's CPU: what `torchrun -m jobs.head.collective_bench` writes."""
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
         "-m", "jobs.head.collective_bench", "--sizes", "65536,262144", "--warmup", "1",
         "--iterations", "2", "--backend", "gloo", "--out", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=180,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    document = json.loads((tmp_path / "collective-bench.json").read_text())
    assert document["backend"] == "gloo" and document["world_size"] == 2
    rows = {(m["collective"], m["size_bytes"]): m for m in document["measurements"]}
    assert set(rows) == {(c, s) for c in ("all_gather", "all_reduce") for s in (65536, 262144)}
    for (collective, _size), m in rows.items():
        assert m["correct"] and m["ranks"] == 2 and m["seconds"] > 0
        assert m["busbw_gbps"] == pytest.approx(m["algbw_gbps"] * busbw_factor(collective, 2))
    assert {r["rank"] for r in document["per_rank"]} == {0, 1}


def test_bad_arguments_are_usage_errors(capsys):
    assert collective_bench.main(["--sizes", "1k", "--out", "x"]) == 2
    assert "sizes in bytes" in capsys.readouterr().err
    assert collective_bench.main(["--collectives", "broadcast", "--out", "x"]) == 2


def test_the_h200_figures_are_one_rank_and_carry_their_provenance():
    figures = json.loads(H200_FIGURES.read_text())
    assert figures["world_size"] == 1 and figures["backend"] == "nccl"
    assert {"torch", "nccl", "driver", "gpu", "cuda_runtime"} <= set(figures["versions"])
    assert figures["versions"]["gpu"] == "NVIDIA H200" and figures["measured"] == "2026-12-01"
    for m in figures["measurements"]:
        assert m["correct"] and m["busbw_gbps"] == 0.0      # one rank: nothing crosses a bus
        if m["collective"] == "all_gather":
            # One rank's all_gather is a copy of the input into the output, at the GPU's copy rate.
            assert m["algbw_gbps"] > 1000
    assert figures["nccl_network"] == {"nets": ["Socket"], "nics": ["eth0:192.0.2.2<0>"], "warnings": []}


def test_the_parser_reads_the_real_h200_log_as_the_bench_recorded_it():
    log = (FIXTURES / "nccl-2.28.9-h200-one-rank-socket.log").read_text()
    assert nccl_nics(log) == json.loads(H200_FIGURES.read_text())["nccl_network"]
    # What NCCL 2.28.9 printed when no RDMA device was found: IB named, then given up.
    assert "NCCL INFO NET/IB : No device found." in log and "NCCL INFO Using network Socket" in log
