"""The evaluation scores with the training reward's own rule: verl's strict '####' rule (the
port agrees with the installed verl 0.7.1's function on every case) and NeMo RL's math-verify
call (math-verify 0.8.0, the version NeMo RL v0.5.0's uv.lock pins), on GSM8K-format rows and
hard cases; and the Wilson interval matches statsmodels' formula's figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.contract import gsm8k_scoring as scoring
from jobs.head.staging import extract_gsm8k_answer
from tests.conftest import skip_or_fail
from tests.jobs.head.test_staging import verl_gsm8k_scorer

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "gsm8k" / "test.jsonl"
PAD = "x" * 400   # pushes an earlier answer out of verl's last 300 characters

# (response, ground truth, verl strict score, NeMo RL math-verify score)
HARD_CASES = [
    ("So she keeps 36 stickers.\n#### 36", "36", 1.0, 1.0),
    # thousands separators: verl removes the comma before comparing
    ("The total is 1,234.\n#### 1,234", "1234", 1.0, 1.0),
    ("\\boxed{1,234}", "1234", 0.0, 1.0),
    # units: verl's regex stops at the number; math-verify reads the boxed number
    ("#### 18 dollars", "18", 1.0, 1.0),
    ("The answer is \\boxed{18 \\text{ dollars}}.", "18", 0.0, 1.0),
    # a dollar sign right after '####' is not a number to verl's regex
    ("#### $18", "18", 0.0, 1.0),
    # negative numbers
    ("The temperature fell to -5 degrees.\n#### -5", "-5", 1.0, 1.0),
    ("\\boxed{-5}", "-5", 0.0, 1.0),
    ("#### 5", "-5", 0.0, 0.0),
    # several numbers: the last '####' wins for verl; the boxed answer for math-verify
    ("#### 12 ... no wait, recount.\n#### 14", "14", 1.0, 1.0),
    ("First 3 + 4 = 7, then 7 * 2 = 14. \\boxed{14}", "14", 0.0, 1.0),
    ("#### 14\n#### 12", "14", 0.0, 0.0),
    # string comparison for verl: a trailing '.' or decimals do not match
    ("#### 18.", "18", 0.0, 1.0),
    ("#### 18.00", "18", 0.0, 1.0),
    # verl reads only the last 300 characters; math-verify reads the whole response
    ("#### 18\n" + PAD, "18", 0.0, 1.0),
    ("no final answer at all", "18", 0.0, 0.0),
    ("", "18", 0.0, 0.0),
]


def need_math_verify() -> None:
    try:
        import math_verify  # noqa: F401
    except ImportError:
        skip_or_fail("math-verify is not installed (requirements-dev.txt pins math-verify==0.8.0)")


@pytest.mark.parametrize(("response", "truth", "verl", "nemo"), HARD_CASES)
def test_verl_rule_on_hard_cases_agrees_with_verl(response, truth, verl, nemo):
    assert scoring.verl_score(response, truth) == verl
    assert float(verl_gsm8k_scorer()(response, truth)) == verl


@pytest.mark.parametrize(("response", "truth", "verl", "nemo"), HARD_CASES)
def test_nemo_rl_rule_on_hard_cases(response, truth, verl, nemo):
    need_math_verify()
    assert scoring.nemo_rl_score(response, truth) == nemo


_ANSWERISH = st.text(alphabet="0123456789-.,$# \nabc\\{}boxed", max_size=40)


# Example budget: 200, for about 18 s of the suite (0.09 s per example, measured 2026-12-06 on the
# 2-core machine with another suite running beside it).
@settings(max_examples=200, deadline=None)
@given(prefix=st.text(max_size=350), tail=_ANSWERISH, truth=st.sampled_from(["18", "-5", "1234", "0.5"]))
def test_verl_port_equals_verl_on_arbitrary_text(prefix, tail, truth):
    compute_score = verl_gsm8k_scorer()
    response = prefix + tail
    assert scoring.verl_score(response, truth) == float(compute_score(response, truth))
    module_extract = compute_score.__globals__["extract_solution"]
    for method in ("strict", "flexible"):
        assert scoring.verl_extract_solution(response, method) == module_extract(response, method)


def test_gsm8k_rows_score_one_with_their_own_solution_under_both_rules():
    need_math_verify()
    for line in FIXTURE.read_text().splitlines():
        row = json.loads(line)
        truth = extract_gsm8k_answer(row["answer"])
        # GSM8K's reference solution ends in '#### N': verl's format.
        assert scoring.score("verl", row["answer"], truth) == 1.0
        assert scoring.score("nemo-rl", f"Reasoning.\n\\boxed{{{truth}}}", truth) == 1.0
        # the other framework's format under a run's rule scores 0: the rule follows the run
        assert scoring.score("verl", f"\\boxed{{{truth}}}", truth) == 0.0
        assert scoring.score("verl", f"#### {int(truth) + 1}", truth) == 0.0
        assert scoring.score("nemo-rl", f"\\boxed{{{int(truth) + 1}}}", truth) == 0.0


def test_scorer_of_each_framework_names_its_rule():
    assert scoring.scorer_for("verl").rule == "verl-gsm8k-strict"
    assert scoring.scorer_for("nemo-rl").rule == "nemo-rl-math-verify"
    with pytest.raises(ValueError, match="unknown framework"):
        scoring.scorer_for("trl")


def test_missing_math_verify_is_a_clear_error(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_math_verify(name, *args, **kwargs):
        if name.startswith("math_verify"):
            raise ImportError("No module named 'math_verify'")
        return real_import(name, *args, **kwargs)

    scoring._math_metric.cache_clear()
    monkeypatch.setattr(builtins, "__import__", no_math_verify)
    try:
        with pytest.raises(scoring.ScorerUnavailable, match="does not fall back"):
            scoring.scorer_for("nemo-rl").check_available()
    finally:
        monkeypatch.undo()
        scoring._math_metric.cache_clear()


@pytest.mark.parametrize(("correct", "total", "low", "high"), [
    # n = 1319 (GSM8K test): the figures of the Wilson formula (statsmodels proportion_confint)
    (1208, 1319, 0.8996, 0.9296),
    (1265, 1319, 0.9470, 0.9685),
    (1000, 1319, 0.7343, 0.7805),
    (715, 1319, 0.5151, 0.5688),
])
def test_wilson_interval(correct, total, low, high):
    got = scoring.wilson_interval(correct, total)
    assert got == pytest.approx((low, high), abs=5e-5)
    assert got[0] < correct / total < got[1]


def test_wilson_interval_edges():
    assert scoring.wilson_interval(0, 0) == (0.0, 1.0)
    low, high = scoring.wilson_interval(0, 1319)
    assert low == 0.0 and 0 < high < 0.003
    low, high = scoring.wilson_interval(1319, 1319)
    assert high == pytest.approx(1.0) and 0.997 < low < 1.0
    with pytest.raises(ValueError):
        scoring.wilson_interval(5, 3)
