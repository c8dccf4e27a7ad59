"""tools/local_ray.py outside a namespace: it refuses to stop or signal anything (the Ray tests
and benchmarks use it for real inside their loopback-only namespaces)."""

from __future__ import annotations

import signal

import pytest

from tools import local_ray


def test_nothing_is_stopped_or_signalled_outside_the_namespace(monkeypatch):
    ran = []
    monkeypatch.setattr(local_ray.subprocess, "run", lambda *a, **k: ran.append(a))
    with pytest.raises(AssertionError, match="never `ray stop` outside"):
        local_ray.stop_all(inside=False)
    with pytest.raises(AssertionError, match="never signal a raylet outside"):
        local_ray.lose_node(7111, signal.SIGKILL, inside=False)
    assert ran == []


def test_a_node_that_is_not_there_is_named():
    with pytest.raises(RuntimeError, match="no raylet with node manager port 1"):
        local_ray.lose_node(1, signal.SIGTERM, inside=True)


def test_ray_start_failures_carry_rays_own_output(monkeypatch):
    class Done:
        returncode, stdout, stderr = 1, "", "ValueError: port 6379 already in use"
    monkeypatch.setattr(local_ray.subprocess, "run", lambda *a, **k: Done())
    with pytest.raises(RuntimeError, match=r"(?s)`ray start` \(the head\) exited 1:.*port 6379 already in use"):
        local_ray.start_head(num_cpus=1, num_gpus=0)
