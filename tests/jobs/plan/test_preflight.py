"""Preflight: every rule of grpo-frameworks.md stops a bad spec with a message naming the key a
user writes and what to change; both stacks pass; it is fast enough to run inside pulumi up."""

from __future__ import annotations

import dataclasses
import json

import pytest
import yaml

from components.config import load_stack_config
from components.run_spec import spec_from_config
from jobs.cli import preflight as preflight_cli
from jobs.contract.spec import GrpoSpec
from jobs.plan.preflight import Finding, check
from tests.conftest import ROOT, stack_config

J = "gke-grpo:job."
X = "gke-grpo:job.extraOverrides"


def stack_spec(stack: str) -> GrpoSpec:
    raw, secret_keys = stack_config(stack)
    return spec_from_config(load_stack_config(raw, secret_keys, stack))


@pytest.fixture(autouse=True)
def _rules_without_gpu_memory(monkeypatch):
    """The rules here do not depend on GPU memory, which tests/jobs/plan/test_gpu_memory.py checks
    (several cases here change batch sizes or parallelism far from what fits)."""
    monkeypatch.setattr("jobs.plan.gpu_memory.memory_findings", lambda spec, mode="enforce": [])


def at_release(spec: GrpoSpec, row_id: str) -> GrpoSpec:
    """``spec`` on another supported release (a row of data/versions.yaml)."""
    from jobs.plan.versions import load_versions

    row = load_versions().by_id(row_id)
    assert row is not None and row.framework == spec.framework, row_id
    return dataclasses.replace(spec, image=row.image, framework_version=row.framework_version,
                               ray_version=row.ray)


DEV = stack_spec("dev")     # verl 0.9.1, 2 x 8 H200: 256 prompts x 8, mini 256, dynamic bsz, rollout TP 2
PROD = stack_spec("prod")   # NeMo RL 0.7.0, 4 x 8 B200: 32 prompts x 16, global batch 512, train TP 8, vLLM TP 4
# The same runs on the earlier supported releases.
DEV_071 = at_release(DEV, "verl-0.7.1")
PROD_050 = at_release(PROD, "nemo-rl-0.5.0")
# The micro-batch arithmetic applies without a dynamic batch size.
DEV_FIXED_BATCH = dataclasses.replace(DEV, dynamic_batch_size=False, max_tokens_per_gpu=None)
PROD_FIXED_BATCH = dataclasses.replace(PROD, dynamic_batch_size=False, sequence_packing=False,
                                       training_tensor_parallel_size=1)
HEADS_7B = ("Qwen/Qwen2.5-7B-Instruct's 28 attention heads and 4 KV heads")


def test_stacks_pass():
    assert DEV.framework == "verl" and PROD.framework == "nemo-rl"
    assert check(DEV) == []
    assert check(PROD) == []


