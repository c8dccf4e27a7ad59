"""The cost estimate the preview prints and the program exports: the hourly cost of the GPU
capacity and the estimated cost of a run, from data/prices.yaml (dated, sourced).

Semantics differ by provisioning model and are stated in the result:
- reservation: COMMITTED. The reserved machines are paid for the whole reservation term whether a
  run uses them or not; a run adds no compute cost of its own. Shown: the committed hourly rate
  (the on-demand rate: reservation discounts/commitments could not be sourced, so it is an
  upper bound) and what the reservation costs over the run's deadline.
- spot and flex-start: INCREMENTAL. GPU nodes exist only while pods need them (pools scale from
  0, the Ray autoscaler removes idle GPU workers), so a run costs the hourly rate times its
  duration; Spot prices move, flex-start is at most the on-demand rate.
With a capacity waterfall the estimate uses the first source; every source's rate is in the
stack output gpuCapacity (components/gpu_capacity.py).
A run's duration is not predicted: the estimate bounds it by job.activeDeadlineSeconds.

A flex-start source serving a gang of several nodes grants them one by one, each billed from its
grant: ``flex_start_partial_grant`` bounds what the granted nodes cost while the gang assembles
(gpu.nodes x job.gpuWaitSeconds x the flex-start rate). Flex-start with queued provisioning, which
grants all of a request's nodes at once, is not used (docs/gpu-capacity.md says why).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import yaml

from components.config import LustreStorage, StackConfig
from jobs.plan.prices import hourly_rate, parse_price_table

PRICES_FILE = Path(__file__).resolve().parent.parent / "data" / "prices.yaml"


@functools.cache
def load_prices(path: Path = PRICES_FILE) -> dict[str, Any]:
    return yaml.safe_load(path.read_text())


def _rounded_money(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def flex_start_partial_grant(config: StackConfig, prices: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The worst case of a partial flex-start grant while the gang assembles: every node but the
    last granted at the start of the GPU wait, the last never (the wait then ends the run), all
    billed meanwhile; bounded by gpu.nodes x job.gpuWaitSeconds x the flex-start rate per node-hour.
    None when no flex-start source serves a gang of more than one node."""
    nodes = config.gpu.nodes
    if nodes < 2 or not any(source.kind == "flexStart" for source in config.capacity.sources):
        return None
    prices = prices or load_prices()
    machine = prices["machines"][config.machine_type]
    rate = hourly_rate(parse_price_table({**prices, "machines": {config.machine_type: machine}})
                       .machines[config.machine_type], "flex-start")
    hours = config.job.gpu_wait_seconds / 3600
    return {"nodes": nodes, "gpuWaitSeconds": config.job.gpu_wait_seconds,
            "hourlyPerNode": _rounded_money(rate.per_node_hour), "rateBasis": rate.basis,
            "upperBound": _rounded_money(None if rate.per_node_hour is None else nodes * hours * rate.per_node_hour),
            "currency": prices["currency"]}


def partial_grant_line(grant: dict[str, Any]) -> str:
    """The preview's and preflight's words for ``flex_start_partial_grant``."""
    money = ("unknown (no flex-start rate)" if grant["upperBound"] is None
             else f"{grant['upperBound']:,.2f} {grant['currency']}")
    rate = "an unknown rate" if grant["hourlyPerNode"] is None else \
        f"{grant['hourlyPerNode']} {grant['currency']} per node-hour ({grant['rateBasis']})"
    return (f"flex-start grants a gang's {grant['nodes']} nodes one by one, each billed from its "
            f"grant: the worst case while the gang assembles is {grant['nodes']} nodes x "
            f"job.gpuWaitSeconds {grant['gpuWaitSeconds']} s x {rate} = {money} per GPU wait; "
            "queued provisioning, which grants them all at once, is not used "
            "(docs/gpu-capacity.md#flex-start-for-a-gang)")


