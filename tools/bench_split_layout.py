"""Split layout benchmark: the rollout and trainer pools as two Ray worker groups, brought up by the
run driver's gang request and used by per-pool placement groups, on a real Ray head.

    python -m tools.bench_split_layout [--gpus-per-node 2] [--rollout-nodes 2] [--trainer-nodes 2]
                                       [--rollout-join-seconds 12] [--trainer-join-seconds 4]
                                       [--idle-timeout 5] [--poll-seconds 2] [--pending-seconds 5]
                                       [--gpu-wait-seconds 300]

A Ray 2.54 head with Ray's own v2 autoscaler over Ray's fake multi-node provider
(tools/fake_capacity.py), inside its own loopback-only network and PID namespace
(tools/loopback_namespace.py), with no GPU node at the start and two GPU node types as the split
layout's RayCluster has them (components/ray_pods.py): ``rollout-workers`` whose nodes advertise
``gke_grpo_rollout_pool: 1`` and ``trainer-workers`` whose nodes advertise
``gke_grpo_trainer_pool: 1`` (jobs/contract/layouts.py), each with max_workers = its pool's nodes
(the group's maxReplicas). Each pool has its own capacity source and join delay: by default the
rollout pool on Spot, joining later (--rollout-join-seconds) than the trainer pool on a
reservation (--trainer-join-seconds). This process watches the GPU nodes every 0.1 s. A
benchmark, not a test: it prints figures (tests/jobs/head/test_split_pools_ray.py asserts the
same facts).

Measured:
  a. bring-up      the driver's real gang holder (jobs/head/gpu_gang.py GangHolder, with both
                   pools: [{"GPU": G, "gke_grpo_rollout_pool": 1}] x R + [{"GPU": G,
                   "gke_grpo_trainer_pool": 1}] x T) makes the request from zero GPU nodes; the
                   autoscaler brings both groups up; the driver's real GPU wait
                   (jobs/head/gpu_wait.py wait_for_gpus with the pools and the gang check, at the
                   plan's poll) returns only once both pools are up. Printed: when each node
                   joined (pool, source), when each pool and both were up, when the GPU wait
                   returned, its progress lines, and the GPU-seconds idle before both pools were up
                   (the sum over nodes of G x (both up - the node's join)), and to the wait's return.
  b. placement     per pool, one STRICT_PACK placement group per node of G bundles
                   {"CPU": 10, "GPU": 1, "<pool resource>": 1e-4}: the bundles verl 0.9.1's
                   RayResourcePool makes when it is given an accelerator_type (verl/
                   single_controller/ray/base.py line 121, lines 149-150: ``bundle[
                   accelerator_type] = 1e-4``; max_colocate_count 10 CPUs a bundle). Printed: the
                   node (and so the pool) of every bundle, and whether each landed on its pool.
                   verl itself never passes an accelerator_type (ResourcePoolManager.
                   create_resource_pool, base.py lines 203-213), nor does NeMo RL bind its groups
                   to a pool, so their bundles may land on either pool's nodes: that is why the
                   program keeps both pools of a split run on one capacity source
                   (jobs/contract/layouts.py FRAMEWORK_SETTINGS, docs/layouts.md). This shows what a
                   bound bundle does, not what the frameworks do today.
  c. a full pool   the rollout pool's groups removed (its GPUs free), one more trainer-bound bundle
                   than the trainer pool has GPUs: it stays pending (pg.wait within
                   --pending-seconds not done) while the rollout pool has free GPUs; the same
                   bundle bound to the rollout pool is placed at once; once one trainer group is
                   removed, the waiting bundle is placed on the trainer pool.
Then the gang is released (the holder's pipe closed: it clears the request and exits 0), the time
until the last GPU node is gone is printed against the idle timeout, the head is stopped, and the
processes left in the namespace are counted (expected: none).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jobs.contract.layouts import POOL_RESOURCES, Pool
from jobs.contract.run_plan import DEFAULT_GPU_POLL_SECONDS
from tools.loopback_namespace import INSIDE_ENV, inside, namespace_init, run_in_namespace

PY = sys.executable
# How long the processes of the stopped head get to end on their own before they are counted.
LEFTOVER_WITHIN_SECONDS = 20.0
# verl 0.9.1 RayResourcePool: max_colocate_count (10) CPUs a bundle, one GPU, and the
# accelerator_type's share (verl/single_controller/ray/base.py lines 119-121, 147-150).
VERL_BUNDLE_CPUS = 10
ACCELERATOR_TYPE_SHARE = 1e-4
# Each pool's capacity source: (name, the node labels GKE sets on its nodes).
POOL_SOURCES: dict[str, tuple[str, dict[str, str]]] = {
    "rollout": ("spot", {"cloud.google.com/gke-spot": "true"}),
    "trainer": ("reservation", {"cloud.google.com/reservation-name": "bench-trainer",
                                "cloud.google.com/reservation-affinity": "specific"}),
}


@dataclass(frozen=True)
class SplitSettings:
    """The fake split cluster and how the scenarios use it."""
    gpus_per_node: int = 2
    rollout_nodes: int = 2
    trainer_nodes: int = 2
    rollout_join_seconds: float = 12.0
    trainer_join_seconds: float = 4.0
    idle_timeout_seconds: float = 5.0
    poll_seconds: float = DEFAULT_GPU_POLL_SECONDS   # the GPU wait's poll
    pending_seconds: float = 5.0       # how long the extra bundle is seen to wait
    gpu_wait_seconds: float = 300.0    # the GPU wait's bound
    place_within_seconds: float = 120.0  # the bound on a placement group that should be placed

    @property
    def pools(self) -> tuple[Pool, ...]:
        return (Pool("rollout", self.rollout_nodes), Pool("trainer", self.trainer_nodes))

    @property
    def nodes(self) -> int:
        return self.rollout_nodes + self.trainer_nodes

    def join_seconds(self, pool: str) -> float:
        return self.rollout_join_seconds if pool == "rollout" else self.trainer_join_seconds

    def cluster(self, event_log: str | None = None):  # -> tools.fake_capacity.FakeCluster
        """A CPU-only head and one node type per pool, as the split RayCluster's worker groups;
        the colocated layout's ``gpu-workers`` group is held at 0 nodes."""
        from tools import fake_capacity as fc

        node_types: dict[str, dict[str, Any]] = {}
        for pool in self.pools:
            source, labels = POOL_SOURCES[pool.name]
            node_types[pool.group] = {
                "resources": {"CPU": VERL_BUNDLE_CPUS * self.gpus_per_node, "GPU": self.gpus_per_node,
                              "object_store_memory": 80_000_000, pool.resource: 1},
                "node_config": {"sources": [fc.FakeSource(
                    source, labels, capacity=pool.nodes * 4,
                    join_seconds=self.join_seconds(pool.name)).to_json()]},
                "min_workers": 0, "max_workers": pool.nodes}
        return fc.FakeCluster(sources=(), max_workers=0, gpus_per_node=self.gpus_per_node,
                              idle_timeout_seconds=self.idle_timeout_seconds,
                              extra_node_types=node_types, event_log=event_log)


