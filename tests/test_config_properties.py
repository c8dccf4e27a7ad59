"""Property-based: the committed stack files, mutated (types, values, unicode, injection strings,
nesting, unknown and secret-looking keys, bytes of the file itself), never crash, hang, leak or
lie. On every example:

- reading + validating raises nothing but the documented errors (ConfigFileError, ConfigError);
- a rejected config names keys of the stack (gke-grpo:... / gcp:...), echoes values truncated,
  and never prints the planted token, whichever key or value carries it;
- an accepted config gives a spec and preflight findings without an exception, and nothing it
  prints carries the token;
- through the whole program (offline preview): a rejected config registers no resource, and no
  output or message carries the token.

Deterministic (derandomize=True) and bounded: each test has an explicit example budget (below),
chosen for the time it may take in the normal test command; deadline=None.
"""

from __future__ import annotations

import copy
import json

import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from components.config import OFFLINE_SECRET_KEYS, ConfigError, load_stack_config
from components.run_spec import spec_from_config
from jobs.plan.preflight import check
from jobs.plan.stack_file import ConfigFileError, read_stack_file
from tests.conftest import ROOT
from tools.hostile_files import PLANTED_TOKEN
from tools.preview import render_json, run_with_config

STACKS = ("dev", "prod")
DOCUMENTS = {s: yaml.safe_load((ROOT / f"Pulumi.{s}.yaml").read_text()) for s in STACKS}
TEXTS = {s: (ROOT / f"Pulumi.{s}.yaml").read_bytes() for s in STACKS}
SETTINGS = dict(deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# Example budgets, for about a minute of the suite in all. Seconds per example measured 2026-12-06
# on the 2-core machine with another suite running beside it: reading + validating a mutated
# config 0.046 s; the whole program 0.04 s (most mutations are refused before any registration);
# a mutated file read and validated 0.013 s; a mutated file through the CLI and preflight 3.0 s
# (each runs the stack-file reader in a subprocess, as a user's command does).
CONFIG_EXAMPLES = 600          # ~28 s
WHOLE_PROGRAM_EXAMPLES = 100   # ~4 s
FILE_EXAMPLES = 400            # ~5 s
CLI_EXAMPLES = 12              # ~36 s

INJECTIONS = ["$(rm -rf /)", "; rm -rf / #", "`id`", "../../etc/passwd", "..", "/", "a/../../b",
              "{{7*7}}", "${HF_TOKEN}", "%s%s%n", "\x00", "\u202egnp.exe", "Ｑwen/Ｑwen", "\ud7ff",  # noqa: RUF001 (a look-alike model name is the point)
              "a" * 5000, "", " ", "\n", "null", "~", "true", "1e400", "-0", "0x10", "NaN",
              PLANTED_TOKEN, f"+trainer.hf_token={PLANTED_TOKEN}", f"password={PLANTED_TOKEN}",
              f"Qwen/{PLANTED_TOKEN}", f"https://x:{PLANTED_TOKEN}@example.com"]
SECRETISH_NAMES = ["hf_token", "HF_TOKEN", "hfToken ", "wandb_api_key", "wandbApiKey", "password",
                   "DB_PASSPHRASE", "apiKey", "secret"]


def scalars():
    return st.one_of(
        st.none(), st.booleans(),
        st.integers(min_value=-(10 ** 30), max_value=10 ** 30),
        st.sampled_from([0, -1, 1, 2 ** 31, 2 ** 63, 10 ** 400]),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=30),
        st.sampled_from(INJECTIONS),
    )


def values():
    return st.recursive(scalars(), lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.text(max_size=12), st.sampled_from(SECRETISH_NAMES)), inner, max_size=4)),
        max_leaves=12)


