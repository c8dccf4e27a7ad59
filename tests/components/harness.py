"""Build one component under Pulumi's mocks, from its own args (no stack config, no
__main__.py), and return what it registered, as the offline preview records it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pulumi

from tools.mocks import GrpoMocks
from tools.preview import Registration, _make_monitor_class


@dataclass
class Built:
    value: object                      # what build() returned (the component)
    registrations: list[Registration]

    def of_type(self, type_: str) -> list[Registration]:
        return [r for r in self.registrations if r.type == type_]

    def one(self, type_: str) -> Registration:
        [found] = self.of_type(type_)
        return found


def build(program: Callable[[], object], *, project: str = "unit-project",
          region: str = "us-central1") -> Built:
    """Run ``program`` in a fresh root stack; returns after every registration has reached the
    recording monitor."""
    from pulumi.runtime import settings as runtime_settings
    from pulumi.runtime.stack import run_pulumi_func
    from pulumi.runtime.sync_await import _sync_await

    mocks = GrpoMocks(project=project, region=region)
    monitor = _make_monitor_class()(mocks)
    runtime_settings.ROOT.set(None)   # a new root stack, not a previous build's
    pulumi.runtime.set_mocks(mocks, project="gke-grpo", stack="unit", preview=True, monitor=monitor)
    holder: list[object] = []
    _sync_await(run_pulumi_func(lambda: holder.append(program())))
    assert monitor.unknown_inputs == []
    return Built(holder[0], list(monitor.registrations))