@dataclass
class PoolNodeWatch:
    """First-seen and last-seen times of every GPU node, with its pool and capacity source."""
    joined: dict[str, float] = field(default_factory=dict)
    gone: dict[str, float] = field(default_factory=dict)
    pool: dict[str, str | None] = field(default_factory=dict)
    source: dict[str, str] = field(default_factory=dict)
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def run(self) -> None:
        import ray

        from jobs.contract.capacity import source_of
        from jobs.head.gpu_wait import pool_of

        while not self.stop.is_set():
            now = time.time()
            try:
                alive = {n["NodeID"]: n for n in ray.nodes()
                         if n.get("Alive") and (n.get("Resources") or {}).get("GPU", 0) > 0}
            except Exception:      # the head going away at the end
                alive = None
            if alive is not None:
                with self.lock:
                    for node_id, node in alive.items():
                        if node_id not in self.joined:
                            self.joined[node_id] = now
                            self.pool[node_id] = pool_of(node.get("Resources") or {})
                            self.source[node_id] = source_of(node.get("Labels") or {})
                    for node_id in self.joined:
                        if node_id not in alive and node_id not in self.gone:
                            self.gone[node_id] = now
            self.stop.wait(0.1)

    def nodes(self) -> list[tuple[str, float, str | None, str]]:
        """(node id, joined, pool, source) of every GPU node seen, by join time."""
        with self.lock:
            rows = [(n, t, self.pool[n], self.source[n]) for n, t in self.joined.items()]
        return sorted(rows, key=lambda row: row[1])

    def alive(self) -> list[str]:
        with self.lock:
            return [n for n in self.joined if n not in self.gone]


