"""What only the Pulumi program (and the laptop tools) need to turn a stack file into a run spec.

    spec_from_config(config) -> GrpoSpec          # the run the stack's job config describes
    load_stack_file(stack, config_file=None) -> StackConfig   # Pulumi.<stack>.yaml, offline

It lives in components/ because it reads the stack config models. The jobs CLI (jobs/ imports
nothing of components/) gets the spec from the deployed stack's output runSpec, or offline from
the command `python -m tools.run_spec STACK` (tools/run_spec.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from components.config import NOT_SHOWN, OFFLINE_SECRET_KEYS, ConfigError, Problem, StackConfig, load_stack_config
from components.versions import stack_row
from jobs.contract.layouts import ASYNCHRONOUS_TRAINERS, SPLIT
from jobs.contract.spec import GrpoSpec
from jobs.plan.findings import Finding
from jobs.plan.stack_file import ConfigFileError, read_stack_file, stack_file_path

ROOT = Path(__file__).resolve().parent.parent


class StackFileError(Exception):
    """The stack file is unreadable or its config invalid; the message names every problem."""


def load_stack_file(stack: str, config_file: str | Path | None = None) -> StackConfig:
    """The validated StackConfig of Pulumi.<stack>.yaml (or config_file), without Pulumi: the
    declared secret keys get the offline placeholder (jobs/plan/stack_file.py)."""
    try:
        path = stack_file_path(ROOT, stack, config_file)
        raw, secret_keys = read_stack_file(path, OFFLINE_SECRET_KEYS)
        return load_stack_config(raw, secret_keys, stack)
    except ConfigFileError as exc:
        raise StackFileError(str(exc)) from None
    except ConfigError as exc:
        raise StackFileError(f"{path}: {exc}") from None


def preflight_findings(config: StackConfig, spec: GrpoSpec) -> list[Finding]:
    """The job preflight `pulumi up` runs before any resource (when job.enabled): the frameworks'
    rules, and the checkpoint cadence against the most interruptible capacity source (a
    waterfall's run can land on any) and the Lustre tier."""
    from jobs.plan.checkpoint_interval import checkpoint_interval_findings
    from jobs.plan.preflight import check

    models = {source.provisioning_model for source in config.capacity.sources}
    source = next(m for m in ("spot", "flex-start", "reservation") if m in models)
    tier = config.storage.lustre.throughput_tier if config.storage.lustre else None
    return (check(spec) + checkpoint_interval_findings(spec, source, lustre_tier_mbps_per_tib=tier)
            + release_findings(config, spec))


def release_findings(config: StackConfig, spec: GrpoSpec) -> list[Finding]:
    """What the chosen release cannot do that the stack's capacity asks of it."""
    row = stack_row(config.job.framework, config.job.release, config.kuberay.image)
    if row.verl_saves_before_capacity_end or capacity_end(spec, config) is None:
        return []
    return [Finding("warning", "gke-grpo:job.release", (
        f"{row.id}'s default trainer (verl's V1 trainer, trainer.use_v1) never saves before its "
        "capacity ends (it does not call should_save_ckpt_esi): a flex-start node or reservation "
        "that ends on schedule stops the run, and its next attempt resumes from the last "
        "periodic checkpoint (job.checkpointEverySteps); verl-0.7.1 saves before the end"))]


def preflight_errors(findings: list[Finding]) -> ConfigError | None:
    """The findings' errors as the config's own error (every problem at once), or None."""
    errors = [Problem(f.key, NOT_SHOWN, f.message) for f in findings if f.level == "error"]
    return ConfigError(errors) if errors else None


def _layout_fields(job) -> dict[str, Any]:
    """The spec's placement fields. A split NeMo RL run is NeMo RL's non-colocated generation on
    the rollout pool's nodes (policy.generation.colocated.resources), so the planner's generation
    arithmetic and memory plan apply to it unchanged."""
    layout = job.layout
    if layout.kind != SPLIT:
        return {"colocated_generation": job.colocated_generation,
                "generation_nodes": job.generation_nodes}
    assert layout.rollout is not None and layout.trainer is not None, "the config rules require both pools"
    nemo_rl = job.framework == "nemo-rl"
    return {
        "colocated_generation": not nemo_rl, "generation_nodes": layout.rollout.nodes if nemo_rl else 0,
        "layout": SPLIT,
        "asynchronous_trainer": layout.asynchronous_trainer or ASYNCHRONOUS_TRAINERS[job.framework][0],
        "rollout_nodes": layout.rollout.nodes, "trainer_nodes": layout.trainer.nodes,
        "staleness_threshold": layout.staleness_threshold,
        "trigger_parameter_sync_step": layout.trigger_parameter_sync_step,
        "max_trajectory_age_steps": layout.max_trajectory_age_steps,
    }


def spec_from_config(config: StackConfig) -> GrpoSpec:
    """The run the stack's job config describes."""
    job = config.job
    row = stack_row(job.framework, job.release, config.kuberay.image)
    gpu_memory = {"nvidia-b200": 180, "nvidia-h200-141gb": 141}[config.gpu.type]
    lustre = config.storage.lustre if config.storage.kind == "lustre" else None
    return GrpoSpec(
        framework=job.framework, image=row.image, framework_version=row.framework_version,
        ray_version=row.ray, experiment_name=job.experiment_name, model=job.model,
        dataset=job.dataset, nodes=config.gpu.nodes, gpus_per_node=config.gpus_per_node,
        gpu_type=config.gpu.type, gpu_memory_gib=gpu_memory,
        generations_per_prompt=job.generations_per_prompt, prompts_per_step=job.prompts_per_step,
        mini_batch_size=job.mini_batch_size, micro_batch_size_per_gpu=job.micro_batch_size_per_gpu,
        log_prob_micro_batch_size_per_gpu=job.log_prob_micro_batch_size_per_gpu,
        learning_rate=job.learning_rate, kl_loss_coef=job.kl_loss_coef,
        kl_loss_type=job.kl_loss_type, total_steps=job.total_steps, total_epochs=job.total_epochs,
        max_prompt_length=job.max_prompt_length, max_response_length=job.max_response_length,
        rollout_engine=job.rollout_engine,
        rollout_tensor_parallel_size=job.rollout_tensor_parallel_size,
        rollout_gpu_memory_utilization=job.rollout_gpu_memory_utilization,
        **_layout_fields(job),
        checkpoint_every_steps=job.checkpoint_every_steps,
        checkpoints_to_keep=job.checkpoints_to_keep,
        validate_every_steps=job.validate_every_steps,
        extra_overrides=tuple(job.extra_overrides), wandb=config.has_wandb_key,
        storage_kind=config.storage.kind,
        storage_capacity_gib=(lustre.capacity_gib if lustre else
                              (18_000 if config.storage.kind == "lustre" else None)),
        model_revision=job.model_revision, dataset_revision=job.dataset_revision,
        training_tensor_parallel_size=job.training_tensor_parallel_size,
        sequence_parallel=job.sequence_parallel,
        activation_checkpointing=job.activation_checkpointing,
        ulysses_sequence_parallel_size=job.ulysses_sequence_parallel_size,
        dynamic_batch_size=job.dynamic_batch_size, max_tokens_per_gpu=job.max_tokens_per_gpu,
        sequence_packing=job.sequence_packing,
        attempt=job.attempt, memory_check=job.memory_check,
    )


def capacity_end(spec: GrpoSpec, config: StackConfig) -> dict[str, Any] | None:
    """The plan's ``capacity_end`` (jobs/plan/capacity_end.py) from the stack's capacity sources:
    the flex-start source's node lifetime (GKE's 7 days when unset, as on Autopilot) and each
    reservation's configured end; None when no source ends on schedule."""
    from components.config.timeformats import rfc3339
    from jobs.contract.capacity_end import FLEX_START_DEFAULT_MAX_RUN_SECONDS
    from jobs.plan.capacity_end import capacity_end_plan

    flex: int | None = None
    reservations: dict[str, float] = {}
    for source in config.capacity.sources:
        if source.kind == "flexStart":
            flex = source.max_run_duration_seconds or FLEX_START_DEFAULT_MAX_RUN_SECONDS
        elif source.reservation is not None and source.reservation.end_time is not None:
            ends_at = rfc3339(source.reservation.end_time)
            if ends_at is not None:    # the config's type has checked it
                name = source.reservation.name
                reservations[name] = min(reservations.get(name, ends_at.timestamp()), ends_at.timestamp())
    tier = config.storage.lustre.throughput_tier if config.storage.lustre else None
    return capacity_end_plan(spec, flex_start_max_run_seconds=flex, reservation_ends=reservations,
                             lustre_tier_mbps_per_tib=tier)
