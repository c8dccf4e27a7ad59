"""Per-step metrics from the frameworks' own TensorBoard event files under the run directory:
<run dir>/tensorboard/attempt-<a>-start-<s>/ (one folder per trainer start; jobs/contract/records.py).

    read_run_metrics(run_dir) -> RunMetrics(starts=[StartMetrics...], framework)
    RunMetrics.merged() -> [StepMetrics]       # one per step, a later start wins
    RunMetrics.step_records() -> [jobs.logs.StepRecord]   # what jobs/cli/plot.py draws

The files are found by a bounded walk that never leaves the run directory (a tensorboard/ folder
that is a symlink to ``/`` is not walked) and read through the one safe reader
(jobs/contract/safe_files.py: regular files only, 512 MiB each at most); the records are
TFRecords of TensorBoard's Event protos, decoded with TensorBoard's own proto and CRC-32C
(tensorboard==2.21.0, requirements-dev.txt; the framing and checks of its record reader,
tensorboard/compat/tensorflow_stub/pywrap_tensorflow.py ``PyRecordReader_New.GetNext``), keeping
what its EventAccumulator keeps as SCALARS: every ``Summary.Value`` with a ``simple_value``. This
runs on the laptop (status, plot, report), never on the Ray head. A live event file may end in a
half-written record: reading stops there, as TensorBoard's loader does. A point with an absurd
step, wall time or value (NaN, 1e308) is skipped and counted (``RunMetrics.warnings``).

The tags, per framework, each the framework's own definition (first tag present wins):

verl v0.7.1 (trainer.logger includes tensorboard; verl/utils/tracking.py _TensorboardAdapter
writes every key of the step's metrics dict with torch's SummaryWriter.add_scalar(key, value,
step); the keys:
  reward        critic/score/mean             verl/trainer/ppo/metric_utils.py compute_data_metrics
  length        response_length/mean          same
  step time     timing_s/step                 compute_timing_metrics ("timing_s/{name}"), the
                                              marked_timer("step") of ray_trainer.py fit()
  tokens/s/GPU  perf/throughput               compute_throughout_metrics: total_num_tokens /
                                              (timing_s/step x n_gpus)
  MFU           perf/mfu/actor                ray_trainer.py ("actor/mfu" renamed), estimated
                                              flops / promised flops / world size
  checkpoint    timing_s/save_checkpoint      marked_timer("save_checkpoint"), inside "step"
  validation    timing_s/testing              marked_timer("testing"), inside "step"
  val score     val-core/<source>/<var>/mean@N   ray_trainer.py _val_metrics_update; step 0 is
                                              val_before_train (logged at global_steps = 0)
  training health (the verl==0.7.1 release, the version `make test` installs; the mirror of
  verl's repository has no v0.7.1 tag, v0.7.0 is the nearest):
  KL            actor/kl_loss                 verl/workers/actor/dp_actor.py update_policy: the
                                              KL to the reference before kl_loss_coef (the
                                              rendered command sets actor.use_kl_loss=True)
  entropy       actor/entropy                 verl/trainer/ppo/ray_trainer.py fit(), from the
                                              old-log-prob pass (dp_actor.py too, when computed)
  grad norm     actor/grad_norm               dp_actor.py update_policy, per mini-batch
  clip fraction actor/pg_clipfrac             verl/trainer/ppo/core_algos.py compute_policy_loss_*
  lr            actor/lr                      verl/workers/fsdp_workers.py update_actor

NeMo RL v0.5.0 (logger.tensorboard_enabled; nemo_rl/utils/logger.py TensorboardLogger.log_metrics
writes f"{prefix}/{name}" with SummaryWriter.add_scalar; nemo_rl/algorithms/grpo.py grpo_train):
  reward        train/reward                  metrics["reward"] (mean; with dynamic sampling the
                                              total reward, as the console's "Avg Total Reward")
  length        train/mean_gen_tokens_per_sample   rollout_metrics (experience/rollouts.py)
  step time     timing/train/total_step_time  timer "total_step_time" (prefix timing/train)
  tokens/s/GPU  timing/train/valid_tokens_per_sec_per_gpu   global_valid_toks / total_step_time
                                              / (cluster.num_nodes x gpus_per_node)
  MFU           performance/train_fp_utilization   algorithms/utils.py print_performance_metrics,
                                              only when the policy reports its FLOPs
  checkpoint    timing/train/checkpointing    timer "checkpointing", inside total_step_time
  validation    timing/validation/total_validation_time   validate(); inside the step timer
                                              for periodic validation
  val score     validation/accuracy           step 0 is val_at_start
  training health (the train/ prefix; nemo_rl/algorithms/grpo.py grpo_train sums the loss
  function's per-micro-batch metrics, which are normalised globally, and means lr):
  KL            train/kl_penalty              nemo_rl/algorithms/loss_functions.py
                                              ClippedPGLossFn: kl / reference_policy_kl_penalty,
                                              the KL itself
  entropy       train/approx_entropy          loss_functions.py ClippedPGLossFn
  grad norm     train/grad_norm               grpo.py, train_results["grad_norm"]
  lr            train/lr                      nemo_rl/models/policy/workers/*_policy_worker.py
  (no clip fraction: NeMo RL logs probs_ratio_clamped, the mean clamped ratio, not a fraction)

A split layout's asynchronous trainer (jobs/contract/layouts.py) also logs how long each side
waited for the other; read only when the run's tags show that trainer (ASYNC_MARKERS), so a
colocated run's steps are what they were (jobs/cli/split_view.py shows them):
verl 0.9.1 fully-async (logged once per parameter sync, step = the parameter version; the
MetricsAggregator sums every timing_s/* over the sync cycle, experimental/fully_async_policy/
detach_utils.py:255-256):
  trainer wait  timing_s/gen                  fully_async_trainer.py:646, marked_timer("gen")
                                              around the wait on the rollouts' message queue
  step time     timing_s/step                 fully_async_trainer.py:559 (summed likewise)
  trainer idle  fully_async/trainer/idle_ratio   detach_utils.py:357-358: timing_s/gen /
                                              timing_s/step of the sync cycle
  rollouter idle fully_async/rollouter/idle_ratio   fully_async_rollouter.py:607-616: 1 - time
                                              generating / time since the last parameter sync
  weight sync   timing_s/timing_s/param_sync  fully_async_trainer.py:729 marks
                                              "timing_s/param_sync", prefixed again by
                                              trainer/ppo/metric_utils.py:645
verl 0.9.1 one-step-off (every step): timing_s/gen = the wait for the previous step's
background generation (experimental/one_step_off_policy/ray_trainer.py:389), beside
timing_s/generate_async, the generation itself (:234), and timing_s/sync_rollout_weights (:398).
NeMo RL v0.7.0 async GRPO (nemo_rl/algorithms/grpo.py async_grpo_train; the timer summed over
the step, :4231-4233, logged with prefix timing/train, :4302-4306):
  trainer wait  timing/train/exposed_generation   :3661 (sampling the replay buffer, waiting
                                              for enough trajectories) + :3977 (waiting for
                                              pending generations before the refit)
  step time     timing/train/total_step_time  :3658
  weight sync   timing/train/weight_sync      :3989
  trajectory age train/avg_trajectory_age     :4238
  (not performance/training_worker_idle_time_ratio: nemo_rl/algorithms/utils.py:745-748 makes it 0
  whenever exposed_generation > 0.1 s; the rollout side logs no idle figure)
"""

