"""What a reader of a run directory left out, counted: run artifacts are data, not trust, so a
record that cannot be used (a time of 1e308, a line that is not JSON, a FIFO where a file should
be) is skipped and counted, and the report and `status` say so in one line per kind of fault:

    3 lines of events.jsonl skipped: time out of range
    1 TensorBoard point of attempt-1-start-0 skipped: value not finite
    events.jsonl not read: it is a FIFO, not a regular events file
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass
class DataWarnings:
    # (noun, where, reason) -> how many: ("line", "events.jsonl", "time out of range")
    counts: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    notes: list[str] = field(default_factory=list)     # whole files or folders not read

    def skip(self, noun: str, where: str, reason: str, count: int = 1) -> None:
        self.counts[(noun, where, reason)] += count

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def extend(self, other: DataWarnings) -> None:
        self.counts.update(other.counts)
        for text in other.notes:
            self.note(text)

    @property
    def skipped(self) -> int:
        return sum(self.counts.values())

    def lines(self) -> list[str]:
        out = list(self.notes)
        for (noun, where, reason), count in sorted(self.counts.items()):
            out.append(f"{count} {noun}{'' if count == 1 else 's'} of {where} skipped: {reason}")
        return out

    def __bool__(self) -> bool:
        return bool(self.counts or self.notes)
