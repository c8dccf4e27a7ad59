"""The run's health gate as the Pulumi program configures it: `gke-grpo:job.healthGate` plus the
sourced thresholds (data/health-gates.yaml) and what the stack's storage should give, turned into
the plain dict the run driver hands to `jobs.health.fabric_gate` (the run plan's "health" key).

Pure functions (no resources): the plan is data, and the head needs only numbers, never this
module or the data file.
"""

from __future__ import annotations

from components.config import GcsStorage, LustreStorage, StackConfig
from jobs.contract.health import GIB, MIB, HealthPlan, StoragePlan
from jobs.plan.health_thresholds import load_health_gates

PROBE_DIR = "health-probe"


def storage_plan(config: StackConfig, run_dir: str) -> StoragePlan | None:
    """The storage probe: checkpoint-sized, written on /data under the run's directory, against
    Lustre's tier x capacity or gcsfuse's published figures."""
    gate = config.job.health_gate
    if gate.storage_probe_gib == 0:
        return None
    gates = load_health_gates()
    if config.storage.kind == "lustre":
        lustre = config.storage.lustre or LustreStorage()
        expected = gates.lustre_gbps(lustre.throughput_tier, lustre.capacity_gib)
        write = read = expected
        source = (f"Managed Lustre tier {lustre.throughput_tier} MB/s per TiB x "
                  f"{lustre.capacity_gib} GiB ({gates.lustre_source})")
    else:
        gcs = config.storage.gcs or GcsStorage()
        write, read = gates.gcsfuse_write_gbps, gates.gcsfuse_read_gbps
        source = gates.gcsfuse_source
        if gcs.file_cache_size_gib:
            source += ("; reads back through gcsfuse's file cache "
                       f"({gcs.file_cache_size_gib} GiB) as a resumed trainer would")
    return StoragePlan(directory=f"{run_dir}/{PROBE_DIR}", size_bytes=gate.storage_probe_gib * GIB,
                       streams=gates.gcsfuse_streams, kind=config.storage.kind,
                       expected_write_gbps=write, expected_read_gbps=read, expected_source=source,
                       warn_fraction=gates.storage_warn_fraction)


def health_plan(config: StackConfig, run_dir: str) -> dict:
    """`jobs.health.HealthPlan` as a JSON-ready dict for the run plan ("health" key)."""
    gate = config.job.health_gate
    gates = load_health_gates()
    sources = dict(gates.sources)
    minimum = gate.min_bus_bandwidth_gbps
    if minimum is not None:
        sources["min_average_busbw_gbps"] = "gke-grpo:job.healthGate.minBusBandwidthGbps"
    fraction = gate.published_fraction
    if fraction is not None:
        sources["published_fraction"] = "gke-grpo:job.healthGate.publishedFraction"
    plan = HealthPlan(
        mode=gate.mode,
        backend="nccl",
        machine_type=config.machine_type,
        collectives=tuple(gate.collectives),
        sizes_bytes=tuple(size * MIB for size in gate.message_sizes_mib),
        warmup_iterations=gate.warmup_iterations,
        iterations=gate.iterations,
        min_average_busbw_gbps=gates.min_average_busbw_gbps if minimum is None else float(minimum),
        published_fraction=gates.published_fraction if fraction is None else float(fraction),
        published=gates.published.get(config.machine_type, ()),
        timeout_s=float(gate.timeout_seconds),
        storage=storage_plan(config, run_dir),
        sources=sources,
    )
    plan.check()
    return plan.to_dict()


def health_gate_warning(config: StackConfig) -> str | None:
    """What `pulumi preview/up` says when the gate will not stop a bad fabric."""
    mode = config.job.health_gate.mode
    if mode == "off":
        return ("gke-grpo:job.healthGate is off: the run starts without measuring its GPUs' RDMA "
                "fabric or the shared storage; a broken fabric (e.g. NCCL over TCP) is found only "
                "by a slow or failing training run")
    if mode == "warn":
        return ("gke-grpo:job.healthGate.mode is warn: a fabric below its thresholds is reported "
                "in health.json and the job log but the run starts anyway")
    return None