from __future__ import annotations

import math
import os
import re
import struct
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from jobs.cli.data_warnings import DataWarnings
from jobs.cli.training_logs import StepRecord
from jobs.contract.records import MAX_STEP, TENSORBOARD_DIR, parse_start_dir, plain_int, time_problem
from jobs.contract.safe_files import TENSORBOARD_EVENTS, UnusableFile, is_within, read_bytes, walk_files

# field -> tags, first present wins
VERL_TAGS: dict[str, tuple[str, ...]] = {
    "reward": ("critic/score/mean", "critic/rewards/mean"),
    "response_length": ("response_length/mean",),
    "step_time": ("timing_s/step", "perf/time_per_step"),
    "tokens_per_sec_per_gpu": ("perf/throughput",),
    "mfu": ("perf/mfu/actor",),
    "checkpoint_time": ("timing_s/save_checkpoint",),
    "validation_time": ("timing_s/testing",),
    "kl": ("actor/kl_loss",),
    "entropy": ("actor/entropy",),
    "grad_norm": ("actor/grad_norm",),
    "clip_fraction": ("actor/pg_clipfrac",),
    "lr": ("actor/lr",),
}
NEMO_RL_TAGS: dict[str, tuple[str, ...]] = {
    "reward": ("train/reward",),
    "response_length": ("train/mean_gen_tokens_per_sample",),
    "step_time": ("timing/train/total_step_time",),
    "tokens_per_sec_per_gpu": ("timing/train/valid_tokens_per_sec_per_gpu",
                               "performance/tokens_per_sec_per_gpu"),
    "mfu": ("performance/train_fp_utilization",),
    "checkpoint_time": ("timing/train/checkpointing",),
    "validation_time": ("timing/validation/total_validation_time",),
    "kl": ("train/kl_penalty",),
    "entropy": ("train/approx_entropy",),
    "grad_norm": ("train/grad_norm",),
    "lr": ("train/lr",),
}
FRAMEWORK_TAGS = {"verl": VERL_TAGS, "nemo-rl": NEMO_RL_TAGS}
# The asynchronous trainers' waits (see above), read when a tag of ASYNC_MARKERS is present.
ASYNC_TAGS: dict[str, dict[str, tuple[str, ...]]] = {
    "verl": {"trainer_wait": ("timing_s/gen",),
             "trainer_idle_ratio": ("fully_async/trainer/idle_ratio",),
             "rollouter_idle_ratio": ("fully_async/rollouter/idle_ratio",),
             "generation_time": ("timing_s/generate_async",),
             "weight_sync": ("timing_s/timing_s/param_sync", "timing_s/sync_rollout_weights")},
    "nemo-rl": {"trainer_wait": ("timing/train/exposed_generation",),
                "weight_sync": ("timing/train/weight_sync",),
                "trajectory_age": ("train/avg_trajectory_age",)},
}
ASYNC_MARKERS = {"verl": ("fully_async/trainer/idle_ratio", "fully_async/rollouter/idle_ratio",
                          "timing_s/generate_async"),
                 "nemo-rl": ("timing/train/exposed_generation",)}
