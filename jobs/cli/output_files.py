"""Where the CLI writes (``plot --out FILE``, ``report --out DIR``): checked before any work, so
a path that cannot be written is a usage error with its own words (exit 2), and written so that
a failure is reported, never hidden or hung on:

    check_output_file("--out", "run.png")      # UsageError: a directory, under a file, read-only
    check_output_dir("--out", "report-RUN")
    write_output(path, data)                   # OSError with the errno when it fails

Writing opens with O_NONBLOCK: a FIFO nobody reads fails at once (ENXIO) instead of blocking
the CLI forever, while ``--out /dev/stdout`` into a pipe still works. The data is flushed and
fsynced by us: matplotlib's own file writing does not report every failed write (savefig to
/dev/full returns normally, matplotlib 3.11.2), so a full disk would pass for a file written.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from pathlib import Path

from jobs.cli.target import UsageError
from jobs.contract.credentials import redact


def _shown(path: str | Path) -> str:
    return redact(str(path))[:300]


def _nearest_existing(path: Path) -> Path:
    current = path.absolute()
    while not os.path.lexists(current) and current != current.parent:
        current = current.parent
    return current


def _check_parent(flag: str, path: Path) -> None:
    ancestor = _nearest_existing(path.parent)
    if not ancestor.is_dir():
        raise UsageError(f"{flag} {_shown(path)}: {_shown(ancestor)} is not a directory, so nothing "
                         "can be written below it")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise UsageError(f"{flag} {_shown(path)}: {_shown(ancestor)} is not writable")


def check_output_file(flag: str, text: str) -> Path:
    """A file the command may create or replace: not a directory, below a writable directory."""
    if not text or "\x00" in text:
        raise UsageError(f"{flag}: give a file name such as run.png")
    path = Path(text)
    if path.is_dir():
        raise UsageError(f"{flag} {_shown(path)} is a directory: give a file name such as "
                         f"{_shown(path / 'run.png')}")
    if os.path.lexists(path):
        if not os.access(path, os.W_OK):
            raise UsageError(f"{flag} {_shown(path)} is not writable")
        return path
    _check_parent(flag, path)
    return path


def check_output_dir(flag: str, text: str) -> Path:
    """A directory the command may create or write into."""
    if not text or "\x00" in text:
        raise UsageError(f"{flag}: give a folder name")
    path = Path(text)
    if os.path.lexists(path):
        if not path.is_dir():
            raise UsageError(f"{flag} {_shown(path)} exists and is not a directory")
        if not os.access(path, os.W_OK | os.X_OK):
            raise UsageError(f"{flag} {_shown(path)} is not writable")
        return path
    _check_parent(flag, path)
    return path


def write_output(path: Path, data: bytes, *, follow_symlinks: bool = True) -> None:
    """Write ``data`` to ``path`` and make sure it landed; OSError (with its errno) otherwise.
    ``follow_symlinks=False`` for the files a command names itself inside its output folder (a
    symlink planted there must not redirect the write); a regular file, a character device
    (/dev/stdout, /dev/full) or a FIFO with a reader is written, anything else refused."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    if not follow_symlinks:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags, 0o644)
    try:
        mode = os.fstat(fd).st_mode
        if not (stat.S_ISREG(mode) or stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)):
            raise OSError(errno.EINVAL, "not a file that can be written")
        if not follow_symlinks and not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, "not a regular file")
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        try:
            os.fsync(fd)
        except OSError as exc:
            if exc.errno not in (errno.EINVAL, errno.EROFS, errno.ENOTSUP):   # devices and pipes cannot sync
                raise
    finally:
        os.close(fd)


def describe_write_error(exc: OSError) -> str:
    if exc.errno == errno.ENXIO:
        return "it is a FIFO that no process reads"
    if exc.errno == errno.ELOOP:
        return "it is a symlink (not followed inside an output folder)"
    return exc.strerror or type(exc).__name__
