"""Hostile stack files: what a confused user or an attacker could pass as
``--config-file``. Each case is a file (or a path) built from the committed Pulumi.dev.yaml, and
the phrase the one-line refusal must contain. Used by tests/jobs/plan/test_stack_file.py (the table
of named cases) and tools/bench_hostile.py (time and peak memory of the refusal)."""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# A token-shaped fake: it must never be printed, whichever way a file carries it.
PLANTED_TOKEN = "hf_" + "PlantedFakeToken0123456789abcdefgh"


@dataclass(frozen=True)
class HostileCase:
    name: str
    phrase: str           # what the refusal says (the file's path is always in it too)


CASES: tuple[HostileCase, ...] = (
    HostileCase("latin1-comment", "is not UTF-8: byte 0xe9 at offset"),
    HostileCase("utf16", "is not UTF-8: byte 0xff at offset 0"),
    HostileCase("random-bytes", "is not UTF-8"),
    HostileCase("nul-bytes", "a NUL character at offset"),
    HostileCase("alias-bomb", "YAML aliases (*a) are not accepted"),
    HostileCase("alias-merge", "YAML aliases (*base) are not accepted"),
    HostileCase("deep-lists", "nested deeper than 64 levels"),
    HostileCase("deep-maps", "nested deeper than 64 levels"),
    HostileCase("dev-zero", "is a character device, not a regular stack file"),
    HostileCase("directory", "is a directory, not a stack file"),
    HostileCase("fifo", "is a FIFO, not a regular stack file"),
    HostileCase("oversize", "is larger than 256 KiB"),
    HostileCase("huge-int", "is outside the 64-bit range the Pulumi CLI reads"),
    HostileCase("duplicate-area", "duplicate key 'gke-grpo:gpu' on line"),
    HostileCase("duplicate-field", "duplicate key 'nodes' on line"),
    HostileCase("python-tag", "is not valid YAML"),
    HostileCase("syntax-error-with-token", "is not valid YAML: line"),
    HostileCase("list-document", "expected a mapping with a `config:` mapping"),
    HostileCase("config-not-mapping", "expected a mapping with a `config:` mapping"),
    HostileCase("unhashable-key", "a mapping key must be a string"),
    HostileCase("missing", "cannot read"),
)


def _dev() -> str:
    return (ROOT / "Pulumi.dev.yaml").read_text()


def make(case: str, directory: Path) -> Path:
    """Create the hostile file `case` under `directory` (or return the path it is about)."""
    path = directory / f"Pulumi.{case}.yaml"
    dev = _dev()
    if case == "latin1-comment":
        path.write_bytes(dev.encode() + "# café\n".encode("latin-1"))
    elif case == "utf16":
        path.write_bytes(dev.encode("utf-16"))
    elif case == "random-bytes":
        path.write_bytes(bytes([0xC3, 0x28]) + random.Random(14).randbytes(64 * 1024))
    elif case == "nul-bytes":
        path.write_bytes(dev.encode() + b"\x00\x00")
    elif case == "alias-bomb":
        rows = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
        rows += [f"{chr(98 + i)}: &{chr(98 + i)} [{','.join(['*' + chr(97 + i)] * 9)}]" for i in range(8)]
        path.write_text("\n".join(rows) + "\nconfig:\n  gke-grpo:job: *i\n")
    elif case == "alias-merge":
        path.write_text("base: &base {nodes: 2}\nconfig:\n  gke-grpo:gpu:\n    <<: *base\n")
    elif case == "deep-lists":
        path.write_text("config:\n  gke-grpo:job: " + "[" * 10_000 + "]" * 10_000 + "\n")
    elif case == "deep-maps":
        path.write_text("config:\n  gke-grpo:job: " + "{a: " * 10_000 + "1" + "}" * 10_000 + "\n")
    elif case == "dev-zero":
        return Path("/dev/zero")
    elif case == "directory":
        path.mkdir(exist_ok=True)
    elif case == "fifo":
        if not path.exists():
            os.mkfifo(path)
    elif case == "oversize":
        path.write_text(dev + ("# padding " + "x" * 90 + "\n") * 3000)
    elif case == "huge-int":
        path.write_text(dev.replace("nodes: 2", "nodes: " + "9" * 5000))
    elif case == "duplicate-area":
        path.write_text(dev + "  gke-grpo:gpu:\n    type: nvidia-b200\n")
    elif case == "duplicate-field":
        path.write_text(dev.replace("    nodes: 2\n", "    nodes: 2\n    nodes: 4\n"))
    elif case == "python-tag":
        path.write_text(dev + '  gke-grpo:x: !!python/object/apply:os.system ["echo pwned"]\n')
    elif case == "syntax-error-with-token":
        path.write_text(dev + f"  gke-grpo:hf_token: [{PLANTED_TOKEN}\n   : : ]]\n")
    elif case == "list-document":
        path.write_text("- config\n- x\n")
    elif case == "config-not-mapping":
        path.write_text("config: [1, 2]\n")
    elif case == "unhashable-key":
        path.write_text("config:\n  ? [a, b]\n  : 1\n")
    elif case == "missing":
        return directory / "Pulumi.no-such-stack.yaml"
    else:
        raise KeyError(case)
    return path