ASYNC_FIELDS = ("trainer_wait", "trainer_idle_ratio", "rollouter_idle_ratio", "generation_time",
                "weight_sync", "trajectory_age")
_VERL_VAL = re.compile(r"^val-core/.+/(?:reward|acc)/mean@\d+$")
NEMO_RL_VAL_TAG = "validation/accuracy"

# The training-health curves of the report (jobs/cli/report_figures.py), in panel order.
HEALTH_FIELDS = ("kl", "entropy", "grad_norm", "clip_fraction", "lr")
FIELDS = ("reward", "response_length", "step_time", "tokens_per_sec_per_gpu", "mfu",
          "checkpoint_time", "validation_time", "val_reward", *HEALTH_FIELDS)
LABELS = {
    "reward": "reward (mean)",
    "response_length": "response length (tokens)",
    "step_time": "step time (s)",
    "tokens_per_sec_per_gpu": "tokens/s per GPU",
    "mfu": "MFU",
    "checkpoint_time": "checkpoint save (s)",
    "validation_time": "validation (s)",
    "val_reward": "validation score",
    "kl": "KL to the reference policy",
    "entropy": "policy entropy",
    "grad_norm": "gradient norm",
    "clip_fraction": "clipped fraction",
    "lr": "learning rate",
    "trainer_wait": "trainer wait for rollouts (s)",
    "trainer_idle_ratio": "trainer idle ratio",
    "rollouter_idle_ratio": "rollouter idle ratio",
    "generation_time": "generation (s)",
    "weight_sync": "weight sync (s)",
    "trajectory_age": "trajectory age (steps)",
}
_EVENT_FILE = "tfevents"


