"""The one credential rule (jobs/contract/credentials.py) on the shared lists of names and values
(tests/fixtures/credential-cases.json), and every caller of the program's side judging them the
same way: the stack config's messages, preflight's extraOverrides rule and the jobs CLI's
submission guard. The policy pack's tests run the same lists (policy/tests/test_credentials_rule.py)."""

from __future__ import annotations

import json

import pytest

from jobs.cli.ray_jobs import SecretInJobError, check_no_secrets
from jobs.contract import credentials
from tests.conftest import ROOT

CASES = json.loads((ROOT / "tests" / "fixtures" / "credential-cases.json").read_text())


@pytest.mark.parametrize("name", CASES["secret_names"])
def test_secret_names(name):
    assert credentials.looks_like_secret_name(name) is True


@pytest.mark.parametrize("name", CASES["ordinary_names"])
def test_ordinary_names(name):
    assert credentials.looks_like_secret_name(name) is False


@pytest.mark.parametrize("value", CASES["secret_values"])
def test_secret_values_are_found_and_redacted(value):
    assert credentials.looks_like_secret_value(value) is True
    kind = credentials.secret_value_kind(value)
    redacted = credentials.redact(value)
    assert credentials.REDACTED in redacted
    assert not credentials.looks_like_secret_value(redacted), redacted
    assert value not in kind and value not in redacted
    for secret in ("AbCdEfGh", "hunter2", "correct-horse", "0123456789abcdef", "abc123"):
        assert secret not in kind and secret not in redacted


@pytest.mark.parametrize("value", CASES["ordinary_values"])
def test_ordinary_values(value):
    assert credentials.looks_like_secret_value(value) is False
    assert credentials.redact(value) == value


def test_a_private_key_is_redacted_whole():
    pem = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----"
    assert credentials.redact(f"key: {pem} tail") == "key: [redacted] tail"


# ---- the callers ----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", CASES["secret_names"])
def test_cli_refuses_secret_env_names(name):
    with pytest.raises(SecretInJobError) as err:
        check_no_secrets("python3 train.py", {"env_vars": {name: "x"}})
    assert "the name looks like a credential" in str(err.value)


@pytest.mark.parametrize("name", CASES["ordinary_names"])
def test_cli_lets_ordinary_env_names_through(name):
    check_no_secrets("python3 train.py", {"env_vars": {name: "1"}})


@pytest.mark.parametrize("value", CASES["secret_values"])
def test_cli_refuses_secret_values_without_echoing_them(value):
    for entrypoint, env in ((f"python3 x.py {value}", None), ("python3 x.py", {"env_vars": {"EXTRA": value}})):
        with pytest.raises(SecretInJobError) as err:
            check_no_secrets(entrypoint, env)
        assert value not in str(err.value)


@pytest.mark.parametrize("value", CASES["ordinary_values"])
def test_cli_lets_ordinary_values_through(value):
    check_no_secrets(f"python3 x.py {value}", {"env_vars": {"EXTRA": value}})
