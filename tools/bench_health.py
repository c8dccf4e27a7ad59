"""Benchmark: the fabric health gate's own overhead (jobs/head/fabric_gate.py fabric_gate) on a real Ray
cluster, gloo on CPU: how long the gate takes beyond the collectives it times. Prints figures;
asserts nothing.

    python -m tools.bench_health [--nodes 2] [--gpus-per-node 2] [--sizes-kib 64,1024] [--runs 3]

Like the tests, everything runs in a network namespace with only loopback (and its own PID
namespace and /tmp/ray): a Ray head and `nodes - 1` more Ray nodes on 127.0.0.1 with fake GPUs.
Overhead = placement group + actor start + rendezvous + teardown (+ the log and health.json);
on GPU nodes the actor start (a Python process importing torch) and the NCCL communicator set-up
dominate it, so these figures are a floor, not a GPU forecast.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INSIDE = "GKE_GRPO_BENCH_HEALTH_INSIDE"
GCS = "127.0.0.1:6379"


def _ray_start(*args: str) -> None:
    ray = str(Path(sys.executable).with_name("ray"))
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0")
    subprocess.run([ray, "start", *args, "--node-ip-address=127.0.0.1", "--disable-usage-stats",
                    "--object-store-memory=80000000"], check=True, capture_output=True, text=True,
                   timeout=120, env=env)


def measure_inside_namespace(args: argparse.Namespace) -> int:
    import ray

    from jobs.contract.health import HealthPlan
    from jobs.head.fabric_gate import fabric_gate

    started = time.monotonic()
    _ray_start("--head", "--port=6379", f"--num-cpus={args.gpus_per_node}", f"--num-gpus={args.gpus_per_node}",
         "--include-dashboard=false")
    for _ in range(args.nodes - 1):
        _ray_start(f"--address={GCS}", "--num-cpus=1", f"--num-gpus={args.gpus_per_node}")
    ray.init(address=GCS, logging_level="WARNING", log_to_driver=False)
    while len([n for n in ray.nodes() if n["Alive"]]) < args.nodes:
        time.sleep(0.2)
    print(f"cluster of {args.nodes} Ray node(s) x {args.gpus_per_node} fake GPU(s) up in "
          f"{time.monotonic() - started:.1f}s (loopback only)")
    sizes = tuple(int(s) * 1024 for s in args.sizes_kib.split(","))
    plan = HealthPlan(backend="gloo", machine_type="loopback", sizes_bytes=sizes,
                      warmup_iterations=args.warmup, iterations=args.iterations,
                      min_average_busbw_gbps=1e-9, env={"GLOO_SOCKET_IFNAME": "lo"},
                      placement_timeout_s=60, timeout_s=300)
    rows = []
    run_root = Path(tempfile.mkdtemp(prefix="bench-health-"))
    for run in range(args.runs):
        start = time.monotonic()
        with open(os.devnull, "w") as quiet:
            result = fabric_gate(plan, args.nodes, args.gpus_per_node, run_root / str(run), out=quiet)
        total = time.monotonic() - start
        t = result.document["timings"]
        measured = t.get("world_collectives", 0.0)
        rows.append((total, t, measured, result))
        print(f"run {run + 1}: gate {total:.2f}s = placement+actors {t['placement_and_actor_start']:.2f}s"
              f" + rendezvous {t['rendezvous']:.2f}s (importing torch "
              f"{result.document['rendezvous']['torch_import_seconds']:.2f}s) + collectives {measured:.2f}s"
              f" + teardown {t.get('teardown', 0):.2f}s; overhead {total - measured:.2f}s; "
              f"{'PASSED' if result.passed else 'FAILED'}")
    for m in rows[-1][3].document["measurements"]:
        print(f"  last run: {m['collective']:<10} {m['size_bytes'] // 1024:>6} KiB  "
              f"algbw {m['algbw_gbps']:.4f} GB/s  busbw {m['busbw_gbps']:.4f} GB/s  ({m['ranks']} ranks)")
    overheads = [total - measured for total, _, measured, _ in rows]
    totals = [total for total, *_ in rows]
    print(f"gate total: median {statistics.median(totals):.2f}s, min {min(totals):.2f}s, max {max(totals):.2f}s "
          f"over {len(rows)} run(s)")
    print(f"gate overhead (everything but the timed collectives): median "
          f"{statistics.median(overheads):.2f}s, min {min(overheads):.2f}s, max {max(overheads):.2f}s")
    shutil.rmtree(run_root, ignore_errors=True)
    ray.shutdown()
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench_health", description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--gpus-per-node", type=int, default=2)
    parser.add_argument("--sizes-kib", default="64,1024")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    if os.environ.get(INSIDE) == "1":
        return measure_inside_namespace(args)
    for tool in ("unshare", "ip", "mount"):
        if shutil.which(tool) is None:
            print(f"needs `{tool}` (util-linux / iproute2) for a loopback-only namespace", file=sys.stderr)
            return 2
    # PID 1 of the namespace is `sh`: when the benchmark ends it exits and the kernel ends
    # every Ray process left in the namespace.
    inner = " ".join(["ip link set lo up", "&& mkdir -p /tmp/ray && mount -t tmpfs -o size=2g tmpfs /tmp/ray",
                      "&&", sys.executable, "-m", "tools.bench_health", *(argv if argv is not None else sys.argv[1:])])
    env = dict(os.environ, **{INSIDE: "1"}, PYTHONPATH=str(ROOT))
    return subprocess.run(["unshare", "--net", "--pid", "--fork", "--mount-proc", "sh", "-c", inner],
                          cwd=ROOT, env=env, timeout=900).returncode


if __name__ == "__main__":
    sys.exit(main())