@contextlib.contextmanager
def split_layout_head(settings: SplitSettings, workdir: Path, namespace_env: str) -> Iterator[PoolNodeWatch]:
    """The head with the autoscaler on the split cluster, this process connected and watching its
    GPU nodes; always stopped. Only inside a loopback-only namespace whose marker is
    ``namespace_env`` (fake_capacity.stop_autoscaling_head runs `ray stop --force`)."""
    import ray

    from tools import fake_capacity as fc

    workdir.mkdir(parents=True, exist_ok=True)
    watch = PoolNodeWatch()
    try:
        fc.start_autoscaling_head(settings.cluster(str(workdir / "provider.jsonl")), workdir)
        ray.init(address=fc.GCS, logging_level="ERROR", log_to_driver=False)
        threading.Thread(target=watch.run, name="pool-node-watch", daemon=True).start()
        yield watch
    finally:
        watch.stop.set()
        ray.shutdown()
        fc.stop_autoscaling_head(namespace_env)


@dataclass
class PoolsBringUp:
    """What the gang request with both pools and the GPU wait did."""
    holder: Any                    # jobs.head.gpu_gang.GangHolder
    asked: float                   # GangHolder.start called
    held: float                    # the request confirmed (start returned)
    gpu_nodes_before: int          # GPU nodes when the request was made
    wait_code: int
    wait_returned: float
    wait_lines: list[str]
    free_at_return: dict[str, int]  # pool -> whole free nodes gpu_wait saw when it returned

    def pool_up(self, watch: PoolNodeWatch, pool: Pool) -> float | None:
        """When the pool's last node joined (None: not all of them did)."""
        joins = [t for _, t, p, _ in watch.nodes() if p == pool.name]
        return sorted(joins)[pool.nodes - 1] if len(joins) >= pool.nodes else None

    def both_up(self, watch: PoolNodeWatch, pools: tuple[Pool, ...]) -> float | None:
        ups = [self.pool_up(watch, pool) for pool in pools]
        return None if None in ups else max(u for u in ups if u is not None)


def bring_up_split_gang(settings: SplitSettings, watch: PoolNodeWatch) -> PoolsBringUp:
    """The driver's gang request with both pools (the real holder process), then the driver's GPU
    wait with the pools and the autoscaler's verdict on the request (as `--check-gang`)."""
    from ray._raylet import GcsClient

    from jobs.head import gpu_wait
    from jobs.head.gpu_gang import GangHolder
    from tools import fake_capacity as fc

    before = len(watch.alive())
    asked = time.time()
    holder = GangHolder.start(settings.nodes, settings.gpus_per_node, pools=settings.pools)
    held = time.time()
    gcs = GcsClient(fc.GCS)
    out = io.StringIO()
    seen: dict[str, int] = {}

    def infeasible() -> bool:
        try:
            return gpu_wait.gang_infeasible(gcs, settings.gpus_per_node, settings.nodes)
        except Exception:
            return False

    def on_ready(snap) -> None:
        seen.update({p.name: len(snap.free_nodes(settings.gpus_per_node, p.name)) for p in settings.pools})

    code = gpu_wait.wait_for_gpus(settings.nodes * settings.gpus_per_node, settings.gpu_wait_seconds,
                                  settings.poll_seconds, gpus_per_node=settings.gpus_per_node,
                                  pools=settings.pools, out=out, infeasible=infeasible, on_ready=on_ready)
    returned = time.time()
    return PoolsBringUp(holder, asked, held, before, code, returned, out.getvalue().splitlines(), seen)


def verl_bundle(pool: str) -> dict[str, float]:
    """One bundle of verl 0.9.1's RayResourcePool with accelerator_type = the pool's resource."""
    return {"CPU": VERL_BUNDLE_CPUS, "GPU": 1, POOL_RESOURCES[pool]: ACCELERATOR_TYPE_SHARE}


@dataclass
class PoolGroup:
    """A placement group bound to one pool, and the node of each of its bundles once placed."""
    pool: str
    name: str
    pg: Any
    bundle_nodes: list[str] = field(default_factory=list)

    def locate(self) -> list[str]:
        from ray.util import placement_group_table

        table = placement_group_table(self.pg)["bundles_to_node_id"]
        self.bundle_nodes = [table[i] for i in sorted(table)]
        return self.bundle_nodes


