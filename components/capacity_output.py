"""The stack output ``gpuCapacity`` (the capacity plan the jobs CLI reads), computed from plain
config values: the GpuCapacity component exports it, and the offline stack target
(components/stack_target.py) computes the same without registering anything, so this module
imports no cloud SDK."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from components.config import CapacityPlan, GpuConfig


class CapacityInputs(Protocol):
    """What the plan reads: GpuCapacityArgs and StackConfig both carry these."""

    @property
    def machine_type(self) -> str: ...
    @property
    def capacity(self) -> CapacityPlan: ...
    @property
    def gpu(self) -> GpuConfig: ...
    @property
    def pools(self) -> tuple[tuple[str, int, int], ...]: ...


def capacity_output(args: CapacityInputs, compute_class: str | None, *, standard: bool) -> dict:
    """The stack output ``gpuCapacity``: the sources in order with their hourly rate per node
    (data/prices.yaml), the Ray worker group's bounds and idle timeout. The jobs CLI reads it
    (jobs/cli/gpu_status.py) to price each node by its own source."""
    from components.ray_pods import GPU_GROUP, IDLE_TIMEOUT_SECONDS
    from jobs.contract.layouts import POOL_GROUPS
    from jobs.plan.prices import hourly_rate, load_price_table

    table = load_price_table()
    machine = table.machines.get(args.machine_type)
    sources = []
    for source in args.capacity.sources:
        rate = hourly_rate(machine, source.provisioning_model) if machine is not None else None
        sources.append({
            "source": source.label, "kind": source.kind,
            "reservation": source.reservation.name if source.reservation else None,
            "nodePool": source.pool_name if standard else None,
            "minNodes": source.min_nodes if standard else None,
            "maxNodes": source.max_nodes if standard else None,
            "hourlyPerNode": None if rate is None or rate.per_node_hour is None else round(rate.per_node_hour, 2),
            "rateBasis": rate.basis if rate is not None else "unknown: no price for the machine",
            "billed": "while reserved, used or not" if source.kind == "reservation" else "while a node runs",
        })
    output: dict[str, Any] = {"machineType": args.machine_type, "currency": table.currency, "pricesAsOf": table.as_of,
            "sources": sources, "computeClass": compute_class,
            "workerGroup": GPU_GROUP, "minReplicas": 0, "maxReplicas": args.gpu.nodes,
            "autoscaler": "Ray autoscaler v2 (KubeRay in-tree)",
            "idleTimeoutSeconds": IDLE_TIMEOUT_SECONDS}
    if args.pools:
        # A split layout: each pool's group, its source and what it costs an hour while up.
        pools = []
        for name, nodes, index in args.pools:
            per_node = sources[index]["hourlyPerNode"]
            pools.append({"pool": name, "workerGroup": POOL_GROUPS[name], "nodes": nodes,
                          "source": sources[index]["source"],
                          "hourly": None if per_node is None else round(nodes * float(per_node), 2)})
        output["pools"] = pools
    return output