# (id, base spec, changes, exact error findings (key, message))
BAD = [
    ("generations-1", DEV, {"generations_per_prompt": 1},
     [(J + "generationsPerPrompt", "is 1; GRPO compares a group of responses per prompt: set it "
       "to 2 or more (8 or 16 are usual)")]),
    ("generations-1-nemo-rl", PROD, {"generations_per_prompt": 1, "mini_batch_size": 32},
     [(J + "generationsPerPrompt", "is 1; GRPO compares a group of responses per prompt: set it "
       "to 2 or more (8 or 16 are usual)")]),
    ("responses-not-divisible-by-gpus", DEV, {"prompts_per_step": 255, "mini_batch_size": 255},
     [(J + "promptsPerStep", "promptsPerStep x generationsPerPrompt = 255 x 8 = 2040 responses per "
       "step do not split evenly over 16 GPUs; make promptsPerStep x generationsPerPrompt a "
       "multiple of 16"),
      (J + "miniBatchSize", "miniBatchSize x generationsPerPrompt / GPUs = 255 x 8 / 16 is not a "
       "positive integer; make miniBatchSize x generationsPerPrompt a multiple of 16")]),
    ("mini-batch-above-prompts", DEV, {"mini_batch_size": 512},
     [(J + "miniBatchSize", "is 512, more than promptsPerStep (256); verl's mini batch counts "
       "prompts: set it to promptsPerStep or a divisor")]),
    ("micro-batch-not-dividing", DEV_FIXED_BATCH, {"micro_batch_size_per_gpu": 12},
     [(J + "microBatchSizePerGpu", "is 12, which does not divide the per-GPU mini batch of 128 "
       "(miniBatchSize x generationsPerPrompt / GPUs); use a divisor of 128")]),
    ("rollout-tp-not-dividing-gpus", DEV, {"rollout_tensor_parallel_size": 3},
     [(J + "rolloutTensorParallelSize", f"is 3, which does not split {HEADS_7B} evenly (vLLM "
       "needs heads % TP == 0 and KV heads % TP == 0, or TP a multiple of the KV heads); use one "
       "of 1, 2, 4, 28"),
      (J + "rolloutTensorParallelSize", "is 3, which does not divide the run's 16 GPUs; use a "
       "divisor of 16")]),
    ("rollout-tp-larger-than-node", dataclasses.replace(DEV, nodes=3, model="acme/Unlisted-7B"),
     {"rollout_tensor_parallel_size": 12, "prompts_per_step": 192, "mini_batch_size": 192},
     [(J + "rolloutTensorParallelSize", "is 12: a rollout replica must fit in one node (8 GPUs) or "
       "span whole nodes; use a divisor or a multiple of 8")]),
    ("rollout-tp-more-than-the-run", dataclasses.replace(DEV, model="acme/Unlisted-7B"),
     {"rollout_tensor_parallel_size": 32},
     [(J + "rolloutTensorParallelSize", "is 32: one rollout replica asks for more GPUs than the run "
       "has (16 = 2 nodes x 8); lower it or add nodes (gke-grpo:gpu.nodes)")]),
    # Model shapes (data/model-shapes.yaml): TP sizes must split the heads.
    ("rollout-tp-not-splitting-heads", DEV, {"rollout_tensor_parallel_size": 8},
     [(J + "rolloutTensorParallelSize", f"is 8, which does not split {HEADS_7B} evenly (vLLM "
       "needs heads % TP == 0 and KV heads % TP == 0, or TP a multiple of the KV heads); use one "
       "of 1, 2, 4, 28")]),
    ("nemo-rl-training-tp-not-dividing-kv-heads", dataclasses.replace(
        PROD, model="Qwen/Qwen2.5-7B-Instruct", rollout_tensor_parallel_size=4),
     {"training_tensor_parallel_size": 8},
     [(J + "trainingTensorParallelSize", f"is 8, which does not divide {HEADS_7B} (NeMo RL's "
       "DTensor plan shards both); use one of 1, 2, 4")]),
    ("verl-ulysses-not-splitting-heads", DEV, {"ulysses_sequence_parallel_size": 8},
     [(J + "ulyssesSequenceParallelSize", f"is 8, which does not split {HEADS_7B} (verl's Ulysses "
       "needs heads % size == 0 and KV heads % size == 0 or size % KV heads == 0); use one of 1, "
       "2, 4, 28")]),
    # Parallelism keys a framework does not have.
    ("verl-training-tp", DEV, {"training_tensor_parallel_size": 2, "sequence_parallel": True},
     [(J + "trainingTensorParallelSize", "is 2; verl's FSDP actor has no tensor parallelism: set "
       "it to 1 (ulyssesSequenceParallelSize splits long sequences instead)"),
      (J + "sequenceParallel", "is true; it is NeMo RL's DTensor sequence parallelism: set it "
       "false (verl: ulyssesSequenceParallelSize)")]),
    ("nemo-rl-ulysses-and-token-budget", PROD, {"ulysses_sequence_parallel_size": 2,
                                                "max_tokens_per_gpu": 24000},
     [(J + "ulyssesSequenceParallelSize", "is 2; Ulysses is verl's: set it to 1 (NeMo RL: "
       "trainingTensorParallelSize with sequenceParallel)"),
      (J + "maxTokensPerGpu", "is 24000; it is verl's token budget: drop it (NeMo RL sizes "
       "dynamic batches from the micro batch x the sequence length)")]),
    ("nemo-rl-dynamic-batching-with-packing", PROD, {"sequence_packing": True},
     [(J + "sequencePacking", "is true while dynamicBatchSize is true; NeMo RL allows only one of "
       "them (\"Dynamic Batching is exclusive of Sequence Packing\"): set one false")]),
    ("verl-token-budget-below-a-sequence", DEV, {"max_tokens_per_gpu": 1024},
     [(J + "maxTokensPerGpu", "is 1024, less than one sequence (maxPromptLength + "
       "maxResponseLength = 1536); verl packs whole sequences into a micro batch: raise it")]),
    ("verl-token-budget-without-dynamic", DEV, {"dynamic_batch_size": False},
     [(J + "maxTokensPerGpu", "is 24000 while dynamicBatchSize is false; set dynamicBatchSize "
       "true or drop it")]),
    ("unknown-engine", DEV, {"rollout_engine": "tgi"},
     [(J + "rolloutEngine", "is 'tgi'; verl rolls out with 'vllm' or 'sglang'")]),
    ("sglang-on-nemo-rl", PROD, {"rollout_engine": "sglang"},
     [(J + "rolloutEngine", "is 'sglang'; NeMo RL 0.5.0 GRPO generates with 'vllm' here")]),
    ("checkpoints-off", DEV, {"checkpoint_every_steps": 0},
     [(J + "checkpointEverySteps", "is 0: checkpoints are off, so a preempted or failed run "
       "cannot resume; set a step interval such as 10")]),
    ("keep-no-checkpoint", PROD, {"checkpoints_to_keep": 0},
     [(J + "checkpointsToKeep", "is 0; keep at least 1 checkpoint to resume from")]),
    ("longer-than-context", DEV_FIXED_BATCH, {"max_response_length": 32768},
     [(J + "maxResponseLength", "maxPromptLength + maxResponseLength = 33280 tokens exceeds "
       "Qwen/Qwen2.5-7B-Instruct's context of 32768; shorten the prompt or the response")]),
    ("misspelt-verl-key", DEV, {"extra_overrides": ("actor_rollout_ref.rollout.tensor_parallel_size=2",)},
     [(X, "actor_rollout_ref.rollout.tensor_parallel_size is not a key of verl 0.9.1's "
       "ppo_trainer config (verl-0.9.1-config.json) (did you mean actor_rollout_ref.rollout.tensor_model_parallel_size?); "
       "fix the spelling, or write +actor_rollout_ref.rollout.tensor_parallel_size=... to add a "
       "new key")]),
    ("verl-key-owned-by-stack", DEV, {"extra_overrides": ("trainer.nnodes=4",)},
     [(X, "trainer.nnodes is set from the stack config ('trainer.nnodes=4'); change the gke-grpo:job "
       "or gke-grpo:gpu value that owns it instead")]),
    ("verl-plus-on-existing-key", DEV, {"extra_overrides": ("+actor_rollout_ref.actor.clip_ratio=0.3",)},
     [(X, "actor_rollout_ref.actor.clip_ratio already exists in verl 0.9.1's ppo_trainer config "
       "(verl-0.9.1-config.json): drop the '+' ('+actor_rollout_ref.actor.clip_ratio=0.3')")]),
    ("not-an-override", DEV, {"extra_overrides": ("trainer.logger",)},
     [(X, "'trainer.logger' is not a key=value override")]),
    ("ulysses-without-remove-padding", DEV,
     {"ulysses_sequence_parallel_size": 2, "sequence_packing": False},
     [(J + "ulyssesSequenceParallelSize", "is 2 while sequencePacking is false; verl's Ulysses "
       "sequence parallelism needs use_remove_padding: set sequencePacking true")]),
    ("verl-separate-generation", DEV, {"colocated_generation": False, "generation_nodes": 1},
     [(J + "colocatedGeneration", "is false; verl's FSDP GRPO here rolls out on the training GPUs "
       "(hybrid engine): set it true (separate generation nodes are a NeMo RL option)"),
      (J + "generationNodes", "is 1; verl rolls out on the training GPUs: set it to 0")]),
    ("verl-unknown-kl-type", DEV, {"kl_loss_type": "k4"},
     [(J + "klLossType", "is 'k4'; verl's KL estimators are kl, k1, abs, mse, k2, low_var_kl, k3 "
       "(GRPO recipes use low_var_kl)")]),
    ("nemo-rl-global-batch-not-dividing", PROD, {"mini_batch_size": 96},
     [(J + "miniBatchSize", "is 96 (NeMo RL's policy.train_global_batch_size, in samples), which "
       "does not divide the 512 samples of a step (promptsPerStep x generationsPerPrompt = 32 x "
       "16); use a divisor of 512")]),
    ("nemo-rl-global-batch-not-multiple-of-dp", PROD_FIXED_BATCH, {"mini_batch_size": 16},
     [(J + "miniBatchSize", "is 16, not a multiple of the data-parallel size 32 (32 training GPUs "
       "/ TP x PP x CP 1); use a multiple of 32")]),
    ("nemo-rl-micro-batch-without-packing", PROD_FIXED_BATCH, {"micro_batch_size_per_gpu": 3},
     [(J + "microBatchSizePerGpu", "is 3, which does not divide the per-rank batch of 16 "
       "(miniBatchSize / data-parallel size 32) with sequence packing and dynamic batching off; "
       "use a divisor of 16")]),
    ("nemo-rl-dtensor-tp-not-dividing", dataclasses.replace(PROD, model="acme/Unlisted-32B"),
     {"training_tensor_parallel_size": 3},
     [(X, "training TP x PP x CP = 3 does not divide the 32 training GPUs; choose sizes whose "
       "product divides it")]),
    ("nemo-rl-both-backends", PROD, {"extra_overrides": ("policy.megatron_cfg.enabled=True",)},
     [(X, "NeMo RL trains with exactly one backend: set policy.megatron_cfg.enabled and "
       "policy.dtensor_cfg.enabled to opposite values")]),
    ("separate-generation-uses-all-nodes", PROD, {"colocated_generation": False, "generation_nodes": 4},
     [(J + "generationNodes", "is 4, all of the run's 4 nodes: separate generation must leave "
       "nodes for training; lower it or add nodes")]),
    ("more-generation-nodes-than-capacity", PROD, {"colocated_generation": False, "generation_nodes": 6},
     [(J + "generationNodes", "is 6: more GPU nodes than the run has (gke-grpo:gpu.nodes = 4); "
       "lower it or add nodes")]),
    ("generation-nodes-while-colocated", PROD, {"generation_nodes": 1},
     [(J + "generationNodes", "is 1 while colocatedGeneration is true; set it to 0, or set "
       "colocatedGeneration false to give generation its own nodes")]),
    ("separate-generation-without-nodes", PROD, {"colocated_generation": False},
     [(J + "generationNodes", "is 0 while colocatedGeneration is false; give generation 1 or "
       "more nodes")]),
    ("nemo-rl-separate-generation-dp", PROD_FIXED_BATCH, {"colocated_generation": False, "generation_nodes": 1},
     [(J + "miniBatchSize", "is 512, not a multiple of the data-parallel size 24 (24 training "
       "GPUs / TP x PP x CP 1); use a multiple of 24")]),
    ("nemo-rl-vllm-tp-not-dividing", dataclasses.replace(PROD, model="acme/Unlisted-32B"),
     {"rollout_tensor_parallel_size": 6},
     [(J + "rolloutTensorParallelSize", "vLLM TP x PP = 6 does not divide the 32 generation GPUs; "
       "use a divisor")]),
    ("nemo-rl-misspelt-key", PROD, {"extra_overrides": ("policy.dtensor_cfg.activation_checkpoint=True",)},
     [(X, "policy.dtensor_cfg.activation_checkpoint is not a key of NeMo RL 0.7.0's "
       "grpo_math_1B.yaml (nemo-rl-0.7.0-keys.txt) (did you mean "
       "policy.dtensor_cfg.activation_checkpointing?); fix the spelling, or write "
       "+policy.dtensor_cfg.activation_checkpoint=... to add a new key")]),
    ("nemo-rl-key-owned-by-stack", PROD, {"extra_overrides": ("cluster.num_nodes=8",)},
     [(X, "cluster.num_nodes is set from the stack config ('cluster.num_nodes=8'); change the "
       "gke-grpo:job or gke-grpo:gpu value that owns it instead")]),
    ("prompts-above-dataset", DEV, {"prompts_per_step": 8192, "mini_batch_size": 256},
     [(J + "promptsPerStep", "is 8192, more than GSM8K's 7217 training rows (the train split less "
       "256 held out for validation): an epoch would have no step; lower it")]),
    ("learning-rate-zero", DEV, {"learning_rate": 0.0},
     [(J + "learningRate", "is 0.0; set a positive learning rate such as 1.0e-6")]),
    ("gpu-memory-utilization-too-high", DEV, {"rollout_gpu_memory_utilization": 0.98},
     [(J + "rolloutGpuMemoryUtilization", "is 0.98; set a fraction of the GPU's total memory above "
       "0 and at most 0.95")]),
    ("negative-kl", PROD, {"kl_loss_coef": -0.1},
     [(J + "klLossCoef", "is -0.1; set 0 (no KL term) or a positive coefficient such as 0.001")]),
    ("zero-length", DEV, {"max_prompt_length": 0},
     [(J + "maxPromptLength", "is 0; set it to 1 or more")]),
    ("zero-micro-batch", PROD, {"micro_batch_size_per_gpu": 0},
     [(J + "microBatchSizePerGpu", "is 0; set it to 1 or more")]),
    ("no-run-length", DEV, {"total_epochs": None},
     [(J + "totalSteps", "neither totalSteps nor totalEpochs is set; set one")]),
]


