"""Capacity benchmark: the real run driver and Ray's own v2 autoscaler over fake GPU nodes.

    python -m tools.bench_capacity [--nodes 2] [--join-seconds 5] [--staging-seconds 4]
                                   [--trainer-seconds 10] [--idle-timeout 10]
                                   [--fallback-after 15] [--waterfall-window 90]
    python -m tools.bench_capacity --kuberay [--bring-up-minutes 2 12] [--trainer-minutes 5]

--kuberay: the stand-in path, in real minutes (no factor). Per supported Ray version (each on its
own Python: .venv-ray-<version>) and per GPU node bring-up, Ray's own v2 autoscaler with its KubeRay
provider scales the RayCluster as the program renders it against the KubeRay stand-in
(tools/kuberay_standin.py), with the program's autoscaler settings; the real driver asks for a
--nodes gang, its trainer sleeps --trainer-minutes, and its gang holder is SIGKILLed one minute into
the trainer. A control per version, with Ray's default settings and the longest bring-up, counts
the recreations the program's settings avoid. Printed: pod recreations before the gang is up (goal
0); GPU-seconds idle before the trainer (from each node's join to the trainer's start, and from
each pod's creation: the upper bound, which counts the node's creation); seconds from the run's end
(the driver's exit) to the last GPU pod gone; seconds from the holder's death to the request made
again (the replacement holder confirmed; the GCS request itself belongs to the cluster and never
lapsed). The clusters run side by side, each in its own loopback-only namespace.

Each scenario starts a Ray head with the v2 autoscaler on Ray 2.54's fake multi-node provider
(tools/fake_capacity.py: real autoscaler code, fake nodes as local raylets that join
--join-seconds after they are created, capacity sources in order as a GKE ComputeClass tries
them), inside its own network namespace with only loopback (and its own PID namespace and
/tmp/ray), and submits the real driver (`python3 -m jobs.run --plan ...`) as a Ray job. This
process watches the GPU nodes every 0.1 s. A benchmark, not a test: it prints figures.

Scenarios:
  elastic run          one source; the driver stages (GPU-free), asks for the gang, waits for it,
                       runs a trainer that sleeps --trainer-seconds, ends and releases the gang.
                       Printed: GPU-seconds idle before the trainer starts (while the rest of the
                       gang joins, and after it is complete); seconds from the run's end to the
                       last GPU worker gone, against the idle timeout; GPU-node-hours of a 24-hour
                       day with one 6-hour run, the old fixed group (every node all day) against
                       this timeline with its trainer phase stretched to 6 hours.
  waterfall, class     two sources in one worker group, as the ComputeClass orders them: the
                       first has no capacity (GKE tries it for --fallback-after seconds, then
                       moves on), the second has. Printed: seconds from the gang request to the
                       first node of the second source, and to the trainer start.
  waterfall, groups    the alternative the ComputeClass replaces: each source its own Ray worker
                       group. (a) the first group has max_workers 0; (b) its nodes never become
                       ready. Printed: seconds until the second group is used (within
                       --waterfall-window, else "not within the window").
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from tools.loopback_namespace import INSIDE_ENV, inside, namespace_init, run_in_namespace

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
GPUS_PER_NODE = 8
POLL = 2.0   # the plan's default GPU poll (jobs/contract/run_plan.py DEFAULT_GPU_POLL_SECONDS)
# What GKE adds after the worker pod is gone: the empty node is removed once "unneeded for more
# than 10 minutes" (the open-source cluster autoscaler's default, kubernetes/autoscaler
# cluster-autoscaler/FAQ.md "How does scale-down work?"; GKE's own page, "About GKE cluster
# autoscaling" updated 2026-04-10, gives no figure: its parameters "are subject to change").
GKE_SCALE_DOWN_SECONDS = 600
PRODUCTION_IDLE_TIMEOUT = 60       # components/ray_pods.py IDLE_TIMEOUT_SECONDS


@dataclass
class Watch:
    """First-seen and last-seen times of every GPU node, and its source label."""
    joined: dict[str, float] = field(default_factory=dict)
    gone: dict[str, float] = field(default_factory=dict)
    types: dict[str, str] = field(default_factory=dict)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        import ray

        while not self.stop.is_set():
            now = time.time()
            alive = {n["NodeID"]: n for n in ray.nodes()
                     if n.get("Alive") and (n.get("Resources") or {}).get("GPU", 0) > 0}
            for node_id, node in alive.items():
                if node_id not in self.joined:
                    self.joined[node_id] = now
                    labels = node.get("Labels") or {}
                    self.types[node_id] = labels.get("bench/source", "?")
            for node_id in self.joined:
                if node_id not in alive and node_id not in self.gone:
                    self.gone[node_id] = now
            time.sleep(0.1)


def _cluster(args, sources, **more):
    from tools import fake_capacity as fc
    return fc.FakeCluster(sources=tuple(sources), max_workers=more.pop("max_workers", args.nodes),
                          gpus_per_node=GPUS_PER_NODE, idle_timeout_seconds=args.idle_timeout, **more)


def _source(name: str, capacity: int, join: float, fallback: float = 0.0, labels=None):
    from tools import fake_capacity as fc
    return fc.FakeSource(name, {"bench/source": name, **(labels or {})}, capacity=capacity,
                         join_seconds=join, fallback_after_seconds=fallback)


# The stand-in trainer uses the gang as a trainer does: one GPU actor per node, all the node's
# GPUs, placed STRICT_SPREAD (a node each) for the run's duration; the nodes turn idle when it
# exits. It writes the time its first line runs (the "trainer start").
TRAINER = """
import pathlib, sys, time
pathlib.Path(sys.argv[1]).write_text(repr(time.time()))
import ray
from ray.util.placement_group import placement_group
nodes, gpus, seconds = int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
ray.init(address="auto", logging_level="ERROR", log_to_driver=False)
pg = placement_group([{"GPU": gpus, "CPU": 0.01}] * nodes, strategy="STRICT_SPREAD")
ray.get(pg.ready(), timeout=120)

