"""The Ray head that the Ray test modules without a head of their own share (tests/jobs/ray_head.py,
``InnerRun``): started once per inner run, in its loopback-only namespace."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.jobs import ray_head


@pytest.fixture(scope="session")
def head(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The shared head, laid out as the head pod is: /opt/gke-grpo holds the jobs package and the
    run plan, PYTHONPATH names it, and the head's /data is the session's scratch folder
    (ray_head.HEAD_DATA), below which each scenario's run has its own directories. Yields the
    dashboard address. A module that needs a head of its own (own_head=True) defines its own
    ``head`` fixture, which takes precedence."""
    if not ray_head.inside_namespace():
        pytest.fail("the Ray head is started only inside a loopback-only namespace (tests/jobs/ray_head.py)")
    ray_head.only_loopback_links()
    ray_head.lay_out_head_pod(tmp_path_factory.mktemp("head-data"))
    with ray_head.running_head() as dashboard:
        yield dashboard
