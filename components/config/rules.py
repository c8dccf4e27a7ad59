"""Rules spanning several keys of the stack config, in one place: overlaps, counts per GPU type,
Autopilot or Standard, version gates, derived names, and the values no API accepts that depend on
another key (gcsfuse's file cache against the GPU machine's local SSD, the head pool's
machine against the real shapes of data/config-limits.yaml). A rule about one value alone is a type
(components/config/types.py)."""

from __future__ import annotations

import ipaddress
import math
import re
from typing import Any, TypeVar

from components.config.facts import (
    LUSTRE_CSI_MIN_GKE_VERSION,
    LUSTRE_MODERN_PORT_MIN_GKE_VERSION,
    LUSTRE_TIERS,
    MACHINE_SHAPES,
    MINIMUM_GKE_MINOR,
    MachineShape,
    predefined_machine,
)
from components.config.gpu_rules import _GpuRules
from components.config.layout_rules import _LayoutRules
from components.config.limits import load_config_limits
from components.config.models import (
    ClusterConfig,
    GcsStorage,
    GpuConfig,
    HeadPool,
    JobConfig,
    KubeRayConfig,
    LustreStorage,
    NetworkConfig,
    StorageConfig,
    _Area,
)
from components.config.patterns import _GKE_VERSION, _ZONE, _version_tuple, quantity_bytes, version_at_least
from components.config.problems import PROJECT, Problem, _lookup
from components.config.stack import ResourceNames
from components.config.timeformats import rfc3339
from components.config.types import BUCKET_NAME_RULE, bucket_name_problem

_AreaModel = TypeVar("_AreaModel", bound=_Area)

# What the gcsfuse sidecar's size is computed from (components/config/sidecar.py): a rule that
# counts the sidecar reads them all.
SIDECAR_KEYS = ("storage.gcs.sidecarCpuLimit", "storage.gcs.sidecarMemoryLimit",
                "storage.gcs.sidecarEphemeralStorageLimit", "storage.gcs.fileCacheSizeGib")


def area_of(parsed: dict[str, _Area | None], name: str, model: type[_AreaModel]) -> _AreaModel | None:
    """The area ``name`` as its model, or None when it did not parse."""
    value = parsed.get(name)
    return value if isinstance(value, model) else None


