"""Preflight of the split layout (jobs/plan/preflight/layout_rules.py): a release that does not ship
the asynchronous trainer, each framework's arithmetic per pool, the settings the trainer does not
read and NeMo RL async GRPO's run length are one error each, naming the key; a valid split of each
framework passes; the verl memory plan puts vLLM on the rollout pool only."""

from __future__ import annotations

import dataclasses

import pytest

from jobs.contract.datasets import GSM8K_TRAINING_ROWS
from jobs.plan.gpu_memory import plan_for_spec
from jobs.plan.preflight import check
from tests.jobs.plan.test_preflight import DEV, PROD, at_release
from tests.jobs.plan.test_split_layout_render import FULLY_ASYNC, ONE_STEP_OFF

L = "gke-grpo:job.layout."
J = "gke-grpo:job."

ASYNC_GRPO = dataclasses.replace(PROD, layout="split", asynchronous_trainer="async-grpo",
                                 rollout_nodes=2, trainer_nodes=2, colocated_generation=False,
                                 generation_nodes=2)


def split_errors(spec):
    return [(f.key, f.message) for f in check(spec) if f.level == "error"]


@pytest.mark.parametrize("spec", [FULLY_ASYNC, ONE_STEP_OFF, ASYNC_GRPO,
                                  at_release(ASYNC_GRPO, "nemo-rl-0.5.0"),
                                  dataclasses.replace(FULLY_ASYNC, staleness_threshold=0.0,
                                                      trigger_parameter_sync_step=1, mini_batch_size=128),
                                  dataclasses.replace(ASYNC_GRPO, max_trajectory_age_steps=2)],
                         ids=["fully-async", "one-step-off", "async-grpo", "async-grpo-0.5.0",
                              "fully-async-settings", "async-grpo-age"])
def test_valid_splits_pass(spec):
    assert split_errors(spec) == []


def test_a_release_without_the_trainer_is_refused_with_the_releases_that_have_it():
    assert split_errors(at_release(FULLY_ASYNC, "verl-0.7.1")) == [
        (L + "asynchronousTrainer", "is 'fully-async', which verl 0.7.1 (data/versions.yaml row "
         "verl-0.7.1) does not ship; releases that do: verl-0.9.1 (gke-grpo:job.release)")]
    assert split_errors(dataclasses.replace(FULLY_ASYNC, asynchronous_trainer="async-grpo")) == [
        (L + "asynchronousTrainer", "is 'async-grpo'; verl's asynchronous trainers are "
         "fully-async, one-step-off")]


# (id, spec, the one error (key, start of its message))
BAD = [
    ("fully-async-steps-per-sync", dataclasses.replace(FULLY_ASYNC, mini_batch_size=256),
     (J + "promptsPerStep", "is 256: verl's fully-async trainer takes miniBatchSize x "
      "require_batches prompts per local step")),
    ("trainer-pool-batch", dataclasses.replace(FULLY_ASYNC, generations_per_prompt=2, mini_batch_size=1),
     (J + "miniBatchSize", "miniBatchSize x generationsPerPrompt = 1 x 2 = 2 samples do not "
      "split over the 8 data-parallel ranks of the trainer pool's 8 GPUs")),
    ("one-step-off-responses", dataclasses.replace(ONE_STEP_OFF, prompts_per_step=254, mini_batch_size=4,
                                                   generations_per_prompt=2),
     (J + "promptsPerStep", "promptsPerStep x generationsPerPrompt = 254 x 2 = 508 responses per "
      "step do not split evenly over the trainer pool's 8 GPUs")),
    # 28: a tensor-parallel size Qwen2.5-7B's 28 heads and 4 KV heads allow.
    ("rollout-tp-not-dividing", dataclasses.replace(FULLY_ASYNC, rollout_tensor_parallel_size=28,
                                                    nodes=5, rollout_nodes=4),
     (J + "rolloutTensorParallelSize", "is 28, which does not divide the rollout pool's 32 GPUs "
      "(4 node(s) x 8): verl starts 32 // 28 = 1 replicas and leaves 4 GPU(s) idle")),
    ("rollout-tp-above-pool", dataclasses.replace(FULLY_ASYNC, rollout_tensor_parallel_size=28),
     (J + "rolloutTensorParallelSize", "is 28: one vLLM replica asks for more than the rollout "
      "pool's 8 GPUs")),
    ("staleness-with-one-step-off", dataclasses.replace(ONE_STEP_OFF, staleness_threshold=0.5),
     (L + "stalenessThreshold", "is 0.5; only verl fully-async reads it")),
    ("negative-staleness", dataclasses.replace(FULLY_ASYNC, staleness_threshold=-0.1),
     (L + "stalenessThreshold", "is -0.1; verl asserts staleness_threshold >= 0")),
    ("age-with-verl", dataclasses.replace(FULLY_ASYNC, max_trajectory_age_steps=2),
     (L + "maxTrajectoryAgeSteps", "is 2; only nemo-rl async-grpo reads it")),
    ("pools-not-adding-up", dataclasses.replace(FULLY_ASYNC, trainer_nodes=2),
     (L + "rollout.nodes", "rollout.nodes + trainer.nodes = 1 + 2 = 3, not the run's 2 GPU nodes")),
    ("nemo-epochs", dataclasses.replace(ASYNC_GRPO, total_steps=None, total_epochs=1),
     (J + "totalEpochs", "is 1; NeMo RL's async GRPO stops only at grpo.max_num_steps")),
    ("nemo-more-than-one-pass", dataclasses.replace(ASYNC_GRPO, total_steps=GSM8K_TRAINING_ROWS // 32 + 1),
     (J + "totalSteps", f"is {GSM8K_TRAINING_ROWS // 32 + 1}, more than one pass over GSM8K's")),
    ("nemo-training-dp", dataclasses.replace(ASYNC_GRPO, rollout_nodes=1, trainer_nodes=3, generation_nodes=1),
     (J + "miniBatchSize", "is 512, not a multiple of the data-parallel size 3 (24 training GPUs")),
]


@pytest.mark.parametrize("spec,expected", [(spec, expected) for _, spec, expected in BAD],
                         ids=[case[0] for case in BAD])
def test_each_refusal_is_one_error_naming_the_key(spec, expected):
    found = split_errors(spec)
    assert len(found) == 1, found
    key, message = found[0]
    assert key == expected[0] and message.startswith(expected[1]), found


def test_the_verl_memory_plan_keeps_vllm_on_the_rollout_pool():
    split, colocated = plan_for_spec(FULLY_ASYNC), plan_for_spec(DEV)
    assert split is not None and colocated is not None
    roles = [phase.role for phase in split.phases]
    assert roles[0] == "rollout pool: vLLM"
    assert not any("vLLM" in role for role in roles[1:])
    assert not any("vLLM" in term.label for phase in split.phases[1:] for term in phase.terms)
    # The trainer pool shards the model over its 8 GPUs, not the run's 16.
    actor = {t.label: t.bytes for t in split.phases[1].terms}["actor fp32 parameters"]
    assert actor == 2 * {t.label: t.bytes for t in colocated.phases[1].terms}["actor fp32 parameters"]
