"""Renderers: the verl and NeMo RL commands of a spec, their overrides and Ray runtime_env."""

from __future__ import annotations

import dataclasses
import shlex

import pytest

from jobs.plan.render import RenderedJob, epochs_for_steps, override_key, owned_keys, render
from tests.conftest import skip_or_fail
from tests.jobs.plan.test_preflight import DEV, DEV_071, PROD, PROD_050

SECRET_WORDS = ("TOKEN", "KEY", "SECRET", "PASSWORD", "CREDENTIAL")
# The stacks pin the Hub revisions: the staged directories are named after them.
GSM8K = "/data/datasets/gsm8k--740312add88f781978c0658806c59bc2815b9866"
QWEN_7B = "/data/models/Qwen/Qwen2.5-7B-Instruct--a09a35458c702b33eeacc393d103063234e8bc28"
QWEN_32B = "/data/models/Qwen/Qwen2.5-32B-Instruct--5ede1c97bbab6ce5cda5812749b4c0bdf79b18dd"


def as_dict(overrides: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for override in overrides:
        key, _, value = override.partition("=")
        assert key not in out, f"{key} rendered twice"
        out[key] = value
    return out


# ---- verl ---------------------------------------------------------------------------------------


def test_verl_dev_overrides():
    job = render(DEV)
    o = as_dict(job.overrides)
    run = DEV.run_id
    assert o["algorithm.adv_estimator"] == "grpo"
    assert o["algorithm.use_kl_in_reward"] == "False"
    assert o["actor_rollout_ref.rollout.n"] == "8"
    assert o["actor_rollout_ref.rollout.name"] == "vllm"
    assert o["actor_rollout_ref.actor.strategy"] == "fsdp2"
    assert o["actor_rollout_ref.actor.use_kl_loss"] == "True"
    assert o["actor_rollout_ref.actor.kl_loss_coef"] == "0.001"
    assert o["actor_rollout_ref.actor.kl_loss_type"] == "low_var_kl"
    assert o["data.train_files"] == f"{GSM8K}/train.parquet"
    # Validation reads the slice held out of the train split; the test split is never read.
    assert o["data.val_files"] == f"{GSM8K}/validation.parquet"
    assert not any("test.parquet" in v for v in o.values())
    assert o["actor_rollout_ref.model.path"] == QWEN_7B
    assert o["trainer.default_local_dir"] == f"/data/checkpoints/{run}" == DEV.checkpoint_dir
    assert o["trainer.save_freq"] == "10"
    assert o["trainer.resume_mode"] == "auto"
    assert o["trainer.max_actor_ckpt_to_keep"] == "2"
    assert o["trainer.logger"] == "[console,tensorboard]"
    assert o["trainer.nnodes"] == "2" and o["trainer.n_gpus_per_node"] == "8"
    assert o["trainer.project_name"] == "gke-grpo" and o["trainer.experiment_name"] == run
    assert o["trainer.total_epochs"] == "2" and "trainer.total_training_steps" not in o
    assert o["trainer.val_before_train"] == "True"
    assert o["trainer.test_freq"] == "10"
    assert o["data.train_batch_size"] == "256"
    assert o["actor_rollout_ref.actor.ppo_mini_batch_size"] == "256"
    assert o["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"] == "8"
    assert o["actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu"] == "16"
    assert o["actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu"] == "16"
    assert o["data.max_prompt_length"] == "512" and o["data.max_response_length"] == "1024"
    # verl's own 7B GSM8K examples (run_qwen2-7b.sh, run_qwen2-7b_seq_balance.sh at v0.7.1).
    assert o["actor_rollout_ref.rollout.tensor_model_parallel_size"] == "2"
    assert o["actor_rollout_ref.model.use_remove_padding"] == "True"
    assert o["actor_rollout_ref.actor.use_dynamic_bsz"] == "True"
    assert o["actor_rollout_ref.actor.ppo_max_token_len_per_gpu"] == "24000"
    assert o["actor_rollout_ref.actor.ulysses_sequence_parallel_size"] == "1"
    assert o["actor_rollout_ref.model.enable_gradient_checkpointing"] == "True"
    assert o["actor_rollout_ref.rollout.gpu_memory_utilization"] == "0.6"
    assert o["actor_rollout_ref.actor.optim.lr"] == "1e-06"
    # The one key replaced whole: the TensorBoard folder reaches verl's TaskRunner actor through
    # ray.init's runtime_env (tests/jobs/cli/test_metrics_render.py checks it resolves). 0.9.1's
    # config has the node (`++` replaces it); 0.7.1's has not (`+` adds it), and its rendered
    # command stays as deployed.
    assert [k for k in o if k.startswith(("+", "~"))] == ["++ray_kwargs.ray_init.runtime_env"]
    old = as_dict(render(DEV_071).overrides)
    assert [k for k in old if k.startswith(("+", "~"))] == ["+ray_kwargs.ray_init.runtime_env"]
    assert {k.lstrip("+"): v for k, v in old.items()} == {k.lstrip("+"): v.replace(DEV.run_id, DEV_071.run_id)
                                                          for k, v in o.items()}


def test_verl_entrypoint_is_the_quoted_command():
    spec = dataclasses.replace(DEV, extra_overrides=(
        "+actor_rollout_ref.rollout.engine_kwargs.vllm.note=it's a test; rm -rf /",))
    job = render(spec)
    assert shlex.split(job.entrypoint) == ["python3", "-m", "verl.trainer.main_ppo", *job.overrides]
    assert job.overrides[-1] == spec.extra_overrides[0]


def test_verl_wandb_and_total_steps():
    spec = dataclasses.replace(DEV, wandb=True, total_steps=100, total_epochs=None)
    o = as_dict(render(spec).overrides)
    assert o["trainer.logger"] == "[console,tensorboard,wandb]"
    assert o["trainer.total_training_steps"] == "100"
    # 7217 // 256 = 28 steps per epoch: 4 epochs hold 100 steps.
    assert o["trainer.total_epochs"] == "4"


def test_epochs_for_steps():
    # 7217 training rows (7473 less 256 held out for validation).
    assert epochs_for_steps(28, 256) == 1      # 28 steps per epoch
    assert epochs_for_steps(29, 256) == 2
    assert epochs_for_steps(200, 32) == 1      # 225 steps per epoch
    assert epochs_for_steps(10, 7217) == 10


@pytest.mark.parametrize("spec,version", [(DEV, "0.9.1"), (DEV_071, "0.7.1")], ids=["0.9.1", "0.7.1"])
def test_verl_runtime_env_installs_exactly_verl(spec, version):
    env = render(spec).runtime_env
    assert set(env) == {"pip", "env_vars"}
    assert env["pip"]["packages"] == [f"verl=={version}"]
    assert "--no-deps" in env["pip"]["pip_install_options"]
    assert "torch" not in str(env)


@pytest.mark.parametrize("spec", [DEV, PROD], ids=["dev", "prod"])
def test_runtime_env_is_valid_for_ray_and_has_no_secrets(spec):
    env = render(spec).runtime_env
    assert not {"working_dir", "py_modules", "setup_hook", "py_executable"} & set(env)
    for name, value in env["env_vars"].items():
        assert not any(word in name.upper() for word in SECRET_WORDS), name
        assert isinstance(value, str)
    assert env["env_vars"]["HF_HOME"] == "/data/huggingface_cache"
    try:
        from ray.runtime_env import RuntimeEnv
    except ImportError:
        skip_or_fail("ray is not installed")
    RuntimeEnv(**env)  # Ray's own validation of every field


@pytest.mark.parametrize("spec", [DEV, PROD], ids=["dev", "prod"])
def test_checkpoint_dir_comes_from_the_run_not_the_attempt(spec):
    assert render(spec.with_attempt(7)) == render(spec)
    assert spec.run_id in render(spec).entrypoint


def test_rendered_job_shape():
    job = render(DEV)
    assert isinstance(job, RenderedJob)
    assert isinstance(job.overrides, tuple)


# ---- NeMo RL ------------------------------------------------------------------------------------


@pytest.mark.parametrize("spec,entry", [(PROD, "run_grpo.py"), (PROD_050, "run_grpo_math.py")],
                         ids=["0.7.0", "0.5.0"])
def test_nemo_rl_prod_overrides(spec, entry):
    job = render(spec)
    assert job.entrypoint.startswith(
        f"cd /opt/nemo-rl && uv run python examples/{entry} --config "
        "examples/configs/grpo_math_1B.yaml ")
    assert job.entrypoint.endswith(shlex.join(job.overrides))
    o = as_dict(job.overrides)
    assert o["cluster.num_nodes"] == "4" and o["cluster.gpus_per_node"] == "8"
    assert o["grpo.num_prompts_per_step"] == "32"
    assert o["grpo.num_generations_per_prompt"] == "16"
    assert o["grpo.max_num_steps"] == "200" and o["grpo.max_num_epochs"] == "1"
    assert o["policy.model_name"] == QWEN_32B
    assert o["policy.train_global_batch_size"] == "512"
    assert o["policy.train_micro_batch_size"] == "1"
    assert o["policy.logprob_batch_size"] == "1"         # v0.7.0's 32B recipe (the prod stack's)
    assert o["policy.generation.colocated.enabled"] == "True"
    assert "policy.generation.colocated.resources.num_nodes" not in o
    assert o["policy.generation.vllm_cfg.tensor_parallel_size"] == "4"
    # NeMo RL's 32B recipe: DTensor TP 8, activation checkpointing, dynamic batching, no packing.
    assert o["policy.dtensor_cfg.tensor_parallel_size"] == "8"
    assert o["policy.dtensor_cfg.activation_checkpointing"] == "True"
    assert o["policy.dtensor_cfg.sequence_parallel"] == "False"
    assert o["policy.dynamic_batching.enabled"] == "True"
    assert o["policy.sequence_packing.enabled"] == "False"
    # One meaning of the lengths: prompt 512, response 1536, sequence 2048.
    assert o["data.max_input_seq_length"] == "512"
    assert o["policy.generation.max_new_tokens"] == "1536"
    assert o["policy.max_total_sequence_length"] == "2048"
    assert o["loss_fn.reference_policy_kl_type"] == "k3"
    assert o["policy.generation.vllm_cfg.gpu_memory_utilization"] == "0.6"
    assert o["checkpointing.enabled"] == "True"
    assert o["checkpointing.checkpoint_dir"] == spec.checkpoint_dir
    assert o["checkpointing.save_period"] == "10" and o["checkpointing.keep_top_k"] == "3"
    # The newest K, not the best by validation accuracy.
    assert o["checkpointing.metric_name"] == "null"
    assert o["logger.wandb_enabled"] == "False"
    if spec is PROD_050:      # the flat layout, synchronous saves (no is_async key at v0.5.0)
        assert o["data.dataset_name"] == "ResponseDataset"
        assert o["+data.train_data_path"] == f"{GSM8K}/train.jsonl"
        assert o["+data.val_data_path"] == f"{GSM8K}/validation.jsonl"
        assert o["+data.input_key"] == "question" and o["+data.output_key"] == "answer"
        assert not any("is_async" in key for key in o)
    else:                     # v0.7.0's nested layout; its v2 policy saves synchronously
        assert o["data.train.dataset_name"] == "ResponseDataset"
        assert o["+data.train.data_path"] == f"{GSM8K}/train.jsonl"
        assert o["+data.train.input_key"] == "question" and o["+data.train.output_key"] == "answer"
        assert o["data.train.split_validation_size"] == "0"
        assert o["data.validation"] == (f"{{dataset_name:ResponseDataset,data_path:{GSM8K}/validation.jsonl,"
                                        "input_key:question,output_key:answer}")
        assert o["+checkpointing.is_async"] == "False"
        assert not any(key.startswith(("data.dataset_name", "+data.train_data_path")) for key in o)
    # NeMo RL's init_ray re-sends the driver's environment: Ray must be told to merge.
    assert job.runtime_env == {"env_vars": {"HF_HOME": "/data/huggingface_cache",
                                            "PYTHONUNBUFFERED": "1",
                                            "RAY_JOB_STOP_WAIT_TIME_S": "30",
                                            "RAY_OVERRIDE_JOB_RUNTIME_ENV": "1"}}


def test_nemo_rl_separate_generation_and_wandb():
    spec = dataclasses.replace(PROD, colocated_generation=False, generation_nodes=1, wandb=True,
                               total_steps=None, total_epochs=3)
    o = as_dict(render(spec).overrides)
    assert o["policy.generation.colocated.enabled"] == "False"
    assert o["policy.generation.colocated.resources.num_nodes"] == "1"
    assert o["policy.generation.colocated.resources.gpus_per_node"] == "8"
    # No W&B key on the head for NeMo RL (components/head_credentials.py): W&B stays off.
    assert o["logger.wandb_enabled"] == "False"
    assert o["grpo.max_num_epochs"] == "3" and "grpo.max_num_steps" not in o


def test_owned_keys():
    assert {"trainer.nnodes", "trainer.default_local_dir", "actor_rollout_ref.rollout.n",
            "trainer.total_training_steps", "trainer.total_epochs"} <= owned_keys(DEV)
    assert {"cluster.num_nodes", "checkpointing.checkpoint_dir", "grpo.max_num_epochs",
            "policy.generation.colocated.resources.num_nodes"} <= owned_keys(PROD)
    # Extra overrides are the user's, not owned.
    spec = dataclasses.replace(DEV, extra_overrides=("actor_rollout_ref.actor.clip_ratio=0.3",))
    assert "actor_rollout_ref.actor.clip_ratio" not in owned_keys(spec)


def test_override_key():
    assert override_key("a.b=1") == ("", "a.b")
    assert override_key("+a.b=1") == ("+", "a.b")
    assert override_key("++a.b=1") == ("++", "a.b")
    assert override_key("~a.b") == ("~", "a.b")
