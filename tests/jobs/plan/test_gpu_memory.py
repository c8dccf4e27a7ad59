"""The GPU-memory planner: it reproduces every measurement of the H200 calibration within 10 %,
refuses what cannot fit with the breakdown, and is wired into preflight."""

from __future__ import annotations

import dataclasses
import json

import pytest

from jobs.cli import preflight as preflight_cli
from jobs.plan import gpu_memory as memory_plan
from jobs.plan.gpu_memory import (
    GIB,
    load_gpu_memory,
    memory_findings,
    plan_for_spec,
)
from jobs.plan.memory_model import calibration_estimate, reference_estimate, replace_shape
from jobs.plan.model_shapes import shape_for
from jobs.plan.preflight import check
from tests.conftest import ROOT
from tests.jobs.plan.test_preflight import DEV, PROD

CALIBRATION = json.loads((ROOT / "data" / "memory-calibration-h200.json").read_text())
# Measured after the constants were fitted, its predictions committed first (docs/memory-planner.md).
HOLDOUT = json.loads((ROOT / "data" / "memory-calibration-h200-holdout.json").read_text())
PHASES = ("forward_backward", "optimizer_step", "logprob_forward")
# The prod stack is on NeMo RL's own 32B GRPO recipe settings (TP 8, activation checkpointing,
# micro batch 1: Pulumi.prod.yaml). grpo_math_1B.yaml's defaults, which prod had before:
NEMO_RL_DEFAULTS = dict(training_tensor_parallel_size=1, activation_checkpointing=False,
                        dynamic_batch_size=False, sequence_packing=True)


def _rows():
    for document in (CALIBRATION, HOLDOUT):
        for model in document["measurements"]:
            for row in model["rows"]:
                yield model, row


def _measured_shape(model):
    return replace_shape(shape_for(model["model"]), model["layers_run"])


@pytest.mark.parametrize("document", [CALIBRATION, HOLDOUT], ids=["calibration", "holdout"])
def test_calibration_has_its_provenance(document):
    env = document["environment"]
    assert env["device"] == "NVIDIA H200"
    assert env["driver"] and env["torch"] and env["transformers"] and env["date_utc"]
    assert env["total_memory_bytes"] == load_gpu_memory()["nvidia-h200-141gb"].total_bytes
    assert len(document["measurements"]) >= 3


def test_calibration_models_are_the_shape_table_models():
    """The benchmark's configs (tools/calibrate_memory.py) are the committed shapes: the
    parameters PyTorch counted equal the table's count at the layers measured."""
    for model in CALIBRATION["measurements"] + HOLDOUT["measurements"]:
        shape = shape_for(model["model"])
        for key in ("hidden_size", "intermediate_size", "kv_heads", "attention_heads",
                    "vocab_size", "tie_word_embeddings", "layers"):
            assert model[key] == getattr(shape, key), (model["model"], key)
        assert _measured_shape(model).parameters == model["parameters"]


def test_planner_reproduces_every_measurement_within_10_percent():
    compared = []
    for model, row in _rows():
        if "out_of_memory" in row:
            continue
        estimate = calibration_estimate(_measured_shape(model), row["tokens"],
                                        row["gradient_checkpointing"])
        for phase in PHASES:
            measured = row[phase]["peak_allocated"]
            error = estimate[phase] / measured - 1
            compared.append((model["model"], model["layers_run"], row["tokens"],
                             row["gradient_checkpointing"], phase, round(error, 4)))
            assert abs(error) <= 0.10, compared[-1]
    assert len(compared) >= 200
    print("worst error:", max(compared, key=lambda c: abs(c[-1])))


def test_planner_reproduces_the_reference_passes_within_10_percent():
    compared = 0
    for model in HOLDOUT["measurements"]:
        for row in model["reference_rows"]:
            measured = row["reference_forward"]["peak_allocated"]
            estimate = reference_estimate(_measured_shape(model), row["tokens"])
            assert abs(estimate / measured - 1) <= 0.10, (model["model"], row["tokens"])
            compared += 1
    assert compared >= 9


