"""The jobs CLI's argument types, each checked at parse time with one clear message: counts,
seconds, ports and the Ray dashboard's address."""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable

from jobs.cli.target import UsageError
from jobs.contract.credentials import redact

# Longest --wait-timeout / --status-every accepted: a year (anything longer is a typo).
MAX_SECONDS = 366 * 24 * 3600.0


def whole_number(least: int) -> Callable[[str], int]:
    """An argparse type: a whole number of at least ``least``."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a whole number, got {text[:40]!r}") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"must be >= {least}, got {text[:40]}")
        return value
    return parse


positive_int = whole_number(1)
nonnegative_int = whole_number(0)

def positive_seconds(text: str) -> float:
    """A finite, positive number of seconds (not 0, -1, inf or nan), at most a year."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, got {text[:40]!r}") from None
    if not math.isfinite(value) or value <= 0 or value > MAX_SECONDS:
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds above 0 and at most "
                                         f"{MAX_SECONDS:.0f}, got {text[:40]}")
    return value

def run_id_text(text: str) -> str:
    """A run id as /data/runs/<run-id> and the Ray submission ids use it."""
    from jobs.contract.records import run_dir

    try:
        run_dir(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{redact(text)[:60]!r} is not a run id (letters, digits, "
                                         "'.', '_' and '-', starting with a letter or digit)") from None
    return text

def port_number(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a port number, got {text[:40]!r}") from None
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port between 1 and 65535, got {text}")
    return value

def dashboard_address(text: str, source: str = "--address") -> str:
    """A Ray dashboard URL, checked at once: http(s)://host[:port] with a port in 1-65535 and
    no credentials, path, query or fragment. Returns it without a trailing slash; UsageError
    (exit 2, before any connection) naming `source` otherwise."""
    from urllib.parse import urlsplit

    shown = redact(text)[:120]
    if any(ch.isspace() or ord(ch) < 32 for ch in text):
        raise UsageError(f"{source}: {shown!r} is not a dashboard URL: it contains blanks or "
                         "control characters")
    try:
        url = urlsplit(text.strip())
        port = url.port
    except ValueError as exc:
        raise UsageError(f"{source}: {shown!r} is not a dashboard URL ({exc}); expected "
                         "http://HOST:PORT such as http://127.0.0.1:8265") from None
    if url.scheme not in ("http", "https"):
        raise UsageError(f"{source}: {shown!r} is not a dashboard URL: the scheme must be http or "
                         "https (e.g. http://127.0.0.1:8265; ray:// and GCS addresses such as "
                         "127.0.0.1:6379 are for ray.init, not for jobs)")
    if not url.hostname:
        raise UsageError(f"{source}: {shown!r} has no host; expected http://HOST:PORT")
    if port is not None and not 1 <= port <= 65535:
        raise UsageError(f"{source}: port {port} is out of range (1-65535)")
    if url.username or url.password:
        raise UsageError(f"{source}: credentials in the URL are not accepted (they would be "
                         "printed and logged)")
    if url.path.strip("/") or url.query or url.fragment:
        raise UsageError(f"{source}: {shown!r} has a path, query or fragment; give the "
                         "dashboard's root, http://HOST:PORT")
    return f"{url.scheme}://{url.netloc}"

def resolve_address(args: argparse.Namespace) -> None:
    """--address, else $RAY_ADDRESS (as Ray's own job CLI does), validated before anything."""
    if getattr(args, "address", None) is not None:
        args.address = dashboard_address(args.address, "--address")
    elif os.environ.get("RAY_ADDRESS") and hasattr(args, "address"):
        args.address = dashboard_address(os.environ["RAY_ADDRESS"], "RAY_ADDRESS")
