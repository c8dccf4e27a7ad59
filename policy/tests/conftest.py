"""The policy pack's tests run in policy/venv (`policy/venv/bin/python -m pytest policy/tests`),
never in the program's suite (pytest.ini: testpaths = tests; tests/test_policy_pack.py runs this
folder in a subprocess)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

POLICY_DIR = Path(__file__).resolve().parents[1]
if str(POLICY_DIR) not in sys.path:
    sys.path.insert(0, str(POLICY_DIR))

from harness import get_analyzer_info, serve_pack


@pytest.fixture(scope="session")
def pack():
    """policy/__main__.py served for real; the probe reads the pack's description over gRPC."""
    return serve_pack(get_analyzer_info)
