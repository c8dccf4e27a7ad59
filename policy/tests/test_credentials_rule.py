"""The policy pack judges names and values with the program's credential rule
(jobs/contract/credentials.py, imported from the repository), on the same lists as the program's own tests
(tests/fixtures/credential-cases.json)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import rules

ROOT = Path(__file__).resolve().parents[2]
CASES = json.loads((ROOT / "tests" / "fixtures" / "credential-cases.json").read_text())


def test_the_rule_is_the_programs_module():
    assert Path(rules.credentials.__file__).resolve() == ROOT / "jobs" / "contract" / "credentials.py"


@pytest.mark.parametrize("name", CASES["secret_names"])
def test_secret_names(name):
    assert rules.credential_name(name) is True


@pytest.mark.parametrize("name", CASES["ordinary_names"])
def test_ordinary_names(name):
    assert rules.credential_name(name) is False


@pytest.mark.parametrize("value", CASES["secret_values"])
def test_secret_values_are_violations_without_the_value(value):
    assert rules.secret_looking(value)
    container = {"name": "c", "image": "x@sha256:" + "0" * 64, "env": [{"name": "EXTRA", "value": value}]}
    pod = {"spec": {"containers": [container]}}
    problems = rules.check_no_plaintext_secrets("kubernetes:core/v1:Pod", pod, "urn:pulumi:dev::p::t::n",
                                                "n", False, "dev")
    assert problems and all(value not in p for p in problems)


@pytest.mark.parametrize("value", CASES["ordinary_values"])
def test_ordinary_values_pass(value):
    assert rules.secret_looking(value) is None
    container = {"name": "c", "image": "x@sha256:" + "0" * 64, "env": [{"name": "EXTRA", "value": value}]}
    pod = {"spec": {"containers": [container]}}
    assert rules.check_no_plaintext_secrets("kubernetes:core/v1:Pod", pod, "urn:pulumi:dev::p::t::n",
                                            "n", False, "dev") == []
