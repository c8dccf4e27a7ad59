"""The GSM8K test-split results of a run (``<run dir>/eval/<base|step-N>/eval.json``, written by
jobs/head/evaluate.py, or its ``[jobs.evaluate] RESULT`` log lines while only the Ray job's log is
at hand) as `gke-grpo status` rows and the report's "Held-out evaluation" section: base vs trained
accuracy with 95% intervals, beside the training reward and published scores, and what the
export and evaluation cost.

    read_eval_results(run_dir) -> [doc, ...]       base first, then by step
    eval_status_rows(results, training_reward) -> [(key, text), ...]
    eval_section_html(results, ...) -> str
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from jobs.contract.exports import BASE_LABEL, EVAL_DIR, EVAL_FILE, EVAL_RESULT_MARKER, parse_step_label


def _order(doc: dict[str, Any]) -> tuple[int, int]:
    label = str(doc.get("label"))
    step = parse_step_label(label)
    return (0, 0) if label == BASE_LABEL else (1, step if step is not None else 0)


def _usable(doc: Any) -> bool:
    return isinstance(doc, dict) and isinstance(doc.get("label"), str) \
        and isinstance(doc.get("accuracy"), (int, float)) and isinstance(doc.get("ci95"), list) \
        and len(doc["ci95"]) == 2


def read_eval_results(run_dir: str | Path) -> list[dict[str, Any]]:
    """Every readable eval.json of the run; an unreadable one is skipped, never an error."""
    root = Path(run_dir) / EVAL_DIR
    docs = []
    for path in sorted(root.glob(f"*/{EVAL_FILE}")) if root.is_dir() else []:
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if _usable(doc):
            docs.append(doc)
    return sorted(docs, key=_order)


def eval_results_from_log(text: str) -> list[dict[str, Any]]:
    """The RESULT lines an evaluation printed into the Ray job's log, the last per label."""
    found: dict[str, dict[str, Any]] = {}
    for line in text.splitlines():
        at = line.find(EVAL_RESULT_MARKER)
        if at < 0:
            continue
        try:
            doc = json.loads(line[at + len(EVAL_RESULT_MARKER):])
        except ValueError:
            continue
        if _usable(doc):
            found[doc["label"]] = doc
    return sorted(found.values(), key=_order)


def _accuracy(doc: dict[str, Any]) -> str:
    low, high = doc["ci95"]
    return f"{doc['accuracy']:.1%} [{low:.1%}, {high:.1%}]"


def _model_label(doc: dict[str, Any]) -> str:
    return "base" if doc["label"] == BASE_LABEL else f"step {parse_step_label(doc['label'])}"


def eval_status_rows(results: list[dict[str, Any]], training_reward: float | None = None
                     ) -> list[tuple[str, str]]:
    """`status` rows: the held-out accuracy of the base and of the last export (with the change
    in points), each other evaluated step, and the training reward beside."""
    if not results:
        return []
    base = next((d for d in results if d["label"] == BASE_LABEL), None)
    steps = [d for d in results if d["label"] != BASE_LABEL]
    last = steps[-1] if steps else None
    parts = []
    if base is not None:
        parts.append(f"base {_accuracy(base)}")
    if last is not None:
        text = f"{_model_label(last)} {_accuracy(last)}"
        if base is not None:
            text += f" ({100 * (last['accuracy'] - base['accuracy']):+.1f} pts)"
        parts.append(text)
    some = last or base
    assert some is not None
    detail = f"n={some.get('total')}, rule {some.get('rule')}"
    if training_reward is not None:
        detail += f"; training reward {training_reward:.3f}"
    rows = [("gsm8k test", " -> ".join(parts) + f" ({detail})")]
    if len(steps) > 1:
        rows.append(("per step", ", ".join(f"{_model_label(d)} {d['accuracy']:.1%}" for d in steps)))
    return rows


def _escape(value: Any) -> str:
    return html.escape(str(value), quote=True)


def eval_section_html(results: list[dict[str, Any]], *, model: str | None,
                      training_reward: float | None, validation: float | None,
                      stage_hours: float | None, stage_cost: str | None) -> str:
    """The report's section: a table of every evaluation, the training reward beside, published
    scores of the same model, and the export + evaluation's share of the cost."""
    if not results:
        return ('<p class="note">No held-out evaluation in the run directory (yet): it runs after '
                "a completed trainer (gke-grpo:job.evaluate), results under eval/.</p>")
    rows = []
    for doc in results:
        rows.append("<tr>" + "".join(f"<td>{_escape(v)}</td>" for v in (
            _model_label(doc), f"{doc['accuracy']:.2%}", f"[{doc['ci95'][0]:.2%}, {doc['ci95'][1]:.2%}]",
            f"{doc.get('correct')}/{doc.get('total')}", doc.get("truncated", "-"),
            f"{doc.get('seconds', 0):.0f} s")) + "</tr>")
    first = results[-1]
    sampling = first.get("sampling") or {}
    parts = ["<table><tr><th>model</th><th>accuracy</th><th>95% interval (Wilson)</th>"
             "<th>correct</th><th>truncated</th><th>time</th></tr>", *rows, "</table>"]
    beside = []
    if training_reward is not None:
        beside.append(f"training reward (latest step, mean): {training_reward:.3f}")
    if validation is not None:
        beside.append(f"validation score (held-out slice of the train split): {validation:.3f}")
    if stage_hours is not None:
        beside.append(f"export + evaluation: {stage_hours:.2f} node-hours"
                      + (f", {stage_cost}" if stage_cost else "") + " (counted in the cost so far)")
    parts.append("<p class=\"sub\">" + _escape("; ".join(beside)) + "</p>" if beside else "")
    dataset = first.get("dataset") or {}
    parts.append(f'<p class="sub">GSM8K {_escape(dataset.get("split", "test"))} split at revision '
                 f'{_escape(dataset.get("revision") or "unpinned")}, {_escape(first.get("total"))} problems; '
                 f'rule {_escape(first.get("rule"))} ({_escape(first.get("rule_source"))}); sampling '
                 f'{_escape(json.dumps(sampling, sort_keys=True))}; model {_escape((first.get("model") or {}).get("id"))} '
                 f'at {_escape((first.get("model") or {}).get("revision") or "unpinned")}.</p>')
    if model:
        from jobs.plan.reference_scores import reference_scores

        published = reference_scores(model)
        if published:
            parts.append("<table><tr><th>published</th><th>GSM8K test</th></tr>" + "".join(
                f"<tr><td>{_escape(r.method)}</td><td>{r.accuracy_percent:.1f}%</td></tr>" for r in published)
                + "</table>")
            parts.append(f'<p class="note">Published scores: {_escape(published[0].source)}; verl\'s '
                         "strict '####' extraction and prompt, not directly comparable with a "
                         "different rule.</p>")
    return "\n".join(parts)
