"""The health gate's pure parts (jobs/head/fabric_gate.py): nccl-tests' bus-bandwidth arithmetic checked on
rows copied from the anchors' published nccl-tests output, the thresholds and their sources, the
localisation of a slow node, NCCL's NIC lines, the storage probe on a real directory, and the
results as health.json, the job log and `gke-grpo status` show them. The orchestration on a real Ray
cluster is tests/jobs/head/test_fabric_gate_ray.py."""

from __future__ import annotations

import io
import json

import pytest

from jobs.cli.health_view import health_status_rows, read_health
from jobs.contract.exit_codes import ExitCode
from jobs.contract.health import (
    GIB,
    RESULT_MARKER,
    HealthPlan,
    HealthPlanError,
    StoragePlan,
    algbw_gbps,
    busbw_factor,
    busbw_gbps,
    effective_size,
    element_count,
    health_from_log,
    health_log_summary,
)
from jobs.head import fabric_gate as health
from jobs.head.fabric_gate import fabric_gate, gate_needed, write_health
from jobs.head.fabric_probe import storage_probe
from jobs.head.fabric_verdict import (
    Measurement,
    aggregate,
    fabric_checks,
    judge_storage,
    localize,
    ring_pair_rounds,
    tcp_fallback_check,
)
from jobs.head.nccl_log import nccl_nics
from jobs.plan.health_thresholds import load_health_gates
from tests.conftest import ROOT

FIXTURES = ROOT / "tests" / "jobs" / "fixtures" / "nccl"

# ---- busbw as nccl-tests defines it ---------------------------------------------------------------
# Rows of nccl-tests output as the anchors published them: (size B, time us, algbw, busbw, ranks).
# skypilot-org/skypilot examples/gcp_gpu_direct_tcpx/README.md @088eebc2 (all_gather_perf,
# 2 x a3-ultragpu-8g = 16 ranks, out-of-place columns):
SKYPILOT_ALL_GATHER = [
    (1073741824, 3123.9, 343.72, 322.23),
    (2147483648, 6229.6, 344.72, 323.18),
    (4294967296, 12416, 345.92, 324.30),
    (8589934592, 24724, 347.44, 325.72),
]
# dstackai/dstack examples/clusters/a4/README.md @30a0dd56 (all_reduce_perf, 2 x a4-highgpu-8g):
DSTACK_ALL_REDUCE = [
    (1073741824, 3229.9, 332.44, 623.33),
    (2147483648, 6107.7, 351.61, 659.26),
    (4294967296, 11952, 359.36, 673.79),
    (8589934592, 23563, 364.55, 683.52),
]


def test_busbw_factors_are_nccl_tests_summary():
    # NVIDIA/nccl-tests doc/PERFORMANCE.md (v2.19.6), "Summary": AllReduce 2(n-1)/n, AllGather (n-1)/n
    assert busbw_factor("all_reduce", 16) == pytest.approx(30 / 16)
    assert busbw_factor("all_gather", 16) == pytest.approx(15 / 16)
    assert busbw_factor("all_reduce", 2) == 1.0 and busbw_factor("all_gather", 2) == 0.5
    assert busbw_factor("all_gather", 1) == 0.0
    with pytest.raises(ValueError, match="unknown collective"):
        busbw_factor("broadcast", 2)


@pytest.mark.parametrize("collective, rows", [("all_gather", SKYPILOT_ALL_GATHER),
                                              ("all_reduce", DSTACK_ALL_REDUCE)])
def test_published_nccl_tests_rows_recomputed(collective, rows):
    """The arithmetic reproduces the anchors' algbw and busbw columns from size and time (the
    columns are rounded to 0.01 GB/s, the time to 0.1 us or 5 digits)."""
    for size, time_us, algbw, busbw in rows:
        seconds = time_us / 1e6
        assert algbw_gbps(size, seconds) == pytest.approx(algbw, abs=0.05, rel=5e-4)
        assert busbw_gbps(collective, size, seconds, 16) == pytest.approx(busbw, abs=0.05, rel=5e-4)


def test_all_gather_size_is_the_gathered_array():
    # nccl-tests: S = sendcount x sizeof(type) x n for all_gather; every rank sends S/n.
    assert element_count("all_gather", 8 * GIB, 16) == 8 * GIB // (4 * 16)
    assert element_count("all_reduce", 8 * GIB, 16) == 8 * GIB // 4
    assert effective_size("all_gather", 8 * GIB, 16) == 8 * GIB
    assert effective_size("all_gather", 1000, 3) == 996     # whole float32 elements per rank


