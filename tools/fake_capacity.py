"""A Ray head whose GPU workers come and go through Ray's own v2 autoscaler, on this machine.

The GPU nodes are Ray 2.54's fake multi-node provider (ray/autoscaler/_private/fake_multi_node/
node_provider.py: each "node" is a local raylet started in the autoscaler's process), extended
with what a GKE node has and the stock provider has not:

- a join time: a real GPU worker joins minutes after its pod is created (node provisioning, image
  pull, the NCCL installer); here after ``join_seconds``;
- capacity sources in order, as a GKE ComputeClass tries its priorities: each source can supply
  ``capacity`` nodes; a source with none left is tried for ``fallback_after_seconds`` (GKE giving
  up on it) before the next one; a node no source can supply stays a pending "pod" forever. A
  node type may carry its own sources (``node_config: {"sources": [...]}``), to model sources
  as separate Ray worker groups instead;
- the node labels GKE sets on a node of that source (``cloud.google.com/gke-spot``,
  ``cloud.google.com/reservation-name``, ...) as Ray node labels, which the GPU worker pods pass
  to ``ray start --labels-file`` (components/node_labels.py).

Everything listens on 127.0.0.1 only inside a loopback-only network namespace (tests/jobs/
ray_head.py, tools/bench_capacity.py); nothing here may run outside one: ``stop_autoscaling_head`` runs
``ray stop --force``, which is only safe inside the namespace's own PID namespace.

The provider is loaded by the autoscaler as an ``external`` provider (``provider.module``), which
also avoids the fake provider's default config file that the ray 2.54.0 wheel does not ship
(``fake_multi_node/example.yaml``: the v2 monitor dies without it).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tools import local_ray

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
GCS, DASHBOARD = local_ray.GCS, local_ray.DASHBOARD
# Ray's fake provider names the head this (ray/autoscaler/_private/fake_multi_node/
# node_provider.py FAKE_HEAD_NODE_ID, 2.54.0); the autoscaler matches the head by it.
FAKE_HEAD_NODE_ID = "fffffffffffffffffffffffffffffffffffffffffffffffffff00000"
GPU_NODE_TYPE = "gpu-workers"
PROVIDER_MODULE = "tools.fake_capacity.WaterfallProvider"


@dataclass(frozen=True)
class FakeSource:
    """One capacity source of the fake ComputeClass."""
    name: str
    labels: dict[str, str]               # the node labels GKE sets on its nodes
    capacity: int                        # nodes it can supply (0: none, ever)
    join_seconds: float = 3.0            # from "pod created" to the raylet registered
    fallback_after_seconds: float = 0.0  # how long GKE tries it when it has nothing left

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "labels": self.labels, "capacity": self.capacity,
                "join_seconds": self.join_seconds,
                "fallback_after_seconds": self.fallback_after_seconds}


@dataclass(frozen=True)
class FakeCluster:
    """What the fake RayCluster looks like: a CPU-only head and one GPU worker group."""
    sources: tuple[FakeSource, ...]
    max_workers: int                     # the group's maxReplicas
    gpus_per_node: int = 2
    cpus_per_node: int = 1
    head_cpus: int = 2
    idle_timeout_seconds: float = 6.0
    update_interval_seconds: float = 1.0
    extra_node_types: dict[str, dict[str, Any]] = field(default_factory=dict)
    event_log: str | None = None        # the provider's created/joined/terminated records

    def autoscaling_config(self) -> dict[str, Any]:
        """The autoscaling config, shaped as Ray's KubeRay translation builds it from a
        RayCluster (ray/autoscaler/_private/kuberay/autoscaling_config.py, 2.54.0): node types
        from the groups, min/max workers from min/maxReplicas, idle timeout in minutes."""
        node_types: dict[str, dict[str, Any]] = {
            "ray.head.default": {"resources": {"CPU": self.head_cpus}, "node_config": {},
                                 "max_workers": 0},
            GPU_NODE_TYPE: {"resources": {"CPU": self.cpus_per_node, "GPU": self.gpus_per_node,
                                          "object_store_memory": 80_000_000},
                            "node_config": {}, "min_workers": 0, "max_workers": self.max_workers},
            **self.extra_node_types,
        }
        return {
            "cluster_name": "fake-capacity",
            "max_workers": self.max_workers + sum(
                t.get("max_workers", 0) for t in self.extra_node_types.values()),
            "provider": {
                "type": "external", "module": PROVIDER_MODULE,
                "use_node_id_as_ip": True, "disable_node_updaters": True,
                "disable_launch_config_check": True, "launch_multiple": True,
                "head_node_id": FAKE_HEAD_NODE_ID, "gcs_address": GCS,
                "sources": [s.to_json() for s in self.sources],
                "event_log": self.event_log,
            },
            "available_node_types": node_types,
            "head_node_type": "ray.head.default",
            "upscaling_speed": 1000.0,
            "idle_timeout_minutes": self.idle_timeout_seconds / 60.0,
            "auth": {}, "docker": {}, "file_mounts": {}, "cluster_synced_files": [],
            "file_mounts_sync_continuously": False, "rsync_exclude": [], "rsync_filter": [],
            "initialization_commands": [], "setup_commands": [], "head_setup_commands": [],
            "worker_setup_commands": [], "head_start_ray_commands": [],
            "worker_start_ray_commands": [],
        }


def fake_cluster_env(cluster: FakeCluster | None = None) -> dict[str, str]:
    env = local_ray.ray_env(RAY_DASHBOARD_STARTUP_TIMEOUT_S="240", PYTHONPATH=str(ROOT))
    if cluster is not None:
        env.update({
            "RAY_FAKE_CLUSTER": "1", "RAY_enable_autoscaler_v2": "1",
            "RAY_CLOUD_INSTANCE_ID": FAKE_HEAD_NODE_ID,
            "RAY_OVERRIDE_NODE_ID_FOR_TESTING": FAKE_HEAD_NODE_ID,
            "AUTOSCALER_UPDATE_INTERVAL_S": f"{cluster.update_interval_seconds:g}",
        })
    return env


def start_autoscaling_head(cluster: FakeCluster, workdir: Path) -> None:
    """`ray start --head` with the autoscaler on the fake provider; returns once the dashboard's
    job API answers."""
    config = workdir / "autoscaling.json"
    config.write_text(json.dumps(cluster.autoscaling_config(), indent=1))
    local_ray.start_head(num_cpus=cluster.head_cpus, num_gpus=0, extra_args=[f"--autoscaling-config={config}"],
                         env=fake_cluster_env(cluster), timeout=300)


def stop_autoscaling_head(namespace_env: str) -> None:
    local_ray.stop_all(inside=os.environ.get(namespace_env) == "1", timeout=60)


def gpu_nodes_alive() -> dict[str, dict[str, str]]:
    """Alive Ray nodes with GPUs: node id -> its labels (from this process's Ray connection)."""
    import ray

    return {n["NodeID"]: dict(n.get("Labels") or {}) for n in ray.nodes()
            if n.get("Alive") and (n.get("Resources") or {}).get("GPU", 0) > 0}


def _provider_base():
    from ray.autoscaler._private.fake_multi_node.node_provider import FakeMultiNodeProvider
    return FakeMultiNodeProvider


class WaterfallProvider(_provider_base()):  # type: ignore[misc]
    """Ray's fake multi-node provider with a join time and capacity sources in order (see the
    module docstring). Runs inside Ray's autoscaler process (the head's monitor)."""

    def __init__(self, provider_config, cluster_name):
        super().__init__(provider_config, cluster_name)
        self._sources = [dict(s) for s in provider_config.get("sources", [])]
        self._used: dict[str, int] = {}
        self._pending: dict[str, threading.Event] = {}
        self._log = Path(provider_config.get("event_log") or
                         Path(tempfile.gettempdir()) / "fake-capacity-provider.jsonl")

    def _record(self, **fields) -> None:
        with open(self._log, "a") as f:
            f.write(json.dumps({"time": time.time(), **fields}) + "\n")

    def _create_node_with_resources_and_labels(self, node_config, tags, count, resources, labels):
        from ray.autoscaler.tags import (
            NODE_KIND_WORKER,
            STATUS_UP_TO_DATE,
            TAG_RAY_NODE_KIND,
            TAG_RAY_NODE_NAME,
            TAG_RAY_NODE_STATUS,
            TAG_RAY_USER_NODE_TYPE,
        )

        with self.lock:
            node_id = self._next_hex_node_id()
            all_tags = {TAG_RAY_NODE_KIND: NODE_KIND_WORKER,
                        TAG_RAY_USER_NODE_TYPE: tags[TAG_RAY_USER_NODE_TYPE],
                        TAG_RAY_NODE_NAME: node_id, TAG_RAY_NODE_STATUS: STATUS_UP_TO_DATE, **tags}
            # Created at once (a pod exists), Ray joins later (or never): as on GKE.
            self._nodes[node_id] = {"tags": all_tags, "node": None}
            cancelled = threading.Event()
            self._pending[node_id] = cancelled
        self._record(event="created", node=node_id, node_type=all_tags[TAG_RAY_USER_NODE_TYPE])
        sources = [dict(s) for s in (node_config or {}).get("sources", self._sources)]
        threading.Thread(target=self._provision, daemon=True,
                         args=(node_id, all_tags, dict(resources), dict(labels or {}), sources,
                               cancelled)).start()

    def _provision(self, node_id, tags, resources, labels, sources, cancelled: threading.Event) -> None:
        for source in sources:
            name = source["name"]
            with self.lock:
                has_room = self._used.get(name, 0) < int(source["capacity"])
                if has_room:
                    self._used[name] = self._used.get(name, 0) + 1
            if not has_room:
                if cancelled.wait(float(source.get("fallback_after_seconds", 0))):
                    return
                continue
            if cancelled.wait(float(source.get("join_seconds", 0))):
                with self.lock:
                    self._used[name] -= 1
                return
            self._start_raylet(node_id, tags, resources, {**labels, **source["labels"]}, name)
            return
        self._record(event="no_source", node=node_id)   # stays a pending pod

    def _start_raylet(self, node_id, tags, resources, labels, source_name) -> None:
        import ray
        from ray._common.network_utils import build_address
        from ray._private import ray_constants

        with self.lock:
            if node_id not in self._nodes:
                return
            gcs = self._gcs_address or build_address(ray._private.services.get_node_ip_address(), 6379)
            params = ray._private.parameter.RayParams(
                min_worker_port=0, max_worker_port=0, dashboard_port=None,
                dashboard_agent_listen_port=0, num_cpus=resources.pop("CPU", 0),
                num_gpus=resources.pop("GPU", 0),
                object_store_memory=resources.pop("object_store_memory", None),
                resources=resources, labels=labels, redis_address=gcs, gcs_address=gcs,
                env_vars={"RAY_OVERRIDE_NODE_ID_FOR_TESTING": node_id,
                          "RAY_CLOUD_INSTANCE_ID": node_id,
                          "RAY_NODE_TYPE_NAME": tags[self._type_tag()],
                          ray_constants.RESOURCES_ENVIRONMENT_VARIABLE: json.dumps(resources),
                          ray_constants.LABELS_ENVIRONMENT_VARIABLE: json.dumps(labels)})
            node = ray._private.node.Node(params, head=False, shutdown_at_exit=False,
                                          spawn_reaper=False)
            self._nodes[node_id]["node"] = node
            self._nodes[node_id]["source"] = source_name
        self._record(event="joined", node=node_id, source=source_name)

    @staticmethod
    def _type_tag() -> str:
        from ray.autoscaler.tags import TAG_RAY_USER_NODE_TYPE
        return TAG_RAY_USER_NODE_TYPE

    def _terminate_node(self, node):
        if node.get("node") is not None:
            node["node"].kill_all_processes(check_alive=False, allow_graceful=True)

    def terminate_node(self, node_id):
        with self.lock:
            node = self._nodes.pop(node_id, None)
            cancelled = self._pending.pop(node_id, None)
            if node is not None and "source" in node:
                self._used[node["source"]] -= 1
        if cancelled is not None:
            cancelled.set()
        if node is not None:
            self._terminate_node(node)
        self._record(event="terminated", node=node_id)
