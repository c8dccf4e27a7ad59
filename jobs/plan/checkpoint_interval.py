"""The checkpoint period that serves goodput: Young's first-order optimum

    T* = sqrt(2 x C x M)      C: seconds to write a checkpoint, M: mean time between interruptions

(J. W. Young, "A first order approximation to the optimum checkpoint interval", CACM 17(9), 1974;
J. T. Daly's higher-order estimate, Future Generation Computer Systems 22(3), 2006, reduces to it
when C << M). Checkpointing every T seconds costs C/T of the time in saves and, on average, T/2
of work redone per interruption: a fraction C/T + T/(2M) of the run, least at T*. At T = k x T*
that fraction is (k + 1/k)/2 times the least.

    load_interruption_priors() -> InterruptionPriors        # data/interruption-priors.yaml
    young_daly_seconds(checkpoint_s, mtbi_s)
    waste_factor(period_s, optimum_s)
    prior_mtbi_seconds(priors, capacity_source, nodes)
    checkpoint_interval_findings(spec, capacity_source, lustre_tier_mbps_per_tib=...)  # preflight

Preflight (before any step ran) uses the priors; `gke-grpo status` and the report use the run's own
checkpoint times and interruptions (jobs/cli/recovery.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from jobs.contract.spec import GrpoSpec
from jobs.plan.findings import Finding

PRIORS_FILE = Path(__file__).resolve().parents[2] / "data" / "interruption-priors.yaml"
CHECKPOINT_EVERY_KEY = "gke-grpo:job.checkpointEverySteps"
# Checkpoint with optimizer state, bytes per parameter (jobs/plan/preflight/rules.py).
CHECKPOINT_BYTES_PER_PARAM = 12


@dataclass(frozen=True)
class Prior:
    value: float | None
    kind: str                 # "sourced" | "assumption"
    source: str

    def label(self) -> str:
        return "an assumption" if self.kind == "assumption" else "sourced"


@dataclass(frozen=True)
class InterruptionPriors:
    node_mtbf_hours: Prior                       # hardware failures, every source
    node_mtbp_hours: dict[str, Prior]            # preemption, per capacity source
    step_seconds: Prior
    gcs_write_gbps: Prior
    lustre_write_gbps_per_tib: Prior
    warn_waste_factor: float


def _prior(row: dict[str, Any], key: str = "value") -> Prior:
    value = row.get(key)
    return Prior(None if value is None else float(value), str(row.get("kind", "assumption")),
                  " ".join(str(row.get("source", "")).split()))


def load_interruption_priors(path: Path | None = None) -> InterruptionPriors:
    doc = yaml.safe_load(Path(path or PRIORS_FILE).read_text())
    writes = doc["checkpoint_write_gbps"]
    return InterruptionPriors(
        node_mtbf_hours=_prior(doc["hardware_failure"], "node_mtbf_hours"),
        node_mtbp_hours={name: _prior(row, "node_mtbp_hours") for name, row in doc["preemption"].items()},
        step_seconds=_prior(doc["step_seconds"]),
        gcs_write_gbps=_prior(writes["gcs"]),
        lustre_write_gbps_per_tib=_prior(writes["lustre"], "value_per_tib"),
        warn_waste_factor=float(doc["warn_waste_factor"]["value"]))


def young_daly_seconds(checkpoint_s: float, mtbi_s: float) -> float:
    """Young's optimum checkpoint period; M itself when a checkpoint costs half of M or more
    (Daly's bound: checkpointing more often than failures come cannot pay)."""
    if checkpoint_s <= 0 or mtbi_s <= 0:
        raise ValueError("checkpoint cost and mean time between interruptions must be > 0")
    if checkpoint_s >= mtbi_s / 2:
        return mtbi_s
    return math.sqrt(2 * checkpoint_s * mtbi_s)


def waste_factor(period_s: float, optimum_s: float) -> float:
    """How many times the least expected overhead a period gives: (k + 1/k) / 2."""
    k = period_s / optimum_s
    return (k + 1 / k) / 2


def prior_mtbi_seconds(priors: InterruptionPriors, capacity_source: str | None,
                       nodes: int) -> tuple[float | None, str]:
    """The run's prior mean time between interruptions: every node's hardware failures plus
    its preemptions on Spot; and the sources it rests on."""
    rate = 0.0                                      # interruptions per hour
    basis = []
    if priors.node_mtbf_hours.value:
        rate += nodes / priors.node_mtbf_hours.value
        basis.append(f"hardware: a failure per {priors.node_mtbf_hours.value:,.0f} node-hours "
                     f"({priors.node_mtbf_hours.label()})")
    preemption = priors.node_mtbp_hours.get(capacity_source or "")
    if preemption is not None and preemption.value:
        rate += nodes / preemption.value
        basis.append(f"{capacity_source}: a preemption per {preemption.value:,.0f} node-hours "
                     f"({preemption.label()})")
    if rate <= 0:
        return None, "no prior"
    return 3600.0 / rate, f"{nodes} node(s); " + "; ".join(basis)


def prior_checkpoint_seconds(priors: InterruptionPriors, parameters: int, storage_kind: str,
                             storage_capacity_gib: int | None,
                             lustre_tier_mbps_per_tib: int | None = None) -> tuple[float | None, str]:
    """A checkpoint's write time before one was timed: 12 bytes a parameter at the storage's
    published write throughput (Managed Lustre: the stack's tier x capacity, else the lowest)."""
    size_gb = CHECKPOINT_BYTES_PER_PARAM * parameters / 1e9
    per_tib = lustre_tier_mbps_per_tib / 1000 if lustre_tier_mbps_per_tib else priors.lustre_write_gbps_per_tib.value
    if storage_kind == "lustre" and storage_capacity_gib and per_tib:
        gbps = per_tib * storage_capacity_gib / 1024
        tier = (f"tier {lustre_tier_mbps_per_tib} MB/s per TiB" if lustre_tier_mbps_per_tib
                else "the lowest tier")
        where = f"Managed Lustre {storage_capacity_gib:,} GiB at {tier}: {gbps:.2f} GB/s"
    elif storage_kind == "gcs" and priors.gcs_write_gbps.value:
        gbps = priors.gcs_write_gbps.value
        where = f"Cloud Storage FUSE's published sequential write {gbps:.2f} GB/s"
    else:
        return None, f"no write throughput for storage {storage_kind!r}"
    return size_gb / gbps, f"~{size_gb:,.0f} GB with optimizer state at {where}"


def checkpoint_interval_findings(spec: GrpoSpec, capacity_source: str | None,
                                 priors: InterruptionPriors | None = None,
                                 lustre_tier_mbps_per_tib: int | None = None) -> list[Finding]:
    """Preflight's warning when checkpointEverySteps x the expected step time is far from the
    Young-Daly period of the stack's capacity source (each figure a prior, labelled)."""
    from jobs.plan.model_shapes import shape_for

    priors = priors or load_interruption_priors()
    shape = shape_for(spec.model)
    step_s = priors.step_seconds.value
    if shape is None or not step_s or spec.checkpoint_every_steps < 1:
        return []
    cost, cost_basis = prior_checkpoint_seconds(priors, shape.parameters, spec.storage_kind,
                                                spec.storage_capacity_gib, lustre_tier_mbps_per_tib)
    mtbi, mtbi_basis = prior_mtbi_seconds(priors, capacity_source, spec.nodes)
    if cost is None or mtbi is None:
        return []
    optimum = young_daly_seconds(cost, mtbi)
    period = spec.checkpoint_every_steps * step_s
    factor = waste_factor(period, optimum)
    if factor <= priors.warn_waste_factor:
        return []
    steps = max(1, round(optimum / step_s))
    total = spec.total_steps
    advice = (f"about {steps} step(s)" if total is None or steps < total else
              f"more than the run's {total} steps (then checkpoints guard only against what this model "
              "leaves out: crashes, stops, the time budget)")
    return [Finding("warning", CHECKPOINT_EVERY_KEY, (
        f"is {spec.checkpoint_every_steps}: a checkpoint about every {period_text(period)} (at "
        f"{step_s:.0f} s a step, {priors.step_seconds.label()}), where the Young-Daly period is "
        f"{period_text(optimum)}: saves would take {cost / period:.0%} of the time ({cost_basis}: "
        f"{cost:.0f} s each) and redone steps {period / (2 * mtbi):.1%} (an interruption every "
        f"{mtbi / 3600:,.1f} h: {mtbi_basis}), {factor:.1f}x the least. The least is at {advice}. "
        "Priors: data/interruption-priors.yaml; `gke-grpo status` recomputes the period "
        "from the run's own checkpoint times and interruptions"))]


def period_text(seconds: float) -> str:
    """A period as people say it: minutes, or hours from 90 minutes on."""
    if seconds >= 5400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.0f} min" if seconds >= 600 else f"{seconds / 60:.1f} min"