def test_aggregate_averages_the_ranks_time_like_nccl_tests():
    reports = [{"collective": "all_reduce", "size_bytes": 10**9, "ranks": 4, "seconds": s, "rank": r}
               for r, s in enumerate((1.0, 1.0, 2.0, 4.0))]
    (m,) = aggregate(reports)
    assert m.seconds == 2.0 and m.slowest_seconds == 4.0
    assert m.algbw_gbps == 0.5 and m.busbw_gbps == 0.5 * 1.5


# ---- thresholds -----------------------------------------------------------------------------------

def test_sourced_thresholds_load_with_their_sources():
    gates = load_health_gates()
    assert gates.min_average_busbw_gbps == 100
    assert "test-gke-a4.yml" in gates.sources["min_average_busbw_gbps"]
    assert gates.published_fraction == 0.75
    (a3u,) = gates.published["a3-ultragpu-8g"]
    assert (a3u.collective, a3u.nodes, a3u.size_bytes, a3u.busbw_gbps) == ("all_gather", 2, 8 * GIB, 325.72)
    assert "skypilot" in a3u.source
    (a4,) = gates.published["a4-highgpu-8g"]
    assert (a4.collective, a4.size_bytes, a4.busbw_gbps) == ("all_reduce", 8 * GIB, 683.52)
    assert "dstack" in a4.source
    # the figures in the data file are the last rows of the published output the tests copy
    assert SKYPILOT_ALL_GATHER[-1][3] == a3u.busbw_gbps and DSTACK_ALL_REDUCE[-1][3] == a4.busbw_gbps
    assert gates.storage_warn_fraction == 0.5
    assert gates.gcsfuse_write_gbps == pytest.approx(4.62459)
    assert gates.gcsfuse_read_gbps == pytest.approx(14.198)
    assert gates.lustre_gbps(500, 18_000) == pytest.approx(500 * 18_000 / 1024 / 1000)


def a3u_plan(**changes) -> HealthPlan:
    gates = load_health_gates()
    fields = dict(machine_type="a3-ultragpu-8g", published=gates.published["a3-ultragpu-8g"],
                  min_average_busbw_gbps=100.0, published_fraction=0.75)
    fields.update(changes)
    return HealthPlan(**fields)


def measured(collective: str, busbw_by_size: dict[int, float], ranks: int = 16) -> list[Measurement]:
    out = []
    for size, busbw in busbw_by_size.items():
        seconds = size / 1e9 * busbw_factor(collective, ranks) / busbw
        out.append(Measurement(collective, size, ranks, seconds, seconds, True))
    return out


def test_healthy_a3_ultra_fabric_passes_both_rules():
    rows = measured("all_gather", dict(zip((1 * GIB, 2 * GIB, 4 * GIB, 8 * GIB), (322.23, 323.18, 324.30, 325.72))))
    rows += measured("all_reduce", {1 * GIB: 300.0, 8 * GIB: 310.0})
    checks = fabric_checks(rows, a3u_plan(), nodes=2)
    assert all(c["passed"] for c in checks)
    names = [c["name"] for c in checks]
    assert names[0] == "all_gather mean busbw over 4 size(s)"
    published = next(c for c in checks if "published" in c["name"])
    assert published["threshold_gbps"] == pytest.approx(0.75 * 325.72)
    assert published["size_bytes"] == 8 * GIB and "skypilot" in published["source"]
    # no published all_reduce figure for A3 Ultra: only the 100 GB/s rule applies to it
    assert [c["name"] for c in checks if c["collective"] == "all_reduce"] == ["all_reduce mean busbw over 2 size(s)"]


def test_a_fabric_below_75_percent_of_published_fails_even_above_100():
    rows = measured("all_gather", {1 * GIB: 200.0, 8 * GIB: 240.0})      # 240 < 244.29
    checks = fabric_checks(rows, a3u_plan(collectives=("all_gather",)), nodes=2)
    assert [c["passed"] for c in checks] == [True, False]


def test_tcp_fallback_speed_fails_the_100_gbps_rule():
    rows = measured("all_gather", {1 * GIB: 20.0, 8 * GIB: 22.0})
    checks = fabric_checks(rows, a3u_plan(collectives=("all_gather",)), nodes=2)
    assert not checks[0]["passed"] and checks[0]["threshold_gbps"] == 100.0


