"""A gang request that cannot fail silently (jobs/head/gpu_gang.py GangHolder): the driver sees the
holder confirm within a bound, or ends at once with the cause's exit code; a holder that dies
while the run runs is noticed within seconds and the request made again; every end of the driver
clears the request, by the holder or by a bounded fallback `release`.

The holder's own code runs unchanged against a stand-in `ray` package (tests/jobs/head/
test_gpu_gang.py _fake_holder) that records each request; the real request against Ray's
autoscaler is tests/jobs/head/test_gpu_gang_ray.py."""

from __future__ import annotations

import os
import signal
import time

import pytest

from jobs.contract.exit_codes import ExitCode
from jobs.head.gpu_gang import GangHolder, GangRequestError
from tests.conftest import ROOT
from tests.jobs.head.test_driver import FakeHooks, drive, make_plan
from tests.jobs.head.test_gpu_gang import CLEARED, _fake_holder, _requests, _wait

HELD = [[{"GPU": 8.0}], [{}], [4]]


@pytest.fixture
def shim_env(tmp_path, monkeypatch):
    """The holder, and the fallback `release`, inherit this environment from the driver's side."""
    shim = _fake_holder(tmp_path)
    monkeypatch.setenv("PYTHONPATH", f"{shim}:{ROOT}")

    def mode(name: str) -> None:
        monkeypatch.setenv("GANG_SHIM_MODE", name)
    mode("ok")
    return mode


@pytest.mark.parametrize("mode,code,words", [
    ("unreachable", ExitCode.NO_RAY, "cannot reach the Ray GCS: ConnectionError"),
    ("no-api", ExitCode.GANG_REQUEST_UNSUPPORTED, "has no request_cluster_resource_constraint"),
])
def test_a_request_that_cannot_be_made_fails_at_once_naming_the_cause(tmp_path, shim_env, mode, code, words):
    shim_env(mode)
    started = time.monotonic()
    with pytest.raises(GangRequestError) as caught:
        GangHolder.start(4, 8)
    assert caught.value.code == code and words in caught.value.message
    assert time.monotonic() - started < 30          # the holder's own answer, not a timeout
    assert _requests(tmp_path) == []


# The steps the holder goes through before it hangs get a bound no loaded machine reaches (Python
# and the stand-in ray load in under a second alone; beside a second suite the load step once took
# over 2 s); the step it hangs in gets 3 s.
BEFORE_HANG_SECONDS = 60.0
HANG_SECONDS = 3.0


@pytest.mark.parametrize("mode,hung,words", [
    ("hang-import", 0, "did not load Ray's modules within 3s: no answer to the GPU request after "),
    ("hang", 1, "did not connect to the Ray GCS within 3s (loaded before): no answer to the GPU "
                "request after "),
    ("hang-request", 2, "did not make the GPU request within 3s (loaded, connected before): no "
                        "answer to the GPU request after "),
])
def test_a_holder_that_hangs_is_stopped_at_its_step_bound_naming_the_step(tmp_path, shim_env, mode, hung, words):
    """Each step has its own bound (CONFIRM_STEPS), and the error names the step the holder hung
    in: a holder that is merely slow to load Ray is not cut off by the GCS calls' bound."""
    shim_env(mode)
    names = (("loaded", "load Ray's modules"), ("connected", "connect to the Ray GCS"),
             ("held", "make the GPU request"))
    steps = tuple((said, doing, HANG_SECONDS if i == hung else BEFORE_HANG_SECONDS)
                  for i, (said, doing) in enumerate(names))
    started = time.monotonic()
    with pytest.raises(GangRequestError) as caught:
        GangHolder.start(4, 8, confirm_steps=steps, fallback_seconds=2)
    assert caught.value.code == ExitCode.GANG_REQUEST_UNCONFIRMED
    assert words in caught.value.message, caught.value.message
    # The hung step's bound, then the bounded fallback release (a silent holder may have made
    # the request; here it hangs like the holder did, and is given up after its 2 s bound).
    assert HANG_SECONDS + 2 <= time.monotonic() - started < BEFORE_HANG_SECONDS


def test_the_step_bounds_cover_ray_giving_up_on_a_gcs_that_does_not_answer():
    """The connect step's bound is above the GCS client's own give-up time plus the autoscaler
    key's 10 s call (measured 35.3 s on Ray 2.54.0 and 2.49.2 with nothing listening), so a
    GCS that does not answer ends as Ray's NO_RAY error, not as a holder taken for hung."""
    from jobs.head.gpu_gang import CONFIRM_STEPS, FALLBACK_SECONDS

    bounds = {said: bound for said, _, bound in CONFIRM_STEPS}
    assert list(bounds) == ["loaded", "connected", "held"]
    assert bounds["connected"] > 35.3 + 10 and bounds["held"] > 10
    assert FALLBACK_SECONDS > 35.3 + 10 + 10


