"""No message echoes a secret: unknown keys (typos of hfToken), keys that look like credentials,
keys set with --secret (decrypted for the program), credentials in extraOverrides; through the
config, preflight, the preview and the jobs CLI. And a model id that used to crash jobs/contract/layout.py
is a config problem naming the key."""

from __future__ import annotations

import io

import pytest
import yaml

from components.config import ConfigError, load_stack_config
from components.run_spec import spec_from_config
from jobs.cli import main as cli
from jobs.plan.preflight import check
from tests.conftest import ROOT, preview_with, stack_config

TOKEN = "hf_" + "SecretTokenValue0123456789abcdefXY"


def _problems(raw, secrets, stack="dev") -> str:
    with pytest.raises(ConfigError) as err:
        load_stack_config(raw, secrets, stack)
    return str(err.value)


@pytest.mark.parametrize("key", ["gke-grpo:hf_token", "gke-grpo:HF_TOKEN", "gke-grpo:wandb_api_key",
                                 "gke-grpo:hftoken", "gke-grpo:token"])
@pytest.mark.parametrize("as_secret", [False, True])
def test_a_typo_of_a_secret_key_never_prints_its_value(key, as_secret):
    raw, secrets = stack_config("dev", {key: TOKEN})
    if as_secret:
        secrets = secrets | {key}
    text = _problems(raw, secrets)
    assert key in text and "unknown key" in text
    assert TOKEN not in text and "(value hidden)" in text


def test_unknown_fields_inside_an_area_are_not_echoed():
    text = _problems(*stack_config("dev", {"gke-grpo:job.hfTokn": "not-a-token-shape-but-private"}))
    assert "gke-grpo:job.hfTokn" in text and "not-a-token-shape-but-private" not in text


def test_an_area_set_as_secret_shows_no_value():
    raw, secrets = stack_config("dev", {"gke-grpo:job.experimentName": "Private Name!"})
    text = _problems(raw, secrets | {"gke-grpo:job"})
    assert "gke-grpo:job.experimentName" in text and "Private Name!" not in text


def test_a_token_in_any_value_is_redacted():
    text = _problems(*stack_config("dev", {"gke-grpo:cluster.name": f"x-{TOKEN}"}))
    assert "gke-grpo:cluster.name" in text and TOKEN not in text and "(value hidden)" in text


@pytest.mark.parametrize("override", [f"+trainer.hf_token={TOKEN}", "+trainer.hf_token=short",
                                      f"actor_rollout_ref.model.path=https://x:{TOKEN}@hf.co/m",
                                      "++data.wandb_api_key=abc123"])
def test_preflight_refuses_credentials_in_extra_overrides(override):
    raw, secrets = stack_config("dev", {"gke-grpo:job.extraOverrides": [override]})
    findings = [f for f in check(spec_from_config(load_stack_config(raw, secrets, "dev"))) if f.level == "error"]
    assert any("carries a credential" in f.message and f.key == "gke-grpo:job.extraOverrides" for f in findings)
    assert all(TOKEN not in str(f) and "abc123" not in str(f) for f in findings)


def test_the_program_stops_on_a_credential_override_before_any_resource():
    result = preview_with("dev", {"gke-grpo:job.extraOverrides": [f"+trainer.hf_token={TOKEN}"]})
    assert result.problems and result.register_calls == 0
    assert "carries a credential" in result.error and TOKEN not in result.error


def test_a_bad_model_id_is_a_config_problem_not_a_traceback():
    result = preview_with("dev", {"gke-grpo:job.model": "../../etc/passwd"})
    assert result.register_calls == 0
    assert [p.key for p in result.problems] == ["gke-grpo:job.model"]


def test_the_cli_and_preflight_do_not_print_a_typoed_token(tmp_path, capsys):
    document = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())
    document["config"]["gke-grpo:hf_token"] = TOKEN
    path = tmp_path / "Pulumi.typo.yaml"
    path.write_text(yaml.safe_dump(document))
    out, err = io.StringIO(), io.StringIO()
    assert cli.main(["status", "--stack", "dev", "--config-file", str(path), "--address", "http://127.0.0.1:1"],
                    out=out, err=err) == 2
    assert "gke-grpo:hf_token" in err.getvalue() and TOKEN not in err.getvalue() + out.getvalue()
    from jobs.cli import preflight as preflight_cli
    assert preflight_cli.main(["--stack", "dev", "--config-file", str(path)]) == 2
    captured = capsys.readouterr()
    assert "gke-grpo:hf_token" in captured.err and TOKEN not in captured.err + captured.out


# ---- messages that help: an unknown key's closest known key, its value when harmless ------------

@pytest.mark.parametrize(("change", "key", "suggestion", "shown"), [
    ({"gke-grpo:gpu.provisioningModle": "spot"}, "gke-grpo:gpu.provisioningModle", "provisioningModel", '"spot"'),
    ({"gke-grpo:job.microBatchSizePerGPU": 4}, "gke-grpo:job.microBatchSizePerGPU", "microBatchSizePerGpu", "4"),
    ({"gke-grpo:clustr": {"name": "x"}}, "gke-grpo:clustr", "gke-grpo:cluster", "(value hidden)"),
])
def test_an_unknown_key_names_the_closest_known_key_and_shows_a_harmless_value(change, key, suggestion, shown):
    text = _problems(*stack_config("dev", change))
    line = next(line for line in text.splitlines() if key + ":" in line)
    assert f"did you mean {suggestion}?" in line
    assert f"given {shown};" in line


def test_a_typo_of_a_credential_key_is_hidden_even_when_the_value_looks_harmless():
    text = _problems(*stack_config("dev", {"gke-grpo:job.hfTokn": "harmless-looking"}))
    assert "harmless-looking" not in text and "(value hidden)" in text


def test_the_secret_hint_is_whole():
    raw, _ = stack_config("dev", {"gke-grpo:hfToken": "plain"})
    text = _problems(raw, set())
    assert "must be stored as a secret (pulumi config set --secret gke-grpo:hfToken <value>)" in text
    assert "[redacted]" not in text
