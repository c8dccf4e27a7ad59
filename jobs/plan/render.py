"""The framework command of a GRPO spec: verl hydra overrides or NeMo RL config overrides, the
training entrypoint and its Ray runtime_env.

    render(spec) -> RenderedJob(entrypoint, overrides, runtime_env)

``entrypoint`` is the shell command of the TRAINING step only (the RayJob code prepends the GPU
wait and ``python -m jobs.prepare``). ``overrides`` are the raw override strings (unquoted, as
hydra receives them one per argv item); the entrypoint shell-quotes each with shlex.

Quantities have one owner each: nodes and GPUs come from gke-grpo:gpu (through the spec), the
checkpoint directory from the run id (never the attempt, so every attempt resumes the run), the
data and model paths from jobs/contract/layout.py and jobs/head/staging.py. ``OWNED_KEYS`` lists the framework
keys rendered from the spec; preflight refuses them in gke-grpo:job.extraOverrides.

Semantics of the spec's batch sizes per framework (the framework's own meaning, no conversion):
- verl: data.train_batch_size = prompts_per_step (prompts); actor.ppo_mini_batch_size =
  mini_batch_size, in PROMPTS (verl multiplies by rollout.n).
- NeMo RL: policy.train_global_batch_size = mini_batch_size, in SAMPLES (prompt x generation).

Lengths have ONE meaning in both renderers: maxPromptLength is the longest prompt in tokens,
maxResponseLength the most tokens generated per response, and their sum the longest sequence
trained on.
- verl: data.max_prompt_length, data.max_response_length (the rollout's response_length follows
  it); longer prompts are dropped from the dataset (data.filter_overlong_prompts=True).
- NeMo RL: data.max_input_seq_length = prompt, policy.generation.max_new_tokens = response,
  policy.max_total_sequence_length = prompt + response (vLLM's max_model_len follows it in
  grpo_math_1B.yaml); a longer prompt is truncated and gets no loss (nemo_rl/data/processors.py
  math_hf_data_processor, loss_multiplier 0.0, v0.5.0).

Validation reads the held-out slice of GSM8K's train split (jobs/head/staging.py, ``validation``);
the test split is never given to a trainer. Checkpoint retention is "the newest K" in both:
verl's max_actor_ckpt_to_keep rotates by step (and jobs/head/checkpoints.py prunes what a restart
leaves behind); NeMo RL's keep_top_k ranks by step when checkpointing.metric_name is null
(nemo_rl/utils/checkpoint.py remove_old_checkpoints, v0.5.0), and it keeps the latest
checkpoint besides the K.

The runtime_env holds only real Ray runtime_env fields (Ray 2.54: ray/_private/runtime_env/
validation.py parse_and_validate_pip, read 2026-12-01): ``env_vars`` without any secret (the HF
token and W&B key reach the pods as env from Kubernetes Secrets) and, for verl, ``pip`` with
exactly ``verl==<version> --no-deps`` installed into Ray's per-job virtualenv, which inherits the
image's site-packages (virtualenv --system-site-packages in ray/_private/runtime_env/
virtualenv_utils.py): torch, vLLM and the rest stay the image's. No working_dir or py_modules:
the jobs code reaches the head another way.
"""

from __future__ import annotations

import dataclasses
import math
import shlex
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jobs.contract.capacity_end import NEMO_RL_SAVE_BY_ENV, VERL_EXPIRATION_ENV
from jobs.contract.converters import NEMO_RL_SAVE_CONSOLIDATED_OVERRIDE, VERL_SAVE_CONTENTS_OVERRIDE
from jobs.contract.datasets import GSM8K_TRAINING_ROWS, dataset_files
from jobs.contract.layout import DATA_LAYOUT
from jobs.contract.records import TENSORBOARD_ENV, run_dir, tensorboard_dir
from jobs.contract.run_plan import JOB_STOP_WAIT_ENV, JOB_STOP_WAIT_SECONDS
from jobs.contract.spec import GrpoSpec
from jobs.plan.interpolations import refused_resolvers
from jobs.plan.render_layouts import VERL_SPLIT_ENTRIES, nemo_rl_split_overrides, verl_split_overrides

