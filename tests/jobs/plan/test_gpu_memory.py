"""The GPU-memory planner: it reproduces every measurement of the H200 calibrations within 10 %
(the first calibration's loss and each framework's own log-prob path, fitted rows and held-out
rows alike), refuses what cannot fit with the breakdown, and is wired into preflight."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections import defaultdict

import pytest

from jobs.cli import preflight as preflight_cli
from jobs.plan import gpu_memory as memory_plan
from jobs.plan.gpu_memory import (
    GIB,
    load_gpu_memory,
    memory_findings,
    plan_for_spec,
)
from jobs.plan.memory_model import calibration_estimate, path_estimate, reference_estimate, replace_shape
from jobs.plan.model_shapes import shape_for
from jobs.plan.preflight import check
from tests.conftest import ROOT, skip_or_fail
from tests.jobs.plan.test_preflight import DEV_071 as DEV
from tests.jobs.plan.test_preflight import PROD
from tools import calibrate_memory

# DEV here is the dev stack on verl 0.7.1: the verl figures are 0.7.1's, measured on an H200
# (data/memory-calibration-h200-paths.json).

DATA = ROOT / "data"
CALIBRATION = json.loads((DATA / "memory-calibration-h200.json").read_text())
# Measured after the constants were fitted, its predictions committed first (docs/memory-planner.md).
HOLDOUT = json.loads((DATA / "memory-calibration-h200-holdout.json").read_text())
# Each framework's own log-prob path (tools/calibrate_memory.py --paths), fitted rows and held-out rows.
PATHS = json.loads((DATA / "memory-calibration-h200-paths.json").read_text())
PATHS_HOLDOUT = json.loads((DATA / "memory-calibration-h200-paths-holdout.json").read_text())
PATHS_PREDICTIONS = json.loads((DATA / "memory-calibration-h200-paths-holdout-predictions.json").read_text())
# verl 0.9.1's path (tools/calibrate_memory.py --paths --verl-version 0.9.1) on one H100 80GB.
PATHS_091 = json.loads((DATA / "memory-calibration-h100-paths-verl-0.9.1.json").read_text())
# Rows of that run whose compiled entropy ran eagerly: dynamo hit its recompile limit (8) on
# entropy_from_logits on the 7B build ("GLOBAL_STATE changed: grad_mode", the run's log), and the
# row's peak equals the eager row's (76,562,144,256 bytes): predicted as the eager path that ran.
EAGER_FALLBACK_091 = {("Qwen/Qwen2.5-7B-Instruct", 24000, "verl.compute_log_prob.entropy"),
                      ("Qwen/Qwen2.5-7B-Instruct", 24000, "verl.compute_log_prob.entropy.temperature")}
# Measured, not fitted within 10 %: LogProbPath refuses it at 0.9.1 (VERL_091.train_entropy_chunked).
REFUSED_091 = {"verl.update_policy.entropy.chunking"}
DOCUMENTS = {"calibration": CALIBRATION, "holdout": HOLDOUT, "paths": PATHS, "paths-holdout": PATHS_HOLDOUT}
PHASES = ("forward_backward", "optimizer_step", "logprob_forward")
# The prod stack is on NeMo RL's own 32B GRPO recipe settings (TP 8, activation checkpointing,
# micro batch 1: Pulumi.prod.yaml). grpo_math_1B.yaml's defaults, which prod had before:
NEMO_RL_DEFAULTS = dict(training_tensor_parallel_size=1, activation_checkpointing=False,
                        dynamic_batch_size=False, sequence_packing=True)
# sha256 of the two source files the --paths runs carried that are not installed here, as read
# from Dao-AILab/flash-attention tag v2.8.3 (060c9188) and NVIDIA-NeMo/RL tag v0.5.0 (6c708930).
PINNED_SOURCES = {
    "flash_attn/ops/triton/cross_entropy.py": "cb9ea79ae3ada5237133bb0365c512817288b0811ac9fbafad4f1b015a20fe7c",
    "nemo_rl/distributed/model_utils.py": "2323eff802c8b7ab65fb2ba437377b75b075570d0ea38956e72fc47971a36feb",
}
ALL_PATHS = {v.name for v in calibrate_memory.VERL_PATHS + calibrate_memory.VERL_PADDED_PATHS
             + calibrate_memory.NEMO_RL_PATHS}


def _rows():
    for document in (CALIBRATION, HOLDOUT):
        for model in document["measurements"]:
            for row in model["rows"]:
                yield model, row


def _path_rows(document):
    for model in document["measurements"]:
        for row in model["rows"]:
            yield model, row


def _measured_shape(model):
    return replace_shape(shape_for(model["model"]), model["layers_run"])


# The releases each --paths file measured: the two first files name them in their provenance
# ("sources": verl tag v0.7.1, NeMo RL tag v0.5.0), later files in "framework_versions".
FIRST_PATHS_VERSIONS = {"verl": "0.7.1", "nemo-rl": "0.5.0"}


def _document_versions(document) -> dict:
    return document.get("framework_versions", FIRST_PATHS_VERSIONS)


def _path_estimate(model, row, versions) -> float:
    path, entropy = calibrate_memory.planner_path(row["framework"], row["options"],
                                                  row["response_length"], row["sequence"],
                                                  versions[row["framework"]])
    return path_estimate(_measured_shape(model), path, phase=row["phase"], tokens=row["tokens"],
                         checkpointing=row["gradient_checkpointing"], entropy=entropy)


@pytest.mark.parametrize("name", list(DOCUMENTS))
def test_calibration_has_its_provenance(name):
    document = DOCUMENTS[name]
    env = document["environment"]
    assert env["device"] == "NVIDIA H200"
    assert env["driver"] and env["torch"] and env["transformers"] and env["date_utc"]
    assert env["total_memory_bytes"] == load_gpu_memory()["nvidia-h200-141gb"].total_bytes
    assert len(document["measurements"]) >= 3
    if name.startswith("paths"):
        assert env["triton"] and set(env["framework_sources"]) >= set(PINNED_SOURCES)
        assert {"run", "command", "sources", "time_budget"} <= set(document["provenance"])
        assert "--paths" in document["command"]


@pytest.mark.parametrize("name", ["paths", "paths-holdout"])
def test_the_paths_ran_the_frameworks_pinned_source_files(name):
    """The files the runs loaded are verl 0.7.1's (.verl-trees/0.7.1, = tag v0.7.1), flash-attn
    2.8.3's and NeMo RL 0.5.0's, byte for byte."""
    sources = DOCUMENTS[name]["environment"]["framework_sources"]
    for file, digest in PINNED_SOURCES.items():
        assert sources[file]["sha256"] == digest
    from tools import verl_snapshot

    installed = verl_snapshot.tree("0.7.1")
    if not installed.is_dir():
        skip_or_fail(f"{installed} is missing (make setup installs every verl release in .verl-trees)")
        return
    verl_files = [f for f in sources if f.startswith("verl/")]
    assert len(verl_files) == 4
    for file in verl_files:
        digest = hashlib.sha256((installed / file.removeprefix("verl/")).read_bytes()).hexdigest()
        assert sources[file]["sha256"] == digest, file


def test_calibration_models_are_the_shape_table_models():
    """The benchmark's configs (tools/calibrate_memory.py) are the committed shapes: the
    parameters PyTorch counted equal the table's count at the layers measured."""
    for document in DOCUMENTS.values():
        for model in document["measurements"]:
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


