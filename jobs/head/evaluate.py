"""Evaluate the base model and a run's exports on GSM8K's test split with vLLM, scored with the
reward rule the run trained with (jobs/contract/gsm8k_scoring.py).

    python3 -m jobs.head.evaluate --run-id RUN --framework verl|nemo-rl --dataset-dir DIR
        --base-model DIR --model-id ID [--model-revision SHA] [--dataset-revision SHA]
        --max-prompt-length P --max-response-length R --gpus G [--tensor-parallel-size T]
        [--every-steps M] [--prompt-file FILE] [--vllm-python PATH] [--answers-file FILE]

The run driver starts it right after the export that follows a completed trainer (the plan's
``evaluate`` command), while the run still holds its GPU workers: the gang is up and paid for,
so the evaluation adds minutes to it rather than a new node's provisioning. The generation runs
as Ray tasks on those workers (``num_gpus`` = the tensor-parallel size each; as many replicas as
the run's GPUs allow, each a contiguous shard of the problems), the scoring here on the head.

What is evaluated: the base model (the staged snapshot the run started from) and the run's
complete exports: the newest, and with ``--every-steps M`` every one whose step is a multiple of
M. Each result is ``<run dir>/eval/<base|step-N>/eval.json`` (+ ``details.jsonl``, one line per
problem), skipped when one with the same settings exists (idempotent across attempts). A
``[jobs.evaluate] RESULT {json}`` line per result goes to the log, which ``gke-grpo status`` reads.

Prompts are the training's: verl's rows of test.parquet carry their chat prompt (the GSM8K
instruction to answer after "####"); NeMo RL's are ``--prompt-file`` (the run's
data.prompt_file, examples/prompts/cot.txt at v0.5.0) formatted with the question, as
math_hf_data_processor (nemo_rl/data/processors.py, v0.5.0) does, one user message. Both go
through the model's chat template with a generation prompt (``LLM.chat``).

``--answers-file`` replaces vLLM by fixed answers (a JSON list of strings, used in order and
cycled): a stand-in generator that exercises everything else on CPU. Standard library only at
import (pyarrow, ray and vLLM where used).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from jobs.contract.datasets import GSM8K_HF_REPO, GSM8K_TEST_ROWS, dataset_files
from jobs.contract.exit_codes import ExitCode
from jobs.contract.exports import (
    BASE_LABEL,
    EVAL_FILE,
    EVAL_RESULT_MARKER,
    EXPORTS_ROOT,
    eval_result_path,
    export_state,
    parse_step_label,
    step_label,
)
from jobs.contract.gsm8k_scoring import Scorer, ScorerUnavailable, scorer_for, wilson_interval
from jobs.contract.records import run_dir as run_directory

LOG_PREFIX = "[evaluate]"
EVAL_VERSION = 1
DETAILS_FILE = "details.jsonl"
SEED = 0
# vLLM's share of each GPU: the evaluation has the GPU to itself (the trainer has exited).
GPU_MEMORY_UTILIZATION = 0.9
# Fewer problems than this per replica would spend more time loading the model than generating.
MIN_PROBLEMS_PER_REPLICA = 64
GENERATION_TIMEOUT_SECONDS = 3 * 3600


def sampling_params(max_response_length: int) -> dict[str, Any]:
    """Every field of vLLM's SamplingParams that decides an answer, explicitly: greedy, one
    answer, as long as the training allowed, no penalties, no stop strings but the model's EOS."""
    return {"n": 1, "temperature": 0.0, "top_p": 1.0, "top_k": 0, "min_p": 0.0, "seed": SEED,
            "max_tokens": max_response_length, "min_tokens": 0, "repetition_penalty": 1.0,
            "presence_penalty": 0.0, "frequency_penalty": 0.0, "stop": None,
            "ignore_eos": False, "skip_special_tokens": True}


def engine_args(max_model_len: int, tensor_parallel_size: int) -> dict[str, Any]:
    return {"dtype": "bfloat16", "tensor_parallel_size": tensor_parallel_size, "seed": SEED,
            "max_model_len": max_model_len, "gpu_memory_utilization": GPU_MEMORY_UTILIZATION,
            "generation_config": "vllm", "trust_remote_code": False}


# ---- the problems ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Gsm8kProblem:
    index: int
    conversation: list[dict[str, str]]
    ground_truth: str


class EvaluationError(Exception):
    """Bad input or a missing prerequisite: one line."""


