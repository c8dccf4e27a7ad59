"""The evaluation stage for real on CPU, with a stand-in generator that returns fixed answers:
GSM8K's test split as data staging wrote it, the training's prompts, the run's reward rule,
eval.json with its 95% interval and every sampling parameter, idempotent; then the whole path
after a completed trainer through the run driver (export, evaluation, records) and what
`gke-grpo status` and the report show of it."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest

from jobs.cli.eval_results import eval_results_from_log, eval_status_rows, read_eval_results
from jobs.cli.report import build_report, collect_inputs, run_status_rows
from jobs.contract.exports import export_dir
from jobs.contract.run_plan import Command
from jobs.head import evaluate as ev
from jobs.head import staging as prep
from tests.jobs.head.test_driver import drive, make_plan
from tests.jobs.head.test_export import hf_files
from tests.jobs.head.test_staging import FIXTURE, MODEL, FakeModelDownloader

RUN = "exp-12345678"
COT = Path(__file__).resolve().parents[3] / "data" / "nemo-rl-0.5.0" / "prompts" / "cot.txt"
# The fixture's test answers are 180, 36, 360 (tests/jobs/fixtures/gsm8k/test.jsonl).
ANSWERS = ["Reasoning...\n#### 180", "So she keeps \\boxed{36}.", "#### 999"]


def staged(tmp_path: Path, framework: str) -> Path:
    prep.prepare(framework, MODEL, "gsm8k", str(tmp_path / "data"), source_dir=str(FIXTURE),
                 model_downloader=FakeModelDownloader())
    return tmp_path / "data" / "datasets" / "gsm8k"


def complete_export(tmp_path: Path, step: int) -> Path:
    from jobs.head.export import ExportSource, write_export

    source_dir = tmp_path / "hf" / str(step)
    hf_files(source_dir)
    files = {p.name: p for p in source_dir.iterdir()}
    target = export_dir(RUN, step, tmp_path / "exports")
    write_export(ExportSource("copy", str(source_dir), files=files), target, run_id=RUN, step=step,
                 framework="verl")
    return target


def evaluate_argv(tmp_path: Path, framework: str, *extra: str) -> list[str]:
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps(ANSWERS))
    argv = ["--run-id", RUN, "--framework", framework, "--dataset-dir", str(staged(tmp_path, framework)),
            "--base-model", str(tmp_path / "data" / "models" / MODEL), "--model-id", MODEL,
            "--model-revision", "a" * 40, "--dataset-revision", "b" * 40,
            "--max-prompt-length", "512", "--max-response-length", "1024", "--gpus", "16",
            "--exports-root", str(tmp_path / "exports"), "--run-dir", str(tmp_path / "run"),
            "--answers-file", str(answers), *extra]
    if framework == "nemo-rl":
        argv += ["--prompt-file", str(COT)]
    return argv


def test_verl_rule_on_the_staged_test_split(tmp_path, capsys):
    complete_export(tmp_path, 20)
    assert ev.main(evaluate_argv(tmp_path, "verl")) == 0
    out = capsys.readouterr().out
    docs = read_eval_results(tmp_path / "run")
    assert [d["label"] for d in docs] == ["base", "step-20"]
    doc = docs[1]
    # '#### 180' right, '\boxed{36}' not verl's format, '#### 999' wrong: 1 of 3.
    assert (doc["correct"], doc["total"], doc["rule"]) == (1, 3, "verl-gsm8k-strict")
    assert doc["accuracy"] == pytest.approx(1 / 3)
    low, high = doc["ci95"]
    assert 0 < low < 1 / 3 < high < 1
    assert doc["sampling"] == {"n": 1, "temperature": 0.0, "top_p": 1.0, "top_k": 0, "min_p": 0.0,
                               "seed": 0, "max_tokens": 1024, "min_tokens": 0,
                               "repetition_penalty": 1.0, "presence_penalty": 0.0,
                               "frequency_penalty": 0.0, "stop": None, "ignore_eos": False,
                               "skip_special_tokens": True}
    assert doc["engine"]["dtype"] == "bfloat16" and doc["engine"]["generation_config"] == "vllm"
    assert doc["engine"]["max_model_len"] == 1536
    assert doc["model"]["revision"] == "a" * 40 and doc["dataset"]["revision"] == "b" * 40
    assert doc["dataset"]["split"] == "test" and doc["dataset"]["expected_rows"] == 1319
    assert doc["model"]["path"] == str(export_dir(RUN, 20, tmp_path / "exports"))
    assert doc["seconds"] >= 0 and doc["generator"] == "fixed answers (stand-in)"
    details = (tmp_path / "run" / "eval" / "step-20" / "details.jsonl").read_text().splitlines()
    assert [json.loads(line)["score"] for line in details] == [1.0, 0.0, 0.0]
    assert len(eval_results_from_log(out)) == 2
    # The same settings again: nothing is redone.
    before = (tmp_path / "run" / "eval" / "step-20" / "eval.json").read_text()
    assert ev.main(evaluate_argv(tmp_path, "verl")) == 0
    assert "exists with these settings, skipped" in capsys.readouterr().out
    assert (tmp_path / "run" / "eval" / "step-20" / "eval.json").read_text() == before


def test_nemo_rl_rule_and_prompt(tmp_path, monkeypatch):
    pytest.importorskip("math_verify")
    complete_export(tmp_path, 10)
    seen = []

    class Recording(ev.FixedAnswers):
        def generate(self, model_path, conversations, sampling, engine):
            seen.append(conversations)
            return super().generate(model_path, conversations, sampling, engine)

    args = ev.evaluate_parser().parse_args(evaluate_argv(tmp_path, "nemo-rl"))
    docs = ev.run_evaluation(args, Recording(ANSWERS))
    # math-verify reads '#### 180' (expression) and '\boxed{36}': 2 of 3.
    assert [(d["label"], d["correct"], d["rule"]) for d in docs] == [
        ("base", 2, "nemo-rl-math-verify"), ("step-10", 2, "nemo-rl-math-verify")]
    question = json.loads((FIXTURE / "test.jsonl").read_text().splitlines()[0])["question"]
    # NeMo RL's cot.txt (v0.5.0) formatted with the question, one user message.
    assert seen[0][0] == [{"role": "user", "content": COT.read_text().format(question)}]
    assert "\\\\boxed{}" in seen[0][0][0]["content"]


def test_incomplete_exports_are_not_evaluated(tmp_path, capsys):
    complete_export(tmp_path, 10)
    hf_files(export_dir(RUN, 20, tmp_path / "exports"))      # files but no marker
    assert ev.main(evaluate_argv(tmp_path, "verl")) == 0
    out = capsys.readouterr().out
    assert "step 20 not evaluated:" in out and "half-written" in out
    assert [d["label"] for d in read_eval_results(tmp_path / "run")] == ["base", "step-10"]


def test_a_missing_test_split_is_one_line(tmp_path, capsys):
    argv = evaluate_argv(tmp_path, "verl")
    argv[argv.index("--dataset-dir") + 1] = str(tmp_path / "nowhere")
    assert ev.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "test.parquet does not exist" in err


def test_replicas_follow_the_gpus_and_the_problem_count():
    assert ev.replicas_for(16, 1, 1319) == 16
    assert ev.replicas_for(16, 4, 1319) == 4
    assert ev.replicas_for(8, 1, 100) == 2
    assert ev.replicas_for(1, 2, 1319) == 1


def test_after_a_completed_trainer_the_driver_exports_and_evaluates(tmp_path):
    """The real driver, a stand-in trainer that checkpoints step 1 like verl (with the
    huggingface/ folder hf_model adds), the real export and evaluation modules as its children."""
    plan = make_plan(tmp_path, "ok")
    checkpoints = Path(plan.checkpoint_dir)
    hf_files(checkpoints / "global_step_1" / "actor" / "huggingface")
    run_dir = Path(plan.run_dir)
    argv = evaluate_argv(tmp_path, "verl")
    argv[argv.index("--run-dir") + 1] = str(run_dir)
    plan = dataclasses.replace(
        plan,
        export=Command(argv=(sys.executable, "-m", "jobs.head.export", "--run-id", plan.run_id,
                             "--checkpoint-dir", str(checkpoints), "--framework", "verl",
                             "--exports-root", str(tmp_path / "exports"))),
        evaluate=Command(argv=(sys.executable, "-m", "jobs.head.evaluate", *argv)))
    code, out, events, _ = drive(plan)
    assert code == 0
    assert "export done, evaluate done" in out
    names = [e["event"] for e in events]
    assert names[names.index("trainer_exit"):] == ["trainer_exit", "export_start", "export_end",
                                                   "evaluate_start", "evaluate_end", "driver_end"]
    assert all(e["exit_code"] == 0 for e in events if e["event"] in ("export_end", "evaluate_end"))
    docs = read_eval_results(run_dir)
    assert [(d["label"], d["correct"]) for d in docs] == [("base", 1), ("step-1", 1)]

    # What `status` and the report show of it, read from the run directory.
    inputs = collect_inputs(run_dir, plan.run_id, framework="verl", model=MODEL)
    # The stages' time is their own goodput bucket, inside the attempt's span (the cost so far).
    assert inputs.goodput.badput_s["export_evaluate"] > 0
    rows = dict(run_status_rows(inputs))
    assert rows["gsm8k test"].startswith("base 33.3% [")
    assert "-> step 1 33.3% [" in rows["gsm8k test"] and "(+0.0 pts" in rows["gsm8k test"]
    assert "rule verl-gsm8k-strict" in rows["gsm8k test"]
    page = build_report(inputs).html
    assert "Held-out evaluation (GSM8K test split)" in page
    assert "33.33%" in page and "95% interval (Wilson)" in page
    # Published scores of the same model, with their source.
    assert "GRPO-LoRA" in page and "93.4%" in page and "docs/algo/baseline.md" in page


def test_a_failed_evaluation_does_not_fail_the_trained_run(tmp_path):
    plan = make_plan(tmp_path, "ok")
    plan = dataclasses.replace(plan, evaluate=Command(argv=(sys.executable, "-c", "raise SystemExit(1)")))
    code, out, events, _ = drive(plan)
    assert code == 0 and "evaluate FAILED (exit 1)" in out
    assert [e["exit_code"] for e in events if e["event"] == "evaluate_end"] == [1]


def test_status_rows_say_base_trained_and_the_change():
    results = [{"label": "base", "accuracy": 0.9, "ci95": [0.88, 0.92], "total": 1319, "rule": "r"},
               {"label": "step-10", "accuracy": 0.91, "ci95": [0.89, 0.93], "total": 1319, "rule": "r"},
               {"label": "step-20", "accuracy": 0.93, "ci95": [0.91, 0.94], "total": 1319, "rule": "r"}]
    rows = eval_status_rows(results, training_reward=0.95)
    assert rows[0] == ("gsm8k test", "base 90.0% [88.0%, 92.0%] -> step 20 93.0% [91.0%, 94.0%] "
                                     "(+3.0 pts) (n=1319, rule r; training reward 0.950)")
    assert rows[1] == ("per step", "step 10 91.0%, step 20 93.0%")
