"""Health gates of a run: the RDMA fabric and the shared storage are measured before the trainer's
first start (and again after a restart that changed nodes), so GPU-hours are never spent on a
broken fabric.

    python3 -m jobs.health fabric --plan PLAN.json --nodes N --gpus-per-node G --run-dir DIR
    python3 -m jobs.health show DIR/health.json

**Fabric acceptance** (``fabric_gate``): one Ray actor per GPU, placed by one placement group
whose bundle *i* holds all the GPUs of node *i* (STRICT_SPREAD: every bundle on its own node,
so one node's GPUs are packed together), joined into one torch.distributed process group with
the backend the trainer uses (NCCL over gIB on the GPU workers; gloo on CPU in the tests). They
run all_gather and all_reduce at every configured message size (1-8 GiB in production) and
report their own times; bus bandwidth is computed as nccl-tests defines it (NVIDIA/nccl-tests
doc/PERFORMANCE.md, v2.19.6):

    algbw = S / t          S: bytes of the whole array (all_gather: the gathered output)
    all_reduce busbw = algbw x 2(n-1)/n        all_gather busbw = algbw x (n-1)/n

with t each rank's time per iteration averaged over the ranks (nccl-tests src/common.cu,
``average = 1``). The gate fails when the mean busbw over the sizes is below the minimum
(Cluster Toolkit's 100 GB/s CI gate) or the largest size is below a fraction (75%) of the
machine's published 2-node figure. A failing fabric is then localised: every node alone (its
NVLink domain), and pairs of nodes around a ring (the published figures are 2-node figures, so
a pair is held to the same thresholds); a node in two slow pairs (or both nodes of a 2-node
run) is named, with the NICs NCCL said it used when NCCL logged them.

torch.distributed rather than nccl-tests: the gate then exercises exactly what the trainer
will (the NCCL library of the framework image, the gIB plugin and environment that
set_nccl_env.sh gave the Ray workers, Ray's GPU assignment), needs no second image, no MPI
and no ssh between pods, and its orchestration can be tested for real on CPU with gloo.

**Storage probe** (``storage_probe``, run by the gate on node 0's first actor): writes a
checkpoint-sized set of files on /data in parallel streams, fsyncs, drops them from the page
cache and reads them back; GB/s against what the storage should give (Lustre: tier x capacity;
Cloud Storage FUSE: gcsfuse's published figures), warned about below half.

Results: ``<run_dir>/health.json`` (``write_health``), one ``[health] result {...}`` line in the
job log (what ``jobs status`` reads back, ``health_from_log``), ``status_rows`` to show them.

Standard library at import; ``ray`` and ``torch`` are imported where they are used (the Ray
head and GPU workers have both; the Pulumi program only builds the plan dict).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import socket
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

GIB = 1 << 30
MIB = 1 << 20
HEALTH_FILE = "health.json"
PREFIX = "[health]"
RESULT_MARKER = f"{PREFIX} result "
# The exit code of an attempt that the gate ended (the jobs CLI's codes are 0-5, jobs.runs).
EXIT_GATE_FAILED = 6
EXIT_OK = 0
EXIT_USAGE = 2
COLLECTIVES = ("all_gather", "all_reduce")
MODES = ("enforce", "warn", "off")
HEALTH_GATES_FILE = Path(__file__).resolve().parent.parent / "data" / "health-gates.yaml"
# NCCL writes its INFO log here (one file per host and pid: NCCL's %h and %p) when the gate asks.
NCCL_DEBUG_FILE = "/tmp/gke-grpo-health-nccl.%h.%p.log"


# ---- sourced figures (data/health-gates.yaml) -----------------------------------------------------

@dataclass(frozen=True)
class PublishedFigure:
    collective: str
    nodes: int
    size_bytes: int
    busbw_gbps: float
    source: str
    read: str = ""            # when the source was read


@dataclass(frozen=True)
class HealthGates:
    min_average_busbw_gbps: float
    published_fraction: float
    published: dict[str, tuple[PublishedFigure, ...]]   # machine type -> figures
    storage_warn_fraction: float
    gcsfuse_write_gbps: float
    gcsfuse_read_gbps: float
    gcsfuse_streams: int
    gcsfuse_source: str
    lustre_source: str
    sources: dict[str, str]

    def lustre_gbps(self, tier_mbps_per_tib: int, capacity_gib: int) -> float:
        """Managed Lustre throughput: per-unit throughput x capacity (MB/s -> GB/s)."""
        return tier_mbps_per_tib * capacity_gib / 1024 / 1000


def load_health_gates(path: Optional[Path] = None) -> HealthGates:
    import yaml   # the Pulumi side only: the plan carries the numbers to the head

    doc = yaml.safe_load(Path(path or HEALTH_GATES_FILE).read_text())
    fabric, storage = doc["fabric"], doc["storage"]
    published = {machine: tuple(PublishedFigure(**dict(figure, source=" ".join(figure["source"].split())))
                                for figure in figures)
                 for machine, figures in fabric["published"].items()}
    for figures in published.values():
        for figure in figures:
            if figure.collective not in COLLECTIVES:
                raise ValueError(f"{path or HEALTH_GATES_FILE}: unknown collective {figure.collective!r}")
    gcsfuse = storage["gcsfuse"]
    return HealthGates(
        min_average_busbw_gbps=float(fabric["min_average_busbw_gbps"]["value"]),
        published_fraction=float(fabric["published_fraction"]["value"]),
        published=published,
        storage_warn_fraction=float(storage["warn_fraction"]["value"]),
        gcsfuse_write_gbps=float(gcsfuse["sequential_write_mbps"]) / 1000,
        gcsfuse_read_gbps=float(gcsfuse["sequential_read_mbps"]) / 1000,
        gcsfuse_streams=int(gcsfuse["streams"]),
        gcsfuse_source=" ".join(gcsfuse["source"].split()),
        lustre_source=" ".join(storage["lustre"]["source"].split()),
        sources={"min_average_busbw_gbps": " ".join(fabric["min_average_busbw_gbps"]["source"].split()),
                 "published_fraction": " ".join(fabric["published_fraction"]["source"].split())},
    )


# ---- the plan (what the run plan carries under "health") ------------------------------------------

@dataclass(frozen=True)
class StoragePlan:
    directory: str                  # where the probe writes (under the run dir on /data)
    size_bytes: int                 # all streams together: about one checkpoint shard
    streams: int
    kind: str                       # "lustre" | "gcs"
    expected_write_gbps: Optional[float]
    expected_read_gbps: Optional[float]
    expected_source: str
    warn_fraction: float = 0.5
    block_bytes: int = 8 * MIB


@dataclass(frozen=True)
class HealthPlan:
    mode: str = "enforce"                                   # enforce | warn | off
    backend: str = "nccl"                                   # nccl | gloo (tests)
    machine_type: str = ""
    collectives: tuple[str, ...] = COLLECTIVES
    sizes_bytes: tuple[int, ...] = (1 * GIB, 2 * GIB, 4 * GIB, 8 * GIB)
    warmup_iterations: int = 2
    iterations: int = 5
    min_average_busbw_gbps: float = 100.0
    published_fraction: float = 0.75
    published: tuple[PublishedFigure, ...] = ()
    localize: bool = True
    localize_size_bytes: Optional[int] = None              # default: the largest size
    intra_node_outlier_fraction: float = 0.5
    placement_timeout_s: float = 300.0
    timeout_s: float = 900.0
    env: dict[str, str] = field(default_factory=dict)       # extra env of the probe actors
    nccl_debug_log: bool = True                             # NCCL INFO log, parsed for NICs
    storage: Optional[StoragePlan] = None
    sources: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> "HealthPlan":
        raw = dict(raw.get("health", raw)) if isinstance(raw, Mapping) else raw
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise PlanError(f"unknown health plan keys: {', '.join(unknown)}")
        values = dict(raw)
        for key in ("collectives", "sizes_bytes"):
            if key in values:
                values[key] = tuple(values[key])
        if "published" in values:
            values["published"] = tuple(PublishedFigure(**p) if isinstance(p, Mapping) else p
                                        for p in values["published"])
        if values.get("storage") is not None and isinstance(values["storage"], Mapping):
            values["storage"] = StoragePlan(**values["storage"])
        plan = cls(**values)
        plan.check()
        return plan

    def check(self) -> None:
        problems = []
        if self.mode not in MODES:
            problems.append(f"mode {self.mode!r} is not one of {', '.join(MODES)}")
        if self.backend not in ("nccl", "gloo"):
            problems.append(f"backend {self.backend!r} is not nccl or gloo")
        bad = [c for c in self.collectives if c not in COLLECTIVES]
        if bad or not self.collectives:
            problems.append(f"collectives {list(self.collectives)}: each one of {', '.join(COLLECTIVES)}")
        if not self.sizes_bytes or any(s <= 0 for s in self.sizes_bytes):
            problems.append("sizes_bytes: at least one positive size")
        if self.iterations < 1 or self.warmup_iterations < 0:
            problems.append("iterations >= 1 and warmup_iterations >= 0")
        if not 0 < self.published_fraction <= 1:
            problems.append("published_fraction in (0, 1]")
        if problems:
            raise PlanError("; ".join(problems))

    @property
    def localize_size(self) -> int:
        return self.localize_size_bytes or max(self.sizes_bytes)


class PlanError(ValueError):
    pass


# ---- bus bandwidth, as nccl-tests defines it ------------------------------------------------------

def busbw_factor(collective: str, ranks: int) -> float:
    """nccl-tests' correction from algorithm to bus bandwidth (doc/PERFORMANCE.md, "Summary";
    src/all_reduce.cu AllReduceGetBw, src/all_gather.cu AllGatherGetBw at v2.19.6)."""
    if ranks < 1:
        raise ValueError("ranks must be >= 1")
    if collective == "all_reduce":
        return 2 * (ranks - 1) / ranks
    if collective == "all_gather":
        return (ranks - 1) / ranks
    raise ValueError(f"unknown collective {collective!r}")


def algbw_gbps(size_bytes: int, seconds: float) -> float:
    """S/t in GB/s (10^9 bytes: nccl-tests divides by 1.0E9)."""
    return size_bytes / 1e9 / seconds


def busbw_gbps(collective: str, size_bytes: int, seconds: float, ranks: int) -> float:
    return algbw_gbps(size_bytes, seconds) * busbw_factor(collective, ranks)


def element_count(collective: str, size_bytes: int, ranks: int, element_bytes: int = 4) -> int:
    """Elements of each rank's *input* for a collective over S bytes: all_reduce reduces S on
    every rank; all_gather's S is the gathered output (nccl-tests: sendcount x size x n), so
    every rank sends S/n. Rounded down to whole elements."""
    if collective == "all_reduce":
        return max(1, size_bytes // element_bytes)
    return max(1, size_bytes // (element_bytes * ranks))


def effective_size(collective: str, size_bytes: int, ranks: int, element_bytes: int = 4) -> int:
    """The bytes actually moved once the size is rounded to whole elements per rank."""
    count = element_count(collective, size_bytes, ranks, element_bytes)
    return count * element_bytes * (1 if collective == "all_reduce" else ranks)


# ---- the probe actor (one per GPU) --------------------------------------------------------------

def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return s.getsockname()[1]


_NCCL_NET = re.compile(r"NET/(?P<net>[A-Za-z0-9_]+)\s*:\s*Using\s+(?P<devices>.*?)(?:\s*;|$)")
_NCCL_USED = re.compile(r"NCCL INFO Using network (?P<net>\S+)")
_NCCL_DEVICE = re.compile(r"\[\d+\](?P<device>[^\s\[\];]+)")
_NCCL_WARN = re.compile(r"NCCL WARN (?P<text>.*NET/.*)$")
# NCCL's socket transport: plain TCP over the pod network, never the RDMA fabric.
TCP_NETWORK = "Socket"


def nccl_nics(log_text: str) -> dict[str, Any]:
    """What NCCL's INFO log says about the network: the network it used ("Using network IB",
    "Using network Socket"), the NICs of that network ("NET/IB : Using [0]mlx5_0:1/IB
    [1]mlx5_1:1/IB ; OOB eth0:10.0.0.1<0>"), and its NET warnings. Formats as NCCL 2.28.9
    prints them (tests/jobs/fixtures/nccl/, read on an H200) and as published (NVIDIA/nccl
    issue 392, siderolabs/docs issue 566). The gIB plugin's own lines are assumed to follow
    NCCL's format (unconfirmed: no published gIB log)."""
    used: list[str] = []
    nics_by_net: dict[str, list[str]] = {}
    warnings: list[str] = []
    for line in log_text.splitlines():
        match = _NCCL_NET.search(line)
        if match:
            devices = nics_by_net.setdefault(match["net"], [])
            for device in _NCCL_DEVICE.finditer(match["devices"]):
                if device["device"] not in devices:
                    devices.append(device["device"])
        match = _NCCL_USED.search(line)
        if match and match["net"] not in used:
            used.append(match["net"])
        warn = _NCCL_WARN.search(line)
        if warn and warn["text"].strip() not in warnings:
            warnings.append(warn["text"].strip())
    nics = [nic for net in (used or list(nics_by_net)) for nic in nics_by_net.get(net, [])]
    return {"nets": used, "nics": list(dict.fromkeys(nics)), "warnings": warnings[:5]}


class CollectiveProbe:
    """One GPU's part of the gate: a Ray actor (wrapped with ``ray.remote`` by the gate)."""

    def __init__(self, rank: int, world_size: int, node_index: int, local_rank: int, backend: str):
        self.rank, self.world_size = rank, world_size
        self.node_index, self.local_rank = node_index, local_rank
        self.backend = backend
        self.groups: dict[tuple[int, ...], Any] = {}

    # -- identity and rendezvous --
    def describe(self) -> dict:
        import ray

        context = ray.get_runtime_context()
        return {"rank": self.rank, "node_index": self.node_index, "local_rank": self.local_rank,
                "node_id": context.get_node_id(), "ip": ray.util.get_node_ip_address(),
                "hostname": socket.gethostname(),
                # The Kubernetes node, from the worker pod's downward API (components/gpu_health.py).
                "k8s_node": os.environ.get("GKE_GRPO_NODE_NAME", ""),
                "gpu_ids": [str(g) for g in ray.get_gpu_ids()],
                "jobs_importable": _jobs_importable()}

    def free_port(self) -> int:
        return _free_port()

    def init_group(self, master_addr: str, master_port: int, timeout_s: float) -> dict:
        import datetime

        begin = time.monotonic()
        import torch
        import torch.distributed as dist

        imported = time.monotonic() - begin
        if self.backend == "nccl":
            torch.cuda.set_device(0)       # Ray's CUDA_VISIBLE_DEVICES leaves this actor one GPU
        start = time.monotonic()
        dist.init_process_group(self.backend, init_method=f"tcp://{master_addr}:{master_port}",
                                rank=self.rank, world_size=self.world_size,
                                timeout=datetime.timedelta(seconds=timeout_s))
        self._barrier()
        return {"rank": self.rank, "master_addr": master_addr, "master_port": master_port,
                "world_size": dist.get_world_size(), "backend": dist.get_backend(),
                "seconds": time.monotonic() - start, "torch_import_seconds": imported}

    # -- measurements --
    def _device(self):
        import torch
        return torch.device("cuda", 0) if self.backend == "nccl" else torch.device("cpu")

    def _sync(self) -> None:
        if self.backend == "nccl":
            import torch
            torch.cuda.synchronize()

    def _barrier(self, group=None) -> None:
        import torch.distributed as dist
        if self.backend == "nccl":
            dist.barrier(group=group, device_ids=[0])
        else:
            dist.barrier(group=group)

    def run_collective(self, collective: str, output, tensor, group) -> None:
        """One collective call; the unit the timing loop repeats."""
        import torch.distributed as dist
        if collective == "all_reduce":
            dist.all_reduce(tensor, group=group)
        else:
            dist.all_gather_into_tensor(output, tensor, group=group)

    def measure(self, collective: str, size_bytes: int, warmup: int, iterations: int,
                group=None, ranks: Optional[int] = None) -> dict:
        """nccl-tests' loop (src/common.cu): barrier, start the clock, `iterations` calls,
        wait for the device, time per iteration."""
        import torch

        ranks = ranks or self.world_size
        count = element_count(collective, size_bytes, ranks)
        device = self._device()
        tensor = torch.ones(count, dtype=torch.float32, device=device)
        output = (torch.empty(count * ranks, dtype=torch.float32, device=device)
                  if collective == "all_gather" else None)
        for _ in range(warmup):
            self.run_collective(collective, output, tensor, group)
        self._sync()
        self._barrier(group)
        start = time.perf_counter()
        for _ in range(iterations):
            self.run_collective(collective, output, tensor, group)
        self._sync()
        seconds = (time.perf_counter() - start) / iterations
        # A check of the data: one all_reduce of ones sums to the rank count (warmups included,
        # the values grow as ranks**calls; only all_gather keeps ones).
        correct = bool(output.eq(1).all().item()) if output is not None else True
        del tensor, output
        return {"rank": self.rank, "node_index": self.node_index, "collective": collective,
                "size_bytes": effective_size(collective, size_bytes, ranks), "ranks": ranks,
                "seconds": seconds, "correct": correct}

    def world_tests(self, collectives: Sequence[str], sizes: Sequence[int], warmup: int,
                    iterations: int) -> list[dict]:
        return [self.measure(c, s, warmup, iterations) for c in collectives for s in sizes]

    def subgroup_tests(self, rounds: Sequence[Sequence[Sequence[int]]], collective: str,
                       size_bytes: int, warmup: int, iterations: int) -> list[dict]:
        """Localisation: every rank creates every subgroup (torch requires all ranks to call
        new_group, in the same order); in each round the disjoint groups run at once."""
        import torch.distributed as dist

        results = []
        for groups in rounds:
            for ranks in groups:
                key = tuple(ranks)
                if key not in self.groups:
                    self.groups[key] = dist.new_group(list(key))
            for ranks in groups:
                if self.rank in ranks:
                    result = self.measure(collective, size_bytes, warmup, iterations,
                                          group=self.groups[tuple(ranks)], ranks=len(ranks))
                    result["group"] = list(ranks)
                    results.append(result)
            self._barrier()
        return results

    def nccl_log(self) -> dict[str, Any]:
        """The NICs and NET warnings of this process's NCCL INFO log, if NCCL wrote one."""
        path = os.environ.get("NCCL_DEBUG_FILE", "")
        if not path:
            return {"nets": [], "nics": [], "warnings": []}
        path = path.replace("%h", socket.gethostname()).replace("%p", str(os.getpid()))
        try:
            return nccl_nics(Path(path).read_text(errors="replace"))
        except OSError:
            return {"nets": [], "nics": [], "warnings": []}

    def storage_probe(self, plan: dict) -> dict:
        return storage_probe(StoragePlan(**plan))

    def shutdown(self) -> None:
        import torch.distributed as dist
        if dist.is_initialized():
            dist.destroy_process_group()


def _jobs_importable() -> bool:
    import importlib.util
    try:
        return importlib.util.find_spec("jobs.health") is not None
    except (ImportError, ValueError):
        return False


# ---- storage probe ----------------------------------------------------------------------------

def storage_probe(plan: StoragePlan) -> dict:
    """Write ``plan.size_bytes`` in ``plan.streams`` files at once (one thread each: file I/O
    releases the GIL), fsync them, drop them from the page cache, read them back and check
    the first block; GB/s of 10^9 bytes. The files are removed whatever happens."""
    directory = Path(plan.directory)
    directory.mkdir(parents=True, exist_ok=True)
    streams = max(1, plan.streams)
    per_stream = max(plan.block_bytes, plan.size_bytes // streams)
    block = os.urandom(plan.block_bytes)        # incompressible, as model weights are
    tag = f"{socket.gethostname()}-{os.getpid()}"
    paths = [directory / f"probe-{tag}-{i}.bin" for i in range(streams)]
    errors: list[str] = []

    def write(path: Path) -> None:
        try:
            with open(path, "wb", buffering=0) as f:
                left = per_stream
                while left > 0:
                    n = min(left, len(block))
                    f.write(block[:n])
                    left -= n
                f.flush()
                os.fsync(f.fileno())
                _drop_cache(f.fileno())
        except OSError as exc:
            errors.append(f"write {path.name}: {exc.strerror or exc}")

    def read(path: Path) -> None:
        try:
            buffer = bytearray(plan.block_bytes)
            with open(path, "rb", buffering=0) as f:
                first = f.readinto(buffer)
                if bytes(buffer[:first]) != block[:first]:
                    errors.append(f"read {path.name}: data read back differs from data written")
                while f.readinto(buffer):
                    pass
        except OSError as exc:
            errors.append(f"read {path.name}: {exc.strerror or exc}")

    try:
        write_seconds = _parallel(write, paths)
        read_seconds = _parallel(read, paths) if not errors else float("nan")
    finally:
        for path in paths:
            try:
                path.unlink()
            except OSError:
                pass
    total = per_stream * streams
    result = {"directory": str(directory), "bytes": total, "streams": streams, "kind": plan.kind,
              "host": socket.gethostname(), "errors": errors,
              "write_seconds": write_seconds, "read_seconds": read_seconds,
              "write_gbps": total / 1e9 / write_seconds if not errors else None,
              "read_gbps": total / 1e9 / read_seconds if not errors else None}
    return result


def _drop_cache(fd: int) -> None:
    if hasattr(os, "posix_fadvise"):
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        except OSError:
            pass


def _parallel(work: Callable[[Path], None], paths: Sequence[Path]) -> float:
    threads = [threading.Thread(target=work, args=(p,), daemon=True) for p in paths]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - start


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


# ---- judging the fabric -------------------------------------------------------------------------

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
            checks.append({"name": (f"{collective} busbw at {_size(m.size_bytes)} vs "
                                    f"{plan.published_fraction:.0%} of {figure.busbw_gbps:g} GB/s "
                                    f"published for {figure.nodes} x {plan.machine_type or 'this machine'}"
                                    f" at {_size(figure.size_bytes)}"),
                           "collective": collective, "size_bytes": m.size_bytes,
                           "measured_gbps": m.busbw_gbps, "threshold_gbps": threshold,
                           "passed": m.busbw_gbps >= threshold, "source": figure.source})
    return checks


def tcp_fallback_check(nics_by_node: Mapping[str, Mapping[str, Any]], nodes: int) -> Optional[dict]:
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


# ---- the gate ---------------------------------------------------------------------------------

@dataclass
class GateResult:
    passed: bool
    exit_code: int
    message: str
    document: dict = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def _size(n: int) -> str:
    for unit, factor in (("GiB", GIB), ("MiB", MIB), ("KiB", 1024)):
        if n >= factor:
            return f"{n / factor:g} {unit}"
    return f"{n} B"


def node_label(info: Mapping[str, Any]) -> str:
    """A node as an operator finds it: the Kubernetes node (kubectl cordon), else the pod's
    hostname; its IP and Ray node id (short)."""
    name = info.get("k8s_node") or info.get("hostname") or "?"
    return f"{name} ({info.get('ip', '?')}, Ray node {str(info.get('node_id', '?'))[:8]})"


class _GateFailure(Exception):
    def __init__(self, stage: str, message: str, nodes: Sequence[int] = ()):
        super().__init__(message)
        self.stage, self.nodes = stage, list(nodes)


def fabric_gate(plan_health: Mapping[str, Any] | HealthPlan, nodes: int, gpus_per_node: int,
                run_dir: str | Path, *, probe_class: type = CollectiveProbe, out=None,
                clock: Callable[[], float] = time.time) -> GateResult:
    """Measure the fabric (and storage) of the run's ``nodes`` x ``gpus_per_node`` GPUs and
    write ``run_dir/health.json``. Needs a connected Ray driver (the run driver's), else
    connects to ``address="auto"``. Never raises for a measurement problem: a failure is a
    GateResult with ``exit_code`` EXIT_GATE_FAILED (mode "warn": passed, with warnings)."""
    out = out or sys.stdout
    plan = plan_health if isinstance(plan_health, HealthPlan) else HealthPlan.from_dict(plan_health)
    started = clock()
    doc: dict[str, Any] = {"version": 1, "mode": plan.mode, "started": started, "nodes": nodes,
                           "gpus_per_node": gpus_per_node, "backend": plan.backend,
                           "machine_type": plan.machine_type}
    if plan.mode == "off":
        warning = ("the fabric health gate is OFF (gke-grpo:job.healthGate): the run starts "
                   "without measuring its RDMA fabric or storage")
        doc.update(passed=True, skipped=True, warnings=[warning], ended=clock())
        _emit(doc, run_dir, out)
        return GateResult(True, EXIT_OK, warning, doc, [warning])
    if nodes < 1 or gpus_per_node < 1:
        raise PlanError(f"nodes ({nodes}) and gpus_per_node ({gpus_per_node}) must be >= 1")
    print(f"{PREFIX} fabric gate: {nodes} node(s) x {gpus_per_node} GPU(s), backend "
          f"{plan.backend}, {', '.join(plan.collectives)} at "
          f"{', '.join(_size(s) for s in plan.sizes_bytes)}", file=out, flush=True)
    import ray

    if not ray.is_initialized():
        ray.init(address="auto", logging_level="WARNING", log_to_driver=False)
    # The workers have no jobs package (it reaches the head only): ship the probe by value.
    _pickle_by_value(probe_class)
    pg = None
    actors: list = []
    infos: list[dict] = []
    warnings: list[str] = []
    timings: dict[str, float] = {}
    doc["timings"] = timings
    mark = [time.monotonic()]

    def lap(stage: str) -> None:
        now = time.monotonic()
        timings[stage] = round(now - mark[0], 4)
        mark[0] = now

    try:
        pg, actors, infos = _place(plan, nodes, gpus_per_node, probe_class, doc)
        lap("placement_and_actor_start")
        doc["rendezvous"] = _rendezvous(plan, actors, infos)
        lap("rendezvous")
        world = _get([a.world_tests.remote(plan.collectives, plan.sizes_bytes,
                                           plan.warmup_iterations, plan.iterations) for a in actors],
                     plan.timeout_s, "world collectives", infos)
        lap("world_collectives")
        reports = [row for rows in world for row in rows]
        measurements = aggregate(reports)
        doc["measurements"] = [m.to_dict() for m in measurements]
        doc["per_rank"] = [{k: r[k] for k in ("rank", "node_index", "collective", "size_bytes", "seconds")}
                           for r in reports]
        checks = fabric_checks(measurements, plan, nodes)
        doc["checks"] = checks
        failed = [c for c in checks if not c["passed"]]
        if failed and plan.localize and nodes >= 2:
            doc["localization"] = _localize(plan, actors, infos, nodes, gpus_per_node, failed)
            lap("localization")
        if plan.backend == "nccl" and plan.nccl_debug_log:
            logs = _get([a.nccl_log.remote() for a in actors], 60, "NCCL log", infos)
            doc["nics"] = _nics_by_node(logs, infos)
            check = tcp_fallback_check(doc["nics"], nodes)
            if check:
                checks.append(check)
                failed = [c for c in checks if not c["passed"]]
        if plan.storage is not None:
            probe = _get([actors[0].storage_probe.remote(dataclasses.asdict(plan.storage))],
                         plan.timeout_s, "storage probe", infos[:1])[0]
            lap("storage_probe")
            storage = judge_storage(probe, plan.storage)
            doc["storage"] = storage
            warnings += storage["warnings"]
        failed_nodes = (doc.get("localization") or {}).get("suspect_nodes", [])
        on_tcp = [n for c in checks for n in c.get("nodes_on_tcp", [])]
        failed_nodes = sorted(set(failed_nodes) | set(on_tcp))
        if failed and not failed_nodes and nodes >= 2:
            failed_nodes = list(range(nodes))
        passed = not failed
        message = _verdict(plan, checks, failed_nodes, infos, doc)
    except _GateFailure as failure:
        passed = False
        failed_nodes = failure.nodes
        message = f"{PREFIX} FAILED in {failure.stage}: {failure}"
        doc["error"] = {"stage": failure.stage, "message": str(failure)}
    except Exception as exc:   # a Ray or torch error of the gate itself: an answer, not a traceback
        passed = False
        failed_nodes = []
        message = f"{PREFIX} FAILED: the gate could not run: {type(exc).__name__}: {exc}"
        doc["error"] = {"stage": "gate", "message": f"{type(exc).__name__}: {exc}"}
    finally:
        mark[0] = time.monotonic()
        _teardown(actors, pg)
        lap("teardown")
    doc["failed_nodes"] = [_node_entry(i, infos, doc) for i in failed_nodes]
    if not passed and plan.mode == "warn":
        warnings.append(message + " (healthGate mode warn: the run goes on)")
    doc.update(passed=passed, enforced=plan.mode == "enforce", warnings=warnings, ended=clock(),
               seconds=clock() - started, message=message)
    _emit(doc, run_dir, out)
    for w in warnings:
        print(f"{PREFIX} WARNING: {w}", file=out, flush=True)
    if passed or plan.mode == "warn":
        return GateResult(True, EXIT_OK, message, doc, warnings)
    return GateResult(False, EXIT_GATE_FAILED, message, doc, warnings)


def _pickle_by_value(probe_class: type) -> None:
    import ray.cloudpickle as cloudpickle

    for module_name in {__name__, probe_class.__module__}:
        module = sys.modules.get(module_name)
        if module is not None and module_name != "__main__":
            try:
                cloudpickle.register_pickle_by_value(module)
            except ValueError:
                pass   # already registered


def _place(plan: HealthPlan, nodes: int, gpus_per_node: int, probe_class: type, doc: dict):
    import ray
    from ray.util.placement_group import placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    # Bundle i = every GPU of node i; STRICT_SPREAD puts each bundle on its own node.
    strategy = "STRICT_SPREAD" if nodes > 1 else "PACK"
    pg = placement_group([{"GPU": gpus_per_node}] * nodes, strategy=strategy,
                         name="gke-grpo-health-gate")
    ready = pg.wait(timeout_seconds=plan.placement_timeout_s)
    if not ready:
        free = _free_gpu_nodes()
        ray.util.remove_placement_group(pg)
        raise _GateFailure("placement", (
            f"could not place {nodes} bundle(s) of {gpus_per_node} GPU(s), one per node "
            f"({strategy}), within {plan.placement_timeout_s:.0f}s; nodes with free GPUs: "
            f"{free or 'none'}"))
    runtime_env = {"env_vars": _actor_env(plan)} if _actor_env(plan) else None
    remote_class = ray.remote(probe_class)
    world = nodes * gpus_per_node
    actors = []
    for node in range(nodes):
        for local in range(gpus_per_node):
            options = dict(num_gpus=1, num_cpus=0, max_restarts=0,
                           scheduling_strategy=PlacementGroupSchedulingStrategy(
                               placement_group=pg, placement_group_bundle_index=node))
            if runtime_env:
                options["runtime_env"] = runtime_env
            actors.append(remote_class.options(**options).remote(
                node * gpus_per_node + local, world, node, local, plan.backend))
    infos = _get([a.describe.remote() for a in actors], plan.timeout_s, "actor start", None)
    by_bundle: dict[int, set[str]] = {}
    for info in infos:
        by_bundle.setdefault(info["node_index"], set()).add(info["node_id"])
    placement = {"strategy": strategy, "bundles": [
        {"node_index": i, "node_ids": sorted(ids), "label": node_label(
            next(x for x in infos if x["node_index"] == i)),
         "gpu_ids": [x["gpu_ids"] for x in infos if x["node_index"] == i],
         "jobs_importable": any(x["jobs_importable"] for x in infos if x["node_index"] == i)}
        for i, ids in sorted(by_bundle.items())]}
    doc["placement"] = placement
    distinct = {next(iter(ids)) for ids in by_bundle.values() if len(ids) == 1}
    if any(len(ids) != 1 for ids in by_bundle.values()) or len(distinct) != nodes:
        raise _GateFailure("placement", f"the actors are not one node per bundle: {placement}")
    return pg, actors, infos


def _actor_env(plan: HealthPlan) -> dict[str, str]:
    env = dict(plan.env)
    if plan.backend == "nccl" and plan.nccl_debug_log:
        env.setdefault("NCCL_DEBUG", "INFO")
        env.setdefault("NCCL_DEBUG_SUBSYS", "INIT,NET")
        env.setdefault("NCCL_DEBUG_FILE", NCCL_DEBUG_FILE)
    return env


def _rendezvous(plan: HealthPlan, actors: list, infos: list[dict]) -> dict:
    import ray

    master_addr = infos[0]["ip"]
    master_port = ray.get(actors[0].free_port.remote(), timeout=60)
    joined = _get([a.init_group.remote(master_addr, master_port, plan.timeout_s) for a in actors],
                  plan.timeout_s, "rendezvous", infos)
    return {"master_addr": master_addr, "master_port": master_port,
            "world_size": joined[0]["world_size"], "backend": joined[0]["backend"],
            "seconds": max(j["seconds"] for j in joined),
            "torch_import_seconds": max(j["torch_import_seconds"] for j in joined)}


def _localize(plan: HealthPlan, actors: list, infos: list[dict], nodes: int, gpus_per_node: int,
              failed: list[dict]) -> dict:
    collective = next((c["collective"] for c in failed if "collective" in c), plan.collectives[0])
    ranks_of = {n: [n * gpus_per_node + g for g in range(gpus_per_node)] for n in range(nodes)}
    intra_rounds = [[ranks_of[n] for n in range(nodes)]] if gpus_per_node > 1 else []
    pair_rounds = [[ranks_of[a] + ranks_of[b] for a, b in pairs] for pairs in ring_pair_rounds(nodes)]
    # At least one warm-up: NCCL sets up a new group's communicator on its first collective.
    results = _get([a.subgroup_tests.remote(intra_rounds + pair_rounds, collective, plan.localize_size,
                                            max(1, plan.warmup_iterations), plan.iterations)
                    for a in actors],
                   plan.timeout_s, "localisation", infos)
    rows = [r for rank_rows in results for r in rank_rows]
    intra = [r for r in rows if len(r["group"]) == gpus_per_node and gpus_per_node > 1
             and len({x // gpus_per_node for x in r["group"]}) == 1]
    pairs = [r for r in rows if r not in intra]
    return localize(pairs, intra, plan, nodes, collective)


def _nics_by_node(logs: list[dict], infos: list[dict]) -> dict[str, dict]:
    by_node: dict[str, dict] = {}
    for log, info in zip(logs, infos):
        entry = by_node.setdefault(str(info["node_index"]), {"nets": [], "nics": [], "warnings": []})
        for key in ("nets", "nics", "warnings"):
            for item in log.get(key, []):
                if item not in entry[key]:
                    entry[key].append(item)
    return by_node


def _node_entry(index: int, infos: list[dict], doc: dict) -> dict:
    info = next((i for i in infos if i["node_index"] == index), {})
    nics = (doc.get("nics") or {}).get(str(index), {})
    return {"node_index": index, "label": node_label(info) if info else f"node {index}",
            "k8s_node": info.get("k8s_node", ""), "ip": info.get("ip", ""),
            "nics": nics.get("nics", []), "nccl_warnings": nics.get("warnings", [])}


def _verdict(plan: HealthPlan, checks: list[dict], failed_nodes: list[int], infos: list[dict],
             doc: dict) -> str:
    failed = [c for c in checks if not c["passed"]]
    if not failed:
        best = ", ".join(f"{c['name']}: {c['measured_gbps']:.4g} GB/s" for c in checks)
        return f"{PREFIX} PASSED: {best}"
    detail = "; ".join(f"{c['name']}: {c['measured_gbps']:.4g} GB/s < {c['threshold_gbps']:.4g} GB/s"
                       if "threshold_gbps" in c else f"{c['name']}: {c.get('detail', 'failed')}"
                       for c in failed)
    named = []
    for entry in (_node_entry(i, infos, doc) for i in failed_nodes):
        text = entry["label"]
        if entry["nics"]:
            text += " NICs " + ",".join(entry["nics"])
        named.append(text)
    return (f"{PREFIX} FAILED: {detail}" + (f"; nodes: {'; '.join(named)}" if named else ""))


def _get(refs: list, timeout: float, stage: str, infos: Optional[list[dict]]):
    """ray.get of every actor's answer, bounded by ``timeout``. The first actor that fails is
    named at once (its peers would otherwise wait in the collective until the timeout); on a
    timeout, the actors that did not answer are named."""
    import ray
    from ray.exceptions import RayActorError, RayTaskError

    def node_of(ref) -> list[int]:
        index = refs.index(ref)
        return [infos[index]["node_index"]] if infos and index < len(infos) else []

    deadline = time.monotonic() + timeout
    pending = list(refs)
    while pending:
        ready, pending = ray.wait(pending, num_returns=1, timeout=max(0.0, deadline - time.monotonic()))
        if not ready:
            nodes = sorted({n for ref in pending for n in node_of(ref)})
            raise _GateFailure(stage, f"no answer within {timeout:.0f}s from {len(pending)} actor(s)", nodes)
        try:
            ray.get(ready[0])
        except (RayActorError, RayTaskError):
            # The peers of a dead rank fail (or hang) in the collective too: give them a moment,
            # then blame the actors that died, else those that raised.
            ray.wait(pending, num_returns=len(pending), timeout=2.0)
            died, raised = [], []
            for ref in refs:
                try:
                    ray.get(ref, timeout=0)
                except RayActorError as exc:
                    died.append((ref, exc))
                except RayTaskError as exc:
                    raised.append((ref, exc))
                except Exception:
                    continue
            blamed = died or raised
            ranks = [refs.index(ref) for ref, _ in blamed]
            text = [line for line in str(blamed[0][1]).strip().splitlines() if line.strip()]
            what = "died" if died else "failed"
            raise _GateFailure(stage, f"the actor(s) of rank {', '.join(map(str, ranks))} {what}: "
                               f"{text[-1] if text else type(blamed[0][1]).__name__}",
                               sorted({n for ref, _ in blamed for n in node_of(ref)})) from None
    return ray.get(refs)


def _free_gpu_nodes() -> list[str]:
    import ray

    return [f"{n.get('NodeManagerAddress')}: {n.get('Resources', {}).get('GPU', 0):g} GPUs"
            for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get("GPU", 0) > 0]


def _teardown(actors: list, pg) -> None:
    import ray

    for a in actors:
        try:
            ray.kill(a, no_restart=True)
        except Exception:
            pass
    if pg is not None:
        try:
            ray.util.remove_placement_group(pg)
        except Exception:
            pass


# ---- results ----------------------------------------------------------------------------------

def summary(doc: Mapping[str, Any]) -> dict:
    """The part of health.json that the job log carries (no per-rank rows)."""
    keep = ("version", "mode", "passed", "enforced", "skipped", "started", "ended", "seconds", "timings",
            "nodes", "gpus_per_node", "backend", "machine_type", "checks", "failed_nodes",
            "warnings", "message", "error")
    out = {k: doc[k] for k in keep if k in doc}
    if "storage" in doc:
        s = doc["storage"]
        out["storage"] = {k: s.get(k) for k in ("kind", "bytes", "write_gbps", "read_gbps",
                                                "expected_write_gbps", "expected_read_gbps")}
    return out


def write_health(doc: Mapping[str, Any], run_dir: str | Path) -> Path:
    """``run_dir/health.json``, replaced atomically (a reader never sees half a file)."""
    directory = Path(run_dir)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / HEALTH_FILE
    tmp = directory / f".{HEALTH_FILE}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(doc, indent=2, sort_keys=True, default=str) + "\n")
    os.replace(tmp, path)
    return path


def _emit(doc: dict, run_dir, out) -> None:
    path = write_health(doc, run_dir)
    print(f"{PREFIX} wrote {path}", file=out, flush=True)
    print(RESULT_MARKER + json.dumps(summary(doc), sort_keys=True, separators=(",", ":"), default=str),
          file=out, flush=True)
    if doc.get("message"):
        print(doc["message"], file=out, flush=True)


def read_health(path: str | Path) -> dict:
    return json.loads(Path(path).read_text())


def health_from_log(text: str) -> Optional[dict]:
    """The last gate result a job log carries (``[health] result {...}``), or None."""
    found = None
    for line in text.splitlines():
        index = line.find(RESULT_MARKER)
        if index < 0:
            continue
        try:
            found = json.loads(line[index + len(RESULT_MARKER):])
        except json.JSONDecodeError:
            continue
    return found


def gate_needed(run_dir: str | Path, node_ids: Iterable[str]) -> bool:
    """Whether the gate must run (again) before a trainer start: no passing result yet, or
    the run's GPU nodes changed since the last one (a restart onto replaced nodes)."""
    path = Path(run_dir) / HEALTH_FILE
    try:
        doc = read_health(path)
    except (OSError, ValueError):
        return True
    if not doc.get("passed") or doc.get("skipped"):
        return not doc.get("skipped")
    measured = sorted(i for b in (doc.get("placement") or {}).get("bundles", []) for i in b["node_ids"])
    return measured != sorted(node_ids)


def ray_gpu_node_ids() -> list[str]:
    """The alive Ray nodes with GPUs (what ``gate_needed`` compares)."""
    import ray
    return sorted(n["NodeID"] for n in ray.nodes()
                  if n.get("Alive") and (n.get("Resources") or {}).get("GPU", 0) > 0)


def status_rows(doc: Optional[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """Rows for ``jobs status`` (key, value) from health.json or its log summary."""
    if not doc:
        return []
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(doc["started"])) if doc.get("started") else "?"
    if doc.get("skipped"):
        return [("health", f"OFF (gke-grpo:job.healthGate), {when}: fabric and storage not measured")]
    state = "PASSED" if doc.get("passed") else "FAILED"
    if not doc.get("passed") and doc.get("enforced") is False:
        state = "FAILED (mode warn: not enforced)"
    rows = [("health", f"{state} {when}, {doc.get('nodes')} node(s) x {doc.get('gpus_per_node')} GPUs, "
                       f"{doc.get('backend')}, {doc.get('seconds', '?')}s")]
    for check in doc.get("checks", []):
        if "threshold_gbps" in check:
            mark = "ok" if check["passed"] else "LOW"
            rows.append(("", f"{mark:<4}{check['name']}: {check['measured_gbps']:.4g} GB/s "
                             f"(min {check['threshold_gbps']:.4g})"))
    if doc.get("error"):
        rows.append(("", f"error in {doc['error'].get('stage')}: {doc['error'].get('message')}"))
    for node in doc.get("failed_nodes", []):
        nics = f", NICs {','.join(node['nics'])}" if node.get("nics") else ""
        rows.append(("", f"failed node {node.get('label')}{nics}"))
    storage = doc.get("storage")
    if storage:
        def rate(key):
            value = storage.get(f"{key}_gbps")
            expected = storage.get(f"expected_{key}_gbps")
            text = "-" if value is None else f"{value:.2f} GB/s"
            return text + (f" (expected {expected:.2f})" if expected else "")
        rows.append(("storage", f"{storage.get('kind')}: write {rate('write')}, read {rate('read')}"))
    for warning in doc.get("warnings", []):
        rows.append(("", f"warning: {warning}"))
    return rows


# ---- command line -------------------------------------------------------------------------------

def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m jobs.health", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("fabric", help="run the fabric (and storage) gate on the Ray cluster")
    p.add_argument("--plan", required=True, help="JSON file: the run plan (its 'health' key) or a health plan")
    p.add_argument("--nodes", type=int, required=True)
    p.add_argument("--gpus-per-node", type=int, required=True)
    p.add_argument("--run-dir", required=True, help="where health.json goes (/data/runs/<run-id>)")
    p.add_argument("--address", default="auto", help="Ray address (default: auto)")
    s = sub.add_parser("show", help="print a health.json as `jobs status` shows it")
    s.add_argument("path")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    if args.command == "show":
        try:
            doc = read_health(args.path)
        except (OSError, ValueError) as exc:
            print(f"{PREFIX} cannot read {args.path}: {exc}", file=sys.stderr)
            return EXIT_USAGE
        for key, value in status_rows(doc):
            print(f"{key:<12}{value}")
        return EXIT_OK if doc.get("passed") else EXIT_GATE_FAILED
    try:
        plan = HealthPlan.from_dict(json.loads(Path(args.plan).read_text()))
    except (OSError, ValueError, TypeError) as exc:
        print(f"{PREFIX} bad plan {args.plan}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    import ray

    try:
        ray.init(address=args.address, logging_level="WARNING", log_to_driver=False)
    except Exception as exc:
        print(f"{PREFIX} cannot connect to Ray at {args.address!r}: {exc}", file=sys.stderr)
        return 1
    try:
        result = fabric_gate(plan, args.nodes, args.gpus_per_node, args.run_dir)
    except PlanError as exc:
        print(f"{PREFIX} {exc}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        ray.shutdown()
    return result.exit_code


if __name__ == "__main__":
    sys.exit(main())