def test_configurations_that_ran_out_of_memory_are_at_least_warned():
    total = CALIBRATION["environment"]["total_memory_bytes"]
    ooms = [(m, r) for m, r in _rows() if "out_of_memory" in r]
    assert ooms
    for model, row in ooms:
        estimate = calibration_estimate(_measured_shape(model), row["tokens"],
                                        row["gradient_checkpointing"])
        assert estimate["forward_backward"] > memory_plan.WARN_FRACTION * total, row


def _h200(spec, **changes):
    changes.setdefault("memory_check", "enforce")
    return dataclasses.replace(spec, gpu_type="nvidia-h200-141gb", gpu_memory_gib=141, **changes)


def test_32b_tp1_without_checkpointing_micro_8x2048_is_refused_with_the_breakdown():
    spec = _h200(PROD, micro_batch_size_per_gpu=8, max_prompt_length=512,
                 max_response_length=1536, memory_check="enforce", **NEMO_RL_DEFAULTS)
    errors = [f for f in check(spec) if f.level == "error"]
    assert [f.key for f in errors] == ["gke-grpo:job.microBatchSizePerGpu"]
    message = errors[0].message
    assert message.startswith("will not fit: policy forward+backward")
    assert "GPU memory plan: Qwen/Qwen2.5-32B-Instruct (nemo-rl) on NVIDIA H200" in message
    assert "activations, 16,384 tokens without checkpointing" in message
    assert "fp32 parameters (1/32 each)" in message


def test_memory_check_warn_turns_the_refusal_into_a_warning():
    spec = _h200(PROD, micro_batch_size_per_gpu=8, memory_check="warn", **NEMO_RL_DEFAULTS)
    findings = check(spec)
    assert [f.level for f in findings if f.key == "gke-grpo:job.microBatchSizePerGpu"] == ["warning"]
    assert not [f for f in findings if f.level == "error"]


def test_memory_check_is_not_part_of_the_run_identity():
    assert dataclasses.replace(PROD, memory_check="enforce").run_id == PROD.run_id


def test_dev_stack_fits_and_preflight_prints_the_breakdown(capsys):
    plan = plan_for_spec(DEV)
    assert plan.fraction < memory_plan.WARN_FRACTION
    assert memory_findings(DEV) == []
    assert preflight_cli.main(["--stack", "dev"]) == 0
    out = capsys.readouterr().out
    assert "GPU memory plan: Qwen/Qwen2.5-7B-Instruct (verl) on NVIDIA H200" in out
    assert "rollout: vLLM + resident actor and reference" in out


def test_prod_with_nemo_rl_32b_recipe_settings_fits():
    spec = dataclasses.replace(PROD, memory_check="enforce")
    assert (spec.training_tensor_parallel_size, spec.activation_checkpointing,
            spec.micro_batch_size_per_gpu) == (8, True, 1)
    assert check(spec) == []
    plan = plan_for_spec(spec)
    assert plan.fraction < memory_plan.WARN_FRACTION
    print(memory_plan.format_plan(plan))


def test_prod_as_committed_fits_and_nemo_rl_defaults_do_not():
    """Prod runs on the recipe's settings with the memory check enforced; grpo_math_1B.yaml's
    defaults (TP 1, no activation checkpointing, micro batch 4 x 2048 tokens) would be refused."""
    assert PROD.memory_check == "enforce"
    assert check(PROD) == []
    defaults = dataclasses.replace(PROD, micro_batch_size_per_gpu=4, **NEMO_RL_DEFAULTS)
    assert [(f.level, f.key) for f in check(defaults)] == [
        ("error", "gke-grpo:job.microBatchSizePerGpu")]


