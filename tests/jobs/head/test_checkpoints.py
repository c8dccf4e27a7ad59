"""verl checkpoint pruning before a trainer start: the newest K stay, and always the one
latest_checkpointed_iteration.txt names; nothing is removed when that cannot be told."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from jobs.head import checkpoints as ckpt
from jobs.head.checkpoints import prune_verl_checkpoints
from jobs.plan.checkpoint_storage import checkpoints_on_disk


def make_tree(root: Path, steps, latest=None) -> Path:
    """A verl checkpoint directory as verl lays it out: global_step_N/actor/... and the tracker."""
    for step in steps:
        actor = root / f"global_step_{step}" / "actor"
        actor.mkdir(parents=True)
        (actor / "model_world_size_16_rank_0.pt").write_bytes(b"weights")
        (root / f"global_step_{step}" / "data.pt").write_bytes(b"dataloader")
    if latest is not None:
        (root / "latest_checkpointed_iteration.txt").write_text(str(latest))
    return root


def names(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir())


def test_six_steps_keep_two_leaves_the_two_newest_and_the_latest_named(tmp_path):
    # Steps 10..60; the tracker names 30 (the saves of 40..60 are what a restart left behind).
    root = make_tree(tmp_path / "run", [10, 20, 30, 40, 50, 60], latest=30)
    removed = prune_verl_checkpoints(root, keep=2)
    assert [p.name for p in removed] == ["global_step_10", "global_step_20", "global_step_40"]
    assert names(root) == ["global_step_30", "global_step_50", "global_step_60",
                           "latest_checkpointed_iteration.txt"]
    assert (root / "global_step_30" / "actor" / "model_world_size_16_rank_0.pt").read_bytes() == b"weights"
    # Pruning again removes nothing.
    assert prune_verl_checkpoints(root, keep=2) == []


def test_latest_among_the_newest_keeps_exactly_k(tmp_path):
    root = make_tree(tmp_path / "run", range(1, 7), latest=6)
    assert len(prune_verl_checkpoints(root, keep=2)) == 4
    assert names(root) == ["global_step_5", "global_step_6", "latest_checkpointed_iteration.txt"]


@pytest.mark.parametrize("tracker", [None, "", "not-a-number", "70"],
                         ids=["missing", "empty", "garbled", "names-a-missing-step"])
def test_nothing_removed_when_the_complete_checkpoint_cannot_be_told(tmp_path, tracker):
    root = make_tree(tmp_path / "run", [10, 20, 30, 40])
    if tracker is not None:
        (root / "latest_checkpointed_iteration.txt").write_text(tracker)
    before = names(root)
    assert prune_verl_checkpoints(root, keep=1) == []
    assert names(root) == before


def test_only_global_step_directories_are_touched(tmp_path):
    root = make_tree(tmp_path / "run", [1, 2, 3, 4], latest=4)
    (root / "global_step_2.tmp").mkdir()            # not a step directory verl finished naming
    (root / "global_step_x").mkdir()
    (root / "global_step_1_backup").write_text("a file")
    (root / "tensorboard").mkdir()
    target = tmp_path / "elsewhere"
    make_tree(target, [0])
    (root / "global_step_0").symlink_to(target / "global_step_0")  # never followed or removed
    prune_verl_checkpoints(root, keep=1)
    assert names(root) == ["global_step_0", "global_step_1_backup", "global_step_2.tmp",
                           "global_step_4", "global_step_x", "latest_checkpointed_iteration.txt",
                           "tensorboard"]
    assert (target / "global_step_0" / "data.pt").exists()


def test_missing_directory_and_bad_keep(tmp_path):
    assert prune_verl_checkpoints(tmp_path / "never-written", keep=2) == []
    with pytest.raises(ValueError, match="keep at least 1"):
        prune_verl_checkpoints(tmp_path, keep=0)


def test_checkpoints_on_disk():
    # verl: keep + the tracker's + max(keep, 2) of the new start; NeMo RL: keep + 2 tmp_step.
    assert checkpoints_on_disk("verl", 1) == 4
    assert checkpoints_on_disk("verl", 2) == 5
    assert checkpoints_on_disk("verl", 3) == 7
    assert checkpoints_on_disk("nemo-rl", 3) == 5


@pytest.mark.parametrize("version", ["0.9.1", "0.7.1"])
def test_the_tracker_and_step_directories_are_what_each_verl_release_writes(version):
    """verl's own get_checkpoint_tracker_filename (verl/utils/checkpoint/checkpoint_manager.py,
    executed from each release's source) and the step directory its trainer saves to (0.7.1:
    trainer/ppo/ray_trainer.py _save_checkpoint; 0.9.1: trainer/ppo/v1/trainer_base.py
    _save_checkpoint), which the driver reads and prunes."""
    import ast as python_ast

    from tools import verl_snapshot

    tree = verl_snapshot.tree(version)
    manager = tree / "utils" / "checkpoint" / "checkpoint_manager.py"
    if not manager.is_file():
        from tests.conftest import skip_or_fail

        skip_or_fail(f"{manager} is missing (make setup installs every verl release in .verl-trees)")
    module = python_ast.parse(manager.read_text())
    (fn,) = [n for n in module.body if isinstance(n, python_ast.FunctionDef)
             and n.name == "get_checkpoint_tracker_filename"]
    namespace: dict = {"os": os}
    exec(compile(python_ast.Module(body=[fn], type_ignores=[]), str(manager), "exec"), namespace)
    assert namespace["get_checkpoint_tracker_filename"]("/run") == f"/run/{ckpt.VERL_TRACKER}"
    trainer = tree / "trainer" / "ppo" / ("v1/trainer_base.py" if version == "0.9.1" else "ray_trainer.py")
    assert 'f"global_step_{self.global_steps}"' in trainer.read_text()
