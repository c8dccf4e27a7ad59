"""GrpoJob under mocks: the RayJob post-deploy step and the code it runs on the head."""

from __future__ import annotations

import re

import yaml

from components.grpo_job import HEAD_MODULES, head_code_files
from jobs.runs import check_no_secrets
from tests.conftest import ROOT, preview_with
from tests.crd_schemas import validate_custom_resource
from tools.preview import SECRET_PLACEHOLDER

P = "gke-grpo:"


def _by_kind(result, kind):
    return [r for r in result.resources if r.inputs.get("kind") == kind]


def _rayjob(result):
    [job] = _by_kind(result, "RayJob")
    return job


def test_rayjob_fits_the_kuberay_crd(stack_preview):
    validate_custom_resource(_rayjob(stack_preview).inputs)


def test_rayjob_targets_the_stack_ray_cluster(stack_preview):
    job = _rayjob(stack_preview)
    [cluster] = _by_kind(stack_preview, "RayCluster")
    spec = job.inputs["spec"]
    assert spec["clusterSelector"] == {"ray.io/cluster": cluster.inputs["metadata"]["name"]}
    assert spec["submissionMode"] == "K8sJobMode"
    assert spec["activeDeadlineSeconds"] == 604800
    assert spec["jobId"] == stack_preview.outputs["submissionId"]
    assert "shutdownAfterJobFinishes" not in spec and "suspend" not in spec
    assert cluster.urn in job.dependencies
    assert job.delete_before_replace is True


def test_entrypoint_waits_for_gpus_prepares_then_trains(stack_preview):
    entrypoint = _rayjob(stack_preview).inputs["spec"]["entrypoint"]
    wait, prepare, train = entrypoint.split(" && ", 2)
    gpus = 16 if stack_preview.stack == "dev" else 32
    assert wait.startswith("python3 -m jobs.wait_for_gpus") and f"--gpus {gpus}" in wait
    assert "--timeout-seconds 1800" in wait
    assert prepare.startswith("python3 -m jobs.prepare")
    if stack_preview.stack == "dev":
        assert "verl.trainer.main_ppo" in train and "algorithm.adv_estimator=grpo" in train
    else:
        assert "examples/run_grpo_math.py" in train


def test_no_secret_anywhere_in_the_rayjob(stack_preview):
    spec = _rayjob(stack_preview).inputs["spec"]
    runtime_env = yaml.safe_load(spec["runtimeEnvYAML"])
    check_no_secrets(spec["entrypoint"], runtime_env, spec["metadata"])
    text = str(_rayjob(stack_preview).raw_inputs)
    assert SECRET_PLACEHOLDER not in text and "hf_" not in text.replace("hf_api_token", "")
    assert not re.search(r"(?i)wandb_api_key|hf_token", text)


def test_runtime_env_has_only_real_fields(stack_preview):
    runtime_env = yaml.safe_load(_rayjob(stack_preview).inputs["spec"]["runtimeEnvYAML"])
    assert set(runtime_env) <= {"env_vars", "pip"}
    if stack_preview.stack == "dev":
        assert runtime_env["pip"]["packages"] == ["verl==0.7.1"]
        assert "--no-deps" in runtime_env["pip"]["pip_install_options"]


def test_unchanged_spec_registers_identical_rayjob():
    first, second = preview_with("dev"), preview_with("dev")
    assert _rayjob(first).inputs == _rayjob(second).inputs


def test_changed_spec_or_attempt_renames_and_so_replaces_the_rayjob(dev_preview):
    base = _rayjob(dev_preview).inputs["metadata"]["name"]
    changed = _rayjob(preview_with("dev", {P + "job.learningRate": 2e-6})).inputs["metadata"]["name"]
    bumped = preview_with("dev", {P + "job.attempt": 2})
    assert base == "grpo-" + dev_preview.outputs["runId"].rsplit("-", 1)[1] + "-attempt-1"
    assert changed != base
    assert _rayjob(bumped).inputs["metadata"]["name"] == base.replace("attempt-1", "attempt-2")
    # A new attempt of the same spec is the same run: same checkpoint directory, resumes.
    assert bumped.outputs["runCheckpointDir"] == dev_preview.outputs["runCheckpointDir"]
    assert bumped.outputs["submissionId"].endswith("-attempt-2")


def test_disabled_job_creates_no_rayjob():
    result = preview_with("dev", {P + "job.enabled": False})
    assert result.error is None and _by_kind(result, "RayJob") == []


def test_preflight_errors_stop_the_program_before_any_resource():
    result = preview_with("dev", {P + "job.generationsPerPrompt": 1})
    assert result.register_calls == 0
    assert [p.key for p in result.problems] == [P + "job.generationsPerPrompt"]


def test_head_gets_the_jobs_code_from_a_configmap(stack_preview):
    [configmap] = [r for r in stack_preview.resources if r.type == "kubernetes:core/v1:ConfigMap"]
    assert configmap.inputs["data"] == head_code_files()
    assert set(configmap.inputs["data"]) == set(HEAD_MODULES)
    for name in HEAD_MODULES:
        assert configmap.inputs["data"][name] == (ROOT / "jobs" / name).read_text()
    [cluster] = _by_kind(stack_preview, "RayCluster")
    head = cluster.inputs["spec"]["headGroupSpec"]["template"]["spec"]
    assert {"name": "jobs-code", "mountPath": "/opt/gke-grpo/jobs", "readOnly": True} in head["containers"][0]["volumeMounts"]
    assert {"name": "PYTHONPATH", "value": "/opt/gke-grpo"} in head["containers"][0]["env"]
    assert configmap.urn in cluster.dependencies


def test_head_modules_import_nothing_of_pulumi():
    for name in HEAD_MODULES:
        source = (ROOT / "jobs" / name).read_text()
        # Module level only: spec.py's Pulumi-side helper imports lazily, never on the head.
        assert not re.search(r"^(import|from) (pulumi|components|tools)\b", source, flags=re.MULTILINE), name


def test_prod_rayjob_starts_nemo_rl_as_its_32b_recipe(prod_preview):
    """What the prod preview submits: NeMo RL's 32B recipe parallelism, newest-K retention,
    the held-out validation slice, pinned revisions, and a runtime env that survives init_ray."""
    import shlex

    spec = _rayjob(prod_preview).inputs["spec"]
    _wait, prepare, train = spec["entrypoint"].split(" && ", 2)
    argv = shlex.split(train.split(" && ", 1)[1])
    for override in ("policy.dtensor_cfg.tensor_parallel_size=8",
                     "policy.dtensor_cfg.activation_checkpointing=True",
                     "policy.train_micro_batch_size=1", "policy.dynamic_batching.enabled=True",
                     "policy.sequence_packing.enabled=False",
                     "policy.generation.vllm_cfg.tensor_parallel_size=4",
                     "checkpointing.metric_name=null", "policy.generation.max_new_tokens=1536",
                     "data.max_input_seq_length=512"):
        assert override in argv, override
    assert any(a.startswith("+data.val_data_path=") and a.endswith("/validation.jsonl") for a in argv)
    assert "--model-revision 5ede1c97bbab6ce5cda5812749b4c0bdf79b18dd" in prepare
    assert "--dataset-revision 740312add88f781978c0658806c59bc2815b9866" in prepare
    runtime_env = yaml.safe_load(spec["runtimeEnvYAML"])
    assert runtime_env["env_vars"]["RAY_OVERRIDE_JOB_RUNTIME_ENV"] == "1"
