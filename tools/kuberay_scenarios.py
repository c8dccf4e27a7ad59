"""Scenarios on the KubeRay stand-in (tools/kuberay_standin.py), for the tests
(tests/jobs/head/test_autoscaler_kuberay_ray.py) and the benchmark (tools/bench_capacity.py
--kuberay): the RayCluster of each supported Ray version as the program renders it, its time
settings and Ray's divided by a scenario's factor, one cluster per scenario launched in its own
namespace, and the records read back.

A scenario's seconds are real-world ones; the factor divides every one of them (the program's,
Ray's and the stand-in's), except the autoscaler's round, an integer in Ray that a factor need not
divide (NOT_DIVIDED). Factor 1 is the real minutes.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tools import kuberay_standin as standin

ROOT = Path(__file__).resolve().parent.parent
GPU_GROUP = "gpu-workers"                         # components/ray_pods.py
ALLOCATE_ENV = "RAY_AUTOSCALER_RECONCILE_ALLOCATE_STATUS_TIMEOUT_S"
# An integer setting in Ray (`env_integer`): a factor that does not divide it sets it to 1 s
# (0 would be a busy loop): the rounds are then sparser than scaled, and a timeout is noticed up to
# a round late.
NOT_DIVIDED = {"AUTOSCALER_UPDATE_INTERVAL_S": "1"}
# The labels of the node a worker pod "runs" on (the node-labels init container's file).
SPOT_NODE_LABELS = {"cloud.google.com/gke-spot": "true"}


def supported_ray_versions() -> list[str]:
    """Every Ray version a supported framework image carries (data/versions.yaml)."""
    from components.versions import load_versions

    return sorted({row.ray for row in load_versions().images})


def ray_python(version: str) -> str | None:
    """The Python whose Ray is ``version``: this one (./venv) or the per-version environment
    `make setup` installs (.venv-ray-<version>, Makefile); None when neither is."""
    import ray

    if ray.__version__ == version:
        return sys.executable
    python = ROOT / f".venv-ray-{version}" / "bin" / "python"
    return str(python) if python.exists() else None


def rendered_raycluster(version: str) -> dict:
    """The RayCluster of a stack whose Ray is ``version``, as the program renders it (the first
    committed golden preview with that Ray: the stacks, then the older releases on their configs;
    tests/tools/test_preview.py keeps each equal to the program's output)."""
    from tools.golden import GOLDENS, golden_path

    for name in GOLDENS:
        preview = json.loads(golden_path(name).read_text())
        for resource in preview["resources"]:
            if resource["type"].endswith(":RayCluster") and resource["inputs"]["spec"]["rayVersion"] == version:
                return resource["inputs"]
    raise LookupError(f"no stack renders a RayCluster of Ray {version}")


def ray_defaults_scaled(version: str, factor: int) -> dict[str, str]:
    """Ray's own time settings of ``version`` (data/ray-autoscaler-settings.yaml), divided: a
    default can only be divided by setting it."""
    from components.ray_autoscaler import load_autoscaler_settings

    env = {}
    for setting in load_autoscaler_settings().settings:
        default = setting.defaults[version]
        if setting.env in NOT_DIVIDED and default % factor:
            env[setting.env] = NOT_DIVIDED[setting.env]
        else:
            if default % factor:
                raise ValueError(f"factor {factor} does not divide {setting.env}={default}")
            env[setting.env] = str(default // factor)
    return env


def scaled_raycluster(rendered: dict, *, keep_program_env: bool, factor: int) -> dict:
    """The rendered RayCluster with its time settings divided: the idle timeout, and the
    program's autoscalerOptions.env (kept, divided) or none of it (a control: Ray's defaults)."""
    cluster = json.loads(json.dumps(rendered))
    options = cluster["spec"]["autoscalerOptions"]
    values = [options["idleTimeoutSeconds"]] + [int(e["value"]) for e in options.get("env", [])]
    if any(value % factor for value in values):
        raise ValueError(f"factor {factor} does not divide the RayCluster's settings {values}")
    options["idleTimeoutSeconds"] //= factor
    if keep_program_env:
        for item in options["env"]:
            item["value"] = str(int(item["value"]) // factor)
    else:
        options.pop("env", None)
    return cluster


def program_allocate_timeout(rendered: dict) -> int:
    env = {e["name"]: e["value"] for e in rendered["spec"]["autoscalerOptions"].get("env", [])}
    return int(env[ALLOCATE_ENV])


def idle_timeout(rendered: dict) -> int:
    return int(rendered["spec"]["autoscalerOptions"]["idleTimeoutSeconds"])


def worker_group(rendered: dict) -> dict:
    return next(g for g in rendered["spec"]["workerGroupSpecs"] if g["groupName"] == GPU_GROUP)


# The scenarios' trainer: it takes every GPU of the gang as verl's resource pools do, one
# STRICT_PACK placement group per node of {"CPU": 1, "GPU": 1} bundles, one per GPU (verl v0.7.1
# verl/single_controller/ray/base.py RayResourcePool.get_placement_groups), holds them for the run
# and exits: each node's idle timer starts when the trainer lets go of it, as after a real run.
# No worker process is started on the GPU nodes.
TRAINER = """
import sys, time
import ray
from ray.util.placement_group import placement_group
nodes, gpus, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
ray.init(address="auto", logging_level="ERROR", log_to_driver=False)
groups = [placement_group([{"CPU": 1, "GPU": 1}] * gpus, strategy="STRICT_PACK") for _ in range(nodes)]
ray.get([group.ready() for group in groups], timeout=120)
print(f"training on {nodes} GPU nodes", flush=True)
time.sleep(seconds)
"""


def driver_plan(workdir: Path, run_id: str, nodes: int, rendered: dict, *, factor: int,
                trainer_seconds: float, gpu_wait_seconds: float) -> dict:
    """A scenario's run driver (``driver_plan`` of the stand-in's config): the plan written as the
    RayJob's is (jobs/contract/run_plan.py), its times divided by ``factor``: a staging of a
    second, then TRAINER holding all the gang's GPUs."""
    from jobs.contract.run_plan import Command, RunPlan

    gpus_per_node = int(worker_group(rendered)["rayStartParams"]["num-gpus"])
    run_dir = workdir / "runs" / run_id
    run_dir.mkdir(parents=True)
    trainer = workdir / "trainer.py"        # a plan's argv holds no newline (jobs/contract/run_plan.py)
    trainer.write_text(TRAINER.lstrip())
    plan = RunPlan(
        run_id=run_id, attempt=1, framework="verl", run_dir=str(run_dir),
        checkpoint_dir=str(workdir / "checkpoints" / run_id),
        prepare=Command(argv=("python3", "-c", "import time; time.sleep(1)")),
        gpus=nodes * gpus_per_node, gpus_per_node=gpus_per_node, gpu_wait_seconds=gpu_wait_seconds / factor,
        trainer=Command(argv=("python3", str(trainer), str(nodes), str(gpus_per_node),
                              str(trainer_seconds / factor))),
        deadline_seconds=None, max_restarts=0, stop_grace_seconds=1, gpu_poll_seconds=0.5)
    path = workdir / "plan.json"
    path.write_text(plan.to_json())
    return {"driver_plan": str(path), "data_root": str(workdir), "run_dir": str(run_dir), "nodes": nodes}


def launch(python: str, workdir: Path, tls: tuple[Path, Path, Path], cluster: dict, version: str,
           *, factor: int, **scenario) -> subprocess.Popen:
    """One cluster running one scenario in its own namespace (the stand-in's `run`); its
    events in workdir."""
    workdir.mkdir(parents=True, exist_ok=True)
    group = worker_group(cluster)
    config = {"raycluster": cluster, "factor": factor, "workdir": str(workdir),
              "ca_file": str(tls[0]), "cert_file": str(tls[1]), "key_file": str(tls[2]),
              "ray_defaults": ray_defaults_scaled(version, factor),
              "nodes": 1, "gpus_per_node": int(group["rayStartParams"]["num-gpus"]),
              "node_labels": SPOT_NODE_LABELS, **scenario}
    path = workdir / "config.json"
    path.write_text(json.dumps(config, indent=1))
    with open(workdir / "harness.log", "w") as log:
        return subprocess.Popen(standin.cluster_command(python, path), cwd=ROOT, stdout=log,
                                stderr=subprocess.STDOUT)


def launch_in_turn(launches: list[tuple[str, Path, Callable[[], subprocess.Popen]]], *, starting_at_once: int,
                   running_at_once: int, head_within: float) -> dict[str, subprocess.Popen]:
    """Each (name, workdir, launch) in order, no more than ``starting_at_once`` clusters starting
    their head at a time and ``running_at_once`` running: eight heads started at once on two cores
    timed out in Ray's own node start ("The current node timed out during startup", 2026-12-06),
    and eight clusters beside the rest of the suite left worker nodes unable to register within
    Ray's 30 s. A cluster counts as started once its head is up, its process has ended, or
    ``head_within`` seconds have passed."""
    procs: dict[str, subprocess.Popen] = {}
    starting: list[tuple[str, Path, float]] = []
    for name, workdir, start in launches:
        while len(starting) >= starting_at_once or \
                sum(proc.poll() is None for proc in procs.values()) >= running_at_once:
            time.sleep(0.2)
            starting = [(n, w, t) for n, w, t in starting
                        if procs[n].poll() is None and time.monotonic() - t < head_within
                        and not by_event(standin.read_cluster_events(w), "head_up")]
        procs[name] = start()
        starting.append((name, workdir, time.monotonic()))
    return procs


def finish(procs: dict[str, subprocess.Popen], bound: float) -> dict[str, int | None]:
    """Each cluster's exit code; None for one still running after ``bound`` seconds (killed:
    its namespace ends with it)."""
    deadline = time.monotonic() + bound
    codes: dict[str, int | None] = {}
    for name, proc in procs.items():
        try:
            codes[name] = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()                 # unshare --kill-child: the cluster's namespace ends
            proc.wait()
            codes[name] = None
    return codes


def describe_cluster(workdir: Path) -> str:
    """The logs' tails and the events of one cluster, for a failure's message: the events last,
    where a truncated report keeps them."""
    text = ""
    for name in ("harness.log", "autoscaler.log", "driver.log"):
        path = workdir / name
        if path.exists():
            text += f"--- {name} (tail) ---\n" + path.read_text()[-1500:] + "\n"
    events = standin.read_cluster_events(workdir)
    start = events[0]["time"] if events else 0.0
    lines = [f"{e['time'] - start:7.1f} {e['event']} "
             + json.dumps({k: v for k, v in e.items() if k not in ("time", "event", "args", "ray_defaults")},
                          sort_keys=True)[:200] for e in events]
    return text + "--- events (seconds from the first) ---\n" + "\n".join(lines[-80:])


def by_event(events: list[dict], name: str, **fields) -> list[dict]:
    return [e for e in events if e["event"] == name and all(e.get(k) == v for k, v in fields.items())]


def driver_events(workdir: Path, run_id: str) -> list[dict]:
    """The run driver's own records (its run directory's events.jsonl)."""
    path = workdir / "runs" / run_id / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def released_after(events: list[dict], since: float) -> tuple[float | None, float | None]:
    """After ``since``: when the resource request first stood empty, and when the last worker
    pod was gone (None: not seen)."""
    cleared = [e["time"] for e in by_event(events, "request") if e["time"] >= since and e["standing"] == []]
    gone = [e["time"] for e in by_event(events, "pod_deleted") if e["time"] >= since]
    return (cleared[0] if cleared else None), (gone[-1] if gone else None)
