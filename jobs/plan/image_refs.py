"""Whether an image reference is pinned: one rule, standard library only.

jobs/plan/versions.py (the program, preflight, the config's PinnedImage type) imports it, and the
policy pack (policy/rules.py, its own virtualenv, importing nothing of the program) loads this
file by path, so a tag the preview refuses is the tag the policy refuses.
"""

from __future__ import annotations

import re

# Tags that move: an image pinned to one of these is not reproducible.
FLOATING_TAGS = re.compile(r"^(latest|nightly|stable|main|master|dev|edge|.*[.-]latest)$")


def image_reference_problem(reference: str) -> str | None:
    """Why an image reference is not a pin, or None when it is one (a non-floating tag or a
    digest)."""
    if "@sha256:" in reference:
        return None
    name, _, tag = reference.rpartition(":")
    if not name or "/" in tag:
        return "has no tag: pin a version tag or a digest"
    if FLOATING_TAGS.match(tag):
        return f"uses the floating tag {tag!r}: pin a version tag or a digest"
    return None