def test_vllm_pool_smaller_than_its_weights_is_refused():
    spec = _h200(PROD, rollout_tensor_parallel_size=1, rollout_gpu_memory_utilization=0.3,
                 micro_batch_size_per_gpu=1)
    findings = [f for f in check(spec) if f.key == "gke-grpo:job.rolloutGpuMemoryUtilization"]
    assert [f.level for f in findings] == ["error"]
    assert "vLLM refuses to start" in findings[0].message


def test_batch_larger_than_the_kv_cache_warns():
    spec = _h200(PROD, rollout_tensor_parallel_size=1, rollout_gpu_memory_utilization=0.5,
                 prompts_per_step=512, mini_batch_size=512, micro_batch_size_per_gpu=1)
    plan = plan_for_spec(spec)
    assert plan.kv.one_sequence_fits and not plan.kv.batch_fits
    warnings = [f for f in memory_findings(spec) if f.key == "gke-grpo:job.rolloutGpuMemoryUtilization"]
    assert [f.level for f in warnings] == ["warning"] and "in waves" in warnings[0].message


def test_kv_cache_arithmetic_32b():
    # 64 layers x 8 KV heads x 128 x 2 (K, V) x 2 bytes = 256 KiB a token (grpo-frameworks.md),
    # split over TP 8 (one KV head a GPU).
    kv = plan_for_spec(dataclasses.replace(PROD, rollout_tensor_parallel_size=8)).kv
    assert kv.kv_bytes_per_token == 256 * 1024 / 8
    assert kv.weights_bytes == 2 * shape_for(PROD.model).parameters / 8


def test_warns_above_85_percent():
    spec = _h200(DEV, log_prob_micro_batch_size_per_gpu=56, dynamic_batch_size=False,
                 max_tokens_per_gpu=None)
    plan = plan_for_spec(spec)
    assert memory_plan.WARN_FRACTION < plan.fraction <= 1
    findings = memory_findings(spec)
    assert [f.level for f in findings] == ["warning"]
    assert findings[0].key == "gke-grpo:job.logProbMicroBatchSizePerGpu"
    assert "tight:" in findings[0].message and "GPU memory plan" in findings[0].message


def test_verl_dynamic_batch_size_is_planned_at_its_token_budget():
    """With use_dynamic_bsz a micro batch holds up to ppo_max_token_len_per_gpu tokens (verl
    dp_actor.py), whatever the per-GPU micro batch says."""
    fixed = plan_for_spec(dataclasses.replace(DEV, dynamic_batch_size=False, max_tokens_per_gpu=None))
    text = memory_plan.format_plan(plan_for_spec(DEV))
    assert DEV.dynamic_batch_size and DEV.max_tokens_per_gpu == 24000
    assert "logits + log-softmax, 24,000 tokens" in text
    assert "logits + log-softmax, 12,288 tokens" in memory_plan.format_plan(fixed)   # 8 x 1,536


def test_unknown_model_is_not_checked_but_says_so():
    findings = memory_findings(dataclasses.replace(DEV, model="someone/unknown-7b"))
    assert [(f.level, f.key) for f in findings] == [("warning", "gke-grpo:job.model")]


def test_gpu_memory_file_has_every_gpu_type():
    gpus = load_gpu_memory()
    assert set(gpus) == {"nvidia-h200-141gb", "nvidia-b200"}
    assert gpus["nvidia-h200-141gb"].measured and gpus["nvidia-b200"].measured is None
    assert 139 < gpus["nvidia-h200-141gb"].total_bytes / GIB < 141


@pytest.mark.parametrize("checkpointing", [True, False])
def test_activation_terms_grow_with_layers_and_tokens(checkpointing):
    shape = shape_for("Qwen/Qwen2.5-32B-Instruct")
    small = calibration_estimate(replace_shape(shape, 4), 8192, checkpointing)
    large = calibration_estimate(replace_shape(shape, 8), 16384, checkpointing)
    assert large["forward_backward"] > small["forward_backward"]
