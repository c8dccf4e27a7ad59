"""Which release's log-prob path the memory planner uses (jobs/plan/logprob_paths.py): the spec's
framework_version picks it; NeMo RL v0.7.0 shares v0.5.0's measured path (the functions compared
are listed at NEMO_RL_070); a release without a measured path is refused, never given another
release's figures, and preflight says the memory is not checked."""

from __future__ import annotations

import pytest

from jobs.plan import logprob_paths
from jobs.plan.gpu_memory import format_plan, memory_findings, plan_for_spec
from jobs.plan.logprob_paths import NEMO_RL_RELEASES, VERL_RELEASES, LogProbPath, UnmeasuredVersion
from jobs.plan.model_shapes import shape_for
from tests.conftest import skip_or_fail
from tests.jobs.plan.test_preflight import DEV, DEV_071, PROD, PROD_050


def test_the_older_releases_and_nemo_rl_0_7_0_have_a_measured_path():
    assert DEV_071.framework_version in VERL_RELEASES
    assert PROD.framework_version == "0.7.0" and PROD_050.framework_version == "0.5.0"
    assert {"0.5.0", "0.7.0"} <= set(NEMO_RL_RELEASES)


@pytest.mark.parametrize(("framework", "version"), [
    ("verl", "0.8.0"), ("nemo-rl", "0.6.0"), ("verl", ""), ("nemo-rl", "")])
def test_a_release_without_a_measured_path_is_refused(framework, version):
    with pytest.raises(UnmeasuredVersion, match="no log-prob path read and measured"):
        LogProbPath(framework, version)


def test_nemo_rl_0_7_0_shares_0_5_0s_constants():
    assert NEMO_RL_RELEASES["0.7.0"] is NEMO_RL_RELEASES["0.5.0"]


def _logit_terms(plan):
    return [(t.label, t.bytes) for p in plan.phases for t in p.terms if "logits" in t.label]


def test_prod_on_nemo_rl_0_7_0_plans_the_same_logits_and_notes_the_model_change():
    old, new = plan_for_spec(PROD_050), plan_for_spec(PROD)
    assert _logit_terms(new) == _logit_terms(old) and _logit_terms(old)
    assert [p.total for p in new.phases] == [p.total for p in old.phases]
    assert not old.notes
    assert any("measured on NeMo RL 0.5.0's Automodel" in n for n in new.notes), new.notes
    assert "note: NeMo RL 0.7.0" in format_plan(new)


def test_verl_0_9_1_is_measured_and_planned_with_its_own_constants():
    """verl 0.9.1 (the dev stack) has its own path, measured on an H100: at temperature 1.0 no
    division (2.25 bytes a token x vocab in training, 0.7.1's in-place division made 8.25)."""
    assert DEV.framework_version == "0.9.1" and VERL_RELEASES["0.9.1"] is logprob_paths.VERL_091
    assert memory_findings(DEV) == []
    assert "GPU memory plan" in format_plan(plan_for_spec(DEV))
    [(_, train, _)] = LogProbPath("verl", "0.9.1").training_logits(shape_for(DEV.model), 24000, 1)
    assert train == 2.25 * 24000 * 152064
    hot = LogProbPath("verl", "0.9.1", temperature=0.7)
    assert hot.scaled and logprob_paths.VERL_091.train_temperature > 0


def test_a_supported_release_without_a_measured_path_is_not_checked_and_preflight_says_so(monkeypatch):
    """verl 0.8.0 is refused above (and is no supported release); a supported release without a
    measured path (0.9.1 before its calibration) gets a warning, never another release's figures."""
    monkeypatch.delitem(VERL_RELEASES, "0.9.1")
    with pytest.raises(UnmeasuredVersion):
        plan_for_spec(DEV)
    findings = memory_findings(DEV)
    assert [(f.level, f.key) for f in findings] == [("warning", "gke-grpo:job.release")]
    assert "GPU memory is not checked: verl 0.9.1" in findings[0].message
    assert "measured: 0.7.1" in findings[0].message


def test_verl_0_9_1_chunked_entropy_in_the_loss_is_refused():
    """Measured, but no constant put every row within 10 %: refused, not guessed."""
    with pytest.raises(UnmeasuredVersion, match="not fitted within 10 %"):
        LogProbPath("verl", "0.9.1", entropy_in_loss=True, chunking=True)
    LogProbPath("verl", "0.7.1", entropy_in_loss=True, chunking=True)


def test_verl_0_7_1_path_is_the_one_the_installed_wheel_runs():
    """VERL_071 follows dp_actor.py's packed branch: logits scaled in place, then
    logprobs_from_logits with inplace_backward = not calculate_entropy (the installed verl 0.7.1
    wheel, verl/workers/actor/dp_actor.py)."""
    from tools import verl_snapshot

    root = verl_snapshot.tree("0.7.1")
    if not root.is_dir():
        skip_or_fail(f"{root} is missing (make setup installs every verl release in .verl-trees)")
        return
    assert (root / "version" / "version").read_text().strip() == "0.7.1"
    actor = (root / "workers" / "actor" / "dp_actor.py").read_text()
    assert "logits_rmpad.div_(temperature)" in actor
    assert "inplace_backward = True\n" in actor and "inplace_backward = False" in actor
    assert VERL_RELEASES["0.7.1"] is logprob_paths.VERL_071
    assert "dp_actor.py" in logprob_paths.VERL_071.code