@pytest.mark.parametrize("name", ["paths", "paths-holdout"])
def test_planner_reproduces_every_framework_path_within_10_percent(name):
    """Every committed row of every path: verl's update_policy and compute_log_prob (packed and
    padded rows, compiled, eager, chunked and checkpointed entropy, fused kernels) and NeMo RL's
    train and get_logprobs (TP 1 and vocab-parallel)."""
    errors = defaultdict(list)
    for model, row in _path_rows(DOCUMENTS[name]):
        assert "error" not in row, row
        if "out_of_memory" in row:
            continue
        error = _path_estimate(model, row, _document_versions(DOCUMENTS[name])) / row[row["phase"]]["peak_allocated"] - 1
        errors[row["path"]].append(error)
        assert abs(error) <= 0.10, (model["model"], model["layers_run"], row["path"], row["tokens"],
                                    row["gradient_checkpointing"], round(error, 4))
    assert set(errors) == ALL_PATHS
    assert sum(len(e) for e in errors.values()) >= (150 if name == "paths" else 90)
    for path, values in sorted(errors.items()):
        print(f"{path}: {len(values)} rows, worst {max(values, key=abs):+.2%}")


def test_verl_0_9_1_calibration_has_its_provenance():
    """One H100 80GB, verl 0.9.1's own files (.verl-trees/0.9.1, byte for byte) and flash-attn
    2.8.3's cross entropy."""
    env = PATHS_091["environment"]
    assert env["device"].startswith("NVIDIA H100") and env["driver"] and env["triton"]
    assert env["date_utc"].startswith("2026-12-06") and PATHS_091["framework_versions"] == {"verl": "0.9.1"}
    assert "--paths --verl-version 0.9.1" in PATHS_091["command"]
    sources = env["framework_sources"]
    file = "flash_attn/ops/triton/cross_entropy.py"
    assert sources[file]["sha256"] == PINNED_SOURCES[file]
    from tools import verl_snapshot

    installed = verl_snapshot.tree("0.9.1")
    if not installed.is_dir():
        skip_or_fail(f"{installed} is missing (make setup installs every verl release in .verl-trees)")
        return
    verl_files = [f for f in sources if f.startswith("verl/")]
    assert "verl/workers/engine/fsdp/transformer_impl.py" in verl_files and len(verl_files) == 6
    for file in verl_files:
        digest = hashlib.sha256((installed / file.removeprefix("verl/")).read_bytes()).hexdigest()
        assert sources[file]["sha256"] == digest, file


