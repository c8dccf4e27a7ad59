"""How a GSM8K answer is scored after training: with the reward rule the run trained with, and
the accuracy's 95% interval. Shared by the evaluation stage (jobs/head/evaluate.py), the CLI's
views of its results and the tests.

    score(framework, response, ground_truth) -> 1.0 | 0.0
    wilson_interval(correct, total) -> (low, high)

The rules, each the training reward's own:

- verl (``verl-gsm8k-strict``): verl v0.7.1 verl/utils/reward_score/gsm8k.py, ``compute_score``
  with its defaults (``method="strict"``, ``format_score=0.0``, ``score=1.0``), which
  ``default_compute_score`` selects for data_source ``openai/gsm8k``. Only the last 300
  characters are searched; the answer must be written ``#### <number>``; the last such match
  wins; commas and ``$`` are removed and the rest compared as a string with the ground truth
  (so ``18.00`` is not ``18``). Ported verbatim below (tests compare it with the installed
  verl's function).
- NeMo RL (``nemo-rl-math-verify``): NeMo RL v0.5.0 nemo_rl/environments/math_environment.py,
  ``HFVerifyWorker`` with ``math_verify_impl: hf_math_verify`` (grpo_math_1B.yaml): math-verify's
  ``math_metric`` with Latex extraction of the gold answer (wrapped in ``\\boxed{}``) and
  expression + Latex extraction of the response; any exception scores 0. math-verify is a main
  dependency of NeMo RL v0.5.0 (pyproject.toml; uv.lock pins math-verify 0.8.0), installed in
  the image's /opt/nemo_rl_venv, which is first on its PATH (docker/Dockerfile): the evaluation
  imports it rather than a copy, and fails with a clear message where it is missing. At v0.5.0
  a truncated response is scored on its text like any other: the ``rewards * is_end`` line of
  ``global_post_process_and_metrics`` is never called (no caller under nemo_rl/).

Scoring a NeMo RL run (boxed answers) with verl's rule, or the reverse, understates accuracy:
the rule follows the framework, never a choice.

Standard library only (math-verify is imported where the NeMo RL rule runs).
"""

from __future__ import annotations

import contextlib
import functools
import io
import math
import re
from collections.abc import Callable
from dataclasses import dataclass

VERL_RULE = "verl-gsm8k-strict"
NEMO_RL_RULE = "nemo-rl-math-verify"
RULE_OF_FRAMEWORK = {"verl": VERL_RULE, "nemo-rl": NEMO_RL_RULE}
RULE_SOURCES = {
    VERL_RULE: "verl v0.7.1 verl/utils/reward_score/gsm8k.py compute_score (strict '#### N' in "
               "the last 300 characters, exact string match after removing ',' and '$')",
    NEMO_RL_RULE: "NeMo RL v0.5.0 nemo_rl/environments/math_environment.py HFVerifyWorker "
                  "(math-verify math_metric, gold as \\boxed{answer}, hf_math_verify)",
}

# z of a two-sided 95% interval: the 0.975 quantile of the standard normal.
Z_95 = 1.959963984540054

# ---- verl: verl/utils/reward_score/gsm8k.py at v0.7.1, verbatim in behaviour ------------------
_SOLUTION_CLIP_CHARS = 300
_STRICT = re.compile("#### (\\-?[0-9\\.\\,]+)")
_FLEXIBLE = re.compile("(\\-?[0-9\\.\\,]+)")


def verl_extract_solution(solution_str: str, method: str = "strict") -> str | None:
    """verl's ``extract_solution``: the answer the rule reads from a response, or None."""
    if method not in ("strict", "flexible"):
        raise ValueError(f"method {method!r}: 'strict' or 'flexible'")
    if len(solution_str) > _SOLUTION_CLIP_CHARS:
        solution_str = solution_str[-_SOLUTION_CLIP_CHARS:]
    if method == "strict":
        solutions = _STRICT.findall(solution_str)
        if not solutions:
            return None
        return str(solutions[-1]).replace(",", "").replace("$", "")
    final_answer = None
    answers = _FLEXIBLE.findall(solution_str)
    for final_answer in reversed(answers):
        if final_answer not in ("", "."):
            break
    return final_answer


def verl_score(response: str, ground_truth: str) -> float:
    """verl's ``compute_score(solution_str, ground_truth)`` with its defaults: 1.0 or 0.0."""
    answer = verl_extract_solution(response, "strict")
    if answer is None:
        return 0.0
    return 1.0 if answer == ground_truth else 0.0


# ---- NeMo RL: math-verify as HFVerifyWorker calls it ------------------------------------------
class ScorerUnavailable(Exception):
    """The run's reward rule cannot run here (math-verify is not installed)."""


@functools.cache
def _math_metric() -> Callable[..., tuple[float, object]]:
    try:
        from math_verify.metric import math_metric
        from math_verify.parser import ExprExtractionConfig, LatexExtractionConfig
    except ImportError as exc:
        raise ScorerUnavailable(
            "math-verify is not importable here: NeMo RL's reward rule cannot run (NeMo RL "
            "v0.5.0 installs it in /opt/nemo_rl_venv, the image's first python3 on PATH); "
            f"the evaluation does not fall back to another rule ({exc})") from None
    metric: Callable[..., tuple[float, object]] = math_metric(
        gold_extraction_target=(LatexExtractionConfig(),),
        pred_extraction_target=(ExprExtractionConfig(), LatexExtractionConfig()))
    return metric


def nemo_rl_score(response: str, ground_truth: str) -> float:
    """HFVerifyWorker.verify for one response: 1.0 or 0.0; any error (a math-verify timeout
    included, a BaseException there) scores 0.0, as in training."""
    metric = _math_metric()
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            result, _extracted = metric(["\\boxed{" + ground_truth + "}"], [response])
        return float(result)
    except Exception:
        return 0.0
    except BaseException as exc:    # math_verify.errors.TimeoutException subclasses BaseException
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        return 0.0


# ---- the rule of a run ------------------------------------------------------------------------
@dataclass(frozen=True)
class Scorer:
    rule: str
    source: str
    score: Callable[[str, str], float]

    def check_available(self) -> None:
        """ScorerUnavailable now, before any generation, when the rule cannot run here."""
        if self.rule == NEMO_RL_RULE:
            _math_metric()


def scorer_for(framework: str) -> Scorer:
    if framework == "verl":
        return Scorer(VERL_RULE, RULE_SOURCES[VERL_RULE], verl_score)
    if framework == "nemo-rl":
        return Scorer(NEMO_RL_RULE, RULE_SOURCES[NEMO_RL_RULE], nemo_rl_score)
    raise ValueError(f"unknown framework {framework!r}: 'verl' or 'nemo-rl'")


def score(framework: str, response: str, ground_truth: str) -> float:
    return scorer_for(framework).score(response, ground_truth)


def wilson_interval(correct: int, total: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval of ``correct`` successes in ``total`` trials (E. B. Wilson,
    JASA 22:209-212, 1927; Brown, Cai & DasGupta, Statistical Science 16(2), 2001): the formula
    of statsmodels' proportion_confint(method="wilson"). (0, 1) when nothing was scored."""
    if total < 0 or not 0 <= correct <= max(total, 0):
        raise ValueError(f"{correct} correct of {total}: need 0 <= correct <= total")
    if total == 0:
        return 0.0, 1.0
    p = correct / total
    z2 = z * z
    denominator = 1 + z2 / total
    center = (p + z2 / (2 * total)) / denominator
    half = z * math.sqrt(p * (1 - p) / total + z2 / (4 * total * total)) / denominator
    return max(0.0, center - half), min(1.0, center + half)