def pool_group(pool: str, name: str, bundles: int) -> PoolGroup:
    from ray.util.placement_group import placement_group

    return PoolGroup(pool, name, placement_group([verl_bundle(pool)] * bundles, strategy="STRICT_PACK",
                                                 name=name))


def place_pool_groups(settings: SplitSettings) -> tuple[list[PoolGroup], float]:
    """One STRICT_PACK group of gpus_per_node bundles per node of each pool (the trainer's first),
    all asked for at once; (the groups, seconds until all were placed)."""
    import ray

    started = time.time()
    groups = [pool_group(pool.name, f"{pool.name}-{i}", settings.gpus_per_node)
              for pool in sorted(settings.pools, key=lambda p: p.name != "trainer") for i in range(pool.nodes)]
    ray.get([group.pg.ready() for group in groups], timeout=settings.place_within_seconds)
    placed = time.time() - started
    for group in groups:
        group.locate()
    return groups, placed


def free_gpus_by_pool(watch: PoolNodeWatch) -> dict[str | None, float]:
    """Free (unreserved) GPUs of the alive GPU nodes, by pool."""
    from ray._private.state import available_resources_per_node

    free = available_resources_per_node()
    alive = set(watch.alive())
    totals: dict[str | None, float] = {}
    for node_id, _, pool, _ in watch.nodes():
        if node_id in alive:
            totals[pool] = totals.get(pool, 0.0) + float(free.get(node_id, {}).get("GPU", 0.0))
    return totals


