"""The one reader of the files a run's programs did not just write themselves: the stack file,
the run plan, events.jsonl, restarts.jsonl, health.json, console logs and TensorBoard event
files. The jobs CLI, preflight, the offline preview and the run driver read them through here,
so a hostile or broken file is refused the same way everywhere, in bounded time and memory,
with one line that names the file and what is wrong:

    read_bytes(path, RUN_PLAN)              -> bytes, or UnusableFile
    read_json(path, HEALTH_RESULT)          -> the JSON value, or UnusableFile
    json_lines(data, "events.jsonl")        -> (line number, object or None, why not)
    walk_files(root, within=run_dir, want=...) -> Walk(files, skipped)

- not a regular file (a directory, a FIFO, ``/dev/zero``, a socket): refused before reading.
  The file is opened with O_NONBLOCK, so a FIFO with no writer cannot block the open, and its
  type is checked on the open descriptor (fstat), so what is read is what was checked;
- larger than its kind's cap (``FileKind.max_bytes``, listed in docs/errors-and-guarantees.md):
  refused from its size, and never more than the cap + 1 byte is read (a file that grows);
- not UTF-8 where text is expected: refused with the byte offset;
- JSON nested deeper than ``MAX_JSON_DEPTH``: refused, never a RecursionError; an integer of
  more than ``MAX_INT_DIGITS`` digits is kept as an ``OversizedInteger`` (never converted: Python
  refuses 4,300+ digits with a ValueError), so a check can name the key that holds it;
- under a run directory (``within``): a path that resolves outside it (a symlink to ``/``) is
  refused, and a directory walk never follows a symlink out of it, never enters a directory twice
  (symlink loops), and stops at ``MAX_WALK_DEPTH`` levels and ``MAX_WALK_ENTRIES`` entries.

Messages never carry the file's content, and anything that looks like a credential in them is
redacted (jobs/contract/credentials.py). Standard library only: this runs on the Ray head too.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jobs.contract.credentials import redact

KIB = 1024
MIB = 1024 * KIB


@dataclass(frozen=True)
class FileKind:
    """What a file is to its reader: its name in messages ("not a regular <what>") and the most
    bytes a real one of its kind needs."""
    what: str
    max_bytes: int
    why: str = ""        # how the cap was chosen (docs/errors-and-guarantees.md shows it)


# Our stack files are 2-4 KiB; PyYAML's pure-Python loader reads about 1 MB/s on a slow core.
STACK_FILE = FileKind("stack file", 256 * KIB, "2-4 KiB in practice; YAML parses at ~1 MB/s")
# The plan the Pulumi program writes is ~8 KiB (the trainer's argv, the health gate's settings).
RUN_PLAN = FileKind("run plan", 1 * MIB, "~8 KiB in practice")
# ~200 bytes per stage boundary, a few dozen per trainer start.
EVENTS = FileKind("events file", 64 * MIB, "~200 bytes a record, a few dozen per trainer start")
RESTARTS = FileKind("restarts file", 16 * MIB, "~200 bytes a restart")
# Per-rank rows of the gate: ~1 KiB a GPU, so 16 MiB is far beyond a thousand nodes of 8 GPUs.
HEALTH_RESULT = FileKind("health result", 16 * MIB, "~1 KiB per GPU measured")
# A Ray job's driver log (trainer output included): verbose, but a log beyond this is better
# filtered first (`grep -E 'step:|Results|Step '`).
CONSOLE_LOG = FileKind("console log", 512 * MIB, "a verbose multi-day trainer log")
# One event file per trainer start: ~100 scalars a step at ~60 bytes each.
TENSORBOARD_EVENTS = FileKind("TensorBoard event file", 512 * MIB,
                              "~6 KiB a step: about 80,000 steps")
# What the driver reads back of its own and the trainer's small records on /data: the checkpoint
# tracker (verl writes one integer), staging markers and the GPU placement, each under 1 KiB.
RUN_RECORD = FileKind("run record", 1 * MIB, "the checkpoint tracker, staging markers, the GPU "
                      "placement: under 1 KiB each")
KINDS = (STACK_FILE, RUN_PLAN, EVENTS, RESTARTS, HEALTH_RESULT, CONSOLE_LOG, TENSORBOARD_EVENTS,
         RUN_RECORD)

# The deepest real document (the run plan's health gate) nests 4 levels; 64 is far above any real
# file and far below the recursion limit of Python's JSON and YAML parsers.
MAX_JSON_DEPTH = 64
# Wider than any count or size a run has (int64 is 19 digits); longer integers stay text.
MAX_INT_DIGITS = 30
# A run directory is <run>/tensorboard/attempt-A-start-S/[exp_NNN/tensorboard/]: 5 levels.
MAX_WALK_DEPTH = 16
MAX_WALK_ENTRIES = 100_000
_READ_CHUNK = 1 << 20


class UnusableFile(Exception):
    """A file that cannot be used: ``str()`` is one line naming the file (credential-shaped
    text redacted); ``reason`` is the same without the path; ``missing`` when it does not
    exist."""

    def __init__(self, path: object, reason: str, *, missing: bool = False, message: str | None = None):
        self.path = str(path)
        self.reason = redact(" ".join(str(reason).split()))
        self.missing = missing
        super().__init__(redact(" ".join((message or f"{path} {reason}").split())))


@dataclass(frozen=True)
class OversizedInteger:
    """A JSON integer too long to be a real count or size: kept as its length only."""
    digits: int

    def __repr__(self) -> str:
        return f"<a {self.digits}-digit integer>"


def cap_text(size: int) -> str:
    """256 KiB, 1 MiB, 512 MiB."""
    return f"{size // MIB} MiB" if size >= MIB and size % MIB == 0 else f"{size // KIB} KiB"


def _file_type(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def is_within(path: str | Path, root: str | Path) -> bool:
    """Whether ``path`` resolves (symlinks followed) to ``root`` or below it."""
    real, top = os.path.realpath(path), os.path.realpath(root)
    return real == top or real.startswith(top.rstrip(os.sep) + os.sep)


def _open_checked(path: Path, kind: FileKind) -> int:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise UnusableFile(path, "does not exist", missing=True,
                           message=f"cannot read {path}: it does not exist") from None
    except OSError as err:
        if err.errno == errno.EISDIR:
            raise UnusableFile(path, f"is a directory, not a {kind.what}") from None
        if err.errno == errno.ELOOP:
            raise UnusableFile(path, "is a symlink loop") from None
        raise UnusableFile(path, f"cannot be read: {err.strerror}",
                           message=f"cannot read {path}: {err.strerror}") from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise UnusableFile(path, f"is a directory, not a {kind.what}")
        if not stat.S_ISREG(mode):
            raise UnusableFile(path, f"is {_file_type(mode)}, not a regular {kind.what}")
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_bytes(path: str | Path, kind: FileKind, *, within: str | Path | None = None) -> bytes:
    """The whole file, if it is a regular file of at most ``kind.max_bytes`` (and, with
    ``within``, resolves inside that directory); UnusableFile otherwise."""
    path = Path(path)
    if within is not None and not is_within(path, within):
        raise UnusableFile(path, f"leads outside {within} (a symlink?): not read")
    fd = _open_checked(path, kind)
    try:
        too_big = f"is larger than {cap_text(kind.max_bytes)}: not a {kind.what}"
        if os.fstat(fd).st_size > kind.max_bytes:
            raise UnusableFile(path, too_big)
        chunks, size = [], 0
        while size <= kind.max_bytes:
            try:
                chunk = os.read(fd, min(_READ_CHUNK, kind.max_bytes + 1 - size))
            except OSError as err:
                raise UnusableFile(path, f"cannot be read: {err.strerror}",
                                   message=f"cannot read {path}: {err.strerror}") from None
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > kind.max_bytes:
            raise UnusableFile(path, too_big)
        return b"".join(chunks)
    finally:
        os.close(fd)


def decode_utf8(data: bytes, where: object) -> str:
    """UTF-8 bytes as text (a leading BOM dropped); UnusableFile with the byte offset otherwise."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise UnusableFile(where, f"is not UTF-8: byte 0x{data[err.start]:02x} at offset {err.start} "
                                  f"({err.reason}); save it as UTF-8") from None
    return text[1:] if text.startswith("\ufeff") else text


