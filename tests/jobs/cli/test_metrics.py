"""jobs/cli/metrics.py reads the frameworks' TensorBoard files with TensorBoard's own reader.

The event files are real: TensorBoard's EventFileWriter with one ``Summary.Value(tag,
simple_value)`` per scalar, which is what torch's SummaryWriter.add_scalar writes
(torch/utils/tensorboard/summary.py scalar(), new_style False) and what both frameworks call:
verl v0.7.1 verl/utils/tracking.py ``_TensorboardAdapter.log``: ``add_scalar(key, data[key],
step)`` for every key of the step's metrics; NeMo RL v0.5.0 nemo_rl/utils/logger.py
``TensorboardLogger.log_metrics``: ``add_scalar(f"{prefix}/{name}", value, step)``. The tags are
the frameworks' own (see the table in jobs/cli/metrics.py for the source of each).
"""

from __future__ import annotations

import pytest

from jobs.cli.metrics import describe_latest, detect_framework, read_run_metrics
from jobs.contract.records import tensorboard_dir
from tools.synthetic_run import write_scalar_events

# verl v0.7.1: verl/trainer/ppo/metric_utils.py (compute_data_metrics, compute_timing_metrics,
# compute_throughout_metrics), ray_trainer.py ("perf/mfu/actor", val-core/... in _val_metrics_update)
VERL_STEP = {"critic/score/mean": 0.5, "critic/rewards/mean": 0.49, "response_length/mean": 300.0,
             "timing_s/step": 62.5, "perf/throughput": 2400.0, "perf/time_per_step": 62.5,
             "perf/mfu/actor": 0.31, "actor/pg_loss": 0.01}
# NeMo RL v0.5.0: nemo_rl/algorithms/grpo.py grpo_train: log_metrics(metrics, prefix="train"),
# (timing_metrics, prefix="timing/train"), (performance_metrics, prefix="performance"),
# (val_metrics, prefix="validation"); algorithms/utils.py print_performance_metrics
NEMO_STEP = {"train/reward": 0.6, "train/mean_gen_tokens_per_sample": 250.0, "train/loss": 0.02,
             "timing/train/total_step_time": 80.0, "timing/train/valid_tokens_per_sec_per_gpu": 1900.0,
             "performance/tokens_per_sec_per_gpu": 2100.0, "performance/train_fp_utilization": 0.28,
             "timing/train/checkpointing": 0.0}


def points(step_values: dict[str, float], step: int, wall: float, scale: float = 1.0):
    return [(tag, step, value * (scale if tag.endswith(("mean", "reward")) else 1.0), wall)
            for tag, value in step_values.items()]


def test_verl_tags(tmp_path):
    d = tensorboard_dir(tmp_path, 1, 0)
    write_scalar_events(d, [("val-core/openai/gsm8k/reward/mean@1", 0, 0.41, 100.0),      # val_before_train
                            *points(VERL_STEP, 1, 200.0), *points(VERL_STEP, 2, 260.0, scale=1.2)])
    m = read_run_metrics(tmp_path)
    assert m.framework == "verl"
    rows = m.merged()
    assert [r.step for r in rows] == [0, 1, 2]
    assert rows[0].get("val_reward") == pytest.approx(0.41) and not rows[0].is_training
    last = rows[-1]
    assert last.get("reward") == pytest.approx(0.6)             # critic/score/mean, not rewards/mean
    assert last.get("response_length") == pytest.approx(360.0)
    assert last.get("step_time") == 62.5 and last.get("tokens_per_sec_per_gpu") == 2400.0
    assert last.get("mfu") == pytest.approx(0.31) and last.wall_time == 260.0
    assert describe_latest(m.latest()) == ("step 2, reward 0.6000, response length 360.0, step time "
                                           "62.5 s, 2,400 tokens/s/GPU, MFU 31.0%")
    records = m.step_records()
    assert records[0].val_reward == pytest.approx(0.41) and records[2].metrics["tokens_per_sec_per_gpu"] == 2400.0


def test_nemo_rl_tags_under_exp_dirs(tmp_path):
    # NeMo RL writes <logger.log_dir>/exp_NNN/tensorboard (nemo_rl/utils/logger.py Logger.__init__,
    # examples/run_grpo_math.py get_next_experiment_dir).
    base = tmp_path / "tensorboard" / "attempt-1-start-0" / "exp_001" / "tensorboard"
    write_scalar_events(base, [("validation/accuracy", 0, 0.55, 50.0), *points(NEMO_STEP, 1, 150.0)])
    m = read_run_metrics(tmp_path)
    assert m.framework == "nemo-rl"
    step0, step1 = m.merged()
    assert step0.step == 0 and step0.get("val_reward") == pytest.approx(0.55)
    assert step1.get("reward") == pytest.approx(0.6)
    assert step1.get("response_length") == 250.0
    assert step1.get("step_time") == 80.0
    assert step1.get("tokens_per_sec_per_gpu") == 1900.0       # valid_tokens_per_sec_per_gpu first
    assert step1.get("mfu") == pytest.approx(0.28)


def test_later_start_wins_and_validation_on_resume_keeps_training_values(tmp_path):
    write_scalar_events(tensorboard_dir(tmp_path, 1, 0), points(VERL_STEP, 1, 10.0) + points(VERL_STEP, 2, 20.0)
                        + points(VERL_STEP, 3, 30.0))
    # start 1 resumes from checkpoint 2: verl validates at the resume step, then redoes step 3
    write_scalar_events(tensorboard_dir(tmp_path, 1, 1), [("val-core/openai/gsm8k/reward/mean@1", 2, 0.7, 40.0),
                                                          *points(VERL_STEP, 3, 50.0, scale=2.0)])
    m = read_run_metrics(tmp_path)
    rows = {r.step: r for r in m.merged()}
    assert rows[2].get("reward") == pytest.approx(0.5) and rows[2].get("val_reward") == pytest.approx(0.7)
    assert rows[3].get("reward") == pytest.approx(1.0) and (rows[3].attempt, rows[3].start) == (1, 1)
    assert [(s.attempt, s.start, len(s.training_steps)) for s in m.starts] == [(1, 0, 3), (1, 1, 1)]


def test_a_truncated_live_file_reads_up_to_the_last_whole_record(tmp_path):
    d = tensorboard_dir(tmp_path, 1, 0)
    write_scalar_events(d, points(VERL_STEP, 1, 10.0) + points(VERL_STEP, 2, 20.0))
    (event_file,) = list(__import__("pathlib").Path(d).iterdir())
    data = event_file.read_bytes()
    event_file.write_bytes(data[:-7])                          # the writer is mid-record
    m = read_run_metrics(tmp_path)
    # only step 2's last scalar (actor/pg_loss, unused) was cut: the rest of step 2 is there
    assert m.latest().step == 2 and m.latest().get("mfu") == pytest.approx(0.31)
    assert m.merged()[0].get("reward") == pytest.approx(0.5)


def test_no_files_no_metrics(tmp_path):
    m = read_run_metrics(tmp_path)
    assert m.empty and m.latest() is None and m.framework is None
    assert describe_latest(None).startswith("no training step")


def test_detect_framework():
    assert detect_framework(VERL_STEP) == "verl"
    assert detect_framework(NEMO_STEP) == "nemo-rl"
    assert detect_framework(["something/else"]) is None
