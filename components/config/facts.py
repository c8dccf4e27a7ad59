"""Facts the config rules rely on, in one import: the sourced tables (data/gpu-machines.yaml,
data/lustre-tiers.yaml, data/gke-version-gates.yaml, each read by its own loader) and the
program's own choices (provisioning models, KubeRay chart range)."""

from __future__ import annotations

from components.config.gke_versions import load_gke_version_gates
from components.config.lustre import LUSTRE_TIERS, LustreTier
from components.config.machines import MACHINE_SHAPES, MachineShape, predefined_machine

__all__ = [
    "COMPUTE_CLASS_MIN_GKE_VERSION", "DEFAULT_GKE_MINOR", "DEFAULT_KUBERAY_CHART_VERSION", "FLEX_START_MAX_RUN_SECONDS",
    "FLEX_START_MIN_GKE_VERSION", "KUBERAY_CRD_DIR", "LUSTRE_CSI_MIN_GKE_VERSION",
    "LUSTRE_MODERN_PORT_MIN_GKE_VERSION", "LUSTRE_TIERS", "MACHINE_SHAPES", "MINIMUM_GKE_MINOR",
    "PROVISIONING_MODELS", "SUPPORTED_KUBERAY_CHARTS", "LustreTier", "MachineShape",
    "predefined_machine",
]

DEFAULT_KUBERAY_CHART_VERSION = "1.7.0"
SUPPORTED_KUBERAY_CHARTS = ((1, 6, 0), (1, 8, 0))  # [from, to)
# The KubeRay CRDs are vendored per chart version (data/kuberay-crds/v<version>/, copied from
# ray-project/kuberay helm-chart/kuberay-operator/crds/ at tag v<version>) and applied from
# those files: `pulumi up` fetches nothing. A chart version needs its CRDs vendored first.
KUBERAY_CRD_DIR = "data/kuberay-crds"

_GATES = load_gke_version_gates()
DEFAULT_GKE_MINOR = _GATES.default_minor
MINIMUM_GKE_MINOR = _GATES.minimum_minor
FLEX_START_MIN_GKE_VERSION = _GATES.flex_start
COMPUTE_CLASS_MIN_GKE_VERSION = _GATES.compute_class
LUSTRE_MODERN_PORT_MIN_GKE_VERSION = _GATES.lustre_modern_port
LUSTRE_CSI_MIN_GKE_VERSION = _GATES.lustre_csi

PROVISIONING_MODELS = ("reservation", "spot", "flex-start")
FLEX_START_MAX_RUN_SECONDS = 7 * 24 * 3600


# The ports Ray's workers bind on a node when `ray start` is not told otherwise (Ray 2.54
# ray/scripts/scripts.py: --min-worker-port default 10002, --max-worker-port default 19999): the
# driver's metrics port on the head must stay out of them.
RAY_WORKER_PORTS = (10002, 19999)


def ray_reserved_ports() -> dict[int, str]:
    """The fixed ports of the Ray pods (components/ray_ports.py), Ray's dashboard agent
    (ray/_private/ray_constants.py DEFAULT_DASHBOARD_AGENT_LISTEN_PORT), the autoscaler's metrics
    (ray/autoscaler/_private/constants.py AUTOSCALER_METRIC_PORT, a sidecar of the head pod) and
    the dashboard's metrics (ray/dashboard/consts.py DASHBOARD_METRIC_PORT), Ray 2.54.0."""
    from components.ray_ports import AUTOSCALER_METRICS_PORT, CLIENT_PORT, DASHBOARD_PORT, GCS_PORT, METRICS_PORT

    return {GCS_PORT: "GCS", DASHBOARD_PORT: "dashboard and job API", CLIENT_PORT: "client server",
            METRICS_PORT: "metrics export", 52365: "dashboard agent",
            AUTOSCALER_METRICS_PORT: "autoscaler metrics", 44227: "dashboard metrics"}
