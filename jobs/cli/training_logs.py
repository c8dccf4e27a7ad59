"""Per-step metrics out of verl and NeMo RL console logs (the Ray job's driver log).

Standard library only. Both parsers return ``StepRecord``s: the training step, the mean reward
of the step's rollouts, the mean response (generation) length in tokens and, when the step ran
a validation, its score. A log may hold several starts of the same run (a resumed attempt
re-logs a step): the last record of a step wins.

verl (``verl/utils/logger/aggregate_logger.py``, ``LocalLogger.log`` -> ``concat_dict_to_str``,
read from verl-project/verl @b017a833 on 2026-12-01) prints one line per step with
``trainer.logger`` containing ``console``::

    step:12 - critic/score/mean:0.53 - critic/rewards/mean:0.53 - response_length/mean:312.4 - ...

``f"{k}:{pprint.pformat(v)}"`` joined by " - ": with numpy 2 a numpy scalar prints as
``np.float64(0.53)``. verl's trainer runs in a Ray actor, so in the job log the line carries
Ray's prefix, e.g. ``(TaskRunner pid=1234) step:12 - ...``, sometimes with ANSI colours. The
reward is ``critic/score/mean`` (the rule reward; ``critic/rewards/mean`` adds the in-reward
KL penalty, the same for GRPO without ``use_kl_in_reward``), the length
``response_length/mean``; validation scores are ``val-core/<data source>/.../mean@N``, logged on
the step they ran at (``step:0`` for ``val_before_train``).

NeMo RL (``nemo_rl/algorithms/grpo.py``, ``grpo_train``; same block in the releases from
v0.3 to the 2026 main branch, read on 2026-12-01) prints per step::

    ========================= Epoch 1/2 =========================        (once per epoch)
    ========================= Step 3/29 =========================
    ...
    📊 Validation Results:          (only on validation steps, before the training results)
        • Accuracy: 0.6120
    📊 Training Results:
      • Loss: 0.0123
      • Generation KL Error: 0.0011
      • Avg Reward: 0.5312          (• Avg Filtered Reward / • Avg Total Reward with dynamic sampling)
      • Mean Generation Length: 312.4000

The step header counts within the epoch (``current_step + 1`` over ``min(len(dataloader),
max_num_steps)``), so the global step is ``(epoch - 1) * steps_per_epoch + step``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# One way to match each number (no nested optional digit runs): linear time on a line of a
# million digits.
_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|nan|inf|NaN|Infinity)"
# verl values: 0.53 | 3 | 1e-06 | nan | np.float64(0.53) | np.int64(3) | tensor(0.53)
_VERL_VALUE = re.compile(rf"^(?:[A-Za-z_][\w.]*\()?\s*({_NUMBER})\s*\)?$")
# At most 12 digits for a step, epoch or count: a longer one is no real step (and Python refuses
# to convert 4,300+ digits).
_VERL_STEP = re.compile(r"(?:^|[\s)\]])step:(\d{1,12}) - ")

VERL_REWARD_KEYS = ("critic/score/mean", "critic/rewards/mean")
VERL_LENGTH_KEY = "response_length/mean"

_NEMO_EPOCH = re.compile(r"=+ Epoch (\d{1,12})/(\d{1,12}) =+")
_NEMO_STEP = re.compile(r"=+ Step (\d{1,12})/(\d{1,12}) =+")
_NEMO_TRAIN = "📊 Training Results:"
_NEMO_VALID = "📊 Validation Results:"
# The line that opens a section of a step's block, and the section the metric lines below it
# belong to: "⏱️  Timing:" and "⏱️  Validation Timing:" open none (their figures are not metrics).
_NEMO_SECTIONS = ((_NEMO_TRAIN, "train"), (_NEMO_VALID, "valid"), ("Timing:", None))
_NEMO_METRIC = re.compile(rf"^\s*•\s*([A-Za-z][A-Za-z0-9 /()\-]*?):\s*({_NUMBER})")
NEMO_REWARD_LABELS = ("Avg Total Reward", "Avg Reward")   # first present wins
NEMO_LENGTH_LABEL = "Mean Generation Length"


@dataclass
class StepRecord:
    step: int
    reward: float | None = None
    response_length: float | None = None
    val_reward: float | None = None
    metrics: dict[str, float] = field(default_factory=dict)

    @property
    def has_training(self) -> bool:
        return self.reward is not None or self.response_length is not None


def _number_or_none(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _without_ansi(line: str) -> str:
    return _ANSI.sub("", line).rstrip("\r\n")


# ---- verl ------------------------------------------------------------------------------------

def parse_verl_line(line: str) -> StepRecord | None:
    """One verl console metrics line -> its record; None for any other line."""
    line = _without_ansi(line)
    match = _VERL_STEP.search(line)
    if not match:
        return None
    record = StepRecord(step=int(match.group(1)))
    for part in line[match.end():].split(" - "):
        key, sep, raw = part.strip().rpartition(":")
        if not sep or not key:
            continue
        value = _VERL_VALUE.match(raw.strip())
        if value is None:
            continue
        number = _number_or_none(value.group(1))
        if number is not None:
            record.metrics[key] = number
    for key in VERL_REWARD_KEYS:
        if key in record.metrics:
            record.reward = record.metrics[key]
            break
    record.response_length = record.metrics.get(VERL_LENGTH_KEY)
    val = sorted(k for k in record.metrics
                 if k.startswith("val-core/") and ("/reward/mean@" in k or "/acc/mean@" in k))
    if val:
        record.val_reward = record.metrics[val[0]]
    return record if record.metrics else None


# ---- NeMo RL ---------------------------------------------------------------------------------

class _NemoParser:
    """Line-by-line state machine over NeMo RL's step blocks."""

    def __init__(self) -> None:
        self.epoch = 1
        self.step: int | None = None        # global step of the block being read
        self.section: str | None = None     # "train" | "valid" | None
        self.current: StepRecord | None = None
        self.done: list[StepRecord] = []
        self.pending_val: float | None = None  # validation before the first step header

    def _close(self) -> None:
        if self.current is not None and (self.current.metrics or self.current.val_reward is not None):
            self.done.append(self.current)
        self.current = None

    def feed(self, line: str) -> None:
        line = _without_ansi(line)
        if (m := _NEMO_EPOCH.search(line)):
            self._close()
            self.epoch = int(m.group(1))
            self.section = None
            return
        if (m := _NEMO_STEP.search(line)):
            self._close()
            in_epoch, per_epoch = int(m.group(1)), int(m.group(2))
            self.step = (self.epoch - 1) * per_epoch + in_epoch
            self.current = StepRecord(step=self.step)
            self.section = None
            return
        for header, section in _NEMO_SECTIONS:
            if header in line:
                self.section = section
                return
        m = _NEMO_METRIC.match(line)
        if not m or self.section is None:
            return
        label, number = m.group(1).strip(), _number_or_none(m.group(2))
        if number is None:
            return
        if self.section == "valid":
            if label == "Accuracy":
                if self.current is None:          # validation at start (val_at_start): step 0
                    self.done.append(StepRecord(step=0, val_reward=number))
                else:
                    self.current.val_reward = number
            return
        if self.current is None:
            return
        self.current.metrics[label] = number
        for reward_label in NEMO_REWARD_LABELS:
            if reward_label in self.current.metrics:
                self.current.reward = self.current.metrics[reward_label]
                break
        if label == NEMO_LENGTH_LABEL:
            self.current.response_length = number

    def records(self, include_open: bool = True) -> list[StepRecord]:
        out = list(self.done)
        if include_open and self.current is not None and self.current.has_training:
            out.append(self.current)
        return out


