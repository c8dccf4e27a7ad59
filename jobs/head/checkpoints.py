"""The run's checkpoint directory as the driver sees it: retention that holds across trainer
restarts, the last complete step, and whether the directory can be written.

    prune_verl_checkpoints(checkpoint_dir, keep) -> removed paths

verl rotates checkpoints from a list kept in memory (``previous_saved_paths = []`` in
verl/utils/checkpoint/checkpoint_manager.py, v0.7.1) that is never rebuilt from disk on resume,
so every restart of the trainer leaves up to ``max_actor_ckpt_to_keep`` ``global_step_*``
directories behind for good (about 90 GB each for a 7B model with optimizer state, 390 GB for
32B). The run driver calls ``prune_verl_checkpoints`` before every verl trainer start, when
nothing writes to the directory.

What is removed: ``global_step_<N>`` directories beyond the ``keep`` newest by step, except the
one ``latest_checkpointed_iteration.txt`` names (the one verl resumes from: verl writes that file
last, after a save completed, in verl/trainer/ppo/ray_trainer.py ``_save_checkpoint``). When the
tracker file is missing, unreadable, or names a directory that does not exist, nothing is
removed: which checkpoint is complete cannot be told, and resuming is more valuable than space.
Entries whose names are not exactly ``global_step_<N>`` (a half-renamed or foreign directory,
a file) are never touched.

NeMo RL needs none of this: its ``remove_old_checkpoints`` reads the ``step_*`` directories from
disk after every save (nemo_rl/utils/checkpoint.py, v0.5.0), so a restart does not forget them.

Preflight's storage estimate counts the most checkpoints that can exist at once under this rule
(jobs/plan/checkpoint_storage.py).

Standard library only: this runs on the Ray head inside the framework image.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path

from jobs.contract.safe_files import RUN_RECORD, UnusableFile, read_text

VERL_TRACKER = "latest_checkpointed_iteration.txt"
_VERL_STEP_DIR = re.compile(r"^global_step_(\d+)$")


_TRACKER_STEP = re.compile(r"^\d{1,18}$")


def tracker_step(checkpoint_dir: str | Path) -> int | None:
    """The step verl's ``latest_checkpointed_iteration.txt`` names, or None when there is none:
    missing, not a regular file (a FIFO there cannot block the driver), oversized, or not one
    non-negative integer (verl/trainer/ppo/ray_trainer.py _save_checkpoint writes
    ``str(global_steps)``, v0.7.1)."""
    try:
        text = read_text(Path(checkpoint_dir) / VERL_TRACKER, RUN_RECORD).strip()
    except UnusableFile:
        return None
    return int(text) if _TRACKER_STEP.match(text) else None


def verl_latest_step(checkpoint_dir: Path) -> int | None:
    """The step ``latest_checkpointed_iteration.txt`` names, or None when it cannot be read or
    its directory does not exist."""
    step = tracker_step(checkpoint_dir)
    if step is None:
        return None
    return step if (checkpoint_dir / f"global_step_{step}").is_dir() else None


def verl_step_dirs(checkpoint_dir: Path) -> dict[int, Path]:
    """step -> ``global_step_<step>`` directory (real directories only, never symlinks)."""
    steps: dict[int, Path] = {}
    try:
        entries = list(checkpoint_dir.iterdir())
    except OSError:
        return steps
    for entry in entries:
        match = _VERL_STEP_DIR.match(entry.name)
        if match and entry.is_dir() and not entry.is_symlink():
            steps[int(match.group(1))] = entry
    return steps


def prune_verl_checkpoints(checkpoint_dir: Path, keep: int) -> list[Path]:
    """Remove the ``global_step_*`` directories of ``checkpoint_dir`` beyond the ``keep`` newest,
    never the one the tracker file names; return what was removed (oldest first)."""
    if keep < 1:
        raise ValueError(f"keep is {keep}: keep at least 1 checkpoint to resume from")
    checkpoint_dir = Path(checkpoint_dir)
    latest = verl_latest_step(checkpoint_dir)
    if latest is None:
        return []
    steps = verl_step_dirs(checkpoint_dir)
    kept = set(sorted(steps, reverse=True)[:keep]) | {latest}
    removed = []
    for step in sorted(steps):
        if step not in kept:
            shutil.rmtree(steps[step])
            removed.append(steps[step])
    return removed


_STEP_DIR = re.compile(r"^(?:global_step|step)_(\d+)$")


def last_checkpoint_step(checkpoint_dir: str | Path) -> int | None:
    """The last step checkpointed in a run's directory, read-only. verl v0.7.1 writes
    ``latest_checkpointed_iteration.txt`` after a complete ``global_step_<n>`` save
    (verl/trainer/ppo/ray_trainer.py `_save_checkpoint`); NeMo RL renames ``tmp_step_<n>`` to
    ``step_<n>`` once a save is complete (nemo_rl/utils/checkpoint.py CheckpointManager, the
    stored version; the same layout in its v0.5.0 docs is unconfirmed)."""
    root = Path(checkpoint_dir)
    step = tracker_step(root)
    if step is not None:
        return step
    try:
        steps = [int(m.group(1)) for p in root.iterdir() if p.is_dir()
                 for m in [_STEP_DIR.match(p.name)] if m]
    except OSError:
        return None
    return max(steps) if steps else None


def check_writable(directory: str | Path) -> str | None:
    """None if a file can be created in ``directory`` (created if missing), else why not. Only
    the probe file this creates is ever removed."""
    path = Path(directory)
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".gke-grpo-write-probe-"):
            pass
    except OSError as exc:
        return f"{path} is not writable: {exc.strerror or exc}"
    return None
