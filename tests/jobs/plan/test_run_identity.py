"""A config change that the framework ignores but that changes the run id (jobs/plan/run_identity.py):
preflight warns, against the deployed stack's runSpec. The inert rules cite verl 0.7.1's
dp_actor.py and _generated_ppo_trainer.yaml (see the module)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest
import yaml

from jobs.cli import preflight as preflight_cli
from jobs.cli.stack_outputs import offline_outputs, offline_spec
from jobs.plan.run_identity import describe_identity_change, identity_changes
from tests.jobs import stand_in_pulumi


@pytest.fixture(scope="module")
def dev_spec():
    return offline_spec("dev")


def test_an_unchanged_spec_says_nothing(dev_spec):
    assert identity_changes(dev_spec, dev_spec) == []
    assert describe_identity_change(dev_spec, dev_spec) == []


def test_a_micro_batch_change_under_dynamic_batching_is_inert_for_verl(dev_spec):
    assert dev_spec.framework == "verl" and dev_spec.dynamic_batch_size
    changed = dataclasses.replace(dev_spec, micro_batch_size_per_gpu=dev_spec.micro_batch_size_per_gpu * 2)
    [change] = identity_changes(dev_spec, changed)
    assert change.key == "gke-grpo:job.microBatchSizePerGpu" and "dp_actor.py" in change.inert_because
    lines = describe_identity_change(dev_spec, changed)
    assert [level for level, _ in lines] == ["note", "warning"]
    assert changed.run_id in lines[0][1] and dev_spec.checkpoint_dir in lines[0][1]
    assert "starts a new run and computes the same" in lines[1][1]


def test_the_same_change_without_dynamic_batching_is_a_real_change(dev_spec):
    static = dataclasses.replace(dev_spec, dynamic_batch_size=False)
    changed = dataclasses.replace(static, micro_batch_size_per_gpu=static.micro_batch_size_per_gpu * 2)
    [change] = identity_changes(static, changed)
    assert change.inert_because is None
    assert [level for level, _ in describe_identity_change(static, changed)] == ["note"]


def test_nemo_rl_micro_batches_are_never_called_inert(dev_spec):
    nemo = dataclasses.replace(dev_spec, framework="nemo-rl")
    changed = dataclasses.replace(nemo, micro_batch_size_per_gpu=nemo.micro_batch_size_per_gpu * 2)
    assert identity_changes(nemo, changed)[0].inert_because is None


def test_preflight_warns_against_the_deployed_run(tmp_path, monkeypatch, capsys):
    """The stand-in pulumi (tests/jobs/stand_in_pulumi.py, the documented `pulumi stack output
    --json --show-secrets` format) serves the dev stack's offline outputs as deployed."""
    outputs = dict(offline_outputs("dev"), kubeconfig="apiVersion: v1\nkind: Config\n")
    stand_in_pulumi.install(tmp_path / "bin", {"dev": {"outputs": outputs, "secrets": ["kubeconfig"]}},
                            selected="dev")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")
    document = yaml.safe_load(Path("Pulumi.dev.yaml").read_text())
    job = document["config"]["gke-grpo:job"]
    job["microBatchSizePerGpu"] = int(job.get("microBatchSizePerGpu", 1)) * 2
    changed = tmp_path / "Pulumi.dev-changed.yaml"
    changed.write_text(yaml.safe_dump(document))
    assert preflight_cli.main(["-s", "dev", "--config-file", str(changed)]) == 0
    out = capsys.readouterr().out
    assert "note: the run id changes from" in out
    assert "warning: gke-grpo:job.microBatchSizePerGpu: changed" in out and "dp_actor.py" in out
