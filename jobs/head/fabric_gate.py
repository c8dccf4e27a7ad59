"""The fabric and storage gate, run on the Ray head before a trainer start so GPU-hours are never
spent on a broken fabric (docs/health-gates.md):

    python3 -m jobs.head.fabric_gate --plan PLAN.json --nodes N --gpus-per-node G --run-dir DIR

**Fabric acceptance** (``fabric_gate``): one Ray actor per GPU (jobs/head/fabric_probe.py),
placed by one placement group whose bundle *i* holds all the GPUs of node *i* (STRICT_SPREAD:
every bundle on its own node, so one node's GPUs are packed together), joined into one
torch.distributed process group with the backend the trainer uses (NCCL over gIB on the GPU
workers; gloo on CPU in the tests). They run all_gather and all_reduce at every configured
message size (1-8 GiB in production) and report their own times; bus bandwidth is computed as
nccl-tests defines it (jobs/contract/health.py). The gate fails when the mean busbw over the
sizes is below the minimum (Cluster Toolkit's 100 GB/s CI gate) or the largest size is below a
fraction (75%) of the machine's published 2-node figure. A failing fabric is then localised:
every node alone (its NVLink domain), and pairs of nodes around a ring; a node in two slow
pairs (or both nodes of a 2-node run) is named, with the NICs NCCL said it used when NCCL
logged them (jobs/head/fabric_verdict.py).

torch.distributed rather than nccl-tests: the gate then exercises exactly what the trainer
will (the NCCL library of the framework image, the gIB plugin and environment that
set_nccl_env.sh gave the Ray workers, Ray's GPU assignment), needs no second image, no MPI
and no ssh between pods, and its orchestration can be tested for real on CPU with gloo.

**Storage probe** (run by the gate on node 0's first actor): writes a checkpoint-sized set of
files on /data in parallel streams, fsyncs, drops them from the page cache and reads them back;
GB/s against what the storage should give, warned about below half.

Results: ``<run_dir>/health.json`` (``write_health``) and one ``[health] result {...}`` line in
the job log (what ``gke-grpo status`` reads back).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from jobs.contract.exit_codes import ExitCode
from jobs.contract.health import (
    HEALTH_FILE,
    LOG_PREFIX,
    RESULT_MARKER,
    GateResult,
    HealthPlan,
    HealthPlanError,
    health_log_summary,
)
from jobs.contract.safe_files import HEALTH_RESULT, RUN_PLAN, UnusableFile, json_if_usable, read_json
from jobs.head.fabric_probe import CollectiveProbe
from jobs.head.fabric_verdict import (
    aggregate,
    fabric_checks,
    judge_storage,
    localize,
    nics_by_node,
    node_entry,
    node_label,
    ring_pair_rounds,
    size_text,
    tcp_fallback_check,
    verdict_message,
)

# NCCL writes its INFO log here (one file per host and pid: NCCL's %h and %p) when the gate asks.
NCCL_DEBUG_FILE = "/tmp/gke-grpo-health-nccl.%h.%p.log"


class _GateFailure(Exception):
    def __init__(self, stage: str, message: str, nodes: Sequence[int] = ()):
        super().__init__(message)
        self.stage, self.nodes = stage, list(nodes)


def fabric_gate(plan_health: Mapping[str, Any] | HealthPlan, nodes: int, gpus_per_node: int,
                run_dir: str | Path, *, probe_class: type = CollectiveProbe, out=None,
                clock: Callable[[], float] = time.time) -> GateResult:
    """Measure the fabric (and storage) of the run's ``nodes`` x ``gpus_per_node`` GPUs and
    write ``run_dir/health.json``. Needs a connected Ray driver (the run driver's), else
    connects to ``address="auto"``. Never raises for a measurement problem: a failure is a
    GateResult with ``exit_code`` ExitCode.HEALTH_GATE_FAILED (mode "warn": passed, with warnings)."""
    out = out or sys.stdout
    plan = plan_health if isinstance(plan_health, HealthPlan) else HealthPlan.from_dict(plan_health)
    started = clock()
    doc: dict[str, Any] = {"version": 1, "mode": plan.mode, "started": started, "nodes": nodes,
                           "gpus_per_node": gpus_per_node, "backend": plan.backend,
                           "machine_type": plan.machine_type}
    if plan.mode == "off":
        warning = ("the fabric health gate is OFF (gke-grpo:job.healthGate): the run starts "
                   "without measuring its RDMA fabric or storage")
        doc.update(passed=True, skipped=True, warnings=[warning], ended=clock())
        _emit(doc, run_dir, out)
        return GateResult(True, ExitCode.OK, warning, doc, [warning])
    if nodes < 1 or gpus_per_node < 1:
        raise HealthPlanError(f"nodes ({nodes}) and gpus_per_node ({gpus_per_node}) must be >= 1")
    print(f"{LOG_PREFIX} fabric gate: {nodes} node(s) x {gpus_per_node} GPU(s), backend "
          f"{plan.backend}, {', '.join(plan.collectives)} at "
          f"{', '.join(size_text(s) for s in plan.sizes_bytes)}", file=out, flush=True)
    import ray

    if not ray.is_initialized():
        ray.init(address="auto", logging_level="WARNING", log_to_driver=False)
    # The workers have no jobs package (it reaches the head only): ship the probe by value.
    _pickle_by_value(probe_class)
    pg = None
    actors: list = []
    infos: list[dict] = []
    warnings: list[str] = []
    timings: dict[str, float] = {}
    doc["timings"] = timings
    mark = [time.monotonic()]

    def lap(stage: str) -> None:
        now = time.monotonic()
        timings[stage] = round(now - mark[0], 4)
        mark[0] = now

    try:
        pg, actors, infos = _place(plan, nodes, gpus_per_node, probe_class, doc)
        lap("placement_and_actor_start")
        passed, failed_nodes, message = _measure(plan, actors, infos, nodes, gpus_per_node,
                                                 doc=doc, warnings=warnings, lap=lap)
    except _GateFailure as failure:
        passed = False
        failed_nodes = failure.nodes
        message = f"{LOG_PREFIX} FAILED in {failure.stage}: {failure}"
        doc["error"] = {"stage": failure.stage, "message": str(failure)}
    except Exception as exc:   # a Ray or torch error of the gate itself: an answer, not a traceback
        passed = False
        failed_nodes = []
        message = f"{LOG_PREFIX} FAILED: the gate could not run: {type(exc).__name__}: {exc}"
        doc["error"] = {"stage": "gate", "message": f"{type(exc).__name__}: {exc}"}
    finally:
        mark[0] = time.monotonic()
        _teardown(actors, pg)
        lap("teardown")
    doc["failed_nodes"] = [node_entry(i, infos, doc) for i in failed_nodes]
    if not passed and plan.mode == "warn":
        warnings.append(message + " (healthGate mode warn: the run goes on)")
    doc.update(passed=passed, enforced=plan.mode == "enforce", warnings=warnings, ended=clock(),
               seconds=clock() - started, message=message)
    _emit(doc, run_dir, out)
    for w in warnings:
        print(f"{LOG_PREFIX} WARNING: {w}", file=out, flush=True)
    if passed or plan.mode == "warn":
        return GateResult(True, ExitCode.OK, message, doc, warnings)
    return GateResult(False, ExitCode.HEALTH_GATE_FAILED, message, doc, warnings)


def _measure(plan: HealthPlan, actors: list, infos: list[dict], nodes: int, gpus_per_node: int, *,
             doc: dict[str, Any], warnings: list[str], lap: Callable[[str], None]) -> tuple[bool, list[int], str]:
    """The gate's measuring stages on the placed probes, each recorded in ``doc`` and timed by
    ``lap``; (passed, the nodes to blame, the verdict)."""
    doc["rendezvous"] = _rendezvous(plan, actors, infos)
    lap("rendezvous")
    world = _gather([a.world_tests.remote(plan.collectives, plan.sizes_bytes,
                                       plan.warmup_iterations, plan.iterations) for a in actors],
                 plan.timeout_s, "world collectives", infos)
    lap("world_collectives")
    reports = [row for rows in world for row in rows]
    measurements = aggregate(reports)
    doc["measurements"] = [m.to_dict() for m in measurements]
    doc["per_rank"] = [{k: r[k] for k in ("rank", "node_index", "collective", "size_bytes", "seconds")}
                       for r in reports]
    checks = fabric_checks(measurements, plan, nodes)
    doc["checks"] = checks
    failed = [c for c in checks if not c["passed"]]
    if failed and plan.localize and nodes >= 2:
        doc["localization"] = _localize(plan, actors, infos, nodes, gpus_per_node, failed)
        lap("localization")
    if plan.backend == "nccl" and plan.nccl_debug_log:
        logs = _gather([a.nccl_log.remote() for a in actors], 60, "NCCL log", infos)
        doc["nics"] = nics_by_node(logs, infos)
        check = tcp_fallback_check(doc["nics"], nodes)
        if check:
            checks.append(check)
            failed = [c for c in checks if not c["passed"]]
    if plan.storage is not None:
        probe = _gather([actors[0].storage_probe.remote(dataclasses.asdict(plan.storage))],
                     plan.timeout_s, "storage probe", infos[:1])[0]
        lap("storage_probe")
        storage = judge_storage(probe, plan.storage)
        doc["storage"] = storage
        warnings += storage["warnings"]
    failed_nodes = (doc.get("localization") or {}).get("suspect_nodes", [])
    on_tcp = [n for c in checks for n in c.get("nodes_on_tcp", [])]
    failed_nodes = sorted(set(failed_nodes) | set(on_tcp))
    if failed and not failed_nodes and nodes >= 2:
        failed_nodes = list(range(nodes))
    return not failed, failed_nodes, verdict_message(plan, checks, failed_nodes, infos, doc)


def _pickle_by_value(probe_class: type) -> None:
    """The workers have no copy of jobs/ (the ConfigMap reaches the head only): ship the probe's
    module by value, and every jobs module it takes names from, transitively, so nothing on the
    worker imports ``jobs``."""
    from ray import cloudpickle

    names: set[str] = set()
    todo = [probe_class.__module__]
    while todo:
        name = todo.pop()
        module = sys.modules.get(name)
        if name in names or module is None or name == "__main__":
            continue
        names.add(name)
        for value in vars(module).values():
            origin = getattr(value, "__module__", None)
            if isinstance(origin, str) and origin.split(".")[0] == "jobs":
                todo.append(origin)
    for name in sorted(names):
        with contextlib.suppress(ValueError):   # already registered
            cloudpickle.register_pickle_by_value(sys.modules[name])


def _place(plan: HealthPlan, nodes: int, gpus_per_node: int, probe_class: type, doc: dict):
    import ray
    from ray.util.placement_group import placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    # Bundle i = every GPU of node i; STRICT_SPREAD puts each bundle on its own node.
    strategy = "STRICT_SPREAD" if nodes > 1 else "PACK"
    pg = placement_group([{"GPU": gpus_per_node}] * nodes, strategy=strategy,
                         name="gke-grpo-health-gate")
    ready = pg.wait(timeout_seconds=plan.placement_timeout_s)
    if not ready:
        free = _free_gpu_nodes()
        ray.util.remove_placement_group(pg)
        raise _GateFailure("placement", (
            f"could not place {nodes} bundle(s) of {gpus_per_node} GPU(s), one per node "
            f"({strategy}), within {plan.placement_timeout_s:.0f}s; nodes with free GPUs: "
            f"{free or 'none'}"))
    runtime_env = {"env_vars": _actor_env(plan)} if _actor_env(plan) else None
    remote_class = ray.remote(probe_class)
    world = nodes * gpus_per_node
    actors = []
    for node in range(nodes):
        for local in range(gpus_per_node):
            options = dict(num_gpus=1, num_cpus=0, max_restarts=0,
                           scheduling_strategy=PlacementGroupSchedulingStrategy(
                               placement_group=pg, placement_group_bundle_index=node))
            if runtime_env:
                options["runtime_env"] = runtime_env
            actors.append(remote_class.options(**options).remote(
                node * gpus_per_node + local, world, node, local, plan.backend))
    infos = _gather([a.describe.remote() for a in actors], plan.timeout_s, "actor start", None)
    by_bundle: dict[int, set[str]] = {}
    for info in infos:
        by_bundle.setdefault(info["node_index"], set()).add(info["node_id"])
    placement = {"strategy": strategy, "bundles": [
        {"node_index": i, "node_ids": sorted(ids), "label": node_label(
            next(x for x in infos if x["node_index"] == i)),
         "gpu_ids": [x["gpu_ids"] for x in infos if x["node_index"] == i],
         "jobs_importable": any(x["jobs_importable"] for x in infos if x["node_index"] == i),
         "probe_module_imported": any(x.get("probe_module_imported") for x in infos if x["node_index"] == i)}
        for i, ids in sorted(by_bundle.items())]}
    doc["placement"] = placement
    distinct = {next(iter(ids)) for ids in by_bundle.values() if len(ids) == 1}
    if any(len(ids) != 1 for ids in by_bundle.values()) or len(distinct) != nodes:
        raise _GateFailure("placement", f"the actors are not one node per bundle: {placement}")
    return pg, actors, infos


def _actor_env(plan: HealthPlan) -> dict[str, str]:
    env = dict(plan.env)
    if plan.backend == "nccl" and plan.nccl_debug_log:
        env.setdefault("NCCL_DEBUG", "INFO")
        env.setdefault("NCCL_DEBUG_SUBSYS", "INIT,NET")
        env.setdefault("NCCL_DEBUG_FILE", NCCL_DEBUG_FILE)
    return env


def _rendezvous(plan: HealthPlan, actors: list, infos: list[dict]) -> dict:
    import ray

    master_addr = infos[0]["ip"]
    master_port = ray.get(actors[0].free_port.remote(), timeout=60)
    joined = _gather([a.init_group.remote(master_addr, master_port, plan.timeout_s) for a in actors],
                  plan.timeout_s, "rendezvous", infos)
    return {"master_addr": master_addr, "master_port": master_port,
            "world_size": joined[0]["world_size"], "backend": joined[0]["backend"],
            "seconds": max(j["seconds"] for j in joined),
            "torch_import_seconds": max(j["torch_import_seconds"] for j in joined)}


def _localize(plan: HealthPlan, actors: list, infos: list[dict], nodes: int, gpus_per_node: int,
              failed: list[dict]) -> dict:
    collective = next((c["collective"] for c in failed if "collective" in c), plan.collectives[0])
    ranks_of = {n: [n * gpus_per_node + g for g in range(gpus_per_node)] for n in range(nodes)}
    intra_rounds = [[ranks_of[n] for n in range(nodes)]] if gpus_per_node > 1 else []
    pair_rounds = [[ranks_of[a] + ranks_of[b] for a, b in pairs] for pairs in ring_pair_rounds(nodes)]
    # At least one warm-up: NCCL sets up a new group's communicator on its first collective.
    results = _gather([a.subgroup_tests.remote(intra_rounds + pair_rounds, collective, plan.localize_size,
                                            max(1, plan.warmup_iterations), plan.iterations)
                    for a in actors],
                   plan.timeout_s, "localisation", infos)
    rows = [r for rank_rows in results for r in rank_rows]
    intra = [r for r in rows if len(r["group"]) == gpus_per_node and gpus_per_node > 1
             and len({x // gpus_per_node for x in r["group"]}) == 1]
    pairs = [r for r in rows if r not in intra]
    return localize(pairs, intra, plan, nodes, collective)


def _gather(refs: list, timeout: float, stage: str, infos: list[dict] | None):
    """ray.get of every actor's answer, bounded by ``timeout``. The first actor that fails is
    named at once (its peers would otherwise wait in the collective until the timeout); on a
    timeout, the actors that did not answer are named."""
    import ray
    from ray.exceptions import RayActorError, RayTaskError

    def node_of(ref) -> list[int]:
        index = refs.index(ref)
        return [infos[index]["node_index"]] if infos and index < len(infos) else []

    deadline = time.monotonic() + timeout
    pending = list(refs)
    while pending:
        ready, pending = ray.wait(pending, num_returns=1, timeout=max(0.0, deadline - time.monotonic()))
        if not ready:
            nodes = sorted({n for ref in pending for n in node_of(ref)})
            raise _GateFailure(stage, f"no answer within {timeout:.0f}s from {len(pending)} actor(s)", nodes)
        try:
            ray.get(ready[0])
        except (RayActorError, RayTaskError):
            # The peers of a dead rank fail (or hang) in the collective too: give them a moment,
            # then blame the actors that died, else those that raised.
            ray.wait(pending, num_returns=len(pending), timeout=2.0)
            died, raised = [], []
            for ref in refs:
                try:
                    ray.get(ref, timeout=0)
                except RayActorError as exc:
                    died.append((ref, exc))
                except RayTaskError as exc:
                    raised.append((ref, exc))
                except Exception:
                    continue
            blamed = died or raised
            ranks = [refs.index(ref) for ref, _ in blamed]
            text = [line for line in str(blamed[0][1]).strip().splitlines() if line.strip()]
            what = "died" if died else "failed"
            raise _GateFailure(stage, f"the actor(s) of rank {', '.join(map(str, ranks))} {what}: "
                               f"{text[-1] if text else type(blamed[0][1]).__name__}",
                               sorted({n for ref, _ in blamed for n in node_of(ref)})) from None
    return ray.get(refs)


def _free_gpu_nodes() -> list[str]:
    import ray

    return [f"{n.get('NodeManagerAddress')}: {n.get('Resources', {}).get('GPU', 0):g} GPUs"
            for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get("GPU", 0) > 0]


def _teardown(actors: list, pg) -> None:
    import ray

    # An actor or group already gone (or a Ray shutting down) does not stop the rest.
    for a in actors:
        with contextlib.suppress(Exception):
            ray.kill(a, no_restart=True)
    if pg is not None:
        with contextlib.suppress(Exception):
            ray.util.remove_placement_group(pg)


def write_health(doc: Mapping[str, Any], run_dir: str | Path) -> Path:
    """``run_dir/health.json``, replaced atomically (a reader never sees half a file)."""
    directory = Path(run_dir)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / HEALTH_FILE
    tmp = directory / f".{HEALTH_FILE}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(doc, indent=2, sort_keys=True, default=str) + "\n")
    os.replace(tmp, path)
    return path


def _emit(doc: dict, run_dir, out) -> None:
    path = write_health(doc, run_dir)
    print(f"{LOG_PREFIX} wrote {path}", file=out, flush=True)
    print(RESULT_MARKER + json.dumps(health_log_summary(doc), sort_keys=True, separators=(",", ":"), default=str),
          file=out, flush=True)
    if doc.get("message"):
        print(doc["message"], file=out, flush=True)


def gate_needed(run_dir: str | Path, node_ids: Iterable[str]) -> bool:
    """Whether the gate must run (again) before a trainer start: no passing result yet, or
    the run's GPU nodes changed since the last one (a restart onto replaced nodes)."""
    doc = json_if_usable(Path(run_dir) / HEALTH_FILE, HEALTH_RESULT)
    if not isinstance(doc, dict):
        return True
    if not doc.get("passed") or doc.get("skipped"):
        return not doc.get("skipped")
    return _measured_nodes(doc) != sorted(node_ids)


def _measured_nodes(doc: dict) -> list[str] | None:
    """The GPU node ids a passing result measured; None when its placement is not the shape
    write_health gives it (a result another program or a cut-off write left)."""
    placement = doc.get("placement")
    bundles = placement.get("bundles") if isinstance(placement, dict) else None
    if not isinstance(bundles, list):
        return None
    measured: list[str] = []
    for bundle in bundles:
        ids = bundle.get("node_ids") if isinstance(bundle, dict) else None
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            return None
        measured += ids
    return sorted(measured)


def _passed_on(run_dir: str | Path, node_ids: Iterable[str]) -> bool:
    """A measured (not skipped) passing result exists for exactly these GPU nodes."""
    doc = json_if_usable(Path(run_dir) / HEALTH_FILE, HEALTH_RESULT)
    return bool(isinstance(doc, dict) and doc.get("passed") and not doc.get("skipped")
                and _measured_nodes(doc) == sorted(node_ids))


def ray_gpu_node_ids() -> list[str]:
    """The alive Ray nodes with GPUs (what ``gate_needed`` compares)."""
    import ray
    return sorted(n["NodeID"] for n in ray.nodes()
                  if n.get("Alive") and (n.get("Resources") or {}).get("GPU", 0) > 0)


# ---- command line -------------------------------------------------------------------------------

def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m jobs.head.fabric_gate", description=__doc__.split("\n\n")[0])
    parser.add_argument("--plan", required=True, help="JSON file: the run plan (its 'health' key) or a health plan")
    parser.add_argument("--nodes", type=int, required=True)
    parser.add_argument("--gpus-per-node", type=int, required=True)
    parser.add_argument("--run-dir", required=True, help="where health.json goes (/data/runs/<run-id>)")
    parser.add_argument("--address", default="auto", help="Ray address (default: auto)")
    parser.add_argument("--reuse-on-same-nodes", action="store_true",
                        help="keep the run's passing result when the GPU nodes are the same (a restart)")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    try:   # the one safe reader: a FIFO or /dev/zero as --plan is refused, never waited on
        plan = HealthPlan.from_dict(read_json(args.plan, RUN_PLAN))
    except (UnusableFile, HealthPlanError) as exc:
        print(f"{LOG_PREFIX} bad plan {args.plan}: {exc}", file=sys.stderr)
        return int(ExitCode.USAGE)
    import ray

    try:
        ray.init(address=args.address, logging_level="WARNING", log_to_driver=False)
    except Exception as exc:
        print(f"{LOG_PREFIX} cannot connect to Ray at {args.address!r}: {exc}", file=sys.stderr)
        return int(ExitCode.NO_RAY)
    try:
        if args.reuse_on_same_nodes and plan.mode != "off" and _passed_on(args.run_dir, ray_gpu_node_ids()):
            print(f"{LOG_PREFIX} the GPU nodes are those of the last passing gate "
                  f"({Path(args.run_dir) / HEALTH_FILE}): not measured again", flush=True)
            return int(ExitCode.OK)
        result = fabric_gate(plan, args.nodes, args.gpus_per_node, args.run_dir)
    except HealthPlanError as exc:
        print(f"{LOG_PREFIX} {exc}", file=sys.stderr)
        return int(ExitCode.USAGE)
    finally:
        ray.shutdown()
    return int(result.exit_code)


if __name__ == "__main__":
    sys.exit(main())
