"""The split layout's two pools for real: Ray 2.54's own v2 autoscaler over fake GPU nodes in two
node types, ``rollout-workers`` (each node advertises ``gke_grpo_rollout_pool: 1``) and
``trainer-workers`` (``gke_grpo_trainer_pool: 1``), as the split RayCluster's worker groups
(jobs/contract/layouts.py, components/ray_pods.py), in a loopback-only network namespace
(tests/jobs/ray_head.py). The scenarios are the split layout benchmark's (tools/bench_split_layout.py)
with short join delays: the rollout pool on Spot joins later than the trainer pool's reservation.

What it shows:
- from zero GPU nodes, the driver's gang request with both pools (the real holder process,
  jobs/head/gpu_gang.py GangHolder) brings up each pool's own group, nothing else; the driver's GPU
  wait with the pools (jobs/head/gpu_wait.py wait_for_gpus) returns 0, and not before the later
  pool is up;
- placement groups whose bundles carry a pool's resource (verl 0.9.1's RayResourcePool bundle
  with ``accelerator_type``: verl/single_controller/ray/base.py lines 149-150) land only on that
  pool's nodes: a custom resource is a hard requirement of a bundle (Ray 2.54
  ray/util/placement_group.py ``placement_group``: each bundle is "a dict of resource
  requirements"), and only the pool's nodes have it;
- one bundle more than a pool has GPUs waits while the other pool has free GPUs (the autoscaler
  cannot add a node to a group at its max_workers: ray/autoscaler/v2/scheduler.py
  ``_enforce_max_workers_per_type``), and is placed once a group of its pool goes;
- the released gang lets both pools go within the idle timeout (the request no longer keeps them:
  scheduler.py ``_enforce_idle_termination``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.jobs import ray_head

# Inner tests measured 2026-12-06 on the 2-core machine (other sessions' work on it, load average
# about 7): 33 s and 39 s (the head's start about 19 s of it); 76 s with two busy loops beside it
# (niced as the suite's xdist workers, load average 15). Bound: 76 s x BOUND_MARGIN.
INNER = ray_head.InnerRun(__file__, "the split layout's pool placement tests", measured_seconds=76,
                          own_head=True)
pytestmark = pytest.mark.filterwarnings("ignore:ssl=None is deprecated:DeprecationWarning")

if not ray_head.inside_namespace():

    def test_split_pools_on_ray_autoscaler_in_a_loopback_only_namespace():
        INNER.check()

else:
    from tools import bench_split_layout as split

    # Rollout 2 nodes on Spot joining 3 s after creation, trainer 1 node on a reservation joining
    # 1 s after: the trainer pool is up first, the GPU wait must still wait for the rollout pool.
    SETTINGS = split.SplitSettings(gpus_per_node=2, rollout_nodes=2, trainer_nodes=1,
                                   rollout_join_seconds=3.0, trainer_join_seconds=1.0,
                                   idle_timeout_seconds=3.0, poll_seconds=0.5, pending_seconds=4.0,
                                   gpu_wait_seconds=180.0, place_within_seconds=60.0)
    # The watch sees a node up to its 0.1 s period (and a busy machine's delay) after the GPU wait's
    # own snapshot does.
    WATCH_LAG_SECONDS = 1.0
    # Release -> last GPU node gone: the idle timeout, the autoscaler's 1 s period and the node's
    # stop (measured 4.4 s to 5.1 s with a 3 s idle timeout); bound with a wide margin.
    GONE_WITHIN_SECONDS = SETTINGS.idle_timeout_seconds + 60.0

    @dataclass
    class SplitState:
        watch: Any
        up: Any
        groups: list = field(default_factory=list)
        released: bool = False

    @pytest.fixture(scope="module")
    def pools_up(tmp_path_factory):
        ray_head.only_loopback_links()
        with split.split_layout_head(SETTINGS, tmp_path_factory.mktemp("split-layout"), ray_head.NS_ENV) as watch:
            assert ray_head.non_loopback_listeners() == []
            up = split.bring_up_split_gang(SETTINGS, watch)
            state = SplitState(watch, up)
            try:
                yield state
            finally:
                if not state.released:
                    split.release_split_gang(SETTINGS, up.holder, watch, state.groups, 0.0)

    def pool_of_node(state: SplitState, node_id: str) -> str | None:
        return state.watch.pool.get(node_id)

    def test_the_gang_request_with_pools_brings_up_both_groups_and_the_gpu_wait_returns_0(pools_up):
        up, watch = pools_up.up, pools_up.watch
        assert up.gpu_nodes_before == 0
        assert up.wait_code == 0, "\n".join(up.wait_lines)
        nodes = watch.nodes()
        for pool in SETTINGS.pools:
            mine = [row for row in nodes if row[2] == pool.name]
            assert len(mine) == pool.nodes, nodes
            source = split.POOL_SOURCES[pool.name][0]
            assert all(row[3].startswith(source) for row in mine), nodes
        assert len(nodes) == SETTINGS.nodes, nodes          # no node of another group
        assert up.free_at_return == {p.name: p.nodes for p in SETTINGS.pools}
        both = up.both_up(watch, SETTINGS.pools)
        assert both is not None and up.wait_returned >= both - WATCH_LAG_SECONDS, (both, up.wait_returned)

    def test_each_pool_s_bundles_land_only_on_that_pool_s_nodes(pools_up):
        groups, _ = split.place_pool_groups(SETTINGS)
        pools_up.groups[:] = groups
        assert len(groups) == SETTINGS.nodes
        for group in groups:
            assert len(group.bundle_nodes) == SETTINGS.gpus_per_node
            assert len(set(group.bundle_nodes)) == 1, group      # STRICT_PACK: one node
            assert {pool_of_node(pools_up, n) for n in group.bundle_nodes} == {group.pool}, group
        for pool in SETTINGS.pools:
            used = [group.bundle_nodes[0] for group in groups if group.pool == pool.name]
            assert len(set(used)) == pool.nodes                  # a node each: the pool is full

    def test_a_bundle_more_than_a_full_pool_has_waits_while_the_other_pool_has_room(pools_up):
        assert pools_up.groups, "needs the previous test's groups"
        full = split.extra_bundle_waits(SETTINGS, pools_up.groups, pools_up.watch)
        assert full.free_while_waiting.get("trainer") == 0
        assert full.free_while_waiting.get("rollout") == SETTINGS.rollout_nodes * SETTINGS.gpus_per_node
        assert not full.placed_while_other_free
        assert full.control_placed_seconds is not None
        assert {pool_of_node(pools_up, n) for n in full.control_nodes} == {"rollout"}
        assert full.placed_after_free_seconds is not None
        assert {pool_of_node(pools_up, n) for n in full.extra_nodes} == {"trainer"}

    def test_the_released_gang_lets_both_pools_go(pools_up):
        release = split.release_split_gang(SETTINGS, pools_up.up.holder, pools_up.watch, pools_up.groups,
                                           GONE_WITHIN_SECONDS)
        pools_up.released = True
        assert release.holder_exit == 0
        assert release.nodes_left == 0 and release.last_gone is not None
        assert release.last_gone - release.released <= GONE_WITHIN_SECONDS
