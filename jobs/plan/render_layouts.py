"""The split layout's overrides (gke-grpo:job.layout kind split, docs/layouts.md): what turns the
colocated overrides of jobs/plan/render.py into the framework's asynchronous trainer on a rollout
pool and a trainer pool. A colocated spec never reaches this module, so its rendering is unchanged.

verl 0.9.1 (the wheel, read 2026-12-06; the four fully_async_policy files below are byte-identical
to tag v0.9.0, whose docs/advance/fully_async.md explains them):
- fully-async: ``python3 -m verl.experimental.fully_async_policy.fully_async_main`` with hydra config
  ``fully_async_ppo_trainer`` (fully_async_main.py line 222), which extends ``ppo_trainer`` through
  ``hydra.searchpath: pkg://verl.trainer.config`` (config/fully_async_ppo_trainer.yaml lines 1-7).
  The rollouter streams ONE prompt at a time (``data.gen_batch_size`` 1, ``data.train_batch_size``
  0: both asserted, fully_async_rollouter.py lines 351-352); the trainer takes
  ``ppo_mini_batch_size x async_training.require_batches`` prompts per local step and syncs the
  weights to the rollout pool every ``trigger_parameter_sync_step`` local steps
  (fully_async_trainer.py lines 157-159 and 684-688). A synced weight version is its step: its
  checkpoints are ``global_step_<version>`` and save_freq / test_freq count versions (lines 818-820,
  890-891, 925-927). The run ends when the rollouter has fed ``rollout.total_rollout_steps``
  prompts (fully_async_rollouter.py lines 405-407 and 878-883; the yaml's default is 100, so it is
  always rendered: ``null`` means every epoch's prompts).
- one-step-off: ``python3 -m verl.experimental.one_step_off_policy.main_ppo`` with
  ``one_step_off_ppo_trainer`` (main_ppo.py line 109): the colocated batch semantics
  (validate_config on the trainer pool, main_ppo.py lines 52-56). Its yaml finds ``ppo_trainer``
  through ``file://verl/trainer/config`` (config/one_step_off_ppo_trainer.yaml lines 1-3), a path
  relative to the working directory, which holds no verl checkout where verl is pip-installed; the
  command-line ``hydra.searchpath`` replaces the yaml's (hydra 1.3
  hydra/_internal/config_loader_impl.py _process_config_searchpath, "hydra.searchpath in
  command-line"), so the package's own tree is named instead.
- both: ``actor_rollout_ref.hybrid_engine`` must be false (fully_async_trainer.py line 76,
  fully_async_rollouter.py line 350, one_step_off_policy/ray_trainer.py line 88; ppo_trainer.yaml
  line 60 defaults it true) and ``rollout.mode`` async (fully_async_rollouter.py line 842,
  one_step_off_policy/ray_trainer.py line 180; rollout.yaml line 8's default, rendered so that
  extraOverrides cannot change it). ``trainer.nnodes``/``n_gpus_per_node`` size the trainer pool
  (verl/experimental/separation/utils.py lines 39-43), ``rollout.nnodes``/``n_gpus_per_node`` the
  rollout pool (copied into actor_rollout_ref.rollout by fully_async_main.py lines 235-236 and
  one_step_off_policy/main_ppo.py lines 121-122).

NeMo RL (v0.7.0 and v0.5.0): the spec of a split run already asks for non-colocated generation on
the rollout pool's nodes (components/run_spec.py), which render.py renders; async GRPO adds what its
guide (docs/guides/async-grpo.md lines 12-46) and the code require: ``grpo.async_grpo.enabled``,
``policy.generation.vllm_cfg.async_engine`` (asserted: nemo_rl/algorithms/grpo.py line 3364 at
v0.7.0, line 1857 at v0.5.0) and ``loss_fn.use_importance_sampling_correction`` (asserted: lines
3371-3373 at v0.7.0, 1861 at v0.5.0). Every key is in both releases' grpo_math_1B.yaml
(data/nemo-rl-<version>/).
"""

from __future__ import annotations

from jobs.contract.spec import GrpoSpec

