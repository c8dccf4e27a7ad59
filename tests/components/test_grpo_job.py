"""GrpoJob under mocks: the RayJob post-deploy step and the code it runs on the head."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from components.head_code import HEAD_CODE_ARCHIVE, head_code_archive, head_code_digest, head_code_files
from jobs.cli.ray_jobs import check_no_secrets
from jobs.contract.run_plan import PLAN_FILE, RUN_COMMAND, SHELL_SAFE, plan_from_dict
from jobs.plan.stack_file import SECRET_PLACEHOLDER
from tests.conftest import ROOT, preview_with
from tests.crd_schemas import validate_custom_resource

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
    # The driver enforces the budget: KubeRay's deadline with clusterSelector skips all cleanup.
    assert "activeDeadlineSeconds" not in spec
    assert spec["jobId"] == stack_preview.outputs["submissionId"]
    assert "shutdownAfterJobFinishes" not in spec and "suspend" not in spec
    assert cluster.urn in job.dependencies
    assert job.delete_before_replace is True


def _plan(result):
    [configmap] = [r for r in result.resources if r.type == "kubernetes:core/v1:ConfigMap"]
    return plan_from_dict(json.loads(configmap.inputs["data"][PLAN_FILE]))


def test_entrypoint_is_the_run_driver_as_one_shell_safe_command(stack_preview):
    entrypoint = _rayjob(stack_preview).inputs["spec"]["entrypoint"]
    assert entrypoint == RUN_COMMAND == "python3 -m jobs.run --plan /opt/gke-grpo/run/plan.json"
    assert SHELL_SAFE.fullmatch(entrypoint)


def test_plan_prepares_waits_for_gpus_then_trains(stack_preview):
    plan = _plan(stack_preview)
    gpus = 16 if stack_preview.stack == "dev" else 32
    assert plan.run_id == stack_preview.outputs["runId"]
    assert plan.checkpoint_dir == stack_preview.outputs["runCheckpointDir"]
    assert plan.run_dir == f"/data/runs/{plan.run_id}"
    assert plan.prepare.argv[:3] == ("python3", "-m", "jobs.head.staging")
    assert (plan.gpus, plan.gpu_wait_seconds, plan.deadline_seconds, plan.max_restarts) == (gpus, 1800, 604800, 20)
    # the health gate's settings (components/health_gate.py), handed to jobs.head.fabric_gate
    from jobs.contract.health import HealthPlan
    assert HealthPlan.from_dict(plan.health).mode in ("enforce", "warn", "off")
    if stack_preview.stack == "dev":
        # verl forgets its older checkpoints on restart: the driver prunes before each start
        assert plan.prune_checkpoints_keep == 2
        assert plan.trainer.argv[:3] == ("python3", "-m", "verl.trainer.main_ppo")
        assert "algorithm.adv_estimator=grpo" in plan.trainer.argv and plan.trainer.cwd is None
    else:
        assert plan.prune_checkpoints_keep is None      # NeMo RL prunes from disk itself
        assert plan.trainer.argv[:4] == ("uv", "run", "python", "examples/run_grpo.py")   # v0.7.0
        assert plan.trainer.cwd == "/opt/nemo-rl"


@pytest.mark.parametrize("change", [{P + "job.activeDeadlineSeconds": 86400},
                                    {P + "job.gpuWaitSeconds": 600},
                                    {P + "job.maxRestarts": 3}])
def test_budget_only_change_keeps_the_rayjob_and_updates_the_plan(dev_preview, change):
    changed = preview_with("dev", change)
    before, after = _rayjob(dev_preview), _rayjob(changed)
    # never the same jobId with a different spec: here the same jobId AND the same spec
    assert after.inputs["spec"]["jobId"] == before.inputs["spec"]["jobId"]
    assert after.inputs == before.inputs
    assert _plan(changed) != _plan(dev_preview)     # the driver of the next attempt reads it


def test_a_change_to_what_the_run_computes_gets_a_new_name_and_job_id(dev_preview):
    changed = _rayjob(preview_with("dev", {P + "job.learningRate": 2e-6}))
    base = _rayjob(dev_preview)
    assert changed.inputs["spec"]["jobId"] != base.inputs["spec"]["jobId"]
    assert changed.inputs["metadata"]["name"] != base.inputs["metadata"]["name"]


def test_fields_outside_the_run_identity_are_ignored_on_update(stack_preview):
    job = _rayjob(stack_preview)
    assert job.ignore_changes == sorted(f"spec.{k}" for k in job.inputs["spec"] if k != "jobId")
    policy = stack_preview.outputs["runUpdatePolicy"]
    assert "a live run keeps the plan its driver read" in policy
    assert "job.activeDeadlineSeconds, job.gpuWaitSeconds or job.maxRestarts" in policy


def test_submitter_pod_is_small_hardened_labelled_and_on_the_head_nodes(stack_preview):
    template = _rayjob(stack_preview).inputs["spec"]["submitterPodTemplate"]
    [cluster] = _by_kind(stack_preview, "RayCluster")
    head = cluster.inputs["spec"]["headGroupSpec"]["template"]["spec"]
    assert template["metadata"]["labels"]["gke-grpo/role"] == "rayjob-submitter"
    # the Ray pods' NetworkPolicy admits the dashboard port from exactly these labels
    policies = [r for r in stack_preview.resources if r.type == "kubernetes:networking.k8s.io/v1:NetworkPolicy"]
    selectors = [peer["podSelector"]["matchLabels"] for p in policies for rule in p.inputs["spec"].get("ingress", [])
                 for peer in rule.get("from", []) if "gke-grpo/role" in peer.get("podSelector", {}).get("matchLabels", {})]
    assert selectors and all(sel.items() <= template["metadata"]["labels"].items() for sel in selectors)
    pod = template["spec"]
    assert pod.get("nodeSelector", {}) == head.get("nodeSelector", {})
    if stack_preview.stack == "prod":       # Standard: the head's own non-Spot CPU pool
        assert pod["nodeSelector"] == {"cloud.google.com/gke-nodepool": "ray-head"}
    else:                                   # Autopilot: default (on-demand) nodes, no Spot selector
        assert "nodeSelector" not in pod
    assert "tolerations" not in pod      # never schedulable on the tainted GPU/Spot nodes
    [container] = pod["containers"]
    assert container["image"] == f"rayproject/ray:{cluster.inputs['spec']['rayVersion']}"
    # KubeRay writes its submit script only into a container without a command
    assert "command" not in container and "args" not in container
    assert container["resources"]["limits"] == {"cpu": "500m", "memory": "1Gi"}
    assert container["securityContext"] == {"allowPrivilegeEscalation": False,
                                             "readOnlyRootFilesystem": True,
                                             "capabilities": {"drop": ["ALL"]}}
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["automountServiceAccountToken"] is False and pod["restartPolicy"] == "Never"


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
        assert runtime_env["pip"]["packages"] == ["verl==0.9.1"]
        assert "--no-deps" in runtime_env["pip"]["pip_install_options"]


def test_the_submitter_survives_head_restarts_and_a_stop_leaves_the_trainer_a_window(stack_preview):
    """submitterConfig.backoffLimit (KubeRay v1.7.0 rayjob_types.go SubmitterConfig: "In K8sJobMode,
    this is the K8s Job backoffLimit"; default 2 in rayjob_controller.go createNewK8sJob): each
    head restart costs the submitter one failed pod (tests/jobs/head/test_recovery_ray.py). The
    job's runtime env carries RAY_JOB_STOP_WAIT_TIME_S, which Ray's job supervisor reads from
    its own environment (tests/jobs/head/test_driver_ray.py shows it reaching the supervisor)."""
    from components.grpo_job import SUBMITTER_BACKOFF_LIMIT
    from jobs.contract.run_plan import JOB_STOP_WAIT_SECONDS

    spec = _rayjob(stack_preview).inputs["spec"]
    assert spec["submitterConfig"] == {"backoffLimit": SUBMITTER_BACKOFF_LIMIT} and SUBMITTER_BACKOFF_LIMIT > 2
    runtime_env = yaml.safe_load(spec["runtimeEnvYAML"])
    assert runtime_env["env_vars"]["RAY_JOB_STOP_WAIT_TIME_S"] == str(JOB_STOP_WAIT_SECONDS)


def test_unchanged_spec_registers_identical_rayjob():
    first, second = preview_with("dev", fresh=True), preview_with("dev", fresh=True)
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
    [configmap_raw] = [r for r in stack_preview.resources if r.urn == configmap.urn]
    data, binary = head_code_files(configmap.inputs["data"][PLAN_FILE])
    assert configmap_raw.raw_inputs["data"] == data
    assert configmap_raw.raw_inputs["binaryData"] == binary
    # What reviewers see: the archive's hash, not its bytes (tools/preview.py).
    archive = head_code_archive()
    assert configmap.inputs["binaryData"] == {
        HEAD_CODE_ARCHIVE: f"{head_code_digest()} ({len(archive)} bytes)"}
    [cluster] = _by_kind(stack_preview, "RayCluster")
    head = cluster.inputs["spec"]["headGroupSpec"]["template"]["spec"]
    assert {"name": "jobs-code", "mountPath": "/opt/gke-grpo/code", "readOnly": True} in head["containers"][0]["volumeMounts"]
    assert {"name": "PYTHONPATH", "value": "/opt/gke-grpo/code/jobs-code.zip"} in head["containers"][0]["env"]
    assert {"name": "run-plan", "mountPath": "/opt/gke-grpo/run", "readOnly": True} in head["containers"][0]["volumeMounts"]
    assert configmap.urn in cluster.dependencies


def test_the_archive_is_the_head_packages_and_reproducible():
    import io
    import zipfile

    names = zipfile.ZipFile(io.BytesIO(head_code_archive())).namelist()
    on_disk = sorted(str(p.relative_to(ROOT)) for package in ("contract", "head")
                     for p in (ROOT / "jobs" / package).rglob("*.py"))
    assert names == sorted(["jobs/__init__.py", "jobs/run.py", *on_disk])
    assert head_code_archive() == head_code_archive()       # byte for byte: one hash in the golden files


def test_the_golden_previews_carry_the_archives_hash():
    """A change to the head's code shows as one changed hash line in tests/golden/*.json; the
    hash there is the folder's as it is now (regenerate with `make golden` after a change)."""
    import json

    expected = f"{head_code_digest()} ({len(head_code_archive())} bytes)"
    for stack in ("dev", "prod"):
        document = json.loads((ROOT / "tests" / "golden" / f"{stack}.json").read_text())
        [configmap] = [r for r in document["resources"] if r["type"] == "kubernetes:core/v1:ConfigMap"]
        assert configmap["inputs"]["binaryData"] == {HEAD_CODE_ARCHIVE: expected}, stack


def test_the_driver_runs_from_the_configmap_alone(dev_preview, tmp_path):
    """The head has only the ConfigMap's files (and the framework image): the archive on
    PYTHONPATH, as the head's env puts it, is enough to run the driver's command, and nothing of
    Pulumi, components/, tools/, torch or yaml is imported (zipimport, standard library)."""
    import base64
    import subprocess
    import sys

    [configmap] = [r for r in dev_preview.resources if r.type == "kubernetes:core/v1:ConfigMap"]
    archive = tmp_path / HEAD_CODE_ARCHIVE
    archive.write_bytes(base64.b64decode(configmap.raw_inputs["binaryData"][HEAD_CODE_ARCHIVE]))
    plan = tmp_path / PLAN_FILE
    plan.write_text(configmap.raw_inputs["data"][PLAN_FILE])
    probe = ("import sys, jobs.run, jobs.head.driver, jobs.head.gpu_wait, jobs.head.staging, jobs.head.fabric_gate\n"
             "from jobs.contract.run_plan import load_plan\n"
             "plan = load_plan(sys.argv[1])\n"
             "assert jobs.head.driver.__file__.startswith(sys.argv[2]), jobs.head.driver.__file__\n"
             "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
             "('pulumi', 'components', 'tools', 'torch', 'yaml'))\n"
             "print(plan.run_id, bad)")
    proc = subprocess.run([sys.executable, "-c", probe, str(plan), str(archive)],
                          env={"PYTHONPATH": str(archive), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [dev_preview.outputs["runId"], "[]"]
    # The command itself, as the RayJob runs it (a plan with no such file: exit 2, the driver's
    # own message, from the archive).
    proc = subprocess.run([sys.executable, "-m", "jobs.run", "--plan", str(tmp_path / "none.json")],
                          env={"PYTHONPATH": str(archive), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert proc.returncode == 2 and "[jobs.run] FAILED (exit 2 USAGE)" in proc.stdout, proc.stdout + proc.stderr


def test_prod_rayjob_starts_nemo_rl_as_its_32b_recipe(prod_preview):
    """What the prod preview submits: NeMo RL's 32B recipe parallelism, newest-K retention,
    the held-out validation slice, pinned revisions, and a runtime env that survives init_ray."""
    import shlex

    spec = _rayjob(prod_preview).inputs["spec"]
    plan = _plan(prod_preview)
    argv, prepare = plan.trainer.argv, shlex.join(plan.prepare.argv)
    for override in ("policy.dtensor_cfg.tensor_parallel_size=8",
                     "policy.dtensor_cfg.activation_checkpointing=True",
                     "policy.train_micro_batch_size=1", "policy.dynamic_batching.enabled=True",
                     "policy.sequence_packing.enabled=False",
                     "policy.generation.vllm_cfg.tensor_parallel_size=4",
                     "checkpointing.metric_name=null", "policy.generation.max_new_tokens=1536",
                     "data.max_input_seq_length=512"):
        assert override in argv, override
    assert any(a.startswith("data.validation={dataset_name:ResponseDataset,data_path:")
               and "/validation.jsonl," in a for a in argv)             # v0.7.0's nested layout
    assert "+checkpointing.is_async=False" in argv
    assert "--model-revision 5ede1c97bbab6ce5cda5812749b4c0bdf79b18dd" in prepare
    assert "--dataset-revision 740312add88f781978c0658806c59bc2815b9866" in prepare
    runtime_env = yaml.safe_load(spec["runtimeEnvYAML"])
    assert runtime_env["env_vars"]["RAY_OVERRIDE_JOB_RUNTIME_ENV"] == "1"


# ---- built from its own args -------------------------------------------------------------------

def _job_from_args(enabled: bool):
    """GrpoJob from GrpoJobArgs: the Ray cluster it targets is a stand-in resource. The run's
    GrpoSpec and job budgets (40-odd fields) are the dev stack's; nothing else of it is used."""
    import pulumi
    import pulumi_kubernetes as k8s

    from components.config import load_stack_config
    from components.grpo_job import GrpoJob, GrpoJobArgs
    from components.run_spec import spec_from_config
    from tests.components.harness import build
    from tests.conftest import stack_config

    config = load_stack_config(*stack_config("dev"))
    spec = spec_from_config(config)

    def program():
        provider = k8s.Provider("k8s", kubeconfig="{}")
        stand_in = k8s.core.v1.ConfigMap("ray-cluster-stand-in", opts=pulumi.ResourceOptions(provider=provider))
        return GrpoJob("job", GrpoJobArgs(
            enabled=enabled, spec=spec, job=config.job, health_gate_warning=None,
            ray_cluster_name="unit-ray", namespace=pulumi.Output.from_input("unit-ns"),
            kubernetes_provider=provider, ray_cluster=stand_in,
            submitter_node_selector={"unit/pool": "head"}))

    return spec, build(program)


def test_grpo_job_is_built_from_its_own_args():
    spec, built = _job_from_args(enabled=True)
    [job] = [r for r in built.registrations if r.type == "kubernetes:ray.io/v1:RayJob"]
    validate_custom_resource(job.inputs)
    assert job.inputs["metadata"]["namespace"] == "unit-ns"
    assert job.inputs["spec"]["clusterSelector"] == {"ray.io/cluster": "unit-ray"}
    assert job.inputs["spec"]["submitterPodTemplate"]["spec"]["nodeSelector"] == {"unit/pool": "head"}
    [stand_in] = [r for r in built.registrations if r.name == "ray-cluster-stand-in"]
    assert stand_in.urn in job.dependencies
    assert built.value.submission_id == spec.submission_id()


def test_a_disabled_job_registers_no_rayjob():
    _, built = _job_from_args(enabled=False)
    assert [r for r in built.registrations if r.type == "kubernetes:ray.io/v1:RayJob"] == []
    assert built.value.update_policy == ""


# ---- capacity that ends on schedule -------------------------------------------------------------

def _plan_of(stack: str, changes: dict):
    from components.config import load_stack_config
    from components.grpo_job import run_plan
    from components.run_spec import spec_from_config
    from tests.conftest import stack_config

    config = load_stack_config(*stack_config(stack, changes))
    spec = spec_from_config(config)
    return spec, plan_from_dict(json.loads(run_plan(spec, config)))


RES = {"kind": "reservation", "name": "grpo-b200-reservation"}


@pytest.mark.parametrize("stack,changes,flex,reservations", [
    ("prod", {}, None, None),                                        # a reservation without an end
    ("dev", {}, None, None),                                         # Spot: no scheduled end
    ("prod", {P + "gpu.reservation.endTime": "2027-01-01T00:00:00Z"}, None,
     [{"name": "grpo-b200-reservation", "ends_at": 1798761600.0}]),
    ("prod", {P + "gpu.provisioningModel": "flex-start", P + "gpu.reservation": "DELETE",
              P + "gpu.maxRunDurationSeconds": 86400}, 86400.0, []),
    # Autopilot takes no maxRunDurationSeconds: GKE's default, 7 days.
    ("dev", {P + "gpu.provisioningModel": "flex-start"}, 604800.0, []),
    ("dev", {P + "gpu.provisioningModel": "flex-start", P + "job.release": "verl-0.7.1"}, 604800.0, []),
    ("prod", {P + "gpu.provisioningModel": "DELETE", P + "gpu.reservation": "DELETE", P + "gpu.capacity": [
        {**RES, "endTime": "2026-12-31T22:00:00Z"}, {"kind": "flexStart", "maxRunDurationSeconds": 7200},
        {"kind": "spot"}]}, 7200.0, [{"name": "grpo-b200-reservation", "ends_at": 1798754400.0}]),
], ids=["prod-reservation", "dev-spot", "prod-reservation-end", "prod-flex-start", "dev-flex-start-autopilot",
        "dev-flex-start-verl-0.7.1", "prod-waterfall"])
def test_the_plan_says_when_the_capacity_ends_and_the_trainer_takes_it(stack, changes, flex, reservations):
    from jobs.contract.capacity_end import NEMO_RL_SAVE_BY_ENV, VERL_EXPIRATION_ENV
    from jobs.plan.capacity_end import capacity_end_margin
    from tests.conftest import DELETE

    changes = {k: DELETE if v == "DELETE" else v for k, v in changes.items()}
    spec, plan = _plan_of(stack, changes)
    argv = " ".join(plan.trainer.argv)
    if flex is None and reservations is None:
        assert plan.capacity_end is None
        assert VERL_EXPIRATION_ENV not in argv and NEMO_RL_SAVE_BY_ENV not in argv
        return
    tier = 500 if stack == "prod" else None                  # prod's Lustre tier
    margin, basis = capacity_end_margin(spec, tier)
    assert plan.capacity_end == {"margin_seconds": margin, "margin_basis": basis,
                                 "flex_start_max_run_seconds": flex, "reservation_ends": reservations}
    if spec.framework == "verl" and spec.framework_version == "0.9.1":
        # The V1 trainer never saves before the end: nothing rendered, and preflight says so.
        assert "esi_redundant_time" not in argv and VERL_EXPIRATION_ENV not in argv
        from components.config import load_stack_config
        from components.run_spec import release_findings
        from tests.conftest import stack_config

        config = load_stack_config(*stack_config(stack, changes), stack)
        [finding] = release_findings(config, spec)
        assert (finding.level, finding.key) == ("warning", "gke-grpo:job.release")
        assert "never saves before its capacity ends" in finding.message
    elif spec.framework == "verl":
        assert f"trainer.esi_redundant_time={int(margin)}" in plan.trainer.argv and VERL_EXPIRATION_ENV in argv
    else:
        assert f"checkpointing.checkpoint_must_save_by=${{oc.env:{NEMO_RL_SAVE_BY_ENV},null}}" in plan.trainer.argv