def _until(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


@dataclass
class FullPoolResult:
    full: str                          # the pool given one bundle more than it has GPUs
    other: str
    free_while_waiting: dict[str | None, float]
    placed_while_other_free: bool      # the extra bundle placed within pending_seconds (expected: no)
    control_placed_seconds: float | None
    control_nodes: list[str]
    placed_after_free_seconds: float | None
    extra_nodes: list[str]


def extra_bundle_waits(settings: SplitSettings, groups: list[PoolGroup], watch: PoolNodeWatch,
                       full: str = "trainer", other: str = "rollout") -> FullPoolResult:
    """With ``full``'s GPUs all reserved by its groups and ``other``'s groups removed: one more
    ``full``-bound bundle waits; the same bundle bound to ``other`` is placed; freeing one
    ``full`` group places the waiting one. Removes the groups it made and those it freed."""
    from ray.util.placement_group import remove_placement_group

    other_gpus = settings.gpus_per_node * next(p.nodes for p in settings.pools if p.name == other)
    for group in [g for g in groups if g.pool == other]:
        remove_placement_group(group.pg)
        groups.remove(group)
    _until(lambda: free_gpus_by_pool(watch).get(other, 0.0) >= other_gpus, settings.place_within_seconds)
    extra = pool_group(full, f"{full}-extra", 1)
    placed_early = extra.pg.wait(settings.pending_seconds)
    free = free_gpus_by_pool(watch)
    control = pool_group(other, f"{other}-control", 1)
    started = time.time()
    control_ok = control.pg.wait(settings.place_within_seconds)
    control_seconds = time.time() - started if control_ok else None
    control_nodes = control.locate() if control_ok else []
    remove_placement_group(control.pg)
    freed = next(g for g in groups if g.pool == full)
    remove_placement_group(freed.pg)
    groups.remove(freed)
    started = time.time()
    extra_ok = extra.pg.wait(settings.place_within_seconds)
    extra_seconds = time.time() - started if extra_ok else None
    extra_nodes = extra.locate() if extra_ok else []
    remove_placement_group(extra.pg)
    return FullPoolResult(full, other, free, placed_early, control_seconds, control_nodes,
                          extra_seconds, extra_nodes)


@dataclass
class SplitRelease:
    holder_exit: int | None
    fallback_exit: int | None
    released: float
    nodes_left: int
    last_gone: float | None


def release_split_gang(settings: SplitSettings, holder: Any, watch: PoolNodeWatch,
                       groups: list[PoolGroup], gone_within: float) -> SplitRelease:
    """The groups removed and the gang released as the driver does at its end (the holder's pipe
    closed); waits up to ``gone_within`` for every GPU node to go (the idle timeout)."""
    from ray.util.placement_group import remove_placement_group

    for group in groups:
        remove_placement_group(group.pg)
    groups.clear()
    released = time.time()
    code = holder.release()
    _until(lambda: not watch.alive(), gone_within)
    with watch.lock:
        gone = list(watch.gone.values())
    return SplitRelease(code, holder.fallback_exit_code, released, len(watch.alive()),
                        max(gone) if gone and not watch.alive() else None)


def namespace_processes() -> list[str]:
    """The live processes of this PID namespace other than its init, this process and its
    ancestors (zombies, which init reaps, are not counted)."""
    mine = {1, os.getpid()}
    pid = os.getpid()
    while pid > 1:
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
        mine.add(pid)
    left = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in mine:
            continue
        try:
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        if state != "Z":
            left.append(f"{entry.name} {command[:100]}")
    return left


def _node_text(node_id: str, watch: PoolNodeWatch) -> str:
    with watch.lock:
        pool, source = watch.pool.get(node_id), watch.source.get(node_id, "?")
    # The fake provider's node ids differ in their last digits (fake_multi_node/node_provider.py).
    return f"...{node_id[-6:]} ({pool or 'no pool'}, {source})"


def measure_split_layout(settings: SplitSettings) -> int:
    import ray

    work = Path(tempfile.mkdtemp(prefix="bench-split-"))
    g = settings.gpus_per_node
    try:
        with split_layout_head(settings, work, INSIDE_ENV) as watch:
            up = bring_up_split_gang(settings, watch)
            groups: list[PoolGroup] = []
            try:
                nodes = watch.nodes()
                both = up.both_up(watch, settings.pools)
                if up.wait_code == 0:
                    groups, placed_seconds = place_pool_groups(settings)
                    placements = [(group.name, group.pool, list(group.bundle_nodes)) for group in groups]
                    full = extra_bundle_waits(settings, groups, watch)
            finally:
                release = release_split_gang(settings, up.holder, watch, groups,
                                             settings.idle_timeout_seconds + 120)
        stopped = time.time()
        _until(lambda: not namespace_processes(), LEFTOVER_WITHIN_SECONDS)
        left, left_after = namespace_processes(), time.time() - stopped
    finally:
        shutil.rmtree(work, ignore_errors=True)

    t0 = up.held
    print(f"Split layout benchmark: Ray {ray.__version__} v2 autoscaler, fake multi-node provider; "
          f"{g} GPUs a node; " + "; ".join(
              f"{p.name} {p.nodes} node(s) ({p.group}, {p.resource}: 1, {POOL_SOURCES[p.name][0]}, joins "
              f"{settings.join_seconds(p.name):g} s after creation)" for p in settings.pools)
          + f"; GPU poll {settings.poll_seconds:g} s; idle timeout {settings.idle_timeout_seconds:g} s")
    print("a. the gang request with both pools, from zero GPU nodes (times from the request held)")
    print(f"  GPU nodes before the request:  {up.gpu_nodes_before}")
    print(f"  holder started -> request held: {up.held - up.asked:.1f} s")
    for node_id, joined, _, _ in nodes:
        print(f"  node {_node_text(node_id, watch)} joined at +{joined - t0:.1f} s")
    for pool in settings.pools:
        at = up.pool_up(watch, pool)
        print(f"  {pool.name} pool up ({pool.nodes} node(s)): " + ("never" if at is None else f"+{at - t0:.1f} s"))
    print("  both pools up:                 " + ("never" if both is None else f"+{both - t0:.1f} s"))
    print(f"  gpu_wait (pools) returned {up.wait_code} at +{up.wait_returned - t0:.1f} s; free nodes it "
          f"saw per pool: {up.free_at_return}; its lines:")
    for line in up.wait_lines:
        print(f"    {line}")
    if both is not None:
        idle = {p.name: g * sum(both - t for _, t, pool, _ in nodes if pool == p.name) for p in settings.pools}
        to_wait = g * sum(up.wait_returned - t for _, t, _, _ in nodes)
        print(f"  GPU-seconds idle before both pools were up: {sum(idle.values()):.1f} ("
              + ", ".join(f"{name} {value:.1f}" for name, value in idle.items())
              + f"); until gpu_wait returned: {to_wait:.1f}")
    if up.wait_code != 0:
        print("  (the GPU wait did not return 0: b and c not run)")
    else:
        print(f"b. placement groups as verl's RayResourcePool with accelerator_type = the pool's resource: one "
              f"STRICT_PACK group a node, {g} bundles {verl_bundle('trainer')} (trainer; rollout alike)")
        print(f"  all groups placed {placed_seconds:.1f} s after they were asked for")
        good = total = 0
        for name, pool, bundle_nodes in sorted(placements):
            on_pool = [watch.pool.get(n) == pool for n in bundle_nodes]
            good, total = good + sum(on_pool), total + len(on_pool)
            print(f"  {name:10s} bundles {list(range(len(bundle_nodes)))} -> node "
                  + ", ".join(sorted({_node_text(n, watch) for n in bundle_nodes})))
        print(f"  every bundle on its pool's nodes: {'yes' if good == total else 'NO'} ({good} of {total})")
        pool_gpus = g * next(p.nodes for p in settings.pools if p.name == full.full)
        print(f"c. one {full.full}-bound bundle more than the {full.full} pool's {pool_gpus} GPUs "
              f"(the {full.other} pool's groups removed)")
        print("  free GPUs by pool while it waited: "
              + ", ".join(f"{pool} {value:g}" for pool, value in sorted(full.free_while_waiting.items(), key=str)))
        print(f"  the extra {full.full} bundle after {settings.pending_seconds:g} s: "
              + ("PLACED" if full.placed_while_other_free else "pending (pg.wait not done)"))
        print(f"  the same bundle bound to the {full.other} pool: "
              + ("not placed" if full.control_placed_seconds is None else
                 f"placed in {full.control_placed_seconds:.1f} s on node "
                 + ", ".join(_node_text(n, watch) for n in full.control_nodes)))
        print(f"  one {full.full} group removed: the waiting bundle "
              + ("was not placed" if full.placed_after_free_seconds is None else
                 f"placed {full.placed_after_free_seconds:.1f} s later on node "
                 + ", ".join(_node_text(n, watch) for n in full.extra_nodes)))
    print("release")
    print(f"  holder exit {release.holder_exit} ({'it cleared the request itself' if release.holder_exit == 0 else f'fallback release exit {release.fallback_exit}'})"
          f"; release -> last GPU node gone: "
          + ("not within the bound" if release.last_gone is None else
             f"{release.last_gone - release.released:.1f} s (idle timeout {settings.idle_timeout_seconds:g} s)"))
    print(f"  processes left in the namespace {left_after:.1f} s after `ray stop`: {len(left) or 'none'}"
          + (" (they end with the namespace: unshare --kill-child)" if left else ""))
    for line in left:
        print(f"    {line}")
    load = os.getloadavg()
    print(f"(this machine's load average at the end: {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} on "
          f"{os.cpu_count()} CPUs: join and placement times stretch with it)")
    return 0 if up.wait_code == 0 else 1


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench_split_layout", description=__doc__.split("\n\n")[0])
    defaults = SplitSettings()
    for flag, kind, default in OPTIONS:
        parser.add_argument(flag, type=kind, default=getattr(defaults, default))
    parser.add_argument("--init", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    for flag, _, _ in OPTIONS:
        if not getattr(args, flag[2:].replace("-", "_")) > 0:
            parser.error(f"{flag} must be above 0")
    passed = [str(x) for flag, _, _ in OPTIONS for x in (flag, getattr(args, flag[2:].replace("-", "_")))]
    if inside():
        if args.init:
            return namespace_init([PY, "-m", "tools.bench_split_layout", *passed])
        return measure_split_layout(SplitSettings(**{field: getattr(args, flag[2:].replace("-", "_"))
                                                     for flag, _, field in OPTIONS}))
    return run_in_namespace("tools.bench_split_layout", passed, timeout=1800)


# (flag, type, SplitSettings field)
OPTIONS = (("--gpus-per-node", int, "gpus_per_node"), ("--rollout-nodes", int, "rollout_nodes"),
           ("--trainer-nodes", int, "trainer_nodes"), ("--rollout-join-seconds", float, "rollout_join_seconds"),
           ("--trainer-join-seconds", float, "trainer_join_seconds"),
           ("--idle-timeout", float, "idle_timeout_seconds"), ("--poll-seconds", float, "poll_seconds"),
           ("--pending-seconds", float, "pending_seconds"),
           ("--gpu-wait-seconds", float, "gpu_wait_seconds"))


if __name__ == "__main__":
    sys.exit(main())