@ray.remote(num_gpus=gpus, num_cpus=0.01)
def step(seconds):
    time.sleep(seconds)

ray.get([step.options(placement_group=pg, placement_group_bundle_index=i).remote(seconds)
         for i in range(nodes)])
"""


def _plan(work: Path, run_id: str, args, trainer_seconds: float) -> Path:
    from jobs.contract.run_plan import Command, RunPlan

    marker = work / f"{run_id}-trainer-started"
    # The stand-in trainer as a file: the validated plan refuses control characters (a newline)
    # in an argument (jobs/contract/run_plan.py), so a multi-line `python -c` program cannot be one.
    trainer = work / "stand_in_trainer.py"
    trainer.write_text(TRAINER)
    plan = RunPlan(run_id=run_id, attempt=1, framework="verl", run_dir=str(work / "runs" / run_id),
                   checkpoint_dir=str(work / "checkpoints" / run_id),
                   prepare=Command(argv=(PY, "-c", f"import time; time.sleep({args.staging_seconds})")),
                   gpus=args.nodes * GPUS_PER_NODE, gpus_per_node=GPUS_PER_NODE,
                   gpu_wait_seconds=600,
                   trainer=Command(argv=(PY, str(trainer), str(marker), str(args.nodes),
                                         str(GPUS_PER_NODE), str(trainer_seconds))),
                   deadline_seconds=None, gpu_poll_seconds=POLL)
    Path(plan.run_dir).mkdir(parents=True)
    path = work / f"{run_id}.json"
    path.write_text(plan.to_json())
    return path


def _events(work: Path, run_id: str) -> dict[str, dict]:
    path = work / "runs" / run_id / "events.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    return {row["event"]: row for row in rows}


def _run_driver(work: Path, run_id: str, args, trainer_seconds: float, watch: Watch) -> dict:
    from ray.job_submission import JobSubmissionClient

    from tools import fake_capacity as fc

    client = JobSubmissionClient(fc.DASHBOARD)
    submission = f"{run_id}-attempt-1"
    from jobs.contract.run_plan import DATA_ROOT_ENV

    # work stands in for /data: the plan's directories lie below it (jobs/contract/run_plan.py).
    client.submit_job(entrypoint=f"{PY} -m jobs.run --plan {_plan(work, run_id, args, trainer_seconds)}",
                      submission_id=submission, runtime_env={"env_vars": {DATA_ROOT_ENV: str(work)}})
    deadline = time.monotonic() + 900
    while str(client.get_job_status(submission)).rsplit(".", 1)[-1] not in ("SUCCEEDED", "FAILED", "STOPPED"):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{run_id}: the driver did not end")
        time.sleep(0.2)
    status = str(client.get_job_status(submission)).rsplit(".", 1)[-1]
    if status != "SUCCEEDED":
        raise RuntimeError(f"{run_id}: {status}\n{client.get_job_logs(submission)[-3000:]}")
    return _events(work, run_id)


def _with_head(cluster, work: Path, body):
    import ray

    from tools import fake_capacity as fc

    work.mkdir(parents=True, exist_ok=True)
    fc.start_autoscaling_head(cluster, work)
    watch = Watch()
    try:
        ray.init(address=fc.GCS, logging_level="ERROR", log_to_driver=False)
        thread = threading.Thread(target=watch.run, daemon=True)
        thread.start()
        return body(watch)
    finally:
        watch.stop.set()
        ray.shutdown()
        fc.stop_autoscaling_head(INSIDE_ENV)


def elastic_run(args, work: Path) -> dict:
    cluster = _cluster(args, [_source("spot", args.nodes * 4, args.join_seconds,
                                      labels={"cloud.google.com/gke-spot": "true"})])

    def body(watch: Watch) -> dict:
        events = _run_driver(work, "elastic", args, args.trainer_seconds, watch)
        ended = events["driver_end"]["time"]
        trainer_exit = events["trainer_exit"]["time"]
        deadline = time.time() + args.idle_timeout + 120
        while len(watch.gone) < len(watch.joined) and time.time() < deadline:
            time.sleep(0.2)
        trainer = float((work / "elastic-trainer-started").read_text())
        joins = sorted(watch.joined.values())
        complete = joins[-1] if len(joins) >= args.nodes else None
        idle_waiting = sum(joins[-1] - t for t in joins) * GPUS_PER_NODE
        idle_after = (trainer - joins[-1]) * len(joins) * GPUS_PER_NODE if complete else None
        last_gone = max(watch.gone.values()) if len(watch.gone) == len(watch.joined) else None
        return {"events": events, "joins": joins, "trainer_start": trainer,
                "gpu_idle_waiting_s": idle_waiting, "gpu_idle_after_complete_s": idle_after,
                "request_to_complete_s": (complete - events["gpu_request"]["time"]) if complete else None,
                "first_node_before_request": min(joins) < events["gpu_request"]["time"],
                "end_to_last_gone_s": None if last_gone is None else last_gone - ended,
                "trainer_exit_to_last_gone_s": None if last_gone is None else last_gone - trainer_exit,
                "node_seconds": [watch.gone.get(n, time.time()) - t for n, t in watch.joined.items()],
                "trainer_exit": events["trainer_exit"]["time"], "ended": ended, "last_gone": last_gone}

    return _with_head(cluster, work, body)


def day_node_hours(result: dict, args, run_hours: float = 6.0) -> dict:
    """A 24-hour day with one 6-hour run, from the elastic timeline: each node held from its
    join to its removal, with the trainer phase stretched to ``run_hours``."""
    joins, trainer = result["joins"], result["trainer_start"]
    overhead_before = sum(trainer - t for t in joins)                       # node-seconds
    tail = (result["last_gone"] or result["trainer_exit"]) - result["trainer_exit"]
    bench_tail = tail * len(joins)
    # The same run with the production idle timeout instead of the benchmark's.
    production_tail = (tail - args.idle_timeout + PRODUCTION_IDLE_TIMEOUT) * len(joins)
    run = len(joins) * run_hours * 3600
    old = args.nodes * 24.0
    pods = (overhead_before + run + production_tail) / 3600
    nodes = pods + len(joins) * GKE_SCALE_DOWN_SECONDS / 3600
    return {"old": old, "new_pods": pods, "new_nodes": nodes,
            "bench": (overhead_before + run + bench_tail) / 3600}


def waterfall_class(args, work: Path) -> dict:
    """Sources in one group, as the ComputeClass: the first never provides."""
    sources = [_source("reservation", 0, args.join_seconds, fallback=args.fallback_after,
                       labels={"cloud.google.com/reservation-name": "bench-r"}),
               _source("spot", args.nodes * 4, args.join_seconds,
                       labels={"cloud.google.com/gke-spot": "true"})]

    def body(watch: Watch) -> dict:
        events = _run_driver(work, "waterfall-class", args, 1.0, watch)
        request = events["gpu_request"]["time"]
        second = [t for n, t in watch.joined.items() if watch.types.get(n) == "spot"]
        return {"to_second_source_s": min(second) - request if second else None,
                "to_trainer_s": events["trainer_start"]["time"] - request,
                "sources": events["trainer_start"].get("capacity_sources")}

    return _with_head(_cluster(args, sources), work, body)


def waterfall_groups(args, work: Path, never_ready: bool) -> dict:
    """Each source its own Ray worker group (node type), the first unusable."""
    from tools import fake_capacity as fc

    first = {"resources": {"CPU": 1, "GPU": GPUS_PER_NODE, "object_store_memory": 80_000_000},
             "node_config": {"sources": [_source("first", args.nodes * 4 if never_ready else 0,
                                                 10**6 if never_ready else args.join_seconds).to_json()]},
             "min_workers": 0, "max_workers": args.nodes if never_ready else 0}
    log = work / "provider.jsonl"
    cluster = _cluster(args, [_source("second", args.nodes * 4, args.join_seconds)],
                       extra_node_types={"a-first-group": first}, event_log=str(log))

    def body(watch: Watch) -> dict:
        from jobs.head.gpu_gang import GangRequest

        gang = GangRequest(fc.GCS)
        requested = time.time()
        gang.request(args.nodes, GPUS_PER_NODE)
        deadline = requested + args.waterfall_window
        while time.time() < deadline:
            second = [t for n, t in watch.joined.items() if watch.types.get(n) == "second"]
            if len(second) >= args.nodes:
                break
            time.sleep(0.2)
        gang.clear()
        second = sorted(t for n, t in watch.joined.items() if watch.types.get(n) == "second")
        created: dict[str, int] = {}
        for line in log.read_text().splitlines() if log.exists() else []:
            record = json.loads(line)
            if record.get("event") == "created":
                created[record["node_type"]] = created.get(record["node_type"], 0) + 1
        return {"to_second_group_s": second[0] - requested if second else None,
                "second_group_nodes": len(second), "created": created}

    return _with_head(cluster, work, body)


def _seconds_text(value, unit="s") -> str:
    return "n/a" if value is None else f"{value:.1f} {unit}"


def measure_capacity(args) -> int:
    work = Path(tempfile.mkdtemp(prefix="bench-capacity-"))
    try:
        elastic = elastic_run(args, work / "elastic")
        day = day_node_hours(elastic, args)
        klass = waterfall_class(args, work / "class")
        groups_zero = waterfall_groups(args, work / "groups-zero", never_ready=False)
        groups_stuck = waterfall_groups(args, work / "groups-stuck", never_ready=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"Capacity benchmark: Ray 2.54 v2 autoscaler, fake multi-node provider; {args.nodes} "
          f"GPU nodes x {GPUS_PER_NODE} GPUs; nodes join {args.join_seconds:.0f} s after creation; "
          f"staging {args.staging_seconds:.0f} s; idle timeout {args.idle_timeout:.0f} s; GPU poll "
          f"{POLL:.0f} s")
    print("elastic run")
    print(f"  GPU node created before the gang request:      {'yes' if elastic['first_node_before_request'] else 'no'}")
    print(f"  gang request -> all {args.nodes} nodes joined:          {_seconds_text(elastic['request_to_complete_s'])}")
    print(f"  GPU-seconds idle before the trainer starts:    "
          f"{elastic['gpu_idle_waiting_s'] + (elastic['gpu_idle_after_complete_s'] or 0):.1f} "
          f"({elastic['gpu_idle_waiting_s']:.1f} while the rest of the gang joined, "
          f"{_seconds_text(elastic['gpu_idle_after_complete_s'], 'GPU-s')} after it was complete; "
          f"poll {POLL:.0f} s)")
    beyond = None if elastic["end_to_last_gone_s"] is None else elastic["end_to_last_gone_s"] - args.idle_timeout
    print(f"  run end (driver_end) -> last GPU worker gone:  {_seconds_text(elastic['end_to_last_gone_s'])} "
          f"(idle timeout {args.idle_timeout:.0f} s: {_seconds_text(beyond)} beyond it)")
    print(f"  trainer exit -> last GPU worker gone:          {_seconds_text(elastic['trainer_exit_to_last_gone_s'])}")
    print("  a 24-hour day with one 6-hour run, GPU-node-hours:")
    print(f"    old fixed group (every node all day):        {day['old']:.2f}")
    print(f"    elastic, this timeline (bench idle timeout): {day['bench']:.2f}")
    print(f"    elastic, idle timeout {PRODUCTION_IDLE_TIMEOUT} s (pods):         {day['new_pods']:.2f}")
    print(f"    elastic, + GKE node scale-down {GKE_SCALE_DOWN_SECONDS // 60} min (nodes): {day['new_nodes']:.2f}  "
          f"({day['new_nodes'] / day['old']:.0%} of the fixed group)")
    print("waterfall in one group (the ComputeClass model): first source has no capacity, "
          f"GKE gives up on it after {args.fallback_after:.0f} s")
    print(f"  gang request -> first node of the second source: {_seconds_text(klass['to_second_source_s'])}")
    print(f"  gang request -> trainer start:                   {_seconds_text(klass['to_trainer_s'])} "
          f"(sources recorded: {klass['sources']})")
    print("waterfall as separate Ray worker groups (not used: for comparison)")
    print(f"  first group max_workers 0:  request -> second group's first node "
          f"{_seconds_text(groups_zero['to_second_group_s'])} (nodes created per group: {groups_zero['created']})")
    stuck = groups_stuck["to_second_group_s"]
    print(f"  first group never ready:    request -> second group's first node "
          f"{_seconds_text(stuck) if stuck is not None else f'not within {args.waterfall_window:.0f} s'}"
          f"; {groups_stuck['second_group_nodes']} of {args.nodes} gang nodes up within "
          f"{args.waterfall_window:.0f} s (nodes created per group: {groups_stuck['created']})")
    load = os.getloadavg()
    print(f"(this machine's load average during the run: {load[0]:.1f} / {load[1]:.1f} / "
          f"{load[2]:.1f} on {os.cpu_count()} CPUs: join and reaction times stretch with it)")
    return 0


KUBERAY_START_SECONDS = 60          # the last minute of a bring-up: the worker's own wait (gIB)
KUBERAY_KILL_AFTER_SECONDS = 60     # the holder SIGKILLed this long after the trainer started
KUBERAY_GPU_WAIT_SECONDS = 1800     # job.gpuWaitSeconds' default (components/config/models/job.py)


def _positive_minutes(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of minutes: {text!r}") from None
    if not 0 < value <= 120:       # NaN fails this too
        raise argparse.ArgumentTypeError(f"minutes must be above 0 and at most 120: {text!r}")
    return value


def measure_kuberay(args) -> int:
    from tools import kuberay_scenarios as ksc
    from tools import kuberay_standin as standin

    work = Path(tempfile.mkdtemp(prefix="bench-kuberay-"))
    tls = standin.make_tls(work)
    bring_ups = sorted({round(m * 60) for m in args.bring_up_minutes})
    trainer = args.trainer_minutes * 60
    versions = [v for v in ksc.supported_ray_versions() if ksc.ray_python(v)]
    missing = sorted(set(ksc.supported_ray_versions()) - set(versions))
    launches, bound = [], 0.0
    procs: dict = {}
    try:
        for version in versions:
            python, rendered = ksc.ray_python(version), ksc.rendered_raycluster(version)
            assert python is not None
            for bring_up in bring_ups:
                timings = {"pending_seconds": max(bring_up - KUBERAY_START_SECONDS, 0),
                           "start_seconds": min(bring_up, KUBERAY_START_SECONDS)}
                name, workdir = f"{version}/{bring_up}", work / version / f"bring-up-{bring_up}"
                workdir.mkdir(parents=True)
                launches.append((name, workdir, functools.partial(
                    ksc.launch, python, workdir, tls, ksc.scaled_raycluster(rendered, keep_program_env=True, factor=1),
                    version, factor=1, until="released", kill="holder",
                    kill_after_seconds=KUBERAY_KILL_AFTER_SECONDS,
                    max_seconds=KUBERAY_GPU_WAIT_SECONDS + bring_up + trainer + 900, **timings,
                    **ksc.driver_plan(workdir, "bench", args.nodes, rendered, factor=1, trainer_seconds=trainer,
                                      gpu_wait_seconds=KUBERAY_GPU_WAIT_SECONDS))))
                bound = max(bound, KUBERAY_GPU_WAIT_SECONDS + bring_up + trainer + 1200)
            longest = bring_ups[-1]
            launches.append((f"{version}/control", work / version / "control", functools.partial(
                ksc.launch, python, work / version / "control", tls,
                ksc.scaled_raycluster(rendered, keep_program_env=False, factor=1), version, factor=1,
                until="joined", nodes=args.nodes, settle_seconds=0, max_seconds=longest + 300,
                pending_seconds=max(longest - KUBERAY_START_SECONDS, 0),
                start_seconds=min(longest, KUBERAY_START_SECONDS))))
        procs.update(ksc.launch_in_turn(launches, starting_at_once=2, running_at_once=len(launches),
                                        head_within=300))
        codes = ksc.finish(procs, bound)
        rows = [_kuberay_figures(ksc, standin, work, version, bring_up, codes[f"{version}/{bring_up}"])
                for version in versions for bring_up in bring_ups]
        controls = {v: _control_figures(ksc, standin, work / v / "control", codes[f"{v}/control"]) for v in versions}
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
    print(f"Capacity benchmark, KubeRay stand-in (real minutes): Ray's v2 autoscaler with its KubeRay provider "
          f"and the program's RayCluster; a {args.nodes}-node gang of {GPUS_PER_NODE}-GPU nodes; trainer "
          f"{args.trainer_minutes:g} min, its gang holder SIGKILLed {KUBERAY_KILL_AFTER_SECONDS} s in")
    if missing:
        print(f"  not measured (no environment: `make setup`): Ray {', '.join(missing)}")
    for row in rows:
        print(f"Ray {row['version']}, GPU node bring-up {row['bring_up'] / 60:g} min"
              + ("" if row["code"] == 0 else f"  (the run did not finish: exit {row['code']}; {row['why']})"))
        print(f"  pod recreations before the gang was up (goal 0):  {row['recreations']}")
        print(f"  GPU-seconds idle before the trainer started:      {_seconds_text(row['idle_from_join'], 'GPU-s')} "
              f"from each node's join; {_seconds_text(row['idle_from_pod'], 'GPU-s')} from each pod's creation")
        print(f"  run end (driver exit) -> last GPU pod gone:       {_seconds_text(row['end_to_gone'])} "
              f"(idle timeout {row['idle_timeout']} s)")
        print(f"  holder SIGKILLed -> request made again:           {_seconds_text(row['holder_to_remade'])}"
              f"; the request lapsed meanwhile: {'yes' if row['lapsed'] else 'no'}")
    for version, control in controls.items():
        print(f"Ray {version} control, Ray's default settings, bring-up {bring_ups[-1] / 60:g} min: "
              f"{control['recreations']} pod recreations in {control['seconds']:.0f} s; "
              f"gang up: {'yes' if control['joined'] else 'no'}")
    load = os.getloadavg()
    print(f"(this machine's load average at the end: {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} on "
          f"{os.cpu_count()} CPUs)")
    shutil.rmtree(work, ignore_errors=True)
    return 0 if all(row["code"] == 0 for row in rows) else 1


def _kuberay_figures(ksc, standin, work: Path, version: str, bring_up: int, code: int | None) -> dict:
    workdir = work / version / f"bring-up-{bring_up}"
    events, driver = standin.read_cluster_events(workdir), ksc.driver_events(workdir, "bench")
    at = {e["event"]: e for e in driver}
    end = ksc.by_event(events, "scenario_end")
    row: dict = {"version": version, "bring_up": bring_up, "code": code,
                 "why": end[0]["why"] if end else "no end recorded",
                 "idle_timeout": ksc.idle_timeout(ksc.rendered_raycluster(version)),
                 "recreations": None, "idle_from_join": None, "idle_from_pod": None, "end_to_gone": None,
                 "holder_to_remade": None, "lapsed": None}
    start = at.get("trainer_start")
    if start is None:
        return row
    gpus = float(ksc.worker_group(ksc.rendered_raycluster(version))["rayStartParams"]["num-gpus"])
    created = [e for e in ksc.by_event(events, "pod_created", group=ksc.GPU_GROUP) if e["time"] <= start["time"]]
    joined = [e for e in ksc.by_event(events, "ray_node_joined") if e["time"] <= start["time"]]
    row["recreations"] = len([e for e in ksc.by_event(events, "pod_deleting") if e["time"] <= start["time"]])
    row["idle_from_join"] = sum(start["time"] - e["time"] for e in joined) * gpus
    row["idle_from_pod"] = sum(start["time"] - e["time"] for e in created) * gpus
    exits = ksc.by_event(events, "driver_exit")
    if exits:
        _, gone = ksc.released_after(events, exits[0]["time"])
        row["end_to_gone"] = None if gone is None else gone - exits[0]["time"]
    killed, remade = ksc.by_event(events, "holder_killed"), at.get("gpu_request_remade")
    if killed and remade:
        row["holder_to_remade"] = remade["time"] - killed[0]["time"]
        row["lapsed"] = any(e["standing"] == [] for e in ksc.by_event(events, "request")
                            if killed[0]["time"] <= e["time"] <= remade["time"])
    return row


def _control_figures(ksc, standin, workdir: Path, code: int | None) -> dict:
    events = standin.read_cluster_events(workdir)
    begun, end = ksc.by_event(events, "gang_requested"), ksc.by_event(events, "scenario_end")
    seconds = (end[0]["time"] - begun[0]["time"]) if begun and end else 0.0
    return {"recreations": len(ksc.by_event(events, "pod_deleting")), "seconds": seconds,
            "joined": bool(end) and end[0]["why"] == "joined", "code": code}


OPTIONS = (("--nodes", int, 2), ("--join-seconds", float, 5.0), ("--staging-seconds", float, 4.0),
           ("--trainer-seconds", float, 10.0), ("--idle-timeout", float, 10.0),
           ("--fallback-after", float, 15.0), ("--waterfall-window", float, 90.0))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench_capacity", description=__doc__.split("\n\n")[0])
    for flag, kind, default in OPTIONS:
        parser.add_argument(flag, type=kind, default=default)
    parser.add_argument("--init", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--kuberay", action="store_true",
                        help="the KubeRay stand-in path, in real minutes (module docstring)")
    parser.add_argument("--bring-up-minutes", type=_positive_minutes, nargs="+", default=[2.0, 12.0])
    parser.add_argument("--trainer-minutes", type=_positive_minutes, default=5.0)
    args = parser.parse_args(argv)
    if args.kuberay:
        if args.nodes < 1:
            parser.error("--nodes must be at least 1")
        return measure_kuberay(args)      # each cluster makes its own loopback-only namespace
    passed = [str(x) for flag, _, _ in OPTIONS for x in (flag, getattr(args, flag[2:].replace("-", "_")))]
    if inside():
        if args.init:
            return namespace_init([PY, "-m", "tools.bench_capacity", *passed])
        return measure_capacity(args)
    return run_in_namespace("tools.bench_capacity", passed, timeout=3600)


if __name__ == "__main__":
    sys.exit(main())