def test_planner_reproduces_every_verl_0_9_1_path_within_10_percent():
    """Every committed row of the 0.9.1 run within 10 %, but the chunked entropy in the loss,
    which did not fit and is refused (UnmeasuredVersion), and two rows whose compiled entropy ran
    eagerly (EAGER_FALLBACK_091), predicted as the eager path."""
    from jobs.plan.logprob_paths import UnmeasuredVersion

    errors = defaultdict(list)
    for model, row in _path_rows(PATHS_091):
        assert "error" not in row, row
        if "out_of_memory" in row:
            continue
        if row["path"] in REFUSED_091:
            with pytest.raises(UnmeasuredVersion, match="not fitted within 10 %"):
                _path_estimate(model, row, PATHS_091["framework_versions"])
            continue
        ran = row
        if (model["model"], row["tokens"], row["path"]) in EAGER_FALLBACK_091:
            ran = {**row, "options": {**row["options"], "torch_compile": False}}
        error = _path_estimate(model, ran, PATHS_091["framework_versions"]) / row[row["phase"]]["peak_allocated"] - 1
        errors[row["path"]].append(error)
        assert abs(error) <= 0.10, (model["model"], model["layers_run"], row["path"], row["tokens"],
                                    row["gradient_checkpointing"], round(error, 4))
    names = {v.name for v in calibrate_memory.VERL_091_PATHS + calibrate_memory.VERL_PADDED_PATHS}
    assert set(errors) == names - REFUSED_091
    assert sum(len(e) for e in errors.values()) >= 140
    for path, values in sorted(errors.items()):
        print(f"{path}: {len(values)} rows, worst {max(values, key=abs):+.2%}")


def test_held_out_predictions_were_written_for_every_row_and_hold():
    """The predictions file was committed before the held-out run: it names every row the run
    measured, and each prediction is within 10 % of the measurement."""
    predicted = {(p["model"], p["layers_run"], p["wrapping"], p["gradient_checkpointing"], p["path"],
                  p["tokens"], p["response_length"]): p["predicted_peak_allocated"]
                 for p in PATHS_PREDICTIONS["predictions"]}
    assert "before" in PATHS_PREDICTIONS["provenance"]
    measured = 0
    for model, row in _path_rows(PATHS_HOLDOUT):
        key = (model["model"], model["layers_run"], model["wrapping"],
               model["gradient_checkpointing"], row["path"], row["tokens"], row["response_length"])
        if "out_of_memory" in row:
            assert predicted[key] > load_gpu_memory()["nvidia-h200-141gb"].total_bytes, key
            continue
        assert abs(predicted[key] / row[row["phase"]]["peak_allocated"] - 1) <= 0.10, key
        measured += 1
    assert measured >= 90