class RefusedHooks(FakeHooks):
    def __init__(self, error):
        super().__init__()
        self.error, self.waited = error, False

    def hold_gpus(self, plan, on_event=None, stop_seen=None):
        raise self.error

    def wait_for_gpus(self, plan, timeout, run):
        self.waited = True
        return super().wait_for_gpus(plan, timeout, run)


@pytest.mark.parametrize("error,code", [
    (GangRequestError(ExitCode.NO_RAY, "cannot reach the Ray GCS: ConnectionError: refused"), ExitCode.NO_RAY),
    (GangRequestError(ExitCode.GANG_REQUEST_UNSUPPORTED, "this Ray's GCS client has no request call"),
     ExitCode.GANG_REQUEST_UNSUPPORTED),
    (OSError(24, "Too many open files"), ExitCode.GANG_REQUEST_UNCONFIRMED),
])
def test_the_driver_ends_at_once_never_with_a_gpu_wait_timeout(tmp_path, error, code):
    hooks = RefusedHooks(error)
    result, out, events, _ = drive(make_plan(tmp_path, "ok"), hooks)
    assert result == code and not hooks.waited
    assert "the GPU gang" in out and (getattr(error, "message", None) or "Too many open files") in out
    assert [e["event"] for e in events if e["event"].startswith("gpu_")] == []
    assert events[-1]["event"] == "driver_end" and events[-1]["exit_code"] == int(code)


def test_a_dead_holder_is_noticed_and_the_request_made_again(tmp_path, shim_env, capfd):
    seen: list[tuple[str, dict]] = []
    holder = GangHolder.start(4, 8, watch_seconds=0.2, on_event=lambda name, **f: seen.append((name, f)))
    assert _requests(tmp_path) == [HELD]
    first = holder.proc
    killed = time.monotonic()
    os.kill(first.pid, signal.SIGKILL)
    # The new holder records its request before it confirms it, and the watcher records the
    # remade request after the confirmation: both are waited for (seen apart under load).
    _wait(lambda: _requests(tmp_path) == [HELD, HELD] and len(seen) == 2, timeout=30)
    assert time.monotonic() - killed < 15           # noticed within seconds, not at the run's end
    assert [name for name, _ in seen] == ["gpu_request_lost", "gpu_request_remade"]
    assert seen[0][1] == {"holder_exit_code": -signal.SIGKILL}
    assert holder.proc is not first and holder.remade == 1
    assert holder.release() == 0 and holder.fallback_exit_code is None
    assert _requests(tmp_path) == [HELD, HELD, CLEARED]
    # The replacement was started by the watcher's thread, which is its parent for
    # PR_SET_PDEATHSIG: it is released by its pipe, not by a SIGTERM when that thread ends.
    released = [line for line in capfd.readouterr().out.splitlines() if "RELEASED" in line]
    assert released and "its pipe closed" in released[-1], released


def test_a_holder_ended_by_the_drivers_stop_is_not_replaced(tmp_path, shim_env):
    """`ray job stop` SIGTERMs the holder with the driver (Ray 2.54 job_supervisor.py kills the
    job process and all its children): the watcher asks the driver's stop rule and leaves the
    release to the driver instead of making the request again."""
    seen: list[tuple[str, dict]] = []
    exits: list[int | None] = []

    def stop_seen(code):
        exits.append(code)
        return True                              # the driver saw its own SIGTERM
    holder = GangHolder.start(4, 8, watch_seconds=0.2, stop_seen=stop_seen,
                              on_event=lambda name, **f: seen.append((name, f)))
    os.kill(holder.proc.pid, signal.SIGTERM)
    _wait(lambda: exits, timeout=30)
    _wait(holder._watcher_idle.is_set, timeout=30)     # the watcher stopped watching
    # the holder cleared the request itself on the signal (exit 0), which the driver's rule is
    # asked about as the stop's SIGTERM; nothing was made again
    assert exits == [-signal.SIGTERM] and seen == [] and holder.remade == 0
    assert _requests(tmp_path) == [HELD, CLEARED]
    assert holder.release() == 0 and holder.fallback_exit_code is None


def test_a_holder_dead_at_the_end_is_covered_by_the_fallback(tmp_path, shim_env):
    holder = GangHolder.start(4, 8, watch_seconds=600)     # the watcher does not step in
    os.kill(holder.proc.pid, signal.SIGKILL)
    holder.proc.wait()
    assert _requests(tmp_path) == [HELD]                    # the request stands
    started = time.monotonic()
    assert holder.release() == -signal.SIGKILL
    assert holder.fallback_exit_code == 0 and time.monotonic() - started < 30
    assert _requests(tmp_path) == [HELD, CLEARED]


def test_the_fallback_is_bounded(tmp_path, shim_env):
    holder = GangHolder.start(4, 8, watch_seconds=600, fallback_seconds=2)
    os.kill(holder.proc.pid, signal.SIGKILL)
    holder.proc.wait()
    shim_env("hang")                                        # the GCS no longer answers
    started = time.monotonic()
    holder.release()
    assert holder.fallback_exit_code is None and time.monotonic() - started < 10