@dataclass
class StepMetrics:
    step: int
    wall_time: float                      # when the framework logged the step (event wall time)
    attempt: int = 0
    start: int = 0
    values: dict[str, float] = field(default_factory=dict)

    def get(self, name: str) -> float | None:
        value = self.values.get(name)
        return None if value is None or math.isnan(value) else value

    @property
    def is_training(self) -> bool:
        return any(self.get(k) is not None for k in ("reward", "response_length", "step_time"))


@dataclass
class StartMetrics:
    attempt: int
    start: int
    path: Path
    steps: list[StepMetrics]              # sorted by step
    tags: frozenset[str] = frozenset()

    @property
    def training_steps(self) -> list[StepMetrics]:
        return [s for s in self.steps if s.is_training]


@dataclass
class RunMetrics:
    framework: str | None
    starts: list[StartMetrics]            # in (attempt, start) order
    warnings: DataWarnings = field(default_factory=DataWarnings)   # what was not read, counted

    @property
    def empty(self) -> bool:
        return not any(s.steps for s in self.starts)

    def merged(self) -> list[StepMetrics]:
        """One row per step over all starts; a later start's values win (a resumed start
        re-logs the steps after its checkpoint), but a later validation-only row does not erase
        the training values of that step (verl validates on the resume step)."""
        by_step: dict[int, StepMetrics] = {}
        for start in self.starts:
            for row in start.steps:
                previous = by_step.get(row.step)
                if previous is not None and not row.is_training:
                    previous.values.update(row.values)
                    continue
                merged = StepMetrics(row.step, row.wall_time, row.attempt, row.start, dict(row.values))
                if previous is not None and "val_reward" in previous.values and "val_reward" not in merged.values:
                    merged.values["val_reward"] = previous.values["val_reward"]
                by_step[row.step] = merged
        return [by_step[s] for s in sorted(by_step)]

    def latest(self) -> StepMetrics | None:
        training = [r for r in self.merged() if r.is_training]
        return training[-1] if training else None

    def step_records(self) -> list[StepRecord]:
        out = []
        for row in self.merged():
            rec = StepRecord(step=row.step, reward=row.get("reward"),
                             response_length=row.get("response_length"), val_reward=row.get("val_reward"))
            rec.metrics = {k: v for k, v in row.values.items() if not math.isnan(v)}
            out.append(rec)
        return out


class _CorruptRecord(Exception):
    def __init__(self, offset: int):
        super().__init__(offset)
        self.offset = offset


def tf_records(data: bytes) -> Iterator[bytes]:
    """The records of a TFRecord file: uint64 length, masked CRC-32C of the length, the data,
    masked CRC-32C of the data (all little-endian). Ends at a truncated record (a live file);
    _CorruptRecord at a checksum that does not match."""
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    offset, size = 0, len(data)
    while offset + 12 <= size:
        header = data[offset:offset + 8]
        (length,) = struct.unpack("<Q", header)
        (header_crc,) = struct.unpack_from("<I", data, offset + 8)
        if masked_crc32c(header) != header_crc:
            raise _CorruptRecord(offset)
        end = offset + 12 + length
        if end + 4 > size:
            return
        payload = data[offset + 12:end]
        (payload_crc,) = struct.unpack_from("<I", data, end)
        if masked_crc32c(payload) != payload_crc:
            raise _CorruptRecord(offset)
        yield payload
        offset = end + 4


def _is_event_file(name: str) -> bool:
    return _EVENT_FILE in name


