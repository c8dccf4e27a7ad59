"""The fabric gate's judgement, pure: the ranks' timings aggregated as nccl-tests reports them,
every threshold as one check, which nodes to blame when the fabric fails (pairs of nodes around
a ring, each node's own GPUs), the storage probe against what the storage should give, and the
message that names the failed nodes as an operator finds them.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jobs.contract.health import GIB, LOG_PREFIX, MIB, HealthPlan, StoragePlan, algbw_gbps, busbw_gbps
from jobs.head.nccl_log import TCP_NETWORK


def judge_storage(probe: dict, plan: StoragePlan) -> dict:
    """The probe against what the storage should give; a warning below ``warn_fraction``."""
    verdict = dict(probe)
    warnings: list[str] = []
    if probe.get("errors"):
        warnings.append(f"storage probe on {probe.get('host')} failed: " + "; ".join(probe["errors"]))
    for what, expected in (("write", plan.expected_write_gbps), ("read", plan.expected_read_gbps)):
        measured = probe.get(f"{what}_gbps")
        verdict[f"expected_{what}_gbps"] = expected
        if measured is None or expected is None:
            continue
        if measured < plan.warn_fraction * expected:
            warnings.append(f"storage {what} {measured:.2f} GB/s on {plan.directory} is below "
                            f"{plan.warn_fraction:.0%} of the {expected:.2f} GB/s the {plan.kind} "
                            f"storage should give ({plan.expected_source})")
    verdict["warnings"] = warnings
    verdict["expected_source"] = plan.expected_source
    return verdict


@dataclass(frozen=True)
class Measurement:
    collective: str
    size_bytes: int
    ranks: int
    seconds: float            # per iteration, averaged over the ranks (nccl-tests -a 1)
    slowest_seconds: float
    correct: bool

    @property
    def algbw_gbps(self) -> float:
        return algbw_gbps(self.size_bytes, self.seconds)

    @property
    def busbw_gbps(self) -> float:
        return busbw_gbps(self.collective, self.size_bytes, self.seconds, self.ranks)

    def to_dict(self) -> dict:
        return {"collective": self.collective, "size_bytes": self.size_bytes, "ranks": self.ranks,
                "seconds": self.seconds, "slowest_rank_seconds": self.slowest_seconds,
                "algbw_gbps": self.algbw_gbps, "busbw_gbps": self.busbw_gbps,
                "correct": self.correct}


def aggregate(reports: Iterable[dict]) -> list[Measurement]:
    """Per (collective, size, group): the ranks' times averaged, as nccl-tests reports them."""
    buckets: dict[tuple, list[dict]] = {}
    for r in reports:
        key = (r["collective"], r["size_bytes"], r["ranks"], tuple(r.get("group") or ()))
        buckets.setdefault(key, []).append(r)
    out = []
    for (collective, size, ranks, _group), rows in buckets.items():
        seconds = [row["seconds"] for row in rows]
        out.append(Measurement(collective, size, ranks, statistics.fmean(seconds), max(seconds),
                               all(row.get("correct", True) for row in rows)))
    return sorted(out, key=lambda m: (m.collective, m.size_bytes))