def load_problems(framework: str, dataset_dir: str, prompt_file: str | None) -> list[Gsm8kProblem]:
    """GSM8K's test split as staged for the run (jobs/head/staging.py), with its prompts."""
    path = Path(dataset_files(dataset_dir, framework)["test"])
    if not path.is_file():
        raise EvaluationError(f"{path} does not exist: the run's data staging writes it "
                              "(GSM8K's test split, never given to the trainer)")
    if framework == "verl":
        import pyarrow.parquet as pq  # lazily: the verl image has it

        rows = pq.read_table(path, columns=["prompt", "reward_model"]).to_pylist()
        return [Gsm8kProblem(i, [{"role": m["role"], "content": m["content"]} for m in row["prompt"]],
                        str(row["reward_model"]["ground_truth"])) for i, row in enumerate(rows)]
    template = None
    if prompt_file is not None:
        try:
            template = Path(prompt_file).read_text()
        except OSError as exc:
            raise EvaluationError(f"prompt file {prompt_file}: {exc.strerror or exc} (the run's "
                                  "data.prompt_file, relative to the NeMo RL workdir)") from None
    problems: list[Gsm8kProblem] = []
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                row = json.loads(line)
                text = template.format(row["question"]) if template else row["question"]
                problems.append(Gsm8kProblem(len(problems), [{"role": "user", "content": text}],
                                        str(row["answer"])))
    return problems


# ---- generators --------------------------------------------------------------------------------

class Generator(Protocol):
    name: str

    def generate(self, model_path: str, conversations: list[list[dict[str, str]]],
                 sampling: dict[str, Any], engine: dict[str, Any]) -> list[dict[str, Any]]: ...


@dataclass
class FixedAnswers:
    """The stand-in: answers from a list, in order, cycled; "stop" as the finish reason."""
    answers: list[str]
    name: str = "fixed answers (stand-in)"

    def generate(self, model_path, conversations, sampling, engine):
        return [{"text": self.answers[i % len(self.answers)], "finish_reason": "stop",
                 "tokens": len(self.answers[i % len(self.answers)].split())}
                for i in range(len(conversations))]


@dataclass
class VllmOnRay:
    """vLLM's offline engine in Ray tasks on the GPU workers, one shard of problems each."""
    replicas: int
    python: str | None = None          # the worker interpreter that has vLLM (NeMo RL's venv)
    timeout_s: float = GENERATION_TIMEOUT_SECONDS
    name: str = "vllm"

    def generate(self, model_path, conversations, sampling, engine):
        import ray
        from ray import cloudpickle

        from jobs.head import eval_generation

        if not ray.is_initialized():
            ray.init(address="auto", logging_level="WARNING")
        # The workers have no copy of jobs/ (the ConfigMap reaches the head only).
        cloudpickle.register_pickle_by_value(eval_generation)
        options: dict[str, Any] = {"num_gpus": engine["tensor_parallel_size"], "num_cpus": 1,
                                   "max_retries": 0}
        if self.python:
            options["runtime_env"] = {"py_executable": self.python,
                                      "env_vars": {"VIRTUAL_ENV": str(Path(self.python).parent.parent)}}
        task = ray.remote(eval_generation.generate_shard).options(**options)
        size = math.ceil(len(conversations) / self.replicas)
        shards = [conversations[i:i + size] for i in range(0, len(conversations), size)]
        refs = [task.remote(model_path, shard, sampling, engine) for shard in shards]
        results: list[dict[str, Any]] = []
        for part in ray.get(refs, timeout=self.timeout_s):
            results.extend(part)
        return results


def replicas_for(gpus: int, tensor_parallel_size: int, problems: int) -> int:
    return max(1, min(gpus // max(tensor_parallel_size, 1),
                      math.ceil(problems / MIN_PROBLEMS_PER_REPLICA)))


# ---- one evaluation ----------------------------------------------------------------------------

@dataclass
class EvalTarget:
    label: str                   # "base" | "step-<n>"
    model_path: str
    step: int | None = None


@dataclass
class EvalSettings:
    run_id: str
    framework: str
    model_id: str
    model_revision: str | None
    dataset_revision: str | None
    dataset_file: str
    prompt_file: str | None
    sampling: dict[str, Any]
    engine: dict[str, Any]
    limit: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def key(self, target: EvalTarget) -> str:
        """What makes two evaluations the same: target, rule, data, prompts and settings."""
        basis = {**asdict(self), "label": target.label, "model_path": target.model_path,
                 "rule": scorer_for(self.framework).rule, "version": EVAL_VERSION}
        basis.pop("extra")
        return hashlib.sha256(json.dumps(basis, sort_keys=True).encode()).hexdigest()[:16]


