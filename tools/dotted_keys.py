"""A framework's config tree as dotted keys and leaf values, one per line: how the verl key
snapshot (tools/verl_snapshot.py) and the NeMo RL key list (tools/nemo_rl_keys.py) are written, so
that a framework upgrade shows up as a readable diff in review."""

from __future__ import annotations

from typing import Any


def dotted_keys(node: Any, prefix: str = "") -> dict[str, Any]:
    """Dotted keys -> leaf values; an empty mapping (``{}``) and a list are leaves."""
    if isinstance(node, dict) and node:
        out: dict[str, Any] = {}
        for key, value in node.items():
            out.update(dotted_keys(value, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: node}