def fabric_checks(measurements: Sequence[Measurement], plan: HealthPlan, nodes: int) -> list[dict]:
    """Every threshold as one check: {name, collective, measured_gbps, threshold_gbps, passed,
    source}. The mean busbw over the sizes (nccl-tests' "Avg bus bandwidth", Cluster Toolkit's
    gate) and, per published figure, the measured busbw at that size (else the largest
    measured) against ``published_fraction`` of it."""
    checks = []
    for collective in plan.collectives:
        rows = [m for m in measurements if m.collective == collective]
        if not rows:
            continue
        if nodes < 2:
            checks.append({"name": f"{collective} (1 node: no inter-node fabric to gate)",
                           "collective": collective, "passed": True, "informational": True,
                           "measured_gbps": statistics.fmean(m.busbw_gbps for m in rows)})
            continue
        mean = statistics.fmean(m.busbw_gbps for m in rows)
        checks.append({"name": f"{collective} mean busbw over {len(rows)} size(s)",
                       "collective": collective, "measured_gbps": mean,
                       "threshold_gbps": plan.min_average_busbw_gbps,
                       "passed": mean >= plan.min_average_busbw_gbps,
                       "source": plan.sources.get("min_average_busbw_gbps", "")})
        if not all(m.correct for m in rows):
            checks.append({"name": f"{collective} data check", "collective": collective,
                           "passed": False, "detail": "the gathered data differs from what was sent"})
        for figure in plan.published:
            if figure.collective != collective:
                continue
            at = [m for m in rows if m.size_bytes == figure.size_bytes] or [max(rows, key=lambda m: m.size_bytes)]
            m = at[0]
            threshold = plan.published_fraction * figure.busbw_gbps
            checks.append({"name": (f"{collective} busbw at {size_text(m.size_bytes)} vs "
                                    f"{plan.published_fraction:.0%} of {figure.busbw_gbps:g} GB/s "
                                    f"published for {figure.nodes} x {plan.machine_type or 'this machine'}"
                                    f" at {size_text(figure.size_bytes)}"),
                           "collective": collective, "size_bytes": m.size_bytes,
                           "measured_gbps": m.busbw_gbps, "threshold_gbps": threshold,
                           "passed": m.busbw_gbps >= threshold, "source": figure.source})
    return checks


def tcp_fallback_check(nics_by_node: Mapping[str, Mapping[str, Any]], nodes: int) -> dict | None:
    """NCCL on its socket transport between nodes is TCP over the pod network (the Lustre
    codelab's RayCluster runs so, with no RDMA wiring): a failure of its own, whatever the
    bandwidth. None when NCCL logged no network or the run has one node."""
    if nodes < 2:
        return None
    on_tcp = sorted(int(n) for n, entry in nics_by_node.items() if TCP_NETWORK in entry.get("nets", []))
    used = sorted({net for entry in nics_by_node.values() for net in entry.get("nets", [])})
    if not used:
        return None
    return {"name": "NCCL network between nodes (RDMA, not TCP sockets)", "collective": "",
            "passed": not on_tcp, "networks": used, "nodes_on_tcp": on_tcp,
            "detail": (f"NCCL used its {TCP_NETWORK} transport (TCP) on node(s) {on_tcp}: the gIB "
                       "plugin or the RDMA NICs are missing (NCCL_NET, set_nccl_env.sh, the "
                       "networking.gke.io/interfaces annotation)") if on_tcp else f"NCCL used {', '.join(used)}"}


def pair_threshold(plan: HealthPlan, collective: str) -> float:
    """What a pair of nodes must reach: the published 2-node figures apply as they are."""
    thresholds = [plan.min_average_busbw_gbps]
    thresholds += [plan.published_fraction * f.busbw_gbps for f in plan.published
                   if f.collective == collective]
    return max(thresholds)


def ring_pair_rounds(nodes: int) -> list[list[tuple[int, int]]]:
    """Pairs (i, i+1 mod n) around the ring of nodes, in rounds of disjoint pairs (every node
    is in two pairs). Fewer than 3 nodes: no pairs (2 nodes: the pair is the whole run)."""
    if nodes < 3:
        return []
    pairs = [(i, (i + 1) % nodes) for i in range(nodes)]
    rounds: list[list[tuple[int, int]]] = []
    for pair in pairs:
        for members in rounds:
            if not any(set(pair) & set(p) for p in members):
                members.append(pair)
                break
        else:
            rounds.append([pair])
    return rounds