def _replace_file(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def existing_result(path: Path, key: str) -> dict[str, Any] | None:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and doc.get("settings_key") == key else None


def evaluate_target(target: EvalTarget, problems: list[Gsm8kProblem], settings: EvalSettings, *,
                    scorer: Scorer, generator: Generator, result_path: Path,
                    clock: Callable[[], float] = time.time) -> dict[str, Any]:
    started = clock()
    outputs = generator.generate(target.model_path, [p.conversation for p in problems],
                                 settings.sampling, settings.engine)
    generated = clock()
    if len(outputs) != len(problems):
        raise RuntimeError(f"the generator returned {len(outputs)} answers for "
                           f"{len(problems)} problems")
    details = []
    correct = 0
    for problem, output in zip(problems, outputs, strict=True):
        value = scorer.score(output["text"], problem.ground_truth)
        correct += value == 1.0
        details.append({"index": problem.index, "score": value, "ground_truth": problem.ground_truth,
                        "finish_reason": output.get("finish_reason"), "tokens": output.get("tokens"),
                        "response": output["text"]})
    ended = clock()
    total = len(problems)
    low, high = wilson_interval(correct, total)
    engine_version = next((o.get("vllm") for o in outputs if o.get("vllm")), None)
    doc = {
        "version": EVAL_VERSION, "settings_key": settings.key(target), "run_id": settings.run_id,
        "label": target.label, "step": target.step,
        "model": {"path": target.model_path, "id": settings.model_id,
                  "revision": settings.model_revision,
                  "kind": "base" if target.label == BASE_LABEL else "export"},
        "dataset": {"repo": GSM8K_HF_REPO, "config": "main", "split": "test",
                    "revision": settings.dataset_revision, "file": settings.dataset_file,
                    "rows": total, "expected_rows": GSM8K_TEST_ROWS,
                    "limit": settings.limit},
        "rule": scorer.rule, "rule_source": scorer.source,
        "correct": correct, "total": total, "accuracy": correct / total if total else None,
        "ci95": [low, high], "ci_method": "Wilson score interval, z = 1.96",
        "truncated": sum(1 for d in details if d["finish_reason"] == "length"),
        "generator": generator.name, "engine_version": engine_version,
        "sampling": settings.sampling, "engine": settings.engine,
        "prompt_file": settings.prompt_file,
        "started": started, "ended": ended, "seconds": round(ended - started, 2),
        "generation_seconds": round(generated - started, 2),
        **settings.extra,
    }
    _replace_file(result_path.with_name(DETAILS_FILE),
                  "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in details))
    _replace_file(result_path, json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return doc


def targets_of(run_id: str, base_model: str, exports_root: Path,
               every_steps: int | None) -> tuple[list[EvalTarget], list[str]]:
    """The base model and the run's complete exports to evaluate; notes on what is left out."""
    targets = [EvalTarget(BASE_LABEL, base_model)]
    notes: list[str] = []
    root = exports_root / run_id
    steps = sorted(s for p in (root.iterdir() if root.is_dir() else [])
                   for s in [parse_step_label(p.name)] if s is not None)
    complete = []
    for step in steps:
        state = export_state(root / step_label(step))
        if state.complete:
            complete.append(step)
        else:
            notes.append(f"step {step} not evaluated: {state.reason}")
    chosen = set(complete[-1:])
    if every_steps:
        chosen |= {s for s in complete if s % every_steps == 0}
    targets += [EvalTarget(step_label(s), str(root / step_label(s)), s) for s in sorted(chosen)]
    if not complete:
        notes.append(f"no complete export under {root}: only the base model is evaluated")
    return targets, notes


def run_evaluation(args: argparse.Namespace, generator: Generator, out=None) -> list[dict]:
    out = out or sys.stdout
    scorer = scorer_for(args.framework)
    try:
        scorer.check_available()
    except ScorerUnavailable as exc:
        raise EvaluationError(str(exc)) from None
    problems = load_problems(args.framework, args.dataset_dir, args.prompt_file)
    if args.limit:
        problems = problems[:args.limit]
    if not problems:
        raise EvaluationError(f"no problems in {args.dataset_dir}'s test split")
    run_dir = Path(args.run_dir) if args.run_dir else run_directory(args.run_id)
    targets, notes = targets_of(args.run_id, args.base_model, Path(args.exports_root),
                                args.every_steps)
    for note in notes:
        print(f"{LOG_PREFIX} {note}", file=out, flush=True)
    settings = EvalSettings(
        run_id=args.run_id, framework=args.framework, model_id=args.model_id,
        model_revision=args.model_revision, dataset_revision=args.dataset_revision,
        dataset_file=dataset_files(args.dataset_dir, args.framework)["test"],
        prompt_file=args.prompt_file, sampling=sampling_params(args.max_response_length),
        engine=engine_args(args.max_prompt_length + args.max_response_length,
                           args.tensor_parallel_size),
        limit=args.limit, extra={"gpus": args.gpus, "replicas": getattr(generator, "replicas", 1)})
    results = []
    for target in targets:
        path = eval_result_path(run_dir, target.label)
        found = existing_result(path, settings.key(target))
        if found is not None:
            print(f"{LOG_PREFIX} {target.label}: {path} exists with these settings, skipped",
                  file=out, flush=True)
            doc = found
        else:
            print(f"{LOG_PREFIX} {target.label}: {len(problems)} problems on {target.model_path} "
                  f"({generator.name}, rule {scorer.rule})", file=out, flush=True)
            doc = evaluate_target(target, problems, settings, scorer=scorer, generator=generator,
                                  result_path=path)
        low, high = doc["ci95"]
        print(f"{LOG_PREFIX} {target.label}: accuracy {doc['accuracy']:.4f} "
              f"[{low:.4f}, {high:.4f}] ({doc['correct']}/{doc['total']}, {doc['seconds']:.0f}s)",
              file=out, flush=True)
        summary = {k: doc[k] for k in ("label", "step", "accuracy", "ci95", "correct", "total",
                                       "rule", "seconds", "started", "ended")}
        print(EVAL_RESULT_MARKER + json.dumps(summary, sort_keys=True), file=out, flush=True)
        results.append(doc)
    return results


def evaluate_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python3 -m jobs.head.evaluate",
                                description="Evaluate the base model and a run's exports on "
                                            "GSM8K's test split (see the module docstring).")
    p.add_argument("--run-id", required=True)
    p.add_argument("--framework", required=True, choices=("verl", "nemo-rl"))
    p.add_argument("--dataset-dir", required=True, help="the run's staged GSM8K directory")
    p.add_argument("--base-model", required=True, help="the staged base model directory")
    p.add_argument("--model-id", required=True)
    p.add_argument("--model-revision")
    p.add_argument("--dataset-revision")
    p.add_argument("--max-prompt-length", type=int, required=True)
    p.add_argument("--max-response-length", type=int, required=True)
    p.add_argument("--gpus", type=int, default=1, help="GPUs the run holds (replicas x TP)")
    p.add_argument("--tensor-parallel-size", type=int, default=1)
    p.add_argument("--every-steps", type=int, help="also every export whose step is a multiple")
    p.add_argument("--prompt-file", help="NeMo RL: the run's data.prompt_file")
    p.add_argument("--vllm-python", help="the worker interpreter with vLLM (NeMo RL's venv)")
    p.add_argument("--exports-root", default=EXPORTS_ROOT)
    p.add_argument("--run-dir", help="default: /data/runs/<run-id>")
    p.add_argument("--limit", type=int, help="only the first N problems (a quick check)")
    p.add_argument("--answers-file", help="stand-in generator: a JSON list of fixed answers")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = evaluate_parser().parse_args(argv)
    except SystemExit as exc:
        return int(ExitCode.USAGE) if exc.code else 0
    try:
        if args.answers_file:
            generator: Generator = FixedAnswers(json.loads(Path(args.answers_file).read_text()))
        else:
            generator = VllmOnRay(replicas_for(args.gpus, args.tensor_parallel_size,
                                               args.limit or GSM8K_TEST_ROWS), args.vllm_python)
        run_evaluation(args, generator)
    except EvaluationError as exc:
        print(f"{LOG_PREFIX} error: {exc}", file=sys.stderr, flush=True)
        return int(ExitCode.USAGE)
    except Exception as exc:      # vLLM or Ray: one line, the traceback is Ray's log
        print(f"{LOG_PREFIX} failed: {type(exc).__name__}: {str(exc)[:800]}", file=sys.stderr,
              flush=True)
        return int(ExitCode.FAILED)
    return int(ExitCode.OK)


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["EVAL_FILE", "FixedAnswers", "VllmOnRay", "main", "run_evaluation"]