def read_event_file(path: Path, run_dir: Path, warnings: DataWarnings) -> dict[str, list[tuple[int, float, float]]]:
    """tag -> [(step, wall_time, value)] of every scalar (``simple_value``) in one event file;
    a file that cannot be read, or a corrupt record, is noted in ``warnings``."""
    from google.protobuf.message import DecodeError
    from tensorboard.compat.proto.event_pb2 import Event

    shown = path.relative_to(run_dir) if path.is_relative_to(run_dir) else path
    try:
        data = read_bytes(path, TENSORBOARD_EVENTS, within=run_dir)
    except UnusableFile as err:
        warnings.note(f"{shown} not read: it {err.reason}")
        return {}
    out: dict[str, list[tuple[int, float, float]]] = {}
    try:
        for record in tf_records(data):
            event = Event.FromString(record)
            for value in event.summary.value:
                if value.HasField("simple_value"):
                    out.setdefault(value.tag, []).append((event.step, event.wall_time, value.simple_value))
    except _CorruptRecord as err:
        warnings.note(f"{shown}: a corrupt record at byte {err.offset}: the rest of the file not read")
    except DecodeError:
        warnings.note(f"{shown}: a record that is not a TensorBoard event: the rest of the file not read")
    return out


def detect_framework(tags: Iterable[str]) -> str | None:
    tags = set(tags)
    verl = sum(1 for t in tags if t.startswith(("critic/", "timing_s/", "perf/", "response_length/"))
               or _VERL_VAL.match(t))
    nemo = sum(1 for t in tags if t.startswith(("train/", "timing/train/", "validation/", "performance/")))
    if not verl and not nemo:
        return None
    return "verl" if verl >= nemo else "nemo-rl"


def is_asynchronous(framework: str | None, tags: Iterable[str]) -> bool:
    """Whether the tags are those of a split layout's asynchronous trainer (ASYNC_MARKERS)."""
    markers = ASYNC_MARKERS.get(framework or "", ())
    return any(t in markers for t in tags)


def _val_tag(framework: str, tags: Iterable[str]) -> str | None:
    if framework == "nemo-rl":
        return NEMO_RL_VAL_TAG if NEMO_RL_VAL_TAG in tags else None
    candidates = sorted(t for t in tags if _VERL_VAL.match(t))
    return candidates[0] if candidates else None


# What a point of a mapped tag must be to be drawn: a step of a real run, a time a run had
# (jobs/contract/records.py), and a finite value no metric of ours reaches (rewards are O(1),
# tokens/s per GPU O(10^4), step times O(10^3) s).
MAX_METRIC_MAGNITUDE = 1e15


def point_problem(step: int, wall: float, value: float) -> str | None:
    """Why a TensorBoard point is not drawn, or None."""
    if plain_int(step, 0, MAX_STEP) is None:
        return "step out of range"
    problem = time_problem(wall)
    if problem:
        return problem.replace("time", "wall time", 1)
    if not math.isfinite(value):
        return "value not finite"
    if abs(value) > MAX_METRIC_MAGNITUDE:
        return "value out of range"
    return None


def steps_from_scalars(scalars: dict[str, list[tuple[int, float, float]]], framework: str,
                       attempt: int = 0, start: int = 0, warnings: DataWarnings | None = None,
                       where: str = "TensorBoard") -> list[StepMetrics]:
    """Rows per step from tag series; the latest wall time of a (tag, step) wins. Points with an
    absurd step, time or value are skipped and counted in ``warnings``."""
    tag_map = dict(FRAMEWORK_TAGS[framework])
    val = _val_tag(framework, scalars)
    if val:
        tag_map["val_reward"] = (val,)
    if is_asynchronous(framework, scalars):
        tag_map.update(ASYNC_TAGS[framework])
    rows: dict[int, StepMetrics] = {}
    for name, tags in tag_map.items():
        tag = next((t for t in tags if t in scalars), None)
        if tag is None:
            continue
        latest: dict[int, tuple[float, float]] = {}
        for step, wall, value in scalars[tag]:
            problem = point_problem(step, wall, value)
            if problem:
                if warnings is not None:
                    warnings.skip("TensorBoard point", where, problem)
                continue
            if step not in latest or wall >= latest[step][0]:
                latest[step] = (wall, value)
        for step, (wall, value) in latest.items():
            row = rows.setdefault(step, StepMetrics(step, wall, attempt, start))
            row.wall_time = max(row.wall_time, wall)
            row.values[name] = value
    return [rows[s] for s in sorted(rows)]


