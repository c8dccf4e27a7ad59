"""Recovery benchmark: the real run driver against a real Ray head with fake GPU nodes.

    python -m tools.bench_recovery [--step-seconds 1.0] [--skip-abrupt]

Runs inside its own network namespace with only loopback (and its own PID namespace and
/tmp/ray), like tools/bench_gpu_idle.py. The head has no GPUs; a second Ray node with 2 fake
GPUs is the run's GPU node. The trainer is tests/jobs/fake_trainer.py in its ``ray-*`` modes: one
actor on the GPU node, called once per step, checkpoint (verl's layout) at step 2, so a lost node
makes Ray itself raise what a framework would print. A benchmark, not a test: it prints figures.

Scenario 1, a node lost mid-training after a checkpoint (two steps past it): the GPU node's
raylet gets SIGTERM (what deleting a preempted pod sends: Ray marks the node dead at once,
"received SIGTERM") or SIGKILL (a node that vanished: Ray notices through missed health checks);
a replacement node joins right after the loss, so the figures are the driver's and Ray's part of
the recovery, not the wait for new capacity (on GKE: minutes for Spot or flex-start). With the
backoff as the stacks have it (the plan's default: 30 s before the first restart) and at its
minimum. Printed: seconds from the kill to the driver's restart decision, to the trainer's
restart and to its first new step; the GPU wait inside that; steps redone.

Scenario 2, a crash that is not a node loss (the actor's process segfaults, its node lives),
repeated on every start: how many trainer starts happen before the driver gives up (goal 1), and
with one real node loss before it (goal 2).

What NeMo RL publishes for the same kind of fault (a cold restart: kill, 45 s settle, Megatron and
vLLM reload, resume: 296-313 s a fault, NVIDIA-NeMo/RL infra/nrl_k8s/examples/ft_experiment/
INSTRUCTIONS.md) is printed beside, with the part of it this driver controls.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

from tools import local_ray
from tools.loopback_namespace import inside, namespace_init, run_in_namespace

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
GCS, DASHBOARD = local_ray.GCS, local_ray.DASHBOARD
GPUS = 2
FAKE_TRAINER = ROOT / "tests" / "jobs" / "fake_trainer.py"
NEMO_RL_GAPS_S = (313, 305, 296)   # INSTRUCTIONS.md control run, "restart gap" per fault


def start_bench_head() -> None:
    local_ray.start_head(num_cpus=2, num_gpus=0, env=local_ray.ray_env(PYTHONPATH=str(ROOT)),
                         timeout=300, dashboard_timeout=120)


def join_fake_gpu_node(port: int) -> None:
    local_ray.join_node(num_gpus=GPUS, resources='{"gpu_worker": 1}', node_manager_port=port,
                        env=local_ray.ray_env(PYTHONPATH=str(ROOT)), timeout=300)


def kill_node(port: int, sig: int) -> float:
    return local_ray.lose_node(port, sig, inside=inside())


def stop_bench_cluster() -> None:
    local_ray.stop_all(inside=inside())


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _wait(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"gave up waiting for {what}")
        time.sleep(0.05)


class Bench:
    def __init__(self, work: Path, step_seconds: float):
        self.work, self.step_seconds = work, step_seconds
        self.port = 7111
        self.runs = 0

    def submit(self, mode: str, **plan_changes) -> tuple[str, Path, Path]:
        from ray.job_submission import JobSubmissionClient

        from jobs.contract.run_plan import DATA_ROOT_ENV, Command, RunPlan

        self.runs += 1
        run_id = f"bench{self.runs}-{mode}"
        base = self.work / run_id
        # The plan's directories lie below the data root it names (jobs/contract/run_plan.py
        # DATA_ROOT_ENV): base stands in for /data.
        checkpoints = base / "checkpoints" / run_id
        plan = RunPlan(run_id=run_id, attempt=1, framework="verl", run_dir=str(base / "runs" / base.name),
                       checkpoint_dir=str(checkpoints), prepare=None, gpus=GPUS, gpus_per_node=GPUS,
                       gpu_wait_seconds=300, deadline_seconds=None,
                       trainer=Command(argv=(PY, str(FAKE_TRAINER), mode, str(checkpoints), str(self.step_seconds))),
                       **plan_changes)
        (base / "runs" / base.name).mkdir(parents=True)
        (base / "plan.json").write_text(plan.to_json())
        submission_id = f"{run_id}-attempt-1"
        JobSubmissionClient(DASHBOARD).submit_job(entrypoint=f"{PY} -m jobs.run --plan {base / 'plan.json'}",
                                                  submission_id=submission_id,
                                                  runtime_env={"env_vars": {DATA_ROOT_ENV: str(base)}})
        return submission_id, base, checkpoints

    def finish(self, submission_id: str, timeout: float = 600) -> tuple[str, int | None]:
        from ray.job_submission import JobSubmissionClient

        client = JobSubmissionClient(DASHBOARD)
        deadline = time.monotonic() + timeout
        while True:
            info = client.get_job_info(submission_id)
            status = str(getattr(info.status, "value", info.status))
            if status in ("SUCCEEDED", "FAILED", "STOPPED"):
                return status, info.driver_exit_code
            if time.monotonic() > deadline:
                raise RuntimeError(f"{submission_id} still {status}")
            time.sleep(0.2)

    def node_loss(self, sig: int, backoff: float | None) -> dict:
        changes = {} if backoff is None else {"backoff_base_seconds": backoff, "backoff_cap_seconds": backoff}
        sid, base, checkpoints = self.submit("ray-node", **changes)
        tracker = checkpoints / "latest_checkpointed_iteration.txt"
        _wait(tracker.exists, 300, "the checkpoint at step 2")
        time.sleep(2.2 * self.step_seconds)                 # two steps past the checkpoint
        killed = kill_node(self.port, sig)
        self.port += 1
        join_fake_gpu_node(self.port)                            # the replacement joins at once
        status, code = self.finish(sid)
        if status != "SUCCEEDED":
            raise RuntimeError(f"{sid}: {status} (exit {code})")
        events = _rows(base / "runs" / base.name / "events.jsonl")
        [restart] = _rows(base / "runs" / base.name / "restarts.jsonl")
        starts = [e for e in events if e["event"] == "trainer_start"]
        [recovery] = [e for e in events if e["event"] == "recovery"]
        waits = [e for e in events if e["event"] in ("gpu_wait_start", "gpu_wait_end") and e["start"] == 1]
        return {"decision": restart["time"] - killed, "restart": starts[1]["time"] - killed,
                "first_step": recovery["time"] - killed, "backoff": restart["backoff_s"],
                "gpu_wait": waits[-1]["time"] - waits[0]["time"] if len(waits) == 2 else float("nan"),
                "redone": recovery["steps_redone"], "loss_source": recovery["loss_source"],
                "ray_marked_dead": restart["loss_at"] - killed}

    def crash_loop(self, with_node_loss: bool) -> dict:
        sid, base, checkpoints = self.submit("ray-node-then-segfault" if with_node_loss else "ray-segfault",
                                             backoff_base_seconds=0.01, backoff_cap_seconds=0.01,
                                             node_settle_seconds=5.0)
        if with_node_loss:
            _wait((checkpoints / "latest_checkpointed_iteration.txt").exists, 300, "the checkpoint at step 2")
            time.sleep(1.2 * self.step_seconds)
            kill_node(self.port, signal.SIGTERM)
            self.port += 1
            join_fake_gpu_node(self.port)
        status, code = self.finish(sid)
        events = _rows(base / "runs" / base.name / "events.jsonl")
        reasons = [e["reason"] for e in events if e["event"] == "trainer_exit"]
        return {"starts": sum(1 for e in events if e["event"] == "trainer_start"), "status": status,
                "exit": code, "reasons": reasons}


def measure_recovery(args) -> int:
    work = Path(tempfile.mkdtemp(prefix="bench-recovery-"))
    results: list[tuple[str, dict]] = []
    loops: list[tuple[str, dict]] = []
    try:
        start_bench_head()
        bench = Bench(work, args.step_seconds)
        join_fake_gpu_node(bench.port)
        scenarios = [("SIGTERM (pod deleted / Spot)", signal.SIGTERM, None),
                     ("SIGTERM (pod deleted / Spot)", signal.SIGTERM, 0.01)]
        if not args.skip_abrupt:
            scenarios.append(("SIGKILL (node vanished)", signal.SIGKILL, 0.01))
        for name, sig, backoff in scenarios:
            row = bench.node_loss(sig, backoff)
            results.append((f"{name}, backoff {'default' if backoff is None else 'minimum'}", row))
        loops.append(("segfault on every start", bench.crash_loop(False)))
        loops.append(("node loss, then segfaults", bench.crash_loop(True)))
    finally:
        stop_bench_cluster()
        shutil.rmtree(work, ignore_errors=True)
    print(f"Recovery benchmark: real driver, real Ray 2.54 head, fake GPU node, a step every "
          f"{args.step_seconds:.1f}s, checkpoint at step 2, node lost two steps later; the "
          "replacement node joins at once (no capacity wait)")
    print(f"{'node loss':<46}{'->decision':>11}{'->restart':>11}{'->1st step':>11}{'backoff':>9}"
          f"{'GPU wait':>10}{'redone':>8}  Ray marked dead")
    for name, r in results:
        print(f"{name:<46}{r['decision']:>10.2f}s{r['restart']:>10.2f}s{r['first_step']:>10.2f}s"
              f"{r['backoff']:>8.2f}s{r['gpu_wait']:>9.2f}s{r['redone']:>8}  {r['ray_marked_dead']:+.2f}s")
    print(f"{'crash that is not a node loss':<46}{'starts':>8}  outcome")
    for name, r in loops:
        print(f"{name:<46}{r['starts']:>8}  {r['status']} exit {r['exit']}: {' -> '.join(r['reasons'])}")
    print(f"NeMo RL (ft_experiment control run, published): {', '.join(map(str, NEMO_RL_GAPS_S))} s a fault "
          "(kill + 45 s settle + Megatron/vLLM cold reload + resume). This driver controls the "
          "decision and the backoff; capacity (GPU wait), the gate on new nodes and the "
          "framework's own start-up (model load, vLLM, resume) are outside it.")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench_recovery", description=__doc__.split("\n\n")[0])
    parser.add_argument("--step-seconds", type=float, default=1.0)
    parser.add_argument("--skip-abrupt", action="store_true", help="leave out the SIGKILL scenario")
    parser.add_argument("--init", action="store_true", help=argparse.SUPPRESS)
    args, rest = parser.parse_known_args(argv)
    forwarded = ["--step-seconds", str(args.step_seconds), *(["--skip-abrupt"] if args.skip_abrupt else [])]
    if inside():
        if args.init:
            return namespace_init([PY, "-m", "tools.bench_recovery", *rest, *forwarded])
        return measure_recovery(args)
    return run_in_namespace("tools.bench_recovery", forwarded, timeout=2400)


if __name__ == "__main__":
    sys.exit(main())