def test_configurations_that_ran_out_of_memory_are_at_least_warned():
    total = CALIBRATION["environment"]["total_memory_bytes"]
    ooms = [(m, r) for m, r in _rows() if "out_of_memory" in r]
    assert ooms
    for model, row in ooms:
        estimate = calibration_estimate(_measured_shape(model), row["tokens"],
                                        row["gradient_checkpointing"])
        assert estimate["forward_backward"] > memory_plan.WARN_FRACTION * total, row
    path_ooms = [(m, r) for m, r in _path_rows(PATHS_HOLDOUT) if "out_of_memory" in r]
    assert path_ooms
    for model, row in path_ooms:
        assert _path_estimate(model, row, _document_versions(PATHS_HOLDOUT)) > memory_plan.WARN_FRACTION * total, row


def test_the_error_table_has_a_row_per_framework_path():
    doc = (ROOT / "docs" / "memory-planner.md").read_text()
    for path in ALL_PATHS:
        assert f"| {path} |" in doc, path


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
    text = memory_plan.format_plan(plan)
    assert "GPU memory plan: Qwen/Qwen2.5-7B-Instruct (verl) on NVIDIA H200" in text
    assert "rollout: vLLM + resident actor and reference" in text
    # The committed dev stack runs verl 0.9.1, measured on an H100 (VERL_091): preflight prints
    # its plan, and it fits.
    assert preflight_cli.main(["--stack", "dev"]) == 0
    out = capsys.readouterr().out
    assert "GPU memory is not checked" not in out
    assert "GPU memory plan: Qwen/Qwen2.5-7B-Instruct (verl) on NVIDIA H200" in out


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


def _verl(**overrides):
    """The dev stack with verl overrides appended (they win over the rendered ones)."""
    extra = tuple(f"actor_rollout_ref.{key}={value}" for key, value in overrides.items())
    return dataclasses.replace(DEV, extra_overrides=DEV.extra_overrides + extra)


def _phase(plan, start):
    return next(p for p in plan.phases if p.role.startswith(start))


def _labels(phase):
    return " | ".join(t.label for t in phase.terms)


def test_warns_above_85_percent():
    """Eager entropy (use_torch_compile: false) at 56,000 tokens a micro batch: the actor's
    log-prob pass is the peak, and with a dynamic batch size the key to lower is the budget."""
    spec = dataclasses.replace(_verl(**{"actor.use_torch_compile": "false"}), max_tokens_per_gpu=56000)
    plan = plan_for_spec(spec)
    assert memory_plan.WARN_FRACTION < plan.fraction <= 1
    assert plan.peak.role.startswith("actor log-prob pass")
    findings = memory_findings(spec)
    assert [f.level for f in findings] == ["warning"]
    assert findings[0].key == "gke-grpo:job.maxTokensPerGpu"
    assert "tight:" in findings[0].message and "GPU memory plan" in findings[0].message


def test_fixed_micro_batches_point_at_the_micro_batch_keys():
    spec = dataclasses.replace(_verl(**{"actor.use_torch_compile": "false"}), dynamic_batch_size=False,
                               max_tokens_per_gpu=None, log_prob_micro_batch_size_per_gpu=40)
    assert [f.key for f in memory_findings(spec)] == ["gke-grpo:job.logProbMicroBatchSizePerGpu"]


def test_verl_dynamic_batch_size_is_planned_at_its_token_budget():
    """With use_dynamic_bsz a micro batch holds up to ppo_max_token_len_per_gpu tokens (verl
    dp_actor.py), whatever the per-GPU micro batch says."""
    fixed = plan_for_spec(dataclasses.replace(DEV, dynamic_batch_size=False, max_tokens_per_gpu=None))
    text = memory_plan.format_plan(plan_for_spec(DEV))
    assert DEV.dynamic_batch_size and DEV.max_tokens_per_gpu == 24000
    assert "logits + log-softmax (bf16, flash-attn cross entropy), 24,000 tokens x 152,064" in text
    assert "12,288 tokens x 152,064" in memory_plan.format_plan(fixed)      # 8 x 1,536


