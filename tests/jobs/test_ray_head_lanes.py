"""How the Ray modules' inner runs are laid out (tests/jobs/ray_head.py): the modules that only
submit jobs share one head in one namespace; each own-head module runs alone, after the others;
a module alongside runs alone from the start, in a namespace added for it."""

from __future__ import annotations

from tests.jobs import ray_head


def inner(name: str, seconds: float, **kind) -> ray_head.InnerRun:
    return ray_head.InnerRun(f"/suite/tests/jobs/{name}.py", name, measured_seconds=seconds, **kind)


def test_alongside_first_then_the_shared_group_then_own_heads_longest_first():
    shared_a, shared_b = inner("jobs_a", 100), inner("jobs_b", 50)
    short_own, long_own = inner("gang", 80, own_head=True), inner("recovery", 300, own_head=True)
    beside = inner("kuberay", 200, own_head=True, alongside=True)
    groups = ray_head._Background.groups([shared_a, short_own, beside, long_own, shared_b, shared_a])
    assert [[g.needs for g in group] for group in groups] == [
        ["kuberay"], ["jobs_a", "jobs_b"], ["recovery"], ["gang"]]


def test_each_module_alongside_adds_a_namespace(monkeypatch):
    background = ray_head._Background()
    submitted = []

    class Runner:
        def __init__(self, name, workers):
            self.workers = workers

        def submit(self, keys, work, payload, *, due_in):
            submitted.append(keys)

    monkeypatch.setattr(ray_head, "namespace_unavailable", lambda: None)
    monkeypatch.setattr(ray_head, "inside_namespace", lambda: False)
    monkeypatch.setattr(ray_head, "_handoff", lambda: type("H", (), {"Runner": Runner}))
    background.start([inner("jobs_a", 100), inner("kuberay", 200, own_head=True, alongside=True),
                      inner("other", 20, own_head=True, alongside=True)])
    assert background.runner.workers == ray_head.NAMESPACES_AT_ONCE + 2
    assert len(submitted) == 3
