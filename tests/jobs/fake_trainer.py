"""A stand-in for verl's trainer, for the run driver's tests and tools/bench_recovery.py: prints
what verl, Ray and PyTorch print (verl's console step line; Ray 2.54's texts, quoted in
jobs/head/failures.py and observed live: ActorDiedError for a node that died and for a worker
process that died, the memory monitor's kill, PyTorch's NCCL watchdog) and checkpoints like
verl v0.7.1 (global_step_<n>/ then latest_checkpointed_iteration.txt, verl/trainer/ppo/
ray_trainer.py _save_checkpoint). The ``ray-*`` modes run for real on a Ray cluster (RAY_ADDRESS):
one actor on a GPU worker node, called once per step, so that killing that node makes Ray itself
raise what the trainer prints.

    python fake_trainer.py MODE CHECKPOINT_DIR [STEP_SECONDS]
"""

import json
import os
import signal
import sys
import time
from pathlib import Path

LOST = ("ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n"
        "\tclass_name: WorkerDict\n\tactor_id: 3f1a\n"
        "The actor died because its node has died. Node Id: 9c2e\n"
        "\tthe actor's node was terminated expectedly: received SIGTERM\n")
# A worker process that died on a node that lives on (SIGSEGV, SIGKILL and a kernel OOM kill all
# print this, observed on Ray 2.54.0).
WORKER_DIED = ("ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n"
               "\tclass_name: WorkerDict\n\tactor_id: 3f1a\n"
               "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR "
               "Worker exit detail: Worker unexpectedly exits with a connection error code 2. End of "
               "file. Some common causes include: (1) the process was killed by the OOM killer due to "
               "high memory usage, (2) ray stop --force was called, or (3) the worker crashed "
               "unexpectedly due to SIGSEGV or another unexpected error.\n")
OOM = ("ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.\n"
       "Memory on the node (IP: 10.0.0.3, ID: 1cbf) where the lease was running was 7.07GB / 23.54GB\n")
HANG = ("[rank3]:[E1201 ProcessGroupNCCL.cpp:629] [Rank 3] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=1, OpType=BROADCAST, Timeout(ms)=600000) ran for 600081 "
        "milliseconds before timing out.\n")


# What verl v0.7.1 prints from its TaskRunner before a save because its capacity ends (verl/trainer/
# ppo/ray_trainer.py fit), and NeMo RL v0.5.0 after such a save, before grpo_train returns
# (nemo_rl/algorithms/grpo.py); NeMo RL's step line (grpo_train).
FORCED_SAVE = "(TaskRunner pid={pid}) Force saving checkpoint: ESI instance expiration approaching.\n"
NEMO_RL_TIMEOUT = "Timeout has been reached, stopping training early\n"
CAPACITY_ENV = ("MLP_CURRENT_CAPACITY_BLOCK_EXPIRATION_TIMESTAMP", "GKE_GRPO_CHECKPOINT_MUST_SAVE_BY")


def told() -> None:
    """What the driver told this start of its capacity's end (the variables each framework reads)."""
    print("capacity told: " + json.dumps({k: os.environ.get(k) for k in CAPACITY_ENV}, sort_keys=True), flush=True)


def verl_capacity_end(root: Path, done: int) -> int:
    """verl near its capacity's end: saves after a step (forced), trains on, and its node goes;
    the restarted start finishes."""
    told()
    if done:
        return trains(root, done)
    if os.environ.get(CAPACITY_ENV[0]):          # verl saves early only when told an end
        print(FORCED_SAVE.format(pid=os.getpid()), end="", flush=True)
    return trains(root, 0, then=LOST, code=1)


def nemo_rl_capacity_end(root: Path, done: int) -> int:
    """NeMo RL: two steps; told a checkpoint_must_save_by, one step, its save, the timeout line
    and exit 0, then the restarted start finishes."""
    told()
    for n in range(done + 1, 3):
        print(f"========================= Step {n}/2 =========================", flush=True)
        checkpoint(root, n)
        if not done and os.environ.get(CAPACITY_ENV[1]):   # NeMo RL's timeout only when told one
            print(NEMO_RL_TIMEOUT, end="", flush=True)
            break
    return 0


def step(n: int) -> None:
    print(f"(TaskRunner pid={os.getpid()}) step:{n} - critic/score/mean:np.float64(0.{n}) - "
          f"response_length/mean:{100 * n}.0", flush=True)


def checkpoint(root: Path, n: int) -> None:
    (root / f"global_step_{n}" / "actor").mkdir(parents=True, exist_ok=True)
    (root / "latest_checkpointed_iteration.txt").write_text(str(n))


def resumed(root: Path) -> int:
    tracker = root / "latest_checkpointed_iteration.txt"
    return int(tracker.read_text()) if tracker.exists() else 0


def trains(root: Path, done: int, *, save: bool = True, then: str = "", code: int = 0) -> int:
    """One step after the checkpoint (saved or not), then print ``then`` and exit ``code``."""
    step(done + 1)
    if save:
        checkpoint(root, done + 1)
    print(then, end="", flush=True)
    return code


def fails(text: str) -> int:
    print(text, end="" if text.endswith("\n") else "\n", flush=True)
    return 1


def lost_once(root: Path, done: int) -> int:
    """Loses its node after step 1 (checkpointed); the restart resumes and finishes."""
    return trains(root, done) if done else trains(root, 0, then=LOST, code=1)


def lost_early_once(root: Path, done: int) -> int:
    """The first start loses its node while loading (no step); the next one trains."""
    marker = root / ".lost-early-once"
    if marker.exists():
        return trains(root, done)
    root.mkdir(parents=True, exist_ok=True)
    marker.write_text("x")
    return fails(LOST)