@pytest.mark.parametrize("base,changes,expected", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_spec(base, changes, expected):
    spec = dataclasses.replace(base, **changes)
    errors = [(f.key, f.message) for f in check(spec) if f.level == "error"]
    assert errors == expected


def test_table_covers_the_rules():
    assert len(BAD) >= 15


def test_warning_checkpoints_exceed_lustre():
    # NeMo RL: keep 3 + the one being written + one a crash left = 5 (jobs/head/checkpoints.py),
    # each 12 bytes/param with optimizer state + 4 of fp32 Hugging Face weights, + one export.
    spec = dataclasses.replace(PROD, storage_capacity_gib=1000, checkpoints_to_keep=3)
    assert check(spec) == [Finding(
        "warning", "gke-grpo:storage.lustre.capacityGib",
        "up to 5 checkpoints of Qwen/Qwen2.5-32B-Instruct can be on disk at once "
        "(checkpointsToKeep 3, see jobs/head/checkpoints.py; ~524 GB each with optimizer state "
        "and the Hugging Face weights the export copies), plus the export (~131 GB): "
        "~2,563 GiB, more than the 1,000 GiB Lustre instance; lower "
        "gke-grpo:job.checkpointsToKeep or raise the capacity")]
    # verl on Lustre, pruned before every start: keep 2 + the tracker's + 2 of the new start = 5.
    verl = dataclasses.replace(DEV, model="Qwen/Qwen2.5-32B-Instruct", storage_kind="lustre",
                               storage_capacity_gib=1500, checkpoints_to_keep=2,
                               rollout_tensor_parallel_size=4, model_revision=None)
    assert [f.message for f in check(verl) if f.key.endswith("capacityGib")] == [
        "up to 5 checkpoints of Qwen/Qwen2.5-32B-Instruct can be on disk at once "
        "(checkpointsToKeep 2, see jobs/head/checkpoints.py; ~524 GB each with optimizer state "
        "and the Hugging Face weights the export copies), plus the export (~131 GB): "
        "~2,563 GiB, more than the 1,500 GiB Lustre instance; lower "
        "gke-grpo:job.checkpointsToKeep or raise the capacity"]
    # Cloud Storage has no capacity: nothing to warn about.
    assert check(dataclasses.replace(spec, storage_kind="gcs", storage_capacity_gib=None)) == []


def test_warning_unknown_model():
    assert check(dataclasses.replace(DEV, model="acme/Tiny-1B")) == [Finding(
        "warning", J + "model", "acme/Tiny-1B is not in data/model-shapes.yaml: its context "
        "length, checkpoint size and head counts (tensor-parallel sizes) are not checked")]


def test_warning_unpinned_revisions():
    assert check(dataclasses.replace(DEV, model_revision=None, dataset_revision=None)) == [
        Finding("warning", J + "modelRevision", "is not set: Qwen/Qwen2.5-7B-Instruct is staged "
                "from the Hub's current main the first time and that copy is kept; pin a commit "
                "sha so a rerun trains the same weights"),
        Finding("warning", J + "datasetRevision", "is not set: gsm8k is staged from the Hub's "
                "current main the first time and that copy is kept; pin a commit sha of "
                "openai/gsm8k")]


def test_warning_wandb_is_off_for_nemo_rl():
    assert [f.message for f in check(dataclasses.replace(PROD, wandb=True))] == [
        "is set but W&B stays off for NeMo RL: NeMo RL copies the driver's whole environment "
        "into the job's runtime env (visible through Ray's state API), so the head holds no W&B "
        "key; TensorBoard logs are written instead"]


def test_nemo_rl_kl_types():
    assert check(dataclasses.replace(PROD, kl_loss_type="mse")) == []
    assert [(f.key, f.message) for f in check(dataclasses.replace(PROD, kl_loss_type="abs"))] == [
        (J + "klLossType", "is 'abs'; NeMo RL's reference-policy KL estimators are k1, k2, k3 "
         "(loss_fn.reference_policy_kl_type); kl = k1, mse = k2, low_var_kl = k3")]


def test_an_unsupported_release_is_one_error_naming_the_supported_ones():
    spec = dataclasses.replace(DEV, framework_version="9.9.9")
    assert [(f.key, f.message) for f in check(spec)] == [(
        J + "release", "verl 9.9.9 is not a supported release (data/versions.yaml has 0.9.1, 0.7.1)")]


def test_missing_key_list_is_an_error(monkeypatch, tmp_path):
    from jobs.plan.preflight import override_rules

    override_rules.release_keys.cache_clear()
    override_rules.release_prefixes.cache_clear()
    monkeypatch.setattr(override_rules, "DATA_DIR", tmp_path)
    try:
        assert [(f.key, f.message) for f in check(DEV) if f.key == X] == [(
            X, "no key list verl-0.9.1-config.json of verl 0.9.1 to check overrides against: run "
            "python -m tools.verl_snapshot")]
    finally:
        override_rules.release_keys.cache_clear()
        override_rules.release_prefixes.cache_clear()


def test_valid_extra_overrides_pass():
    verl = dataclasses.replace(DEV, extra_overrides=(
        "actor_rollout_ref.actor.clip_ratio_high=0.28",
        "+actor_rollout_ref.rollout.engine_kwargs.vllm.max_num_seqs=512",
    ), ulysses_sequence_parallel_size=2)
    assert check(verl) == []
    nemo = dataclasses.replace(PROD, extra_overrides=(
        "policy.dtensor_cfg.context_parallel_size=1",
        "+policy.generation.vllm_kwargs.max_num_seqs=256",
    ), training_tensor_parallel_size=4, sequence_parallel=True)
    assert check(nemo) == []


def test_megatron_parallelism_counts():
    spec = dataclasses.replace(PROD, extra_overrides=(
        "policy.megatron_cfg.enabled=True", "policy.dtensor_cfg.enabled=False",
        "policy.megatron_cfg.tensor_model_parallel_size=8",
        "policy.megatron_cfg.pipeline_model_parallel_size=2",
    ))
    # dp = 32 / (8 x 2) = 2 divides 512: passes; PP 3 would not divide.
    assert check(spec) == []
    bad = dataclasses.replace(spec, extra_overrides=(
        *spec.extra_overrides[:3], "policy.megatron_cfg.pipeline_model_parallel_size=3"))
    assert [f.message for f in check(bad)] == [
        "training TP x PP x CP = 24 does not divide the 32 training GPUs; choose sizes whose "
        "product divides it"]


# ---- the CLI -------------------------------------------------------------------------------------


@pytest.mark.parametrize("stack,warnings", [("dev", 0), ("prod", 1)])
def test_main_passes_the_stacks(stack, warnings, capsys):
    assert preflight_cli.main(["--stack", stack]) == 0
    out = capsys.readouterr().out
    assert f"0 error(s), {warnings} warning(s)" in out
    if warnings:   # prod saves a 32B checkpoint every 10 steps on a reservation: the one warning
        assert "warning: gke-grpo:job.checkpointEverySteps: is 10" in out and "tier 500 MB/s per TiB" in out


def _stack_file(tmp_path, stack, changes):
    raw, _ = stack_config(stack, changes)
    config = {}
    for key, value in raw.items():
        config[key] = json.loads(value) if value[:1] in "{[" else value
    # Secrets as they appear in a stack file.
    config["gke-grpo:hfToken"] = {"secure": "v1:cGxhY2Vob2xkZXI="}
    path = tmp_path / f"Pulumi.{stack}.yaml"
    path.write_text(yaml.safe_dump({"config": config}))
    return path


def test_main_reports_errors_with_exit_2(tmp_path, capsys):
    path = _stack_file(tmp_path, "dev", {"gke-grpo:job.generationsPerPrompt": 1})
    assert preflight_cli.main(["--stack", "dev", "--config-file", str(path)]) == 2
    out = capsys.readouterr().out
    assert ("error: gke-grpo:job.generationsPerPrompt: is 1; GRPO compares a group of responses "
            "per prompt") in out
    assert "1 error(s), 0 warning(s)" in out


def test_main_invalid_config_exit_2(tmp_path, capsys):
    path = _stack_file(tmp_path, "dev", {"gke-grpo:job.framework": "trl"})
    assert preflight_cli.main(["--stack", "dev", "--config-file", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "gke-grpo:job.framework" in captured.err


def test_main_unreadable_file_exit_2(tmp_path, capsys):
    assert preflight_cli.main(["--stack", "dev", "--config-file", str(tmp_path / "missing.yaml")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_main_usage_exit_2(capsys):
    assert preflight_cli.main([]) == 2


def test_preflight_does_not_import_heavy_modules():
    import subprocess
    import sys

    code = ("import sys, jobs.plan.preflight, jobs.plan.render; "
            "bad = [m for m in ('pulumi', 'components', 'hydra', 'omegaconf', 'verl', 'yaml') "
            "if m in sys.modules]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"
