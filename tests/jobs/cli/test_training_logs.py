"""Per-step metrics out of verl and NeMo RL console logs, and the plot drawn from them.

The fixtures follow the frameworks' real console formats:
- fixtures/verl_console.log: verl's ``LocalLogger`` (verl/utils/logger/aggregate_logger.py,
  ``concat_dict_to_str``: ``step:{step}`` then `` - {key}:{pprint.pformat(value)}``; numpy 2
  scalars print as ``np.float64(x)``), read from verl-project/verl @b017a833 on 2026-12-01; the
  ``(TaskRunner pid=N)`` prefix is Ray's, verl's trainer running in the TaskRunner actor.
- fixtures/nemo_rl_console.log: NeMo RL's ``grpo_train`` (nemo_rl/algorithms/grpo.py):
  ``========================= Epoch e/E ...``, ``... Step s/S ...`` counting within the epoch,
  ``📊 Validation Results:`` / ``• Accuracy:``, ``📊 Training Results:`` / ``• Loss:`` /
  ``• Avg Reward:`` / ``• Mean Generation Length:`` (NVIDIA-NeMo/RL, read 2026-12-01).
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from jobs.cli.plot import describe_records, plot_records
from jobs.cli.training_logs import ProgressTracker, StepRecord, merge_runs, parse_log, parse_verl_line, training_records

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
VERL = (FIXTURES / "verl_console.log").read_text()
NEMO = (FIXTURES / "nemo_rl_console.log").read_text()


def _values(records):
    return [(r.step, r.reward, r.response_length) for r in training_records(records)]


def test_verl_console_log_values():
    records = parse_log(VERL)
    assert _values(records) == [
        (1, 0.3125, 287.52), (2, 0.3711, 301.25), (3, 0.4404, 296.0), (4, 0.5017, 312.75),
        (5, 0.5625, 318.5), (6, 0.6016, 309.875)]
    by_step = {r.step: r for r in records}
    # validation before training is step 0; the step-5 validation line joins step 5's record
    assert by_step[0].val_reward == 0.4162 and not by_step[0].has_training
    assert by_step[5].val_reward == 0.5731 and by_step[5].reward == 0.5625
    assert by_step[1].metrics["actor/ppo_kl"] == pytest.approx(1.2e-05)
    assert by_step[1].metrics["actor/lr"] == pytest.approx(1e-06)
    assert by_step[1].metrics["training/global_step"] == 1


def test_verl_line_formats():
    plain = parse_verl_line("step:7 - critic/score/mean:0.5 - response_length/mean:12")
    assert (plain.step, plain.reward, plain.response_length) == (7, 0.5, 12.0)
    # critic/rewards/mean stands in when score is absent; ANSI colour and Ray prefix are ignored
    coloured = parse_verl_line("\x1b[36m(TaskRunner pid=9)\x1b[0m step:8 - critic/rewards/mean:np.float32(0.75)")
    assert (coloured.step, coloured.reward) == (8, 0.75)
    nan = parse_verl_line("step:9 - critic/score/mean:nan - response_length/mean:np.float64(1e+02)")
    assert nan.response_length == 100.0 and nan.reward != nan.reward
    for other in ("training/global_step:3 - x:1", "Training Progress: step:3", "steps:3 - a:1", ""):
        assert parse_verl_line(other) is None, other


def test_nemo_rl_console_log_values():
    records = parse_log(NEMO)
    # epoch 2 restarts the in-epoch counter at 1: global step = (epoch - 1) * 3 + step
    assert _values(records) == [
        (1, 0.2812, 402.125), (2, 0.3594, 388.5), (3, 0.4219, 371.0625),
        (4, 0.4844, 355.75), (5, 0.5156, 342.25)]
    by_step = {r.step: r for r in records}
    assert by_step[2].val_reward == 0.442 and by_step[5].val_reward == 0.561
    assert by_step[1].val_reward is None
    assert by_step[3].metrics["Loss"] == 0.0107
    assert "Total step time" not in by_step[3].metrics   # timing lines are not metrics


def test_nemo_rl_dynamic_sampling_reward_and_validation_at_start():
    text = "\n".join([
        "📊 Validation Results:", "    • Accuracy: 0.3000",
        "========================= Step 1/10 =========================",
        "📊 Training Results:", "  • Loss: 0.1", "  • Avg Filtered Reward: 0.9000",
        "  • Avg Total Reward: 0.4000", "  • Mean Generation Length: 50.0000"])
    records = parse_log(text, "nemo-rl")
    assert [(r.step, r.val_reward) for r in records if not r.has_training] == [(0, 0.3)]
    assert _values(records) == [(1, 0.4, 50.0)]   # the total, not the filtered, reward


def test_framework_detection_and_forcing():
    assert _values(parse_log(VERL, "nemo-rl")) == []
    assert _values(parse_log(NEMO, "verl")) == []
    assert len(_values(parse_log(VERL + NEMO))) == 6   # the framework with more steps wins


def test_attempts_merge_later_wins():
    first = parse_log("step:1 - critic/score/mean:0.1 - response_length/mean:10\n"
                      "step:2 - critic/score/mean:0.2 - response_length/mean:20\n")
    # attempt 2 resumed from the step-1 checkpoint and re-ran step 2
    second = parse_log("step:1 - val-core/openai/gsm8k/reward/mean@1:0.15\n"
                       "step:2 - critic/score/mean:0.25 - response_length/mean:22\n"
                       "step:3 - critic/score/mean:0.3 - response_length/mean:30\n")
    merged = merge_runs(first, second)
    assert _values(merged) == [(1, 0.1, 10.0), (2, 0.25, 22.0), (3, 0.3, 30.0)]
    assert merged[0].val_reward == 0.15


def test_progress_tracker_follows_split_chunks():
    tracker = ProgressTracker()
    assert tracker.describe() == "no training step logged yet"
    text = VERL
    for i in range(0, len(text), 37):       # chunks that cut lines anywhere
        tracker.feed(text[i:i + 37])
    assert (tracker.latest.step, tracker.latest.reward) == (6, 0.6016)
    assert tracker.describe() == "step 6, reward 0.6016, response length 309.9"
    nemo = ProgressTracker()
    nemo.feed(NEMO)
    assert (nemo.latest.step, nemo.latest.reward, nemo.latest.response_length) == (5, 0.5156, 342.25)


def _png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])


def test_plot_writes_png_of_parsed_values(tmp_path):
    records = parse_log(VERL)
    out = plot_records(records, tmp_path / "sub" / "verl.png", title="verl")
    width, height = _png_size(out)
    assert width > 500 and height > 400
    assert describe_records(records) == ("6 steps (1..6); reward 0.3125 -> 0.6016; "
                                "response length 287.5 -> 309.9")
    with pytest.raises(ValueError, match="no training step"):
        plot_records([StepRecord(step=0, val_reward=0.5)], tmp_path / "empty.png")
    assert not (tmp_path / "empty.png").exists()