def read_text(path: str | Path, kind: FileKind, *, within: str | Path | None = None,
              errors: str = "strict") -> str:
    """The file as UTF-8 text. ``errors="replace"`` for logs, whose bytes are whatever a
    program printed; strict (UnusableFile with the offset) for everything structured."""
    data = read_bytes(path, kind, within=within)
    if errors == "strict":
        return decode_utf8(data, path)
    return data.decode("utf-8", errors=errors)


def _parse_int(text: str) -> int | OversizedInteger:
    digits = len(text.lstrip("-"))
    return int(text) if digits <= MAX_INT_DIGITS else OversizedInteger(digits)


def json_depth(value: Any) -> int:
    """How deeply lists and objects nest in a parsed JSON value (a scalar: 0)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in children)
    return deepest


class _JsonRefused(ValueError):
    pass


def parse_json(text: str) -> Any:
    """JSON text -> value, bounded: _JsonRefused (a ValueError) with a short reason that never
    quotes the text. NaN and Infinity parse (as the standard library does) for the checks to name."""
    try:
        value = json.loads(text, parse_int=_parse_int)
    except RecursionError:
        raise _JsonRefused(f"nested deeper than {MAX_JSON_DEPTH} levels") from None
    except json.JSONDecodeError as err:
        raise _JsonRefused(f"not JSON (line {err.lineno}, column {err.colno}: {err.msg})") from None
    except ValueError as err:          # e.g. a float literal Python cannot represent
        raise _JsonRefused(f"not JSON ({type(err).__name__})") from None
    if json_depth(value) > MAX_JSON_DEPTH:
        raise _JsonRefused(f"nested deeper than {MAX_JSON_DEPTH} levels")
    return value


def load_json_text(text: str, where: object) -> Any:
    try:
        return parse_json(text)
    except _JsonRefused as err:
        reason = str(err)
        raise UnusableFile(where, f"is {reason}" if reason.startswith("not ") else reason) from None


def read_json(path: str | Path, kind: FileKind, *, within: str | Path | None = None) -> Any:
    """A JSON file (UTF-8, bounded in size and depth) -> its value; UnusableFile otherwise."""
    return load_json_text(read_text(path, kind, within=within), path)


def json_if_usable(path: str | Path, kind: FileKind) -> Any:
    """The JSON value of a file the run's own programs write and read back (the health result,
    a staging marker, the GPU placement), or None when it is missing or unusable: to these
    readers a FIFO, a cut-off write or garbage there is a record not (yet) written, and the
    bounded read means none of them can block or exhaust the driver."""
    try:
        return read_json(path, kind)
    except UnusableFile:
        return None


def json_lines(data: bytes) -> Iterator[tuple[int, dict[str, Any] | None, str | None]]:
    """(line number, object, None) per JSON-object line of a JSONL file, or (line number, None,
    why not) for a line that is not one; blank lines are skipped. A half-written last line (a
    live run on a FUSE mount) is one such line, never an error."""
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            yield number, None, "not UTF-8"
            continue
        try:
            value = parse_json(text)
        except _JsonRefused as err:
            reason = str(err)
            yield number, None, reason.split(" (", 1)[0] if reason.startswith("not JSON") else reason
            continue
        if isinstance(value, dict):
            yield number, value, None
        else:
            yield number, None, "not a JSON object"


@dataclass
class Walk:
    """What a bounded walk found: regular files wanted, in a stable order, and one line per
    thing it did not read (relative to the walk's ``within``)."""
    files: list[Path] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


class _Walker:
    """One bounded walk (walk_files)."""

    def __init__(self, within: str | Path, want: Callable[[str], bool], max_depth: int, max_entries: int):
        self.within, self.want = within, want
        self.top = os.path.realpath(within)
        self.max_depth, self.max_entries = max_depth, max_entries
        self.found = Walk()
        self.seen: set[tuple[int, int]] = set()
        self.entries = 0

    def shown(self, path: str) -> str:
        rel = os.path.relpath(path, self.within)
        return rel if not rel.startswith("..") else path

    def inside(self, path: str) -> bool:
        real = os.path.realpath(path)
        return real == self.top or real.startswith(self.top.rstrip(os.sep) + os.sep)

    def skip(self, path: str, why: str) -> None:
        self.found.skipped.append(f"{self.shown(path)}: {why}")

    def listing(self, directory: str) -> list[os.DirEntry[str]] | None:
        """The directory's entries in name order; None when it was seen already or cannot be read."""
        try:
            info = os.stat(directory)
            if not stat.S_ISDIR(info.st_mode) or (info.st_dev, info.st_ino) in self.seen:
                return None
            self.seen.add((info.st_dev, info.st_ino))
            with os.scandir(directory) as listing:
                return sorted(listing, key=lambda e: e.name)
        except OSError as err:
            self.skip(directory, f"{err.strerror or err}: not read")
            return None

    def run(self, root: str) -> Walk:
        if not os.path.lexists(root):
            return self.found
        if not self.inside(root):
            self.skip(root, "leads outside the run directory (a symlink?): not followed")
            return self.found
        stack = [(root, 0)]
        while stack:
            directory, depth = stack.pop()
            below = []
            for entry in self.listing(directory) or []:
                self.entries += 1
                if self.entries > self.max_entries:
                    self.skip(root, f"more than {self.max_entries:,} entries: the rest not read")
                    return self.found
                if self.visit(entry, depth):
                    below.append((entry.path, depth + 1))
            stack.extend(reversed(below))      # depth first, in name order
        return self.found

    def visit(self, entry: os.DirEntry[str], depth: int) -> bool:
        """Records a wanted file or what was not read; True for a directory to enter."""
        if entry.is_symlink() and not self.inside(entry.path):
            self.skip(entry.path, "a symlink out of the run directory: not followed")
            return False
        try:
            mode = os.stat(entry.path).st_mode
        except OSError as err:
            self.skip(entry.path, f"{'a symlink loop' if err.errno == errno.ELOOP else err.strerror}: not read")
            return False
        if stat.S_ISDIR(mode):
            if depth + 1 > self.max_depth:
                self.skip(entry.path, f"deeper than {self.max_depth} levels: not read")
                return False
            return True
        if self.want(entry.name):
            if stat.S_ISREG(mode):
                self.found.files.append(Path(entry.path))
            else:
                self.skip(entry.path, f"{_file_type(mode)}, not a regular file: not read")
        return False


def walk_files(root: str | Path, *, within: str | Path, want: Callable[[str], bool],
               max_depth: int = MAX_WALK_DEPTH, max_entries: int = MAX_WALK_ENTRIES) -> Walk:
    """Regular files below ``root`` whose name ``want`` accepts, never leaving ``within``: a
    symlink that resolves outside it is not followed, a directory is entered once (a symlink
    loop ends there), at most ``max_depth`` levels and ``max_entries`` entries are looked at.
    Entries ``want`` accepts that are not regular files (a FIFO named like an event file) are
    reported in ``skipped``, as are the links not followed and the limits reached."""
    return _Walker(within, want, max_depth, max_entries).run(str(root))