def test_verl_plan_follows_verls_own_log_prob_path():
    """dev (verl 0.7.1, packed rows): bf16 logits and flash-attn's cross entropy in training
    (8.25 bytes a token x vocabulary entry), 2 bytes in both log-prob passes (the actor's with
    its compiled entropy, the reference's without); before, the planner charged 12.22 and 10."""
    plan = plan_for_spec(DEV)
    tokens_vocab = 24000 * 152064
    old_lp, ref_lp = _phase(plan, "actor log-prob pass"), _phase(plan, "reference log-prob pass")
    assert "with entropy" in _labels(old_lp) and "no entropy" in _labels(ref_lp)
    logits = next(t for t in old_lp.terms if t.label.startswith("log-prob logits"))
    assert logits.bytes == 2.0 * tokens_vocab
    train = _phase(plan, "actor forward+backward")
    logits = next(t for t in train.terms if t.label.startswith("logits + log-softmax"))
    assert logits.bytes == 8.25 * tokens_vocab
    assert plan.fraction < memory_plan.WARN_FRACTION and plan.peak.role.startswith("rollout")


@pytest.mark.parametrize(("overrides", "phase", "label"), [
    ({"model.use_fused_kernels": "true"}, "actor forward+backward", "one layer recomputed"),
    ({"model.use_fused_kernels": "true"}, "actor log-prob pass", "a layer's MLP intermediates"),
    ({"actor.use_torch_compile": "false"}, "actor log-prob pass", "eager entropy"),
    ({"actor.use_torch_compile": "false", "actor.entropy_from_logits_with_chunking": "true"},
     "actor log-prob pass", "eager entropy (one 2,048-row chunk)"),
    ({"actor.use_torch_compile": "false", "actor.entropy_coeff": "0.001"},
     "actor forward+backward", "eager entropy (use_torch_compile: false)"),
    ({"model.use_remove_padding": "false"}, "actor forward+backward", "bf16 padded rows"),
    ({"model.use_remove_padding": "false"}, "reference log-prob pass", "copy of the response logits"),
    ({"model.use_remove_padding": "false"}, "actor log-prob pass", "eager entropy of the response logits"),
])
def test_verl_options_change_the_path(overrides, phase, label):
    plan = plan_for_spec(_verl(**overrides))
    assert label in _labels(_phase(plan, phase)), memory_plan.format_plan(plan)


def test_verl_fused_kernels_shrink_the_logits_and_a_triton_backend_is_noted():
    default, fused = plan_for_spec(DEV), plan_for_spec(_verl(**{"model.use_fused_kernels": "true"}))
    for start in ("actor forward+backward", "actor log-prob pass"):
        assert _phase(fused, start).total < _phase(default, start).total
    triton = plan_for_spec(_verl(**{"model.use_fused_kernels": "true",
                                    "model.fused_kernel_options.impl_backend": "triton"}))
    assert any("impl_backend triton: not measured" in note for note in triton.notes)


def test_nemo_rl_plan_follows_its_log_prob_path():
    """prod (NeMo RL, TP 8, a log-prob batch of 1 as v0.7.0's 32B recipe): fp32 logits,
    vocab-parallel DistributedLogprob on 1/8 of the vocabulary; at TP 1, log_softmax of the whole
    vocabulary. The root unit holds the embedding and the LM head (Automodel wraps only the
    decoder layers)."""
    text = memory_plan.format_plan(plan_for_spec(PROD))
    assert "log-prob logits (fp32, DistributedLogprob), 2,048 tokens x 19,008" in text
    tp1 = plan_for_spec(dataclasses.replace(PROD, **NEMO_RL_DEFAULTS))
    lp = _phase(tp1, "log-prob pass")
    assert "log-prob logits (fp32, log_softmax), 2,048 tokens x 152,064" in _labels(lp)
    root = next(t for t in lp.terms if t.label == "root unit gathered in bf16")
    shape = shape_for(PROD.model)
    assert root.bytes == 2 * 2 * shape.vocab_size * shape.hidden_size


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