def test_published_size_not_measured_compares_the_largest():
    rows = measured("all_gather", {1 * GIB: 300.0, 2 * GIB: 250.0})
    check = fabric_checks(rows, a3u_plan(collectives=("all_gather",)), nodes=2)[1]
    assert check["size_bytes"] == 2 * GIB and check["name"].startswith("all_gather busbw at 2 GiB")


def test_one_node_has_no_fabric_to_gate():
    rows = measured("all_gather", {GIB: 1.0}, ranks=8)
    checks = fabric_checks(rows, a3u_plan(collectives=("all_gather",)), nodes=1)
    assert all(c["passed"] and c.get("informational") for c in checks)


# ---- localisation -------------------------------------------------------------------------------

def test_ring_pairs_cover_every_node_twice_in_disjoint_rounds():
    assert ring_pair_rounds(2) == []
    for n in (3, 4, 5, 8, 16):
        rounds = ring_pair_rounds(n)
        pairs = [p for r in rounds for p in r]
        assert sorted(pairs) == sorted((i, (i + 1) % n) for i in range(n))
        for r in rounds:
            members = [x for p in r for x in p]
            assert len(members) == len(set(members))
        assert len(rounds) <= 3


def pair_rows(pairs: dict[tuple[int, int], float], gpus: int = 1) -> list[dict]:
    rows = []
    for (a, b), busbw in pairs.items():
        ranks = [a * gpus + g for g in range(gpus)] + [b * gpus + g for g in range(gpus)]
        seconds = GIB / 1e9 * busbw_factor("all_gather", len(ranks)) / busbw
        for r in ranks:
            rows.append({"collective": "all_gather", "size_bytes": GIB, "ranks": len(ranks),
                         "seconds": seconds, "rank": r, "node_index": r // gpus, "group": ranks})
    return rows


def test_the_node_in_two_slow_pairs_is_named():
    plan = a3u_plan(collectives=("all_gather",))
    result = localize(pair_rows({(0, 1): 320, (1, 2): 320, (2, 3): 90, (3, 0): 80}), [], plan, 4, "all_gather")
    assert result["suspect_nodes"] == [3]
    assert {tuple(p["nodes"]): p["slow"] for p in result["pairs"]} == {
        (0, 1): False, (1, 2): False, (2, 3): True, (0, 3): True}


def test_intra_node_outlier_is_named_and_two_nodes_name_both():
    plan = a3u_plan(collectives=("all_gather",))
    intra = []
    for node, busbw in ((0, 400.0), (1, 120.0)):
        ranks = list(range(node * 8, node * 8 + 8))
        seconds = GIB / 1e9 * busbw_factor("all_gather", 8) / busbw
        intra += [{"collective": "all_gather", "size_bytes": GIB, "ranks": 8, "seconds": seconds,
                   "rank": r, "node_index": node, "group": ranks} for r in ranks]
    result = localize([], intra, plan, 2, "all_gather")
    assert result["suspect_nodes"] == [1]                    # below half of the median (260)
    even = [dict(r, seconds=intra[0]["seconds"]) for r in intra]
    assert localize([], even, plan, 2, "all_gather")["suspect_nodes"] == [0, 1]


# ---- NCCL's network lines --------------------------------------------------------------------------

def test_nccl_nics_from_nccls_info_and_warn_lines():
    # Lines of NCCL's INFO/WARN log as published (siderolabs/docs issue 566; NVIDIA/nccl-tests issue 24)
    log = "\n".join([
        "nccl-test:179:179 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB "
        "[3]mlx5_3:1/IB [RO]; OOB eth0:10.0.0.1<0>",
        "nccl-test:179:179 [0] NCCL INFO Using network IB",
        "nccl-test:179:179 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA",
        "gpu5:6252:6325 [0] transport/net_ib.cu:788 NCCL WARN NET/IB : Got completion with error 4, "
        "opcode 1, len 0, vendor err 81",
    ])
    parsed = nccl_nics(log)
    assert parsed["nets"] == ["IB"]                      # "Using network IB"
    assert parsed["nics"] == ["mlx5_0:1/IB", "mlx5_1:1/IB", "mlx5_2:1/IB", "mlx5_3:1/IB"]
    assert parsed["warnings"] == ["NET/IB : Got completion with error 4, opcode 1, len 0, vendor err 81"]
    assert nccl_nics("no nccl here") == {"nets": [], "nics": [], "warnings": []}


def test_nccl_log_of_a_real_run_that_fell_back_to_tcp():
    # NCCL 2.28.9 (torch 2.11, H200, one rank) with no RDMA device: IB fails, Socket is used.
    log = (FIXTURES / "nccl-2.28.9-h200-one-rank-socket.log").read_text()
    parsed = nccl_nics(log)
    assert parsed == {"nets": ["Socket"], "nics": ["eth0:192.0.2.2<0>"], "warnings": []}
    check = tcp_fallback_check({"0": parsed, "1": nccl_nics(log.replace("Socket", "IB"))}, nodes=2)
    assert not check["passed"] and check["nodes_on_tcp"] == [0] and "TCP" in check["detail"]
    assert tcp_fallback_check({"0": parsed}, nodes=1) is None
    rdma = {"nets": ["IB"], "nics": ["mlx5_0:1/RoCE"], "warnings": []}
    assert tcp_fallback_check({"0": rdma, "1": rdma}, nodes=2)["passed"]
    assert tcp_fallback_check({"0": {"nets": []}}, nodes=2) is None


# ---- the plan ---------------------------------------------------------------------------------------

def test_plan_round_trips_through_json_and_refuses_nonsense():
    plan = a3u_plan(storage=StoragePlan("/data/runs/r/health-probe", GIB, 10, "gcs", 4.6, 14.2, "gcsfuse"))
    again = HealthPlan.from_dict(json.loads(json.dumps({"health": plan.to_dict()})))
    assert again == plan
    with pytest.raises(HealthPlanError, match="unknown health plan keys: colectives"):
        HealthPlan.from_dict({"colectives": ["all_gather"]})
    with pytest.raises(HealthPlanError, match="mode 'maybe'"):
        HealthPlan.from_dict({"mode": "maybe"})
    with pytest.raises(HealthPlanError, match="collectives"):
        HealthPlan.from_dict({"collectives": ["broadcast"]})


def test_gate_off_writes_a_skipped_result_with_a_warning(tmp_path):
    out = io.StringIO()
    result = fabric_gate({"mode": "off"}, 2, 8, tmp_path, out=out)
    assert result.passed and result.exit_code == 0 and "OFF" in result.message
    doc = read_health(tmp_path / "health.json")
    assert doc["skipped"] and doc["passed"] and "OFF" in doc["warnings"][0]
    assert health_status_rows(health_from_log(out.getvalue()))[0][1].startswith("OFF")
    assert gate_needed(tmp_path, ["a"]) is False          # off stays off across restarts


# ---- storage probe ----------------------------------------------------------------------------------

def test_storage_probe_writes_reads_back_and_cleans_up(tmp_path):
    plan = StoragePlan(str(tmp_path / "probe"), size_bytes=6 << 20, streams=3, kind="lustre",
                       expected_write_gbps=None, expected_read_gbps=None, expected_source="-",
                       block_bytes=1 << 20)
    probe = storage_probe(plan)
    assert probe["bytes"] == 6 << 20 and probe["streams"] == 3 and probe["errors"] == []
    assert probe["write_gbps"] > 0 and probe["read_gbps"] > 0
    assert list((tmp_path / "probe").iterdir()) == []


def test_storage_below_half_of_expected_is_a_warning_only():
    plan = StoragePlan("/data/x", GIB, 10, "lustre", expected_write_gbps=8.79, expected_read_gbps=8.79,
                       expected_source="Lustre tier 500 x 18000 GiB")
    verdict = judge_storage({"write_gbps": 4.0, "read_gbps": 5.0, "errors": [], "host": "w0"}, plan)
    assert len(verdict["warnings"]) == 1 and "storage write 4.00 GB/s" in verdict["warnings"][0]
    assert "below 50% of the 8.79 GB/s the lustre storage should give" in verdict["warnings"][0]
    failed = judge_storage({"write_gbps": None, "read_gbps": None, "errors": ["write p: No space left"],
                            "host": "w0"}, plan)
    assert failed["warnings"] == ["storage probe on w0 failed: write p: No space left"]


# ---- results ------------------------------------------------------------------------------------------

def failed_doc() -> dict:
    return {"version": 1, "mode": "enforce", "passed": False, "enforced": True, "started": 1764579600.0,
            "nodes": 2, "gpus_per_node": 8, "backend": "nccl", "seconds": 41.2,
            "checks": [{"name": "all_gather mean busbw over 4 size(s)", "measured_gbps": 21.5,
                        "threshold_gbps": 100.0, "passed": False, "collective": "all_gather"}],
            "failed_nodes": [{"node_index": 1, "label": "gke-a3u-pool-abcd (10.0.0.7, Ray node 0123abcd)",
                              "nics": ["mlx5_0:1/RoCE"]}],
            "per_rank": [{"rank": 0}], "warnings": [],
            "placement": {"bundles": [{"node_ids": ["n0"]}, {"node_ids": ["n1"]}]}}


def test_status_rows_name_failed_nodes_and_nics():
    rows = health_status_rows(failed_doc())
    assert rows[0] == ("health", "FAILED 2025-12-01 09:00 UTC, 2 node(s) x 8 GPUs, nccl, 41.2s")
    assert ("", "LOW all_gather mean busbw over 4 size(s): 21.5 GB/s (min 100)") in rows
    assert ("", "failed node gke-a3u-pool-abcd (10.0.0.7, Ray node 0123abcd), NICs mlx5_0:1/RoCE") in rows
    assert health_status_rows(None) == []


def test_health_json_and_log_summary(tmp_path):
    doc = failed_doc()
    path = write_health(doc, tmp_path / "runs" / "r1")
    assert read_health(path) == doc and not list(path.parent.glob(".*tmp"))
    log = "some trainer line\n" + RESULT_MARKER + json.dumps(health_log_summary(doc)) + "\nmore\n"
    assert "per_rank" not in health_log_summary(doc)
    assert health_from_log(log)["failed_nodes"] == doc["failed_nodes"]
    assert health_from_log("nothing") is None


def test_gate_needed_after_a_restart_onto_other_nodes(tmp_path):
    assert gate_needed(tmp_path, ["n0", "n1"]) is True              # never measured
    write_health(dict(failed_doc(), passed=True), tmp_path)
    assert gate_needed(tmp_path, ["n1", "n0"]) is False             # same nodes
    assert gate_needed(tmp_path, ["n0", "n2"]) is True              # a node was replaced
    write_health(failed_doc(), tmp_path)
    assert gate_needed(tmp_path, ["n0", "n1"]) is True              # last one failed


def test_command_line_show_and_bad_plan(tmp_path, capsys):
    from jobs.cli import main as cli

    write_health(failed_doc(), tmp_path)
    assert cli.main(["health", str(tmp_path / "health.json")]) == ExitCode.HEALTH_GATE_FAILED
    assert capsys.readouterr().out.startswith("health      FAILED")
    assert cli.main(["health", str(tmp_path)]) == ExitCode.HEALTH_GATE_FAILED    # the run directory
    capsys.readouterr()
    (tmp_path / "plan.json").write_text('{"health": {"mode": "sometimes"}}')
    assert health.main(["--plan", str(tmp_path / "plan.json"), "--nodes", "2",
                        "--gpus-per-node", "8", "--run-dir", str(tmp_path)]) == ExitCode.USAGE
    assert "bad plan" in capsys.readouterr().err
    assert cli.main(["health", str(tmp_path / "missing.json")]) == ExitCode.USAGE
    assert "cannot read" in capsys.readouterr().err

def test_a_restart_keeps_only_a_measured_passing_result_of_the_same_nodes(tmp_path):
    """`python3 -m jobs.head.fabric_gate --reuse-on-same-nodes` (a restart): the last passing,
    measured result of exactly these GPU nodes is kept; a skipped (mode off) or failed one, or
    other nodes, are measured again."""
    from jobs.head.fabric_gate import _passed_on

    def result(**doc):
        write_health({"placement": {"bundles": [{"node_ids": ["n0"]}, {"node_ids": ["n1"]}]}, **doc}, tmp_path)

    assert _passed_on(tmp_path, ["n0", "n1"]) is False                 # never measured
    result(passed=True)
    assert _passed_on(tmp_path, ["n1", "n0"]) is True
    assert _passed_on(tmp_path, ["n0", "n2"]) is False                 # a replaced node
    result(passed=True, skipped=True)
    assert _passed_on(tmp_path, ["n0", "n1"]) is False                 # the gate was off then
    result(passed=False)
    assert _passed_on(tmp_path, ["n0", "n1"]) is False