def _start_scalars(path: Path, run_dir: Path, warnings: DataWarnings) -> dict[str, list[tuple[int, float, float]]]:
    scalars: dict[str, list[tuple[int, float, float]]] = {}
    walk = walk_files(path, within=run_dir, want=_is_event_file)
    for text in walk.skipped:
        warnings.note(text)
    for file in walk.files:
        for tag, points in read_event_file(file, run_dir, warnings).items():
            scalars.setdefault(tag, []).extend(points)
    return scalars


def start_dirs(run_directory: str | Path, warnings: DataWarnings | None = None) -> list[tuple[int, int, Path]]:
    """(attempt, start, folder) of every trainer start folder, in order. A folder whose name is
    not attempt-A-start-S (a trainer started outside the driver) sorts first as attempt 0. Only
    folders inside the run directory count: a symlink out of it is noted, not followed; a symlink
    to another start's folder is not read twice."""
    warnings = warnings if warnings is not None else DataWarnings()
    run_dir = Path(run_directory)
    root = run_dir / TENSORBOARD_DIR
    if not root.is_dir():
        return []
    if not is_within(root, run_dir):
        warnings.note(f"{TENSORBOARD_DIR}: leads outside the run directory (a symlink?): not read")
        return []
    try:
        children = sorted(os.scandir(root), key=lambda e: (e.is_symlink(), e.name))
    except OSError as err:
        warnings.note(f"{TENSORBOARD_DIR}: {err.strerror or err}: not read")
        return []
    out, seen = [], set()
    for child in children:
        if not is_within(child.path, run_dir):
            warnings.note(f"{TENSORBOARD_DIR}/{child.name}: a symlink out of the run directory: not followed")
            continue
        real = os.path.realpath(child.path)
        if real in seen or not os.path.isdir(child.path):
            continue
        seen.add(real)
        attempt, start = parse_start_dir(child.name) or (0, 0)
        out.append((attempt, start, Path(child.path)))
    return sorted(out, key=lambda t: (t[0], t[1], t[2].name))


def read_run_metrics(run_directory: str | Path, framework: str | None = None) -> RunMetrics:
    """Every start's metrics; the framework is given (the spec's) or detected from all tags."""
    run_dir = Path(run_directory)
    warnings = DataWarnings()
    raw = [(a, s, path, _start_scalars(path, run_dir, warnings)) for a, s, path in start_dirs(run_dir, warnings)]
    framework = framework or detect_framework(t for *_, scalars in raw for t in scalars)
    starts = [StartMetrics(a, s, path, steps_from_scalars(scalars, framework, a, s, warnings, path.name)
                           if framework else [], frozenset(scalars))
              for a, s, path, scalars in raw]
    return RunMetrics(framework, starts, warnings)


def describe_latest(row: StepMetrics | None) -> str:
    """One line for `status`: the latest training step's metrics."""
    if row is None:
        return "no training step in the TensorBoard files yet"
    parts = [f"step {row.step}"]
    formats = (("reward", "reward {:.4f}"), ("response_length", "response length {:.1f}"),
               ("step_time", "step time {:.1f} s"), ("tokens_per_sec_per_gpu", "{:,.0f} tokens/s/GPU"),
               ("mfu", "MFU {:.1%}"))
    for name, fmt in formats:
        value = row.get(name)
        if value is not None:
            parts.append(fmt.format(value))
    return ", ".join(parts)


def series(rows: Sequence[StepMetrics], name: str) -> tuple[list[int], list[float]]:
    xs, ys = [], []
    for r in rows:
        v = r.get(name)
        if v is not None:
            xs.append(r.step)
            ys.append(v)
    return xs, ys
