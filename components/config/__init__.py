"""Typed stack configuration: the one owner of every default, derived value and rule.

A stack's config (``Pulumi.<stack>.yaml``) is parsed and validated here as a whole before the
program registers a single resource. Problems are collected, never raised one at a time: a user
with three mistakes sees three lines, each naming the key as they would write it
(``gke-grpo:gpu.reservation.name``), the value they gave and what is allowed.

The package, by area:

- ``facts``: sourced facts (machine shapes, Lustre tiers, GKE version gates), read from data/;
- ``patterns``: name patterns, Kubernetes quantities, GKE version comparison;
- ``types``: the single-field rules as pydantic types (names, CIDRs, ranges, patterns, times),
  each with the message a user sees; ``timeformats``: RFC 3339 times and RFC 5545 RRULEs;
- ``models``: the pydantic model of each ``gke-grpo:<area>``, its fields annotated with those types;
- ``keys``: the areas, secrets and scalar keys of a stack config;
- ``rules``: the rules that span several keys, in one place (ceilings come from ``limits``:
  data/config-limits.yaml);
- ``stack``: ``StackConfig`` (derived values, one place each) and ``ResourceNames``;
- ``loader``: ``load_stack_config`` (every problem at once; a refused value is dropped so the
  rules still run on its valid siblings) and ``read_pulumi_config``;
- ``sidecar``: the gcsfuse sidecar's limits, which the rules and components/storage.py share.

Every name other code imports from ``components.config`` is re-exported here.
"""

from components.config.capacity import CapacityPlan, PlannedSource, capacity_plan
from components.config.facts import (
    DEFAULT_GKE_MINOR,
    DEFAULT_KUBERAY_CHART_VERSION,
    FLEX_START_MAX_RUN_SECONDS,
    FLEX_START_MIN_GKE_VERSION,
    KUBERAY_CRD_DIR,
    LUSTRE_CSI_MIN_GKE_VERSION,
    LUSTRE_MODERN_PORT_MIN_GKE_VERSION,
    LUSTRE_TIERS,
    MACHINE_SHAPES,
    PROVISIONING_MODELS,
    SUPPORTED_KUBERAY_CHARTS,
    LustreTier,
    MachineShape,
    predefined_machine,
)
from components.config.keys import (
    AREAS,
    GCP_REQUIRED,
    OFFLINE_SECRET_KEYS,
    REQUIRED_AREAS,
    SCALAR_KEYS,
    SECRET_KEYS,
    TOP_LEVEL_KEYS,
)
from components.config.loader import load_stack_config, read_pulumi_config
from components.config.models import (
    AuthorizedNetwork,
    CapacitySource,
    ClusterConfig,
    ExportConfig,
    GcsStorage,
    GpuConfig,
    HeadPool,
    HeadResources,
    HealthGateConfig,
    JobConfig,
    KubeRayConfig,
    LustreStorage,
    MaintenanceExclusion,
    MaintenanceWindow,
    NetworkConfig,
    Reservation,
    StorageConfig,
    WorkerResources,
)
from components.config.patterns import (
    _RFC3339,
    cpu_cores,
    quantity_bytes,
    version_at_least,
)
from components.config.problems import HIDDEN, NOT_SHOWN, PROJECT, ConfigError, Problem
from components.config.rules import _Rules
from components.config.stack import ResourceNames, StackConfig

__all__ = [
    "AREAS",
    "DEFAULT_GKE_MINOR",
    "DEFAULT_KUBERAY_CHART_VERSION",
    "FLEX_START_MAX_RUN_SECONDS",
    "FLEX_START_MIN_GKE_VERSION",
    "GCP_REQUIRED",
    "HIDDEN",
    "KUBERAY_CRD_DIR",
    "LUSTRE_CSI_MIN_GKE_VERSION",
    "LUSTRE_MODERN_PORT_MIN_GKE_VERSION",
    "LUSTRE_TIERS",
    "MACHINE_SHAPES",
    "NOT_SHOWN",
    "OFFLINE_SECRET_KEYS",
    "PROJECT",
    "PROVISIONING_MODELS",
    "REQUIRED_AREAS",
    "SCALAR_KEYS",
    "SECRET_KEYS",
    "SUPPORTED_KUBERAY_CHARTS",
    "TOP_LEVEL_KEYS",
    "_RFC3339",
    "AuthorizedNetwork",
    "CapacityPlan",
    "CapacitySource",
    "ClusterConfig",
    "ConfigError",
    "ExportConfig",
    "GcsStorage",
    "GpuConfig",
    "HeadPool",
    "HeadResources",
    "HealthGateConfig",
    "JobConfig",
    "KubeRayConfig",
    "LustreStorage",
    "LustreTier",
    "MachineShape",
    "MaintenanceExclusion",
    "MaintenanceWindow",
    "NetworkConfig",
    "PlannedSource",
    "Problem",
    "Reservation",
    "ResourceNames",
    "StackConfig",
    "StorageConfig",
    "WorkerResources",
    "_Rules",
    "capacity_plan",
    "cpu_cores",
    "load_stack_config",
    "predefined_machine",
    "quantity_bytes",
    "read_pulumi_config",
    "version_at_least",
]
