"""A stand-in for verl's trainer, for the run driver's tests: prints what verl and Ray print
(verl's console step line; Ray 2.54's ActorDiedError text, ray/exceptions.py and the GCS's "The
actor died because its node has died") and checkpoints like verl v0.7.1 (global_step_<n>/ then
latest_checkpointed_iteration.txt, verl/trainer/ppo/ray_trainer.py _save_checkpoint).

    python fake_trainer.py MODE CHECKPOINT_DIR
"""

import os
import signal
import sys
import time
from pathlib import Path

LOST = ("ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n"
        "\tclass_name: WorkerDict\n\tactor_id: 3f1a\n"
        "The actor died because its node has died. Node Id: 9c2e\n")


def step(n: int) -> None:
    print(f"(TaskRunner pid={os.getpid()}) step:{n} - critic/score/mean:np.float64(0.{n}) - "
          f"response_length/mean:{100 * n}.0", flush=True)


def checkpoint(root: Path, n: int) -> None:
    (root / f"global_step_{n}" / "actor").mkdir(parents=True, exist_ok=True)
    (root / "latest_checkpointed_iteration.txt").write_text(str(n))


def resumed(root: Path) -> int:
    tracker = root / "latest_checkpointed_iteration.txt"
    return int(tracker.read_text()) if tracker.exists() else 0


def main(mode: str, root: Path) -> int:
    print(f"fake trainer {mode}: tensorboard dir {os.environ.get('GKE_GRPO_TENSORBOARD_DIR')}", flush=True)
    done = resumed(root)
    if done:
        print(f"resumed from step {done}", flush=True)
    if mode == "ok":
        step(done + 1)
        checkpoint(root, done + 1)
        return 0
    if mode == "lost-once":
        if done:                       # the restart: continue from the marker and finish
            step(done + 1)
            checkpoint(root, done + 1)
            return 0
        step(1)
        checkpoint(root, 1)
        print(LOST, end="", flush=True)
        return 1
    if mode == "always-lost":
        step(done + 1)
        checkpoint(root, done + 1)
        print(LOST, end="", flush=True)
        return 1
    if mode == "lost-early":           # a worker lost while loading the model: no step yet
        print(LOST, end="", flush=True)
        return 1
    if mode == "fail-early":
        print("RuntimeError: CUDA error: no kernel image is available for execution", flush=True)
        return 1
    if mode == "usage":
        print("Could not override 'trainer.nonexistent_key'.\n"
              "Key 'nonexistent_key' is not in struct", flush=True)
        return 1
    if mode == "overrun":              # ignores SIGTERM: the driver must SIGKILL it
        signal.signal(signal.SIGTERM, lambda *_: print("SIGTERM ignored", flush=True))
        n = done
        while True:
            n += 1
            step(n)
            time.sleep(0.2)
    raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], Path(sys.argv[2])))