VERL_SPLIT_ENTRIES = {
    "fully-async": ("python3", "-m", "verl.experimental.fully_async_policy.fully_async_main"),
    "one-step-off": ("python3", "-m", "verl.experimental.one_step_off_policy.main_ppo"),
}
# verl 0.9.1 verl/experimental/fully_async_policy/config/fully_async_ppo_trainer.yaml line 16:
# async_training.trigger_parameter_sync_step when gke-grpo:job.layout leaves it to verl.
VERL_DEFAULT_TRIGGER_PARAMETER_SYNC_STEP = 4
VERL_ONE_STEP_OFF_SEARCHPATH = "hydra.searchpath=[pkg://verl.trainer.config]"


def verl_trigger_parameter_sync_step(spec: GrpoSpec) -> int:
    """The trainer's local steps between two weight syncs of a fully-async run."""
    if spec.trigger_parameter_sync_step is None:
        return VERL_DEFAULT_TRIGGER_PARAMETER_SYNC_STEP
    return spec.trigger_parameter_sync_step


def verl_require_batches(spec: GrpoSpec) -> int:
    """async_training.require_batches: the mini batches per local step that make one step (one
    weight version) hold promptsPerStep prompts, as verl's docs align it with the colocated
    trainer's train_batch_size ("trigger_parameter_sync_step should be set to
    data.train_batch_size / (require_batches * ppo_mini_batch_size)", docs/advance/fully_async.md
    at v0.9.0). Preflight refuses a promptsPerStep that is not a multiple of miniBatchSize x
    triggerParameterSyncStep."""
    per_local_step = spec.mini_batch_size * verl_trigger_parameter_sync_step(spec)
    return max(spec.prompts_per_step // max(per_local_step, 1), 1)


def _override_name(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


def verl_split_overrides(spec: GrpoSpec, colocated: tuple[str, ...]) -> tuple[str, ...]:
    """``colocated``: render.py's verl overrides of ``spec`` WITHOUT its extraOverrides."""
    fully_async = spec.asynchronous_trainer == "fully-async"
    pools = [
        f"rollout.nnodes={spec.rollout_nodes}",
        f"rollout.n_gpus_per_node={spec.gpus_per_node}",
        "actor_rollout_ref.hybrid_engine=False",
        "actor_rollout_ref.rollout.mode=async",
    ]
    if fully_async:
        length = (spec.total_steps * spec.prompts_per_step) if spec.total_steps is not None else "null"
        pools += [
            "data.gen_batch_size=1",
            f"rollout.total_rollout_steps={length}",
            f"async_training.require_batches={verl_require_batches(spec)}",
        ]
        if spec.trigger_parameter_sync_step is not None:
            pools.append(f"async_training.trigger_parameter_sync_step={spec.trigger_parameter_sync_step}")
        if spec.staleness_threshold is not None:
            pools.append(f"async_training.staleness_threshold={spec.staleness_threshold!r}")
    out: list[str] = [] if fully_async else [VERL_ONE_STEP_OFF_SEARCHPATH]
    for override in colocated:
        key = _override_name(override)
        if key == "trainer.nnodes":
            out.append(f"trainer.nnodes={spec.trainer_nodes}")
        elif key == "data.train_batch_size" and fully_async:
            out.append("data.train_batch_size=0")
        elif key == "trainer.total_training_steps" and fully_async:
            continue   # the fully-async run's length is rollout.total_rollout_steps
        elif key == "trainer.n_gpus_per_node":
            out.append(override)
            out.extend(pools)
        else:
            out.append(override)
    return tuple(out)


def nemo_rl_split_overrides(spec: GrpoSpec) -> tuple[str, ...]:
    """Async GRPO's settings, after render.py's non-colocated generation overrides."""
    age = ([f"grpo.async_grpo.max_trajectory_age_steps={spec.max_trajectory_age_steps}"]
           if spec.max_trajectory_age_steps is not None else [])
    return ("grpo.async_grpo.enabled=True", *age,
            "policy.generation.vllm_cfg.async_engine=True",
            "loss_fn.use_importance_sampling_correction=True")