# NeMo RL's asynchronous GRPO (nemo_rl/algorithms/grpo.py async_grpo_train, v0.7.0 lines
# 4314-4325): the end-of-run line, or the caught error and a normal return.
ASYNC_END = "Max number of steps has been reached, stopping training early\n"
ASYNC_ERROR = "❌ Error in async loop: RayActorError: The actor died unexpectedly\n"


def split_lost_then_exit_0(root: Path, done: int) -> int:
    """verl's fully-async trainer after a lost rollout node: the rollouter takes it for the end of
    its data and the trainer ends normally (exit 0) after one step; the restart finishes."""
    return trains(root, done)


def hang_after_loss_once(root: Path, done: int) -> int:
    """A split trainer that waits forever once a node is gone (no step after the first); the
    restart finishes."""
    if done:
        return trains(root, done)
    trains(root, 0)
    while True:
        time.sleep(0.2)


def steps_forever(root: Path, done: int, on_sigterm=None) -> int:
    if on_sigterm is not None:
        signal.signal(signal.SIGTERM, on_sigterm)
    n = done
    while True:
        n += 1
        step(n)
        time.sleep(0.2)


def slow_stop(root: Path, done: int) -> int:
    """Needs FAKE_TRAINER_STOP_SECONDS (4) to stop cleanly after a SIGTERM."""
    def stop(*_):
        time.sleep(float(os.environ.get("FAKE_TRAINER_STOP_SECONDS", "4")))
        (root / "stopped-cleanly").write_text(str(time.time()))
        print("stopped cleanly", flush=True)
        raise SystemExit(0)
    return steps_forever(root, done, stop)


def long(root: Path, done: int) -> int:
    """Checkpoints every step, 0.3 s a step, until the test creates ``<checkpoints>/finish``."""
    n = done
    while not (root / "finish").exists():
        n += 1
        step(n)
        checkpoint(root, n)
        time.sleep(0.3)
    return 0


MODES = {
    "ok": trains,
    "lost-once": lost_once,
    "always-lost": lambda root, done: trains(root, done, then=LOST, code=1),     # progress each time
    "lost-no-progress": lambda root, done: trains(root, done, save=False, then=LOST, code=1),
    "lost-early": lambda root, done: fails(LOST),                               # lost while loading
    "lost-early-once": lost_early_once,
    "worker-died": lambda root, done: trains(root, done, save=False, then=WORKER_DIED, code=1),
    "oom": lambda root, done: trains(root, done, save=False, then=OOM, code=1),
    "hang": lambda root, done: trains(root, done, save=False, then=HANG, code=1),
    "fail-early": lambda root, done: fails("RuntimeError: CUDA error: no kernel image is available for execution"),
    "usage": lambda root, done: fails("Could not override 'trainer.nonexistent_key'.\n"
                                      "Key 'nonexistent_key' is not in struct"),
    # ignores SIGTERM: the driver must SIGKILL it
    "overrun": lambda root, done: steps_forever(root, done, lambda *_: print("SIGTERM ignored", flush=True)),
    "slow-stop": slow_stop,
    "long": long,
    "verl-capacity-end": verl_capacity_end,
    "async-end": lambda root, done: trains(root, done, then=ASYNC_END),
    "async-error-exit-0": lambda root, done: trains(root, done, save=False, then=ASYNC_ERROR),
    "split-lost-then-exit-0": split_lost_then_exit_0,
    "hang-after-loss-once": hang_after_loss_once,
    "nemo-rl-capacity-end": nemo_rl_capacity_end,
}


def main(mode: str, root: Path) -> int:
    print(f"fake trainer {mode}: tensorboard dir {os.environ.get('GKE_GRPO_TENSORBOARD_DIR')}", flush=True)
    done = resumed(root)
    if done:
        print(f"resumed from step {done}", flush=True)
    if mode.startswith("ray-"):
        return ray_mode(mode, root, done)
    if mode not in MODES:
        raise SystemExit(f"unknown mode {mode}")
    return MODES[mode](root, done)


def ray_mode(mode: str, root: Path, done: int) -> int:
    """A trainer that uses the cluster: one actor on the GPU worker node (custom resource
    ``gpu_worker``), called every step. ``ray-node``: checkpoints at step 2 and then steps until
    its node goes (the test or benchmark kills it), the restarted start steps twice and finishes.
    ``ray-segfault``: the actor's process segfaults after the first step.
    ``ray-node-then-segfault``: the first start as ray-node, every later one as ray-segfault."""
    if mode == "ray-node-then-segfault":
        mode = "ray-segfault" if done else "ray-node"
    import ray

    step_seconds = float(sys.argv[3]) if len(sys.argv) > 3 else 0.5
    ray.init(address="auto", logging_level="ERROR", log_to_driver=False)
    worker = ray.remote(num_cpus=0, resources={"gpu_worker": 0.01}, max_restarts=0)(Worker).remote()
    ray.get(worker.ping.remote(), timeout=120)
    last = done + 2 if done else 10_000
    n = done
    while n < last:
        n += 1
        ray.get(worker.ping.remote(segfault=(mode == "ray-segfault" and n == done + 2)))
        step(n)
        if n == 2 or (done and n == last):
            checkpoint(root, n)
        time.sleep(step_seconds)
    return 0


class Worker:
    def ping(self, segfault: bool = False) -> int:
        if segfault:
            os.kill(os.getpid(), signal.SIGSEGV)
        return os.getpid()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], Path(sys.argv[2])))
