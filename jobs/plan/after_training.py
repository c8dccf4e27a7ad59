"""The run plan's stages after a completed trainer: the Hugging Face export
(jobs/head/export.py) and the GSM8K test-split evaluation (jobs/head/evaluate.py), rendered
from the run's spec and the stack's gke-grpo:job.evaluate / job.export settings.

    after_training_commands(spec, evaluate="final", hub_repo=None) -> (export, evaluate)

Where they run and why: both are child processes of the run driver on the head, right after
the trainer exits and while the run still holds its GPU workers. The export copies the
Hugging Face weights the trainer wrote itself (jobs/contract/converters.py): CPU and streaming
I/O on the head, no model in memory. The evaluation puts vLLM on those held GPUs through Ray
tasks: the gang is already up and paid for, so the test split costs minutes of it, where asking
for a fresh GPU node would add a node's provisioning (and, on Spot or flex-start, a wait) to
every run.

``job.evaluate``: ``none`` (neither stage's evaluation; the export still runs), ``final`` (the
base model and the last checkpoint), ``every-K`` (also every K-th checkpoint still on disk when
training ends: step a multiple of K x checkpointEverySteps; retention, checkpointsToKeep,
decides which are left).
"""

from __future__ import annotations

import posixpath
import re

from jobs.contract.run_plan import PYTHON, Command
from jobs.contract.spec import GrpoSpec

EVALUATE_MODES = re.compile(r"^(none|final|every-([1-9][0-9]*))$")
# NeMo RL's vLLM interpreter in its image (v0.5.0; the same at v0.7.0: NEMO_RL_VENV_DIR
# /opt/ray_venvs in docker/Dockerfile, the worker class nemo_rl.models.generation.vllm.vllm_worker.
# VllmGenerationWorker in ray_actor_environment_registry.py, read 2026-12-06): prefetch_venvs.py creates one venv per actor
# class under NEMO_RL_VENV_DIR (/opt/ray_venvs, docker/Dockerfile), named by the class's path
# (nemo_rl/utils/venvs.py create_local_venv), and NeMo RL starts its vLLM workers with that
# python as the runtime_env's py_executable (nemo_rl/distributed/worker_groups.py): the image's
# default /opt/nemo_rl_venv is synced without the vllm extra.
NEMO_RL_VLLM_PYTHON = ("/opt/ray_venvs/nemo_rl.models.generation.vllm.vllm_worker."
                       "VllmGenerationWorker/bin/python")
# grpo_math_1B.yaml: data.prompt_file at v0.5.0, data.default.prompt_file at v0.7.0, the same
# file (relative to the NeMo RL workdir).
NEMO_RL_DEFAULT_PROMPT_FILE = "examples/prompts/cot.txt"
# The share of one GPU the bf16 weights may take, leaving vLLM room for activations and KV.
WEIGHTS_SHARE_OF_GPU = 0.6


def every_steps(evaluate: str, checkpoint_every_steps: int) -> int | None:
    """The step multiple of ``every-K`` (K checkpoints apart), None for final/none."""
    match = EVALUATE_MODES.match(evaluate)
    if match is None:
        raise ValueError(f"evaluate {evaluate!r}: none, final or every-K (K >= 1)")
    return int(match.group(2)) * checkpoint_every_steps if match.group(2) else None


def nemo_rl_prompt_file(spec: GrpoSpec, workdir: str) -> str | None:
    """The prompt file the NeMo RL trainer reads: data.prompt_file (v0.5.0) or
    data.default.prompt_file (v0.7.0) from extraOverrides, else grpo_math_1B.yaml's; relative paths are the image workdir's, as the trainer resolves them."""
    value: str | None = NEMO_RL_DEFAULT_PROMPT_FILE
    for override in spec.extra_overrides:
        key, _, text = override.lstrip("+").partition("=")
        if key in ("data.prompt_file", "data.default.prompt_file"):
            text = text.strip().strip("'\"")
            value = None if text in ("null", "None", "") else text
    if value is None:
        return None
    return value if value.startswith("/") else posixpath.join(workdir, value)


def evaluation_tensor_parallel_size(spec: GrpoSpec) -> int:
    """The smallest vLLM tensor-parallel size whose bf16 weights take at most 60% of a GPU and
    that splits the model's heads; the rollout's when the model's shape is unknown."""
    from jobs.plan.model_shapes import shape_for  # PyYAML

    shape = shape_for(spec.model)
    if shape is None:
        return spec.rollout_tensor_parallel_size
    for tp in (1, 2, 4, 8):
        if tp > spec.gpus_per_node:
            break
        kv_ok = shape.kv_heads % tp == 0 if shape.kv_heads >= tp else tp % shape.kv_heads == 0
        fits = 2 * shape.parameters / tp <= WEIGHTS_SHARE_OF_GPU * spec.gpu_memory_gib * 2**30
        if shape.attention_heads % tp == 0 and kv_ok and fits:
            return tp
    return spec.rollout_tensor_parallel_size


def export_command(spec: GrpoSpec, *, every: int | None, hub_repo: str | None,
                   workdir: str | None) -> Command:
    argv = [PYTHON, "-m", "jobs.head.export", "--run-id", spec.run_id,
            "--checkpoint-dir", spec.checkpoint_dir, "--framework", spec.framework]
    if every:
        argv += ["--every-steps", str(every)]
    if hub_repo:
        argv += ["--hub-repo", hub_repo]
    if workdir:
        argv += ["--nemo-rl-workdir", workdir]
    return Command(argv=tuple(argv))


def evaluate_command(spec: GrpoSpec, *, every: int | None, workdir: str | None) -> Command:
    argv = [PYTHON, "-m", "jobs.head.evaluate", "--run-id", spec.run_id,
            "--framework", spec.framework, "--dataset-dir", spec.dataset_dir,
            "--base-model", spec.model_dir, "--model-id", spec.model,
            "--max-prompt-length", str(spec.max_prompt_length),
            "--max-response-length", str(spec.max_response_length),
            "--gpus", str(spec.total_gpus),
            "--tensor-parallel-size", str(evaluation_tensor_parallel_size(spec))]
    if spec.model_revision:
        argv += ["--model-revision", spec.model_revision]
    if spec.dataset_revision:
        argv += ["--dataset-revision", spec.dataset_revision]
    if every:
        argv += ["--every-steps", str(every)]
    if spec.framework == "nemo-rl":
        prompt = nemo_rl_prompt_file(spec, workdir or "/opt/nemo-rl")
        if prompt:
            argv += ["--prompt-file", prompt]
        argv += ["--vllm-python", NEMO_RL_VLLM_PYTHON]
    return Command(argv=tuple(argv))


def after_training_commands(spec: GrpoSpec, evaluate: str = "final",
                            hub_repo: str | None = None) -> tuple[Command, Command | None]:
    """(export, evaluate or None) for the run plan."""
    every = every_steps(evaluate, spec.checkpoint_every_steps)
    workdir = None
    if spec.framework == "nemo-rl":
        from jobs.plan.render import nemo_rl_entry

        workdir = nemo_rl_entry(spec)[1]
    export = export_command(spec, every=every, hub_repo=hub_repo, workdir=workdir)
    if evaluate == "none":
        return export, None
    return export, evaluate_command(spec, every=every, workdir=workdir)
