"""Which framework release a stack runs (components/releases.py, gke-grpo:job.release): a bad key
is stopped before anything is registered, with one message naming every bad key; a deployed
stack keeps the release it was deployed with until its owner moves it; a move is said before it
happens, with what it recreates and that the run starts again."""

from __future__ import annotations

import logging

import pytest

from components.config import ConfigError, load_stack_config
from tests.conftest import DELETE, preview_with, stack_config
from tools.golden import GOLDENS
from tools.preview import run_with_config

P = "gke-grpo:"
RAY_CLUSTER = "kubernetes:ray.io/v1:RayCluster"


def _errors(stack: str, changes: dict) -> ConfigError:
    raw, secrets = stack_config(stack, changes)
    with pytest.raises(ConfigError) as raised:
        load_stack_config(raw, secrets, stack)
    return raised.value


@pytest.mark.parametrize("stack,changes,key,words", [
    ("dev", {P + "job.release": "verl-0.8.0"}, "job.release",
     "a row of the supported-versions table (data/versions.yaml): verl-0.9.1, verl-0.7.1, "
     "nemo-rl-0.7.0, nemo-rl-0.5.0"),
    ("dev", {P + "job.release": "nemo-rl-0.7.0"}, "job.release",
     "a release of job.framework 'verl' (verl-0.9.1, verl-0.7.1); nemo-rl-0.7.0 is nemo-rl's"),
    ("dev", {P + "job.release": "latest"}, "job.release", "a row id of data/versions.yaml"),
    ("dev", {P + "job.release": 91}, "job.release", ""),
    ("dev", {P + "kuberay.image": "verlai/verl:vllm017.dev2"}, "kuberay.image",
     "the image of job.release verl-0.9.1 (this one is verl-0.7.1's): set one of the two"),
])
def test_a_bad_release_is_one_problem_naming_the_key(stack, changes, key, words):
    problems = [p for p in _errors(stack, changes).problems if p.key == P + key]
    assert len(problems) == 1 and words in str(problems[0]), [str(p) for p in problems]


def test_every_bad_key_is_named_at_once():
    error = _errors("prod", {P + "job.release": "verl-0.9.1", P + "job.experimentName": "Bad Name"})
    assert {p.key for p in error.problems} >= {P + "job.release", P + "job.experimentName"}


def test_an_unknown_release_registers_nothing():
    raw, secrets = stack_config("dev", {P + "job.release": "verl-0.8.0"})
    result = run_with_config("dev", raw, secrets)
    assert result.error and "gke-grpo:job.release" in result.error and "Traceback" not in result.error
    assert result.register_calls == 0


def test_new_stacks_get_the_newest_release():
    result = preview_with("dev", {P + "job.release": DELETE})
    (cluster,) = result.by_type(RAY_CLUSTER)
    assert cluster.inputs["spec"]["rayVersion"] == "2.55.1"
    assert result.outputs["runSpec"]["framework_version"] == "0.9.1"


def _deployed(name: str) -> dict:
    """The outputs of a stack deployed as the golden ``name`` (what `pulumi stack output` gives),
    from the run's preview cache."""
    stack, changes = GOLDENS[name]
    return preview_with(stack, changes).outputs


def _preview(stack: str, changes: dict, deployed: dict, caplog):
    raw, secrets = stack_config(stack, changes)
    caplog.clear()
    with caplog.at_level(logging.INFO):
        return run_with_config(stack, raw, secrets, deployed)


def test_a_deployed_stack_keeps_its_release_when_the_key_is_unset(caplog):
    """Deployed on verl 0.7.1 before job.release existed: the new default row moves nothing; the
    preview renders what is deployed (the old release's golden) and says how to move."""
    deployed = _deployed("dev-verl-0.7.1")
    result = _preview("dev", {P + "job.release": DELETE}, deployed, caplog)
    assert result.error is None, result.error
    (cluster,) = result.by_type(RAY_CLUSTER)
    assert cluster.inputs["spec"]["rayVersion"] == "2.54.0"
    assert result.outputs["runSpec"] == deployed["runSpec"]
    assert result.outputs["runId"] == deployed["runId"]
    assert ("gke-grpo:job.release is not set: this stack keeps verl-0.7.1, the release it was deployed "
            "with (new stacks get verl-0.9.1). To move it, set gke-grpo:job.release verl-0.9.1") in caplog.text
    assert "(deployed) ->" not in caplog.text and result.warnings == _preview(
        "dev", {P + "job.release": "verl-0.7.1"}, deployed, caplog).warnings


def test_moving_a_deployed_stack_says_what_it_recreates_and_that_the_run_starts_again(caplog):
    deployed = _deployed("dev-verl-0.7.1")
    result = _preview("dev", {}, deployed, caplog)      # the committed dev stack names verl-0.9.1
    assert result.error is None, result.error
    [moved] = [w for w in result.warnings if w.startswith("gke-grpo:job.release: ")]
    assert moved.startswith("gke-grpo:job.release: verl-0.7.1 (deployed) -> verl-0.9.1 (image "
                            "verlai/verl:vllm017.dev2 -> verlai/verl:vllm024.dev2, Ray 2.54.0 -> 2.55.1): "
                            "recreates the Ray head and worker pods: stops a live run")
    assert f"The run id becomes {result.outputs['runId']}" in moved
    assert result.outputs["runId"] != deployed["runId"]
    assert f"the deployed run's checkpoints stay in {deployed['runCheckpointDir']}" in moved


def test_the_same_release_says_nothing_about_releases(caplog):
    deployed = _deployed("dev")
    result = _preview("dev", {}, deployed, caplog)
    assert not [w for w in result.warnings if w.startswith("gke-grpo:job.release: ")]
    assert "job.release is not set" not in caplog.text


def test_another_frameworks_deployed_release_is_not_kept(caplog):
    """A stack moved from NeMo RL to verl keeps nothing of NeMo RL's release."""
    deployed = {"runSpec": _deployed("prod")["runSpec"]}     # its run only: no store compared
    result = _preview("dev", {P + "job.release": DELETE}, deployed, caplog)
    assert result.error is None and result.outputs["runSpec"]["framework_version"] == "0.9.1"


def test_every_older_release_has_a_golden_on_its_stacks_config():
    from jobs.plan.versions import load_versions

    covered = {changes.get(P + "job.release") for _, changes in GOLDENS.values()}
    defaults = {load_versions().for_framework(f).id for f in ("verl", "nemo-rl")}
    assert covered | defaults >= {row.id for row in load_versions().images}