class _Rules(_GpuRules, _LayoutRules):
    """Rules spanning several keys. Each check reads only areas that parsed."""

    def __init__(self, problems: list[Problem], parsed: dict[str, _Area | None],
                 region: str | None, project: str | None = None):
        self.problems = problems
        self.cluster = area_of(parsed, "cluster", ClusterConfig)
        self.gpu = area_of(parsed, "gpu", GpuConfig)
        self.network = area_of(parsed, "network", NetworkConfig)
        self.storage = area_of(parsed, "storage", StorageConfig)
        self.kuberay = area_of(parsed, "kuberay", KubeRayConfig)
        self.job = area_of(parsed, "job", JobConfig)
        self.region = region
        self.project = project

    def add(self, key: str, given: Any, allowed: str, reads: tuple[str, ...] = ()) -> None:
        """A problem at ``key``; ``reads``: the other keys the rule compared it with."""
        self.problems.append(Problem(f"{PROJECT}:{key}", given, allowed,
                                     tuple(f"{PROJECT}:{k}" for k in reads)))

    def run(self) -> None:
        # Each area's checks get the area itself: it parsed. Others are read as Optional.
        if self.cluster:
            self._check_cluster(self.cluster)
        if self.gpu:
            self._check_gpu(self.gpu)
        if self.network:
            self._check_network(self.network)
        if self.storage:
            self._check_storage(self.storage)
        if self.kuberay:
            self._check_kuberay(self.kuberay)
        if self.job:
            self._check_job(self.job)

    # ---- cluster --------------------------------------------------------------------------
    def _check_cluster(self, c: ClusterConfig) -> None:
        # Names, zones, times and the RRULE are checked by their types (components/config/types.py).
        for derived in ResourceNames(c.name, 8).all_rfc1035():
            if len(derived) > 63:
                self.add("cluster.name", c.name, f"too long: the derived name {derived!r} "
                         "exceeds GCP's 63 characters")
                break
        zone_match = _ZONE.fullmatch(c.zone)
        if zone_match and self.region and zone_match.group(1) != self.region:
            self.add("cluster.zone", c.zone, f"a zone of the region gcp:region={self.region} "
                     f"(for example {self.region}-b)")
        version = _version_tuple(c.min_master_version)
        if version is not None and version[:2] < tuple(int(p) for p in MINIMUM_GKE_MINOR.split(".")):
            self.add("cluster.minMasterVersion", c.min_master_version,
                     f"{MINIMUM_GKE_MINOR} or later: A3 Ultra and A4 GPU nodes need it")
        window = c.maintenance_window
        start, end = rfc3339(window.start_time), rfc3339(window.end_time)
        if start is not None and end is not None and end <= start:
            self.add("cluster.maintenanceWindow.endTime", window.end_time,
                     f"a time after maintenanceWindow.startTime ({window.start_time})",
                     reads=("cluster.maintenanceWindow.startTime",))
        for i, exclusion in enumerate(c.maintenance_exclusions):
            start, end = rfc3339(exclusion.start_time), rfc3339(exclusion.end_time)
            if start is not None and end is not None and end <= start:
                key = f"cluster.maintenanceExclusions[{i}]"
                self.add(f"{key}.endTime", exclusion.end_time,
                         f"a time after {key}.startTime ({exclusion.start_time}): an exclusion "
                         "ends after it starts", reads=(f"{key}.startTime",))
        if c.mode == "autopilot" and c.head_pool is not None:
            self.add("cluster.headPool", c.head_pool.model_dump(by_alias=True, exclude_unset=True),
                     "not allowed on Autopilot: Autopilot has no node pools; the Ray head runs on "
                     "Autopilot's default on-demand (non-Spot) capacity")
        if c.head_pool is not None and c.mode == "standard":
            self._check_head_machine_is_real(c.head_pool.machine_type)
        if c.head_pool is not None and c.head_pool.min_nodes > c.head_pool.max_nodes:
            self.add("cluster.headPool.minNodes", c.head_pool.min_nodes,
                     f"at most headPool.maxNodes ({c.head_pool.max_nodes})",
                     reads=("cluster.headPool.maxNodes",))
        self._check_control_plane_access(c)

    def _check_head_machine_is_real(self, machine: str) -> None:
        limits = load_config_limits()
        # An unreadable name is reported by _check_head; here: a readable one that is no shape.
        if predefined_machine(machine) is not None and not limits.head_machine_known(machine):
            self.add("cluster.headPool.machineType", machine, "a real predefined machine type: "
                     + limits.head_machine_choices(machine) + " (data/config-limits.yaml)")

    def _check_control_plane_access(self, c: ClusterConfig) -> None:
        """The control plane is never open to the internet by default: the DNS-based endpoint
        (IAM decides who connects) or the IP endpoint limited to named networks."""
        networks = c.master_authorized_networks
        # Each network's CIDR (never 0.0.0.0/0) is checked by its type (types.AuthorizedCidr).
        access = ("cluster.controlPlaneAccess",)
        if c.control_plane_access == "dns" and networks:
            self.add("cluster.masterAuthorizedNetworks",
                     [n.model_dump(by_alias=True) for n in networks],
                     'only with cluster.controlPlaneAccess "authorizedNetworks": with "dns" the IP '
                     "endpoints are off and IAM (container.clusters.connect) decides who connects",
                     reads=access)
        if c.control_plane_access == "authorizedNetworks" and not networks:
            self.add("cluster.masterAuthorizedNetworks", [], 'at least one {"cidrBlock": '
                     '"203.0.113.0/24", "displayName": "office"} with controlPlaneAccess '
                     '"authorizedNetworks" (or use controlPlaneAccess "dns")', reads=access)
        self._check_authorized_public_space(networks)

    def _check_authorized_public_space(self, networks: tuple) -> None:
        """The ranges together, not each alone: 0.0.0.0/1 + 128.0.0.0/1 is the whole internet.
        Only public space counts (data/config-limits.yaml: the bound and why)."""
        limits = load_config_limits()
        public = limits.public_addresses([n.cidr_block for n in networks])
        most = limits.authorized_public_addresses_max
        if public > most:
            self.add("cluster.masterAuthorizedNetworks", [n.cidr_block for n in networks],
                     f"ranges that together cover at most {most:,} public IPv4 addresses (a /16; "
                     f"data/config-limits.yaml): these cover {public:,} "
                     f"({public / 2**32:.2%} of all IPv4 addresses). Name the networks you work "
                     'from, or use cluster.controlPlaneAccess "dns", where IAM decides who '
                     "connects", reads=("cluster.controlPlaneAccess",))

    # ---- network ----------------------------------------------------------------------------
    def _check_network(self, n: NetworkConfig) -> None:
        # Both shapes have 8 RDMA NICs; the GPU type decides when it parsed.
        shape = MACHINE_SHAPES[self.gpu.type if self.gpu else "nvidia-b200"]
        nics = shape.rdma_nics
        # Each range is a private /8-/29 CIDR by its type (types.SubnetCidr); here: their count
        # per GPU type, and that no two overlap.
        if len(n.rdma_subnet_cidrs) != nics:
            self.add("network.rdmaSubnetCidrs", list(n.rdma_subnet_cidrs),
                     f"exactly {nics} CIDRs: one subnet per RDMA NIC of {shape.machine_type}",
                     reads=("gpu.type",))
        ranges = [(key, ipaddress.IPv4Network(value)) for key, value in (
            ("network.clusterSubnetCidr", n.cluster_subnet_cidr),
            ("network.podCidr", n.pod_cidr),
            ("network.serviceCidr", n.service_cidr),
            ("network.gvnicSubnetCidr", n.gvnic_subnet_cidr),
            ("network.lustrePeeringCidr", n.lustre_peering_cidr),
            *((f"network.rdmaSubnetCidrs[{i}]", cidr) for i, cidr in enumerate(n.rdma_subnet_cidrs)))]
        for i, (key_a, net_a) in enumerate(ranges):
            for key_b, net_b in ranges[i + 1:]:
                if net_a.overlaps(net_b):
                    self.add(key_b, str(net_b), f"a range disjoint from {PROJECT}:{key_a} "
                             f"({net_a})", reads=(key_a,))

    # ---- storage ----------------------------------------------------------------------------
    def _check_storage(self, s: StorageConfig) -> None:
        other = "lustre" if s.kind == "gcs" else "gcs"
        if getattr(s, other) is not None:
            self.add(f"storage.{other}", getattr(s, other).model_dump(by_alias=True, exclude_none=True),
                     f'only with storage.kind "{other}" (kind is "{s.kind}")')
        if s.kind == "gcs":
            self._check_gcs(s.gcs or GcsStorage())
        if s.kind == "lustre":
            self._check_lustre(s.lustre or LustreStorage())

    def _check_gcs(self, gcs: GcsStorage) -> None:
        # A given bucketName, the retention and the cache TTL are checked by their types; here:
        # the default name derived from the cluster name and the project.
        if gcs.bucket_name is None and self.cluster is not None and self.project:
            name = ResourceNames(self.cluster.name, 8).bucket(self.project)
            if bucket_name_problem(name):
                self.add("cluster.name", self.cluster.name,
                         f"the default bucket name {name!r} (<cluster name>-<project>) is invalid; "
                         f"set {PROJECT}:storage.gcs.bucketName or shorten the cluster name. A bucket "
                         f"name is {BUCKET_NAME_RULE}", reads=("storage.gcs.bucketName",))
        if self.gpu is not None:
            self._check_file_cache_fits_local_ssd(gcs, MACHINE_SHAPES[self.gpu.type])
        autopilot = self.cluster is not None and self.cluster.mode == "autopilot"
        for field, value in (("sidecarCpuLimit", gcs.sidecar_cpu_limit),
                             ("sidecarMemoryLimit", gcs.sidecar_memory_limit),
                             ("sidecarEphemeralStorageLimit", gcs.sidecar_ephemeral_storage_limit)):
            if value is None:     # its form is checked by its type (types.Quantity)
                continue
            number = re.match(r"[0-9.]+", value)
            zero = number is not None and float(number.group(0)) == 0
            if autopilot and zero:
                self.add(f"storage.gcs.{field}", value, 'a non-zero limit: "0" (unlimited) '
                         "works on Standard clusters only")
            elif field == "sidecarEphemeralStorageLimit" and not zero and \
                    quantity_bytes(value) <= gcs.file_cache_size_gib * 2**30:
                self.add(f"storage.gcs.{field}", value, f"more than the file cache "
                         f"({gcs.file_cache_size_gib}Gi, storage.gcs.fileCacheSizeGib): the "
                         "cache lives in the sidecar's ephemeral storage",
                         reads=("storage.gcs.fileCacheSizeGib",))

    def _check_file_cache_fits_local_ssd(self, gcs: GcsStorage, shape: MachineShape) -> None:
        from components.config.sidecar import EPHEMERAL_HEADROOM_FRACTION, EPHEMERAL_HEADROOM_MIN_GIB

        cache = gcs.file_cache_size_gib
        headroom = max(EPHEMERAL_HEADROOM_MIN_GIB, math.ceil(cache * EPHEMERAL_HEADROOM_FRACTION))
        if cache > 0 and cache + headroom > shape.local_ssd_gib:
            most = int((shape.local_ssd_gib - EPHEMERAL_HEADROOM_MIN_GIB) / (1 + EPHEMERAL_HEADROOM_FRACTION))
            self.add("storage.gcs.fileCacheSizeGib", cache,
                     f"at most {most:,} GiB: the cache (plus its {EPHEMERAL_HEADROOM_FRACTION:.0%} "
                     f"headroom) lives in the sidecar's ephemeral storage, the "
                     f"{shape.local_ssd_gib:,} GiB of local SSD of {shape.machine_type}",
                     reads=("gpu.type",))

    def _check_lustre(self, lustre: LustreStorage) -> None:
        # The tier, the fsname and the instance id are checked by their types (types.py).
        tier = LUSTRE_TIERS.get(lustre.throughput_tier)
        problem = tier.capacity_problem(lustre.capacity_gib) if tier is not None else None
        if problem:
            self.add("storage.lustre.capacityGib", lustre.capacity_gib,
                     f"{problem} for throughput tier {lustre.throughput_tier}",
                     reads=("storage.lustre.throughputTier",))
        version = self.cluster.min_master_version if self.cluster else None
        if version and _GKE_VERSION.fullmatch(version):
            if not version_at_least(version, LUSTRE_CSI_MIN_GKE_VERSION):
                self.add("cluster.minMasterVersion", version,
                         f"at least {LUSTRE_CSI_MIN_GKE_VERSION} for the Lustre CSI driver")
            elif not lustre.legacy_port and not version_at_least(
                    version, LUSTRE_MODERN_PORT_MIN_GKE_VERSION):
                self.add("storage.lustre.legacyPort", False,
                         f"true when nodes may be older than {LUSTRE_MODERN_PORT_MIN_GKE_VERSION} "
                         f"(cluster.minMasterVersion is {version}); or raise "
                         "cluster.minMasterVersion to that version and keep the modern port 988",
                         reads=("cluster.minMasterVersion",))

    # ---- kuberay ----------------------------------------------------------------------------
    def _check_kuberay(self, k: KubeRayConfig) -> None:
        if k.operator == "addon" and k.helm_chart_version is not None:
            self.add("kuberay.helmChartVersion", k.helm_chart_version,
                     'only with kuberay.operator "helm": the GKE Ray addon and the Helm operator '
                     "must never both run")
        if k.operator == "helm" and k.operator_namespace is not None:
            self.add("kuberay.operatorNamespace", k.operator_namespace, 'only with kuberay.operator '
                     '"addon": the Helm release lives in kuberay-system')
        self._check_image(k)
        self._check_worker(k)
        self._check_head(k)
        self._check_autoscaler(k)

    def _check_autoscaler(self, k: KubeRayConfig) -> None:
        # A worker pod still starting when its allocate timeout runs out is deleted and created
        # again (ray/autoscaler/v2/instance_manager/reconciler.py, data/ray-autoscaler-settings.yaml):
        # shorter than the run's own GPU wait, a gang that capacity grants late is recycled
        # before the run gives up on it.
        timeout = k.autoscaler.allocate_timeout_seconds
        if timeout is not None and self.job is not None and timeout < self.job.gpu_wait_seconds:
            self.add("kuberay.autoscaler.allocateTimeoutSeconds", timeout,
                     f"at least job.gpuWaitSeconds ({self.job.gpu_wait_seconds}): the Ray autoscaler "
                     "would delete and recreate GPU worker pods still starting within the run's GPU "
                     "wait (default: the GPU wait + a GPU node's bring-up)",
                     reads=("job.gpuWaitSeconds",))

    def _check_image(self, k: KubeRayConfig) -> None:
        from components.versions import load_versions

        image = k.image     # pinned: checked by its type (types.PinnedImage)
        if image is None:
            return
        versions = load_versions()
        row = versions.by_image(image)
        if row is None:
            self.add("kuberay.image", image, "an image of the supported-versions table "
                     "(data/versions.yaml): " + ", ".join(r.image for r in versions.images))
        elif self.job is not None and row.framework != self.job.framework:
            self.add("kuberay.image", image, f"an image for job.framework {self.job.framework!r} "
                     f"(this one is for {row.framework!r})", reads=("job.framework",))
        elif self.job is not None and self.job.release is not None and row.id != self.job.release:
            self.add("kuberay.image", image, f"the image of job.release {self.job.release} "
                     f"(this one is {row.id}'s): set one of the two", reads=("job.release",))

    def _check_release(self, j: JobConfig) -> None:
        from components.versions import load_versions

        if j.release is None:      # its form is checked by its type (types.ReleaseId)
            return
        versions = load_versions()
        row = versions.by_id(j.release)
        if row is None:
            self.add("job.release", j.release, "a row of the supported-versions table "
                     "(data/versions.yaml): " + ", ".join(r.id for r in versions.images))
        elif row.framework != j.framework:
            ids = ", ".join(r.id for r in versions.rows_for(j.framework))
            self.add("job.release", j.release, f"a release of job.framework {j.framework!r} "
                     f"({ids}); {row.id} is {row.framework}'s", reads=("job.framework",))

    def _check_worker(self, k: KubeRayConfig) -> None:
        worker = k.worker
        if self.gpu is None:
            return
        shape = MACHINE_SHAPES[self.gpu.type]
        # Same headroom as components/kuberay.py: system DaemonSets need room on the node.
        from components.kuberay_limits import SYSTEM_RESERVE_CPU, SYSTEM_RESERVE_MEMORY_GIB, worker_size_limit
        sidecar_cpu, sidecar_memory, sidecar_note = 0.0, 0.0, ""
        sidecar_reads: tuple[str, ...] = ()
        if self.storage is not None and self.storage.kind == "gcs" and self.cluster is not None:
            # The gcsfuse sidecar shares the worker's node; with a limit its request counts.
            from components.config.sidecar import gcsfuse_sidecar_limits
            sidecar_reads = SIDECAR_KEYS
            try:
                limits = gcsfuse_sidecar_limits(self.storage.gcs or GcsStorage(),
                                                self.cluster.mode == "autopilot")
                sidecar_cpu, sidecar_memory = limits.budget()
            except ValueError:
                pass  # an unreadable quantity is reported by _check_gcs
            if sidecar_cpu or sidecar_memory:
                sidecar_note = f" and the gcsfuse sidecar takes {limits.cpu} CPU, {limits.memory}"
        max_cpu, max_memory = worker_size_limit(shape.allocatable_cpu, shape.allocatable_memory_gib,
                                                sidecar_cpu, sidecar_memory)
        if worker.cpu is not None and worker.cpu > max_cpu:
            self.add("kuberay.worker.cpu", worker.cpu, f"at most {max_cpu}: {shape.machine_type} "
                     f"has ~{shape.allocatable_cpu:.2f} allocatable CPUs and GKE's system "
                     f"DaemonSets need ~{SYSTEM_RESERVE_CPU}{sidecar_note}", reads=sidecar_reads)
        if worker.memory_gib is not None and worker.memory_gib > max_memory:
            self.add("kuberay.worker.memoryGib", worker.memory_gib, f"at most {max_memory}: "
                     f"{shape.machine_type} has ~{shape.allocatable_memory_gib:.0f} GiB allocatable "
                     f"and GKE's system DaemonSets need ~{SYSTEM_RESERVE_MEMORY_GIB} GiB{sidecar_note}",
                     reads=sidecar_reads)
        if self.cluster is not None and self.cluster.mode == "autopilot":
            self._check_autopilot_worker_pod(k, shape)
        memory = worker.memory_gib or max_memory
        if worker.shm_gib >= memory:
            self.add("kuberay.worker.shmGib", worker.shm_gib, f"less than the worker's memory "
                     f"({memory} GiB): /dev/shm is memory the worker's limit counts",
                     reads=("kuberay.worker.memoryGib", *sidecar_reads))

    def _check_autopilot_worker_pod(self, k: KubeRayConfig, shape: MachineShape) -> None:
        """The GPU worker pod as a whole (Ray container + gcsfuse sidecar) within Autopilot's
        per-pod maximum for its GPU shape (data/autopilot-gpu-limits.yaml): Autopilot rejects a
        pod above it."""
        from components.autopilot_limits import pod_limit_for
        from components.config.sidecar import gcsfuse_sidecar_limits

        limit = pod_limit_for(shape.gpu_type, shape.gpus)
        if limit is None:
            self.add("gpu.type", shape.gpu_type, f"a GPU type with {shape.gpus} GPUs in Autopilot's "
                     "per-pod maximums (data/autopilot-gpu-limits.yaml)")
            return
        worker = k.worker
        sidecar_cpu = sidecar_memory = sidecar_storage = 0.0
        sidecar_reads: tuple[str, ...] = ()
        if self.storage is not None and self.storage.kind == "gcs":
            sidecar_reads = SIDECAR_KEYS
            try:
                limits = gcsfuse_sidecar_limits(self.storage.gcs or GcsStorage(), True)
                sidecar_cpu, sidecar_memory = limits.budget()
                sidecar_storage = quantity_bytes(limits.ephemeral_storage) / 2**30
            except ValueError:
                return  # reported by _check_gcs
        # Omitted CPU and memory are sized to fit by components/kuberay.py (worker_resources);
        # what the config states explicitly is checked.
        asked = {
            "kuberay.worker.cpu": (worker.cpu, sidecar_cpu, limit.cpu, "CPUs"),
            "kuberay.worker.memoryGib": (worker.memory_gib, sidecar_memory, limit.memory_gib,
                                         "GiB of memory"),
            "kuberay.worker.ephemeralStorageGib": (worker.ephemeral_storage_gib, sidecar_storage,
                                                   limit.ephemeral_storage_gib,
                                                   "GiB of ephemeral storage"),
        }
        for key, (value, sidecar, maximum, what) in asked.items():
            total = None if value is None else value + sidecar
            if total is not None and total > maximum:
                self.add(key, _lookup(worker.model_dump(by_alias=True), (key.rsplit(".", 1)[1],)),
                         f"a GPU worker pod of at most {maximum:g} {what} on Autopilot "
                         f"({shape.gpus} x {shape.gpu_type}, {limit.source}); this pod asks "
                         f"{total:g} including the gcsfuse sidecar", reads=sidecar_reads)

    def _check_autopilot_head_pod(self, k: KubeRayConfig) -> None:
        """The head pod's ephemeral storage (container + gcsfuse sidecar) within Autopilot's
        general-purpose per-pod maximum (data/autopilot-gpu-limits.yaml)."""
        from components.autopilot_limits import general_purpose_ephemeral_storage_gib
        from components.config.sidecar import HEAD_SIDECAR_AUTOPILOT

        asked = k.head.ephemeral_storage_gib
        if asked is None:
            return
        sidecar = 0.0
        if self.storage is not None and self.storage.kind == "gcs":
            sidecar = quantity_bytes(HEAD_SIDECAR_AUTOPILOT.ephemeral_storage) / 2**30
        maximum = general_purpose_ephemeral_storage_gib()
        # The Ray autoscaler's sidecar asks for its own (components/ray_pods.py).
        from components.kuberay_limits import AUTOSCALER_EPHEMERAL_GIB
        if asked + sidecar + AUTOSCALER_EPHEMERAL_GIB > maximum:
            self.add("kuberay.head.ephemeralStorageGib", asked,
                     f"at most {maximum - sidecar - AUTOSCALER_EPHEMERAL_GIB:g} on Autopilot: a pod "
                     f"without local SSD gets at most {maximum:g} GiB of ephemeral storage"
                     f"{f', the gcsfuse sidecar takes {sidecar:g}' if sidecar else ''} and the Ray "
                     f"autoscaler {AUTOSCALER_EPHEMERAL_GIB:g}; /tmp/ray is on its own disk-backed "
                     "volume there")

    def _check_head(self, k: KubeRayConfig) -> None:
        """The head's requests fit its Standard pool's machine (plus a small sidecar)."""
        c = self.cluster
        if c is not None and c.mode == "autopilot":
            self._check_autopilot_head_pod(k)
        if c is None or c.mode != "standard":
            return
        pool = c.head_pool or HeadPool()
        shape = predefined_machine(pool.machine_type)
        if shape is None:
            self.add("cluster.headPool.machineType", pool.machine_type, "a predefined machine type "
                     "such as c2-standard-16 or n2-highmem-16 (<family>-standard|highmem|highcpu-<vCPUs>)")
            return
        vcpus, memory_gib = shape
        probe = MachineShape("", pool.machine_type, "", 0, 0, vcpus, memory_gib, 0, "", "")
        head = k.head
        # One vCPU and 2 GiB for the node's system pods and the gcsfuse sidecar's requests, and
        # the Ray autoscaler's sidecar in the head pod (components/ray_pods.py).
        from components.kuberay_limits import AUTOSCALER_CPU, AUTOSCALER_MEMORY_GIB
        cpu_room = probe.allocatable_cpu - 1 - AUTOSCALER_CPU
        memory_room = probe.allocatable_memory_gib - 2 - AUTOSCALER_MEMORY_GIB
        if head.cpu > cpu_room or head.memory_gib > memory_room:
            self.add("kuberay.head", head.model_dump(by_alias=True),
                     f"at most {int(cpu_room)} CPUs and "
                     f"{int(memory_room)} GiB on the head pool's "
                     f"{pool.machine_type} ({vcpus} vCPUs, {memory_gib:g} GiB); or choose a larger "
                     "cluster.headPool.machineType",
                     reads=("cluster.headPool.machineType", "kuberay.head.cpu", "kuberay.head.memoryGib"))

    # ---- job ----------------------------------------------------------------------------------
    def _check_job(self, j: JobConfig) -> None:
        self._check_release(j)
        self._check_layout(j)
        self._check_capacity_outlives_a_checkpoint(j)
        if (j.total_steps is None) == (j.total_epochs is None):
            self.add("job.totalSteps", j.total_steps, "set exactly one of job.totalSteps and "
                     "job.totalEpochs", reads=("job.totalEpochs",))
        gate = j.health_gate
        if gate.mode != "off":
            sizes = gate.message_sizes_mib
            if not sizes or any(not 1 <= size <= 16384 for size in sizes):
                self.add("job.healthGate.messageSizesMib", list(sizes), "1 to 16384 MiB each, at "
                         "least one (1024-8192 measure the large-message bandwidth the thresholds "
                         "are published for)")
            if not gate.collectives:
                self.add("job.healthGate.collectives", [], 'at least one of "all_gather", "all_reduce"')