if TYPE_CHECKING:
    from jobs.plan.versions import ImageRow

PROJECT_NAME = "gke-grpo"

# ---- verl ---------------------------------------------------------------------------------------
VERL_ENTRY = ("python3", "-m", "verl.trainer.main_ppo")

# ---- NeMo RL ------------------------------------------------------------------------------------
# The default config of examples/run_grpo_math.py at v0.5.0 ("If not specified, config will
# default to examples/configs/grpo_math_1B.yaml": https://docs.nvidia.com/nemo/rl/0.5.0/guides/
# grpo.html, read 2026-12-01). Relative to the image's workdir (data/versions.yaml
# nemo_rl_workdir); every value that matters for the run is overridden below.
NEMO_RL_CONFIG = "examples/configs/grpo_math_1B.yaml"

# gke-grpo:job.klLossType (verl's names) -> NeMo RL's loss_fn.reference_policy_kl_type ("Can be
# set to k1, k2, k3", grpo_math_1B.yaml at v0.5.0; http://joschu.net/blog/kl-approx.html): verl's
# low_var_kl is k3, kl is k1, mse (0.5 x log-ratio^2) is k2 (verl/trainer/ppo/core_algos.py
# kl_penalty_forward, 0.7.1).
NEMO_RL_KL_TYPES = {"k1": "k1", "kl": "k1", "k2": "k2", "mse": "k2", "k3": "k3", "low_var_kl": "k3"}

# Ray runtime_env pip: the default options are ["--disable-pip-version-check",
# "--no-cache-dir"]; setting pip_install_options replaces them, so they are repeated.
PIP_INSTALL_OPTIONS = ("--disable-pip-version-check", "--no-cache-dir", "--no-deps")


@dataclass(frozen=True)
class RenderedJob:
    entrypoint: str                        # the training command (shell), nothing else
    overrides: tuple[str, ...]             # raw override strings, in order
    runtime_env: dict[str, Any] = field(default_factory=dict)
    # The same training command as an argv and its working directory, for the run driver
    # (jobs/head/driver.py), which starts it as a child process without a shell.
    argv: tuple[str, ...] = ()
    cwd: str | None = None


def render(spec: GrpoSpec, capacity_margin_seconds: float | None = None) -> RenderedJob:
    """``capacity_margin_seconds``: the stack has capacity that ends on schedule, and the trainer
    must begin its last save this long before (jobs/plan/capacity_end.py); the overrides then
    take the end the run driver sets per start (``capacity_end_overrides``). None: no source of
    the stack ends on schedule."""
    if spec.framework == "verl":
        return render_verl(spec, capacity_margin_seconds)
    if spec.framework == "nemo-rl":
        return render_nemo_rl(spec, capacity_margin_seconds)
    raise ValueError(f"unknown framework {spec.framework!r}")


def nemo_rl_env_vars() -> dict[str, str]:
    """NeMo RL's init_ray passes the driver's whole environment as the runtime env of its own
    ray.init (``runtime_env={"env_vars": dict(os.environ)}``, nemo_rl/distributed/
    virtual_cluster.py at v0.5.0), which necessarily repeats every key of the job's env_vars:
    Ray refuses such a merge unless RAY_OVERRIDE_JOB_RUNTIME_ENV=1 (ray/_private/worker.py,
    "Failed to merge the Job's runtime env"). NeMo RL ships exactly this setting
    (default_runtime_env.yaml at v0.5.0)."""
    return {**base_env_vars(), "RAY_OVERRIDE_JOB_RUNTIME_ENV": "1"}


def base_env_vars() -> dict[str, str]:
    """Environment for every framework; no secrets here (visible in the Ray dashboard)."""
    return {
        # The tutorial's HF_HOME on the shared mount (jobs/contract/layout.py): tokenizer files and other
        # small Hub downloads are cached once for all pods.
        "HF_HOME": DATA_LAYOUT.hf_home,
        "PYTHONUNBUFFERED": "1",
        # Ray's window between a stop's SIGTERM and its SIGKILL (jobs/contract/run_plan.py).
        JOB_STOP_WAIT_ENV: str(JOB_STOP_WAIT_SECONDS),
    }


