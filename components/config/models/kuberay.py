"""`gke-grpo:kuberay`: the operator, the image and the Ray pods' sizes."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from components.config.models.base import _Area
from components.config.types import (
    AutoscalerTimeoutSeconds,
    HelmChartVersion,
    KubernetesNamespace,
    PinnedImage,
    RayClusterName,
)


class HeadResources(_Area):
    cpu: int = Field(12, ge=2, description="Standard: checked against the head pool's machine")
    memory_gib: int = Field(
        48,
        ge=4,
        description="Standard: checked against the head pool's machine",
    )
    # Requested explicitly: Autopilot's default is 1 GiB. Omitted: 50 on Standard; 5 on
    # Autopilot, whose general-purpose pods get at most 10 GiB (sidecar included), so there the
    # head's /tmp/ray is a disk-backed generic ephemeral volume instead (components/kuberay.py).
    ephemeral_storage_gib: int | None = Field(
        None,
        ge=1,
        description=("requested ephemeral storage (Autopilot default: 1 GiB). Autopilot: with the sidecar "
                     "at most 10 GiB; `/tmp/ray` is a 100 GiB disk-backed ephemeral volume there"),
        json_schema_extra={"defaultText": "Standard: 50, Autopilot: 5"},
    )

class WorkerResources(_Area):
    # Omitted: computed from the machine's allocatable (components/config/machines.py MachineShape).
    cpu: int | None = Field(
        None,
        ge=1,
        description="checked against the machine's allocatable",
        json_schema_extra={"defaultText": "allocatable - 6 (- sidecar)"},
    )
    memory_gib: int | None = Field(
        None,
        ge=1,
        description="checked against the machine's allocatable",
        json_schema_extra={"defaultText": "allocatable - 64 GiB (- sidecar)"},
    )
    shm_gib: int = Field(250, ge=1, description="`/dev/shm` memory emptyDir")
    # /tmp and /tmp/ray (Ray spilling, runtime envs, vLLM and torch compile caches) on the
    # node's local SSD; requested explicitly (Autopilot's default is 1 GiB).
    ephemeral_storage_gib: int = Field(
        1000,
        ge=10,
        description=("requested ephemeral storage (`/tmp`, `/tmp/ray`) on local SSD; Autopilot: the pod, "
                     "sidecar included, within `data/autopilot-gpu-limits.yaml`"),
    )

class AutoscalerOptions(_Area):
    # The Ray v2 autoscaler deletes and recreates a worker pod that has not joined Ray within this
    # (RAY_AUTOSCALER_RECONCILE_ALLOCATE_STATUS_TIMEOUT_S; data/ray-autoscaler-settings.yaml has
    # each Ray version's default). Omitted: derived from job.gpuWaitSeconds, so changing that key
    # then also recreates the head pod; set this to keep them apart.
    allocate_timeout_seconds: AutoscalerTimeoutSeconds | None = Field(
        None,
        description=("how long the Ray autoscaler lets a GPU worker pod start (node, image pull, "
                     "gIB wait) before it deletes and recreates it; at least `job.gpuWaitSeconds`"),
        json_schema_extra={"defaultText": ("`job.gpuWaitSeconds` + 2400 (a GPU node's bring-up, "
                                           "`data/ray-autoscaler-settings.yaml`)")},
    )


class KubeRayConfig(_Area):
    operator: Literal["addon", "helm"] = Field(
        description="`addon` (GKE's Ray addon) or `helm` (kuberay-operator release)",
    )
    helm_chart_version: HelmChartVersion | None = Field(
        None,
        description=("only with `helm`; a version whose CRDs are vendored in `data/kuberay-crds/` "
                     "(1.7.0)"),
        json_schema_extra={"defaultText": "1.7.0 with `helm`"},
    )
    namespace: KubernetesNamespace = Field(
        "grpo",
        description="namespace of the Ray cluster, storage claim and secrets",
    )
    ray_cluster_name: RayClusterName = Field("grpo", description="RayCluster name")
    image: PinnedImage | None = Field(
        None,
        description="Ray image; must be a row of the table for `job.framework`",
        json_schema_extra={"defaultText": "the framework's row of `data/versions.yaml`"},
    )
    # GKE's Ray addon: the namespace of its operator, if you know it, to narrow the
    # NetworkPolicy (with Helm the program knows: kuberay-system).
    operator_namespace: str | None = Field(
        None,
        description="addon only: the managed operator's namespace, to narrow the NetworkPolicy",
    )
    head: HeadResources = Field(HeadResources(), description="Ray head resources",
                                json_schema_extra={"defaultText": "defaults"})
    worker: WorkerResources = Field(WorkerResources(), description="GPU worker resources",
                                    json_schema_extra={"defaultText": "defaults"})
    autoscaler: AutoscalerOptions = Field(AutoscalerOptions(), description="Ray autoscaler settings",
                                          json_schema_extra={"defaultText": "defaults"})