@st.composite
def mutated_configs(draw):
    """(stack, config mapping as a YAML document would give it) with one to three mutations."""
    stack = draw(st.sampled_from(STACKS))
    config = copy.deepcopy(DOCUMENTS[stack]["config"])
    for _ in range(draw(st.integers(1, 3))):
        key = draw(st.sampled_from(sorted(config) + [f"gke-grpo:{n}" for n in SECRETISH_NAMES] + ["gke-grpo:x"]))
        action = draw(st.sampled_from(["set-field", "set-field", "set-field", "replace", "delete", "add-field",
                                       "plausible", "plausible", "plausible"]))
        current = config.get(key)
        if action == "plausible" and isinstance(current, dict) and current:
            # a value of the same type, often one the rules accept: reaches the program's inner
            # code paths (preflight, the components) instead of stopping at the shape checks
            target = current
            field = draw(st.sampled_from(sorted(target)))
            old = target[field]
            if isinstance(old, bool):
                target[field] = draw(st.booleans())
            elif isinstance(old, int):
                target[field] = draw(st.sampled_from([old, old * 2, max(1, old // 2), 1, 0, 2 ** 31 - 1]))
            elif isinstance(old, float):
                target[field] = draw(st.sampled_from([old, old * 10, old / 10, 0.0, 1.0]))
            elif isinstance(old, str):
                target[field] = draw(st.sampled_from([old, old.upper(), old + "-x", old[:-1], *INJECTIONS[:12]]))
            elif isinstance(old, list) and old:
                target[field] = draw(st.sampled_from([old, old[:-1], old + old[:1], []]))
        elif action == "delete":
            config.pop(key, None)
        elif action == "replace" or not isinstance(current, dict):
            config[key] = draw(values())
        else:
            target = current
            # walk one level further into a nested object now and then (gpu.reservation, storage.gcs ...)
            nested = [k for k, v in target.items() if isinstance(v, dict)]
            if nested and draw(st.booleans()):
                target = target[draw(st.sampled_from(sorted(nested)))]
            if action == "add-field" or not target:
                field = draw(st.one_of(st.sampled_from(SECRETISH_NAMES), st.text(min_size=1, max_size=12)))
            else:
                field = draw(st.sampled_from(sorted(target)))
            target[field] = draw(values())
    return stack, config


def as_engine_config(config: dict) -> tuple[dict, set]:
    """What the reader hands the program (jobs/plan/stack_file.read_stack_file's conversion)."""
    raw, secrets = {}, set()
    for name, value in config.items():
        key = str(name) if ":" in str(name) else f"gke-grpo:{name}"
        if isinstance(value, dict) and set(value) == {"secure"}:
            raw[key], _ = "offline-preview-placeholder", secrets.add(key)
        elif isinstance(value, (dict, list)):
            raw[key] = json.dumps(value, default=str)
        elif isinstance(value, bool):
            raw[key] = "true" if value else "false"
        else:
            raw[key] = "" if value is None else str(value)
    for key in OFFLINE_SECRET_KEYS:   # as the offline readers do for an unset required secret
        if key not in raw:
            raw[key], _ = "offline-preview-placeholder", secrets.add(key)
    return raw, secrets


def _no_token(text: str) -> None:
    assert PLANTED_TOKEN not in text, text[:2000]
    assert PLANTED_TOKEN[3:20] not in text, text[:2000]


def _check_contract(stack: str, raw: dict, secrets: set) -> None:
    try:
        config = load_stack_config(raw, secrets, stack)
    except ConfigError as err:
        text = str(err)
        _no_token(text)
        assert err.problems
        for problem in err.problems:
            assert problem.key.startswith(("gke-grpo:", "gcp:")), problem.key
            assert len(str(problem)) < 1500, str(problem)[:300]
        return
    event("config accepted")
    spec = spec_from_config(config)
    findings = check(spec)
    for finding in findings:
        _no_token(str(finding))


@settings(max_examples=CONFIG_EXAMPLES, **SETTINGS)
@given(mutated_configs())
def test_mutated_configs_keep_the_contract(example):
    stack, config = example
    try:
        raw, secrets = as_engine_config(config)
    except (ValueError, RecursionError):
        return      # not representable as a Pulumi config (e.g. an int beyond str()'s limit)
    _check_contract(stack, raw, secrets)


@settings(max_examples=WHOLE_PROGRAM_EXAMPLES, **SETTINGS)
@given(mutated_configs())
def test_mutated_configs_through_the_whole_program(example):
    stack, config = example
    try:
        raw, secrets = as_engine_config(config)
    except (ValueError, RecursionError):
        return
    result = run_with_config(stack, raw, secrets)
    event("accepted" if result.error is None else "rejected")
    if result.problems:
        assert result.register_calls == 0, "a rejected config registered a resource"
    if result.error is not None:
        _no_token(result.error)
    else:
        _no_token(render_json(result))


@st.composite
def mutated_texts(draw):
    """The committed file's bytes with edits: inserted bytes or YAML-significant characters,
    a line duplicated, a span deleted, a line indented differently."""
    data = bytearray(TEXTS[draw(st.sampled_from(STACKS))])
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(data)))
        kind = draw(st.sampled_from(["bytes", "yaml", "dup-line", "delete", "indent"]))
        if kind == "bytes":
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "yaml":
            data[at:at] = draw(st.sampled_from([b"&a ", b"*a", b"[", b"]", b"{", b"}", b": ", b"- ", b"\t",
                                                b"!!python/name:os.system ", b"? ", b"|", b"'", b'"', b"#",
                                                b"<<: ", b"\n", b"%YAML 1.1\n", b"---\n", b"\xef\xbb\xbf",
                                                PLANTED_TOKEN.encode()]))
        elif kind == "dup-line":
            lines = bytes(data).split(b"\n")
            i = draw(st.integers(0, len(lines) - 1))
            lines.insert(i, lines[i])
            data = bytearray(b"\n".join(lines))
        elif kind == "delete":
            del data[at:at + draw(st.integers(1, 40))]
        else:
            lines = bytes(data).split(b"\n")
            i = draw(st.integers(0, len(lines) - 1))
            lines[i] = b" " * draw(st.integers(0, 6)) + lines[i].lstrip()
            data = bytearray(b"\n".join(lines))
    return bytes(data)


@settings(max_examples=FILE_EXAMPLES, **SETTINGS)
@given(mutated_texts())
def test_mutated_files_keep_the_contract(tmp_path_factory, data):
    path = tmp_path_factory.getbasetemp() / "Pulumi.mutated.yaml"
    path.write_bytes(data)
    try:
        raw, secrets = read_stack_file(path, OFFLINE_SECRET_KEYS)
    except ConfigFileError as err:
        text = str(err)
        assert "\n" not in text and str(path) in text and len(text) < 600, text
        _no_token(text)
        return
    _check_contract("dev", raw, secrets)


def test_the_strategies_reach_both_outcomes():
    """The suite is not vacuous: mutations produce accepted and rejected configs, and hit the
    secret-echo paths (a planted token under an unknown, a secret-looking and a known key)."""
    for changes, accepted in (({}, True), ({"gke-grpo:hf_token": PLANTED_TOKEN}, False),
                              ({"gke-grpo:job": {**DOCUMENTS["dev"]["config"]["gke-grpo:job"], "model": PLANTED_TOKEN}}, False)):
        config = {**copy.deepcopy(DOCUMENTS["dev"]["config"]), **changes}
        raw, secrets = as_engine_config(config)
        try:
            load_stack_config(raw, secrets, "dev")
            outcome = True
        except ConfigError as err:
            outcome = False
            _no_token(str(err))
        assert outcome is accepted


@settings(max_examples=CLI_EXAMPLES, **SETTINGS)
@given(mutated_texts())
def test_mutated_files_through_the_cli_and_preflight(tmp_path_factory, data):
    """The jobs CLI and preflight on the same mutated files: only their documented exit codes,
    no traceback or internal error, nothing secret."""
    import contextlib
    import io

    from jobs.cli import main as cli
    from jobs.cli import preflight as preflight_cli
    from jobs.cli.ray_jobs import RetryPolicy

    path = tmp_path_factory.getbasetemp() / "Pulumi.mutated-cli.yaml"
    path.write_bytes(data)
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(["status", "--stack", "dev", "--config-file", str(path), "--address", "http://127.0.0.1:1"],
                    out=out, err=err, retry=RetryPolicy(tries=1, call_timeout=2.0, budget=2.0))
    assert code in (2, 4), err.getvalue()          # invalid config, or nothing listening on port 1
    printed = out.getvalue() + err.getvalue()
    assert "Traceback" not in printed and "internal error" not in printed
    _no_token(printed)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = preflight_cli.main(["--stack", "dev", "--config-file", str(path)])
    assert code in (0, 2)
    printed = out.getvalue() + err.getvalue()
    assert "Traceback" not in printed
    _no_token(printed)