def estimate_cost(config: StackConfig, prices: dict[str, Any] | None = None) -> dict[str, Any]:
    prices = prices or load_prices()
    machine = prices["machines"][config.machine_type]
    # The first capacity source's rate; a waterfall's other sources are priced in the stack
    # output gpuCapacity, and a run's cost uses the source of each node it got (jobs CLI).
    sources = config.capacity.sources
    model = sources[config.run_source_index].provisioning_model
    nodes = config.gpu.nodes
    # The rate choice is shared with the run's actual cost (jobs/cli/run_cost.py, job side).
    chosen = hourly_rate(parse_price_table({**prices, "machines": {config.machine_type: machine}})
                         .machines[config.machine_type], model)
    rate, source, bound = chosen.per_node_hour, chosen.source, chosen.basis
    hourly = None if rate is None else rate * nodes
    deadline_hours = config.job.active_deadline_seconds / 3600
    semantics = {
        "reservation": "committed: paid for the reservation's whole term whether used or not; "
                       "the run adds no compute cost of its own",
        "spot": "incremental: paid only while the GPU nodes run (the pool scales from 0); "
                "Spot prices change and preemptions lengthen a run",
        "flex-start": "incremental: paid only while the flex-start nodes run (at most "
                      "maxRunDurationSeconds each)",
    }[model]
    if len(sources) > 1:
        semantics += ("; the first of " + str(len(sources)) + " capacity sources ("
                      + " -> ".join(source.label for source in sources) + "), each priced in the "
                      "output gpuCapacity")
    result: dict[str, Any] = {
        "pricesAsOf": prices["as_of"],
        "currency": prices["currency"],
        "priceRegion": prices["region"],
        "machineType": config.machine_type,
        "provisioningModel": model,
        "gpuNodes": nodes,
        "semantics": semantics,
        "hourlyPerNode": _rounded_money(rate),
        "hourlyGpuCapacity": _rounded_money(hourly),
        "rateBasis": bound,
        "rateSource": source,
        "runHoursUpperBound": round(deadline_hours, 2),
        ("committedCostOverRunDeadline" if model == "reservation" else "runCostUpperBound"):
            _rounded_money(None if hourly is None else hourly * deadline_hours),
    }
    if config.pools:
        # A split layout: each pool at its own source's rate (the same choice as above).
        table = parse_price_table({**prices, "machines": {config.machine_type: machine}})
        per_pool = []
        for name, pool_nodes, index in config.pools:
            pool_rate = hourly_rate(table.machines[config.machine_type],
                                    sources[index].provisioning_model).per_node_hour
            per_pool.append({"pool": name, "nodes": pool_nodes, "source": sources[index].label,
                             "hourly": _rounded_money(None if pool_rate is None else pool_rate * pool_nodes)})
        result["pools"] = per_pool
    grant = flex_start_partial_grant(config, prices)
    if grant is not None:
        result["flexStartPartialGrant"] = grant
    storage = prices["storage"]
    if config.storage.kind == "lustre":
        lustre = config.storage.lustre or LustreStorage()
        per_gib = storage["lustre_per_gib_month"].get(lustre.throughput_tier)
        result["storageMonthly"] = _rounded_money(None if per_gib is None else per_gib * lustre.capacity_gib)
        result["storageBasis"] = (f"Managed Lustre {lustre.capacity_gib} GiB at tier "
                                  f"{lustre.throughput_tier}: provisioned, paid continuously"
                                  + ("" if per_gib is not None else "; rate unknown for this tier"))
        result["storageSource"] = storage["lustre_source"]
    else:
        result["storagePerGibMonth"] = storage["gcs_standard_per_gib_month"]
        result["storageBasis"] = "Cloud Storage Standard: paid per GiB stored (plus operations)"
        result["storageSource"] = storage["gcs_source"]
    return result


def describe(estimate: dict[str, Any]) -> list[str]:
    """Lines for the preview's tree output."""
    def money(value):
        return "unknown" if value is None else f"{value:,.2f} {estimate['currency']}"
    lines = [
        f"{estimate['gpuNodes']} x {estimate['machineType']} ({estimate['provisioningModel']}): "
        f"{money(estimate['hourlyGpuCapacity'])} per hour [{estimate['rateBasis']}]",
        f"  {estimate['semantics']}",
    ]
    if "committedCostOverRunDeadline" in estimate:
        lines.append(f"  committed over the run deadline ({estimate['runHoursUpperBound']} h): "
                     f"{money(estimate['committedCostOverRunDeadline'])}")
    else:
        lines.append(f"  a run, at most {estimate['runHoursUpperBound']} h (job.activeDeadlineSeconds): "
                     f"at most {money(estimate['runCostUpperBound'])}")
    for pool in estimate.get("pools", []):
        lines.append(f"  {pool['pool']} pool: {pool['nodes']} node(s) from {pool['source']}, "
                     f"{money(pool['hourly'])} per hour")
    if "flexStartPartialGrant" in estimate:
        lines.append(f"  {partial_grant_line(estimate['flexStartPartialGrant'])}")
    if "storageMonthly" in estimate:
        lines.append(f"  storage: {money(estimate['storageMonthly'])} per month ({estimate['storageBasis']})")
    else:
        lines.append(f"  storage: {estimate['storagePerGibMonth']} {estimate['currency']} per GiB-month "
                     f"({estimate['storageBasis']})")
    lines.append(f"  prices as of {estimate['pricesAsOf']} ({estimate['priceRegion']}), sources in data/prices.yaml")
    return lines