def localize(pair_results: Sequence[dict], intra_results: Sequence[dict], plan: HealthPlan,
             nodes: int, collective: str) -> dict:
    """Which nodes to blame. A node in two slow pairs (or in every pair it was in) is named;
    with 2 nodes both are named (the one link cannot tell which end is bad). A node whose
    own GPUs (NVLink domain) are below ``intra_node_outlier_fraction`` of the median node is
    named too."""
    threshold = pair_threshold(plan, collective)
    pairs: list[dict[str, Any]] = []
    for m, group in _grouped(pair_results):
        nodes_of = sorted({r["node_index"] for r in pair_results if tuple(r["group"]) == group})
        pairs.append({"nodes": nodes_of, "busbw_gbps": m.busbw_gbps,
                      "threshold_gbps": threshold, "slow": m.busbw_gbps < threshold})
    slow_count: dict[int, int] = {}
    seen: dict[int, int] = {}
    for pair in pairs:
        for n in pair["nodes"]:
            seen[n] = seen.get(n, 0) + 1
            if pair["slow"]:
                slow_count[n] = slow_count.get(n, 0) + 1
    suspects = {n for n, slow in slow_count.items() if slow >= min(2, seen[n])}
    intra = []
    for m, group in _grouped(intra_results):
        node = next(r["node_index"] for r in intra_results if tuple(r["group"]) == group)
        intra.append({"node": node, "busbw_gbps": m.busbw_gbps})
    if len(intra) >= 2:
        median = statistics.median(i["busbw_gbps"] for i in intra)
        for i in intra:
            i["slow"] = i["busbw_gbps"] < plan.intra_node_outlier_fraction * median
            if i["slow"]:
                suspects.add(i["node"])
    if nodes == 2 and not suspects:
        suspects = {0, 1}
    return {"collective": collective, "size_bytes": plan.localize_size, "pairs": pairs,
            "intra_node": intra, "suspect_nodes": sorted(suspects)}


def _grouped(results: Sequence[dict]) -> list[tuple[Measurement, tuple]]:
    groups: dict[tuple, list[dict]] = {}
    for r in results:
        groups.setdefault(tuple(r["group"]), []).append(r)
    return [(aggregate(rows)[0], group) for group, rows in sorted(groups.items())]


def size_text(n: int) -> str:
    for unit, factor in (("GiB", GIB), ("MiB", MIB), ("KiB", 1024)):
        if n >= factor:
            return f"{n / factor:g} {unit}"
    return f"{n} B"


def node_label(info: Mapping[str, Any]) -> str:
    """A node as an operator finds it: the Kubernetes node (kubectl cordon), else the pod's
    hostname; its IP and Ray node id (short)."""
    name = info.get("k8s_node") or info.get("hostname") or "?"
    return f"{name} ({info.get('ip', '?')}, Ray node {str(info.get('node_id', '?'))[:8]})"


def nics_by_node(logs: list[dict], infos: list[dict]) -> dict[str, dict]:
    by_node: dict[str, dict] = {}
    for log, info in zip(logs, infos):
        entry = by_node.setdefault(str(info["node_index"]), {"nets": [], "nics": [], "warnings": []})
        for key in ("nets", "nics", "warnings"):
            for item in log.get(key, []):
                if item not in entry[key]:
                    entry[key].append(item)
    return by_node


def node_entry(index: int, infos: list[dict], doc: dict) -> dict:
    info = next((i for i in infos if i["node_index"] == index), {})
    nics = (doc.get("nics") or {}).get(str(index), {})
    return {"node_index": index, "label": node_label(info) if info else f"node {index}",
            "k8s_node": info.get("k8s_node", ""), "ip": info.get("ip", ""),
            "nics": nics.get("nics", []), "nccl_warnings": nics.get("warnings", [])}


def verdict_message(plan: HealthPlan, checks: list[dict], failed_nodes: list[int], infos: list[dict],
             doc: dict) -> str:
    failed = [c for c in checks if not c["passed"]]
    if not failed:
        best = ", ".join(f"{c['name']}: {c['measured_gbps']:.4g} GB/s" for c in checks)
        return f"{LOG_PREFIX} PASSED: {best}"
    detail = "; ".join(f"{c['name']}: {c['measured_gbps']:.4g} GB/s < {c['threshold_gbps']:.4g} GB/s"
                       if "threshold_gbps" in c else f"{c['name']}: {c.get('detail', 'failed')}"
                       for c in failed)
    named = []
    for entry in (node_entry(i, infos, doc) for i in failed_nodes):
        text = entry["label"]
        if entry["nics"]:
            text += " NICs " + ",".join(entry["nics"])
        named.append(text)
    return (f"{LOG_PREFIX} FAILED: {detail}" + (f"; nodes: {'; '.join(named)}" if named else ""))
