"""The keys of a stack config: the areas (one model each), the secrets, the scalars and the
`gcp:*` settings this program reads, with the reference text of the keys that have no model."""

from __future__ import annotations

from components.config.models import (
    ClusterConfig,
    GpuConfig,
    JobConfig,
    KubeRayConfig,
    MonitoringConfig,
    NetworkConfig,
    StorageConfig,
    _Area,
)
from components.config.problems import PROJECT

AREAS: dict[str, type[_Area]] = {
    "cluster": ClusterConfig,
    "gpu": GpuConfig,
    "network": NetworkConfig,
    "storage": StorageConfig,
    "kuberay": KubeRayConfig,
    "job": JobConfig,
    "monitoring": MonitoringConfig,
}
REQUIRED_AREAS = ("cluster", "gpu", "storage", "kuberay", "job")
SECRET_KEYS = {"hfToken": True, "wandbApiKey": False}  # key -> required
# The required secrets the offline readers (preview, preflight, jobs CLI) stand in for when a
# stack file does not set them (jobs/plan/stack_file.py read_stack_file).
OFFLINE_SECRET_KEYS = tuple(f"{PROJECT}:{name}" for name, required in SECRET_KEYS.items() if required)
SCALAR_KEYS = {"environment"}
# Keys of other namespaces this program reads; `gcp:*` provider settings beyond these are
# the provider's business and pass through untouched.
GCP_REQUIRED = ("project", "region")

# Keys without an area model: (default, meaning) for the generated config reference
# (tools/config_reference.py) and the stack file's JSON schema.
TOP_LEVEL_KEYS: dict[str, tuple[str, str]] = {
    "gcp:project": ("required", "the Google Cloud project id"),
    "gcp:region": ("required", "region of the cluster, subnets and bucket"),
    f"{PROJECT}:environment": ("required", "`dev` or `prod`; prod turns on cluster deletion "
                               "protection and 7-day soft delete (data stores are protected in "
                               "both: `storage.allowDataLoss`)"),
    f"{PROJECT}:hfToken": ("required, secret", "Hugging Face token; reaches only a Kubernetes "
                           "Secret"),
    f"{PROJECT}:wandbApiKey": ("unset, secret", "W&B API key; when set the trainer also logs to "
                               "W&B"),
}