# ---- both ------------------------------------------------------------------------------------

def _merge(records: Iterable[StepRecord]) -> list[StepRecord]:
    """Last record of a step wins, but a later validation-only record does not erase training
    values logged for the same step (verl logs a resumed run's validation on the resume step)."""
    by_step: dict[int, StepRecord] = {}
    for record in records:
        previous = by_step.get(record.step)
        if previous is not None and not record.has_training:
            previous.val_reward = record.val_reward if record.val_reward is not None else previous.val_reward
            previous.metrics.update(record.metrics)
            continue
        if previous is not None and record.val_reward is None:
            record.val_reward = previous.val_reward
        by_step[record.step] = record
    return [by_step[s] for s in sorted(by_step)]


def parse_log(text: str, framework: str | None = None) -> list[StepRecord]:
    """Per-step records of a whole log, sorted by step. ``framework`` is "verl", "nemo-rl" or
    None to detect it (whichever parser finds more steps)."""
    lines = text.splitlines()
    verl: list[StepRecord] = []
    nemo = _NemoParser()
    for line in lines:
        if framework in (None, "verl"):
            record = parse_verl_line(line)
            if record is not None:
                verl.append(record)
        if framework in (None, "nemo-rl"):
            nemo.feed(line)
    nemo_records = nemo.records()
    if framework == "verl":
        return _merge(verl)
    if framework == "nemo-rl":
        return _merge(nemo_records)
    return _merge(verl if len(verl) >= len(nemo_records) else nemo_records)


def merge_runs(*logs: list[StepRecord]) -> list[StepRecord]:
    """Records of several attempts of one run, in attempt order: later attempts win."""
    return _merge(r for log in logs for r in log)


def training_records(records: Iterable[StepRecord]) -> list[StepRecord]:
    return [r for r in records if r.has_training]


class ProgressTracker:
    """Follows a log as it streams in chunks (lines may be split across chunks) and keeps the
    latest training step seen, for the CLI's status line."""

    def __init__(self) -> None:
        self._partial = ""
        self._nemo = _NemoParser()
        self.latest: StepRecord | None = None
        self.lines = 0

    def feed(self, chunk: str) -> None:
        text = self._partial + chunk
        *complete, self._partial = text.split("\n")
        for line in complete:
            self.lines += 1
            record = parse_verl_line(line)
            if record is not None and record.has_training:
                self.latest = record
                continue
            self._nemo.feed(line)
            current = self._nemo.current
            if current is not None and current.has_training:
                self.latest = current

    def describe(self) -> str:
        r = self.latest
        if r is None:
            return "no training step logged yet"
        parts = [f"step {r.step}"]
        if r.reward is not None and not math.isnan(r.reward):
            parts.append(f"reward {r.reward:.4f}")
        if r.response_length is not None and not math.isnan(r.response_length):
            parts.append(f"response length {r.response_length:.1f}")
        return ", ".join(parts)