def _bool(value: bool) -> str:
    return "True" if value else "False"


def _num(value: float | int) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def epochs_for_steps(total_steps: int, prompts_per_step: int, train_rows: int = GSM8K_TRAINING_ROWS) -> int:
    """Epochs that hold at least ``total_steps`` steps when each epoch has
    floor(train_rows / prompts_per_step) steps (both trainers drop the last partial batch);
    the trainer stops at the step count, so the epoch bound must not stop it earlier."""
    steps_per_epoch = max(train_rows // max(prompts_per_step, 1), 1)
    return max(math.ceil(total_steps / steps_per_epoch), 1)


# ------------------------------------------------------------------------------------------------
# verl
# ------------------------------------------------------------------------------------------------


def verl_overrides(spec: GrpoSpec, capacity_margin_seconds: float | None = None) -> tuple[str, ...]:
    files = dataset_files(spec.dataset_dir, "verl")
    # console stays: it is the live fallback of `status`/`plot` (jobs/cli/training_logs.py).
    loggers = ["console", "tensorboard"] + (["wandb"] if spec.wandb else [])
    if spec.total_steps is not None:
        length = [f"trainer.total_training_steps={spec.total_steps}",
                  f"trainer.total_epochs={epochs_for_steps(spec.total_steps, spec.prompts_per_step)}"]
    else:
        length = [f"trainer.total_epochs={spec.total_epochs}"]
    batching = [f"actor_rollout_ref.actor.use_dynamic_bsz={_bool(spec.dynamic_batch_size)}"]
    if spec.dynamic_batch_size and spec.max_tokens_per_gpu is not None:
        # ref and rollout log-prob token budgets follow the actor's (${oc.select:...} in verl's
        # ppo_trainer config).
        batching.append(f"actor_rollout_ref.actor.ppo_max_token_len_per_gpu={spec.max_tokens_per_gpu}")
    rendered = (
        # GRPO: group-relative advantages (verl's default is gae, which builds a critic).
        "algorithm.adv_estimator=grpo",
        # KL as a loss term, as verl's GRPO recipes do (examples/grpo_trainer/
        # run_qwen2_5_32b_fsdp.sh @50ef5e4f, read 2026-12-01), never in the reward.
        "algorithm.use_kl_in_reward=False",
        f"data.train_files={files['train']}",
        f"data.val_files={files['validation']}",
        f"data.train_batch_size={spec.prompts_per_step}",
        f"data.max_prompt_length={spec.max_prompt_length}",
        f"data.max_response_length={spec.max_response_length}",
        "data.filter_overlong_prompts=True",
        "data.truncation=error",
        f"actor_rollout_ref.model.path={spec.model_dir}",
        f"actor_rollout_ref.model.enable_gradient_checkpointing={_bool(spec.activation_checkpointing)}",
        # Padding-free (packed) sequences, as verl's 7B GSM8K example (examples/grpo_trainer/
        # run_qwen2-7b.sh at v0.7.1); required by Ulysses sequence parallelism.
        f"actor_rollout_ref.model.use_remove_padding={_bool(spec.sequence_packing)}",
        "actor_rollout_ref.actor.strategy=fsdp2",
        f"actor_rollout_ref.actor.ulysses_sequence_parallel_size={spec.ulysses_sequence_parallel_size}",
        *batching,
        f"actor_rollout_ref.actor.optim.lr={_num(spec.learning_rate)}",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={spec.mini_batch_size}",
        f"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu={spec.micro_batch_size_per_gpu}",
        "actor_rollout_ref.actor.use_kl_loss=True",
        f"actor_rollout_ref.actor.kl_loss_coef={_num(spec.kl_loss_coef)}",
        f"actor_rollout_ref.actor.kl_loss_type={spec.kl_loss_type}",
        "actor_rollout_ref.actor.entropy_coeff=0",
        f"actor_rollout_ref.rollout.name={spec.rollout_engine}",
        f"actor_rollout_ref.rollout.n={spec.generations_per_prompt}",
        f"actor_rollout_ref.rollout.tensor_model_parallel_size={spec.rollout_tensor_parallel_size}",
        f"actor_rollout_ref.rollout.gpu_memory_utilization={_num(spec.rollout_gpu_memory_utilization)}",
        f"actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu={spec.log_prob_micro_batch_size_per_gpu}",
        f"actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu={spec.log_prob_micro_batch_size_per_gpu}",
        f"trainer.nnodes={spec.nodes}",
        f"trainer.n_gpus_per_node={spec.gpus_per_node}",
        f"trainer.project_name={PROJECT_NAME}",
        f"trainer.experiment_name={spec.run_id}",
        f"trainer.logger=[{','.join(loggers)}]",
        *length,
        # A step-0 baseline on the validation files before the first update (jobs/cli/metrics.py).
        "trainer.val_before_train=True",
        verl_tensorboard_override(spec, capacity_end=capacity_margin_seconds is not None),
        f"trainer.test_freq={spec.validate_every_steps if spec.validate_every_steps > 0 else -1}",
        f"trainer.save_freq={spec.checkpoint_every_steps}",
        f"trainer.max_actor_ckpt_to_keep={spec.checkpoints_to_keep}",
        f"trainer.default_local_dir={spec.checkpoint_dir}",
        # Every checkpoint also as Hugging Face safetensors (global_step_N/actor/huggingface),
        # gathered by rank 0 on the GPU node during the save: what the export copies
        # (jobs/contract/converters.py). verl's merger would need the whole model in the
        # head's RAM instead (docs/export-evaluate-serve.md).
        VERL_SAVE_CONTENTS_OVERRIDE,
        "trainer.resume_mode=auto",
        *capacity_end_overrides(spec, capacity_margin_seconds),
    )
    if spec.split:      # the asynchronous trainer on two pools (jobs/plan/render_layouts.py)
        rendered = verl_split_overrides(spec, rendered)
    return (*rendered, *spec.extra_overrides)


def tensorboard_env_reference(spec: GrpoSpec) -> str:
    """``${oc.env:GKE_GRPO_TENSORBOARD_DIR,<default>}``: the trainer start's TensorBoard folder,
    which the run driver sets per start (<run dir>/tensorboard/attempt-A-start-S); resolved by
    OmegaConf in the trainer's own process, so the argv stays the same for every start. The
    default (attempt 0) catches a trainer started without the driver, in the run directory
    still: nothing of a real start is ever written over."""
    fallback = tensorboard_dir(run_dir(spec.run_id), 0, 0)
    return f"${{oc.env:{TENSORBOARD_ENV},{fallback}}}"


def verl_tensorboard_override(spec: GrpoSpec, capacity_end: bool = False) -> str:
    """verl 0.7.1 takes the TensorBoard folder from TENSORBOARD_DIR in the environment of its
    TaskRunner actor (verl/utils/tracking.py _TensorboardAdapter; the Tracking object is built in
    RayPPOTrainer.fit, inside the actor). An actor does not see its driver's environment, only
    the runtime_env that ray.init passes: verl's run_ppo (verl/trainer/main_ppo.py) merges
    ``ray_kwargs.ray_init.runtime_env`` into its own and calls
    ``ray.init(**OmegaConf.to_container(ray_init_kwargs))`` WITHOUT resolving, so a plain
    ``env_vars.TENSORBOARD_DIR=${oc.env:...}`` would reach Ray as that literal text. The whole
    runtime_env is therefore one ``oc.create`` interpolation: ``ray_init_kwargs.get(
    "runtime_env")`` resolves it in the driver process, where the driver's env var is set. The
    variable itself rides along, so the actor's own OmegaConf.resolve(config) (TaskRunner.run)
    finds it too. Quoted: hydra's override grammar takes nested braces only inside quotes.

    ``capacity_end``: the capacity's end the driver sets per start goes along the same way, as
    verl's should_save_ckpt_esi reads it in the actor (jobs/contract/capacity_end.py); without
    the driver it is empty, which that function reads as no end."""
    row = release_row(spec)
    ref = tensorboard_env_reference(spec)
    capacity_end = capacity_end and row.verl_saves_before_capacity_end
    expiration = f",{VERL_EXPIRATION_ENV}:${{oc.env:{VERL_EXPIRATION_ENV},\"\"}}" if capacity_end else ""
    # verl 0.9.1 defines ray_kwargs.ray_init.runtime_env (py_executable: null), and `+` cannot
    # add a key that exists; `++` replaces the node (data/versions.yaml
    # verl_runtime_env_in_config). 0.7.1 keeps `+`: its rendered command, and so its RayJob, stay
    # as deployed.
    prefix = "++" if row.verl_runtime_env_in_config else "+"
    return (f"{prefix}ray_kwargs.ray_init.runtime_env='${{oc.create:{{env_vars:{{TENSORBOARD_DIR:{ref},"
            f"{TENSORBOARD_ENV}:{ref}{expiration}}}}}}}'")


def release_row(spec: GrpoSpec) -> ImageRow:
    """The data/versions.yaml row of the spec's framework release (UnsupportedRelease otherwise)."""
    from jobs.plan.versions import load_versions  # lazily: PyYAML

    return load_versions().for_release(spec.framework, spec.framework_version)


def capacity_end_overrides(spec: GrpoSpec, margin_seconds: float | None) -> tuple[str, ...]:
    """What makes the trainer save before its capacity ends (jobs/contract/capacity_end.py);
    nothing when no source of the stack ends on schedule.
    - verl v0.7.1: ``trainer.esi_redundant_time`` (default 0, verl/trainer/config/
      ppo_trainer.yaml), the margin added to should_save_ckpt_esi's 60 s and longest step; the
      end itself rides in the TaskRunner's runtime_env (``verl_tensorboard_override``).
    - NeMo RL v0.5.0: ``checkpointing.checkpoint_must_save_by`` (default null, grpo_math_1B.yaml)
      from the driver's per-start duration, resolved in the driver process as the TensorBoard
      folder is (``nemo_rl_tensorboard_overrides``); null without the driver: no timeout."""
    if margin_seconds is None:
        return ()
    if spec.framework == "verl":
        # verl 0.9.1's default (V1) trainer never calls should_save_ckpt_esi: nothing to set,
        # and preflight says the run relies on its periodic checkpoints there.
        if not release_row(spec).verl_saves_before_capacity_end:
            return ()
        return (f"trainer.esi_redundant_time={math.ceil(margin_seconds)}",)
    return (f"checkpointing.checkpoint_must_save_by=${{oc.env:{NEMO_RL_SAVE_BY_ENV},null}}",)


def renderer_own_overrides(spec: GrpoSpec) -> frozenset[str]:
    """The overrides that may use the renderer's own resolvers (jobs/plan/interpolations.py)."""
    if spec.framework == "verl":
        return frozenset({verl_tensorboard_override(spec), verl_tensorboard_override(spec, capacity_end=True)})
    return frozenset(nemo_rl_tensorboard_overrides(spec)) | frozenset(capacity_end_overrides(spec, 0.0))


def unsafe_interpolations(spec: GrpoSpec, overrides: tuple[str, ...]) -> list[tuple[str, str]]:
    """(override key, reason) for every refused resolver in the rendered overrides, extra
    overrides included (jobs/plan/interpolations.py)."""
    own = renderer_own_overrides(spec)
    found = []
    for override in overrides:
        for reason in refused_resolvers(override, renderer=override in own):
            found.append((override_key(override)[1], reason))
    return found


def _refuse_unsafe_interpolations(spec: GrpoSpec, overrides: tuple[str, ...]) -> None:
    # Preflight reports these first, naming the key; this is the last line before a trainer.
    found = unsafe_interpolations(spec, overrides)
    if found:
        raise ValueError("refused OmegaConf interpolation in " + "; ".join(
            f"{key}: {reason}" for key, reason in found))


def render_verl(spec: GrpoSpec, capacity_margin_seconds: float | None = None) -> RenderedJob:
    overrides = verl_overrides(spec, capacity_margin_seconds)
    _refuse_unsafe_interpolations(spec, overrides)
    runtime_env = {
        "pip": {
            # The verlai images ship verl's dependencies but not verl (data/versions.yaml):
            # exactly verl, no dependency resolution (that would reinstall torch).
            "packages": [f"verl=={spec.framework_version}"],
            "pip_install_options": list(PIP_INSTALL_OPTIONS),
        },
        "env_vars": base_env_vars(),
    }
    entry = VERL_SPLIT_ENTRIES[spec.asynchronous_trainer or ""] if spec.split else VERL_ENTRY
    argv = (*entry, *overrides)
    return RenderedJob(entrypoint=shlex.join(argv), overrides=overrides,
                       runtime_env=runtime_env, argv=argv)


# ------------------------------------------------------------------------------------------------
# NeMo RL (v0.5.0: flat data.* layout, examples/run_grpo_math.py; v0.7.0: nested data.train.*,
# examples/run_grpo.py)
# ------------------------------------------------------------------------------------------------


def nemo_rl_overrides(spec: GrpoSpec, capacity_margin_seconds: float | None = None) -> tuple[str, ...]:
    if spec.total_steps is not None:
        length = [f"grpo.max_num_steps={spec.total_steps}",
                  f"grpo.max_num_epochs={epochs_for_steps(spec.total_steps, spec.prompts_per_step)}"]
    else:
        # NeMo RL stops at whichever bound comes first; max_num_steps' default is 1,000,000.
        length = [f"grpo.max_num_epochs={spec.total_epochs}"]
    if spec.colocated_generation:
        generation = ["policy.generation.colocated.enabled=True"]
    else:
        generation = ["policy.generation.colocated.enabled=False",
                      f"policy.generation.colocated.resources.num_nodes={spec.generation_nodes}",
                      f"policy.generation.colocated.resources.gpus_per_node={spec.gpus_per_node}"]
    val_period = spec.validate_every_steps
    total_length = spec.max_prompt_length + spec.max_response_length
    return (
        f"cluster.num_nodes={spec.nodes}",
        f"cluster.gpus_per_node={spec.gpus_per_node}",
        f"grpo.num_prompts_per_step={spec.prompts_per_step}",
        f"grpo.num_generations_per_prompt={spec.generations_per_prompt}",
        *length,
        f"grpo.val_period={val_period}",
        # A step-0 baseline on the validation files before the first update (jobs/cli/metrics.py).
        "grpo.val_at_start=True",
        f"loss_fn.reference_policy_kl_penalty={_num(spec.kl_loss_coef)}",
        f"loss_fn.reference_policy_kl_type={NEMO_RL_KL_TYPES.get(spec.kl_loss_type, spec.kl_loss_type)}",
        f"policy.model_name={spec.model_dir}",
        f"policy.train_global_batch_size={spec.mini_batch_size}",
        f"policy.train_micro_batch_size={spec.micro_batch_size_per_gpu}",
        f"policy.logprob_batch_size={spec.log_prob_micro_batch_size_per_gpu}",
        f"policy.max_total_sequence_length={total_length}",
        f"policy.generation.max_new_tokens={spec.max_response_length}",
        f"data.max_input_seq_length={spec.max_prompt_length}",
        # DTensor (FSDP2) training parallelism and batching; the prod stack uses the settings of
        # NeMo RL's own 32B recipe (examples/configs/recipes/llm/
        # grpo-qwen2.5-32b-32n8g-fsdp2tp8-actckpt.v3.yaml at v0.5.0).
        f"policy.dtensor_cfg.tensor_parallel_size={spec.training_tensor_parallel_size}",
        f"policy.dtensor_cfg.sequence_parallel={_bool(spec.sequence_parallel)}",
        f"policy.dtensor_cfg.activation_checkpointing={_bool(spec.activation_checkpointing)}",
        f"policy.dynamic_batching.enabled={_bool(spec.dynamic_batch_size)}",
        f"policy.sequence_packing.enabled={_bool(spec.sequence_packing)}",
        f"policy.optimizer.kwargs.lr={_num(spec.learning_rate)}",
        f"policy.megatron_cfg.optimizer.lr={_num(spec.learning_rate)}",
        f"policy.generation.backend={spec.rollout_engine}",
        *generation,
        f"policy.generation.vllm_cfg.tensor_parallel_size={spec.rollout_tensor_parallel_size}",
        f"policy.generation.vllm_cfg.gpu_memory_utilization={_num(spec.rollout_gpu_memory_utilization)}",
        "checkpointing.enabled=True",
        f"checkpointing.checkpoint_dir={spec.checkpoint_dir}",
        f"checkpointing.save_period={spec.checkpoint_every_steps}",
        f"checkpointing.keep_top_k={spec.checkpoints_to_keep}",
        # The newest K, never the best by a validation metric (grpo_math_1B.yaml's default is
        # val:accuracy, which would let validation choose the checkpoint that is kept).
        "checkpointing.metric_name=null",
        # Every checkpoint also as consolidated Hugging Face safetensors (step_N/policy/weights/
        # model/consolidated): v0.5.0's DCP converter cannot read the v2 policy's checkpoints
        # (jobs/contract/converters.py).
        NEMO_RL_SAVE_CONSOLIDATED_OVERRIDE,
        # The head holds no W&B key for NeMo RL (components/head_credentials.py): W&B stays off.
        "logger.wandb_enabled=False",
        f"logger.wandb.project={PROJECT_NAME}",
        f"logger.wandb.name={spec.run_id}",
        *nemo_rl_tensorboard_overrides(spec),
        *nemo_rl_data_overrides(spec),
        *nemo_rl_checkpoint_overrides(spec),
        *capacity_end_overrides(spec, capacity_margin_seconds),
        # Async GRPO on the split layout's pools (jobs/plan/render_layouts.py).
        *(nemo_rl_split_overrides(spec) if spec.split else ()),
        *spec.extra_overrides,
    )


def nemo_rl_data_overrides(spec: GrpoSpec) -> tuple[str, ...]:
    """The local GSM8K JSONL files (jobs/head/staging.py writes question + bare answer) as NeMo
    RL's ResponseDataset, in the release's data layout (data/versions.yaml nemo_rl_data_layout).
    Keys not in grpo_math_1B.yaml take `+` (struct mode)."""
    files = dataset_files(spec.dataset_dir, "nemo-rl")
    if release_row(spec).nemo_rl_data_layout == "nested":
        # v0.7.0: setup_response_data reads data.train (merged with data.default: the math
        # processor, env and cot prompt) and data.validation (nemo_rl/data/utils.py lines
        # 171-177 and 247-262); ResponseDataset(data_path, input_key, output_key, subset, split,
        # split_validation_size, seed) (response_datasets/response_dataset.py line 42).
        # split_validation_size is 0.05 in grpo_math_1B.yaml: 0, or 5 % of the training rows
        # would become a second validation set.
        return ("data.train.dataset_name=ResponseDataset",
                f"+data.train.data_path={files['train']}",
                "+data.train.input_key=question",
                "+data.train.output_key=answer",
                "data.train.split_validation_size=0",
                f"data.validation={{dataset_name:ResponseDataset,data_path:{files['validation']},"
                "input_key:question,output_key:answer}")
    # v0.5.0's flat layout: keys of load_response_dataset in NVIDIA-NeMo/RL nemo_rl/data/
    # datasets/response_datasets/__init__.py, the stored version whose ResponseDataset signature
    # matches the v0.5.0 API docs (read 2026-12-01).
    return ("data.dataset_name=ResponseDataset",
            f"+data.train_data_path={files['train']}",
            f"+data.val_data_path={files['validation']}",
            "+data.input_key=question",
            "+data.output_key=answer")


def nemo_rl_checkpoint_overrides(spec: GrpoSpec) -> tuple[str, ...]:
    """v0.7.0's DTensor v2 policy saves asynchronously unless ``checkpointing.is_async`` is
    given (data/versions.yaml nemo_rl_async_checkpoint_default), and NeMo RL renames
    ``tmp_step_N`` to ``step_N`` without waiting for that save (no wait anywhere in v0.7.0's
    nemo_rl/): the driver's prune, the export and a resume would read a step whose weights may
    not be on disk yet. Synchronous saves keep ``step_N`` complete."""
    if release_row(spec).nemo_rl_async_checkpoint_default:
        return ("+checkpointing.is_async=False",)
    return ()


def nemo_rl_tensorboard_overrides(spec: GrpoSpec) -> tuple[str, ...]:
    """NeMo RL v0.5.0 writes TensorBoard under <logger.log_dir>/exp_NNN/tensorboard
    (nemo_rl/utils/logger.py Logger; examples/run_grpo_math.py get_next_experiment_dir) in the
    driver process, and resolves the config there (OmegaConf.to_container(config, resolve=True)
    in run_grpo_math.py main, after parse_hydra_overrides): the env reference resolves to this
    start's folder."""
    return ("logger.tensorboard_enabled=True", f"logger.log_dir={tensorboard_env_reference(spec)}")


def nemo_rl_entry(spec: GrpoSpec) -> tuple[str, str]:
    """(entry script, workdir) of the spec's image: pinned together with the image in
    data/versions.yaml (from v0.6.0 the entry is examples/run_grpo.py)."""
    row = release_row(spec)
    if not row.nemo_rl_entry or not row.nemo_rl_workdir:
        raise ValueError(f"data/versions.yaml row {row.id} has no nemo_rl_entry/nemo_rl_workdir")
    return row.nemo_rl_entry, row.nemo_rl_workdir


def render_nemo_rl(spec: GrpoSpec, capacity_margin_seconds: float | None = None) -> RenderedJob:
    overrides = nemo_rl_overrides(spec, capacity_margin_seconds)
    _refuse_unsafe_interpolations(spec, overrides)
    entry, workdir = nemo_rl_entry(spec)
    command = ["uv", "run", "python", entry, "--config", NEMO_RL_CONFIG, *overrides]
    entrypoint = f"cd {shlex.quote(workdir)} && {shlex.join(command)}"
    return RenderedJob(entrypoint=entrypoint, overrides=overrides,
                       runtime_env={"env_vars": nemo_rl_env_vars()}, argv=tuple(command), cwd=workdir)


def override_key(override: str) -> tuple[str, str]:
    """("+", "a.b") for "+a.b=1"; ("", "a.b") for "a.b=1"; ("~", "a.b") for "~a.b"."""
    head = override.split("=", 1)[0]
    for prefix in ("++", "+", "~"):
        if head.startswith(prefix):
            return prefix, head[len(prefix):]
    return "", head


def owned_keys(spec: GrpoSpec) -> frozenset[str]:
    """Framework keys rendered from the spec (without extra overrides): their owner is the stack
    config, so extraOverrides may not set them."""
    bare = dataclasses.replace(spec, extra_overrides=())
    rendered = verl_overrides(bare) if spec.framework == "verl" else nemo_rl_overrides(bare)
    keys = {override_key(o)[1] for o in rendered}
    # Both bounds of the run length belong to totalSteps/totalEpochs, whichever is rendered.
    # The capacity-end settings belong to the stack's capacity sources (jobs/plan/capacity_end.py),
    # rendered or not.
    keys |= {override_key(o)[1] for o in capacity_end_overrides(bare, 0.0)}
    if spec.framework == "verl":
        keys |= {"trainer.total_training_steps", "trainer.total_epochs"}
        keys |= {"actor_rollout_ref.actor.ppo_max_token_len_per_gpu",
                 "actor_rollout_ref.actor.ppo_micro_batch_size",
                 "actor_rollout_ref.rollout.log_prob_micro_batch_size",
                 "actor_rollout_ref.ref.log_prob_micro_batch_size"}
    else:
        keys |= {"grpo.max_num_steps", "grpo.max_num_epochs",
                 "policy.generation.colocated.resources.num_nodes",
                 "policy.generation.colocated.resources.gpus_per_node"}
    return frozenset(keys)
