"""Headroom the GPU worker leaves on its node, shared by the config rules and the KubeRay
component (one owner, no import of Pulumi's Kubernetes SDK from the config).

GKE's system DaemonSets on a GPU node (networking, logging, metrics, the device plugin, the
DCGM exporter, the NCCL installer's pause container) take this much: an estimate, not a
measurement; `kubectl describe node` shows the real figure on a running node.
"""

import math

SYSTEM_RESERVE_CPU = 6
SYSTEM_RESERVE_MEMORY_GIB = 64

# The Ray autoscaler's sidecar in the head pod (components/ray_pods.py autoscaler_options):
# KubeRay's defaults (500m CPU, 512Mi, request = limit; KubeRay v1.7.0 common/pod.go
# BuildAutoscalerContainer), stated so the head's sizing rules count them, plus the 1 GiB of
# ephemeral storage Autopilot gives a container that does not ask.
AUTOSCALER_CPU, AUTOSCALER_MEMORY_GIB, AUTOSCALER_EPHEMERAL_GIB = 0.5, 0.5, 1


def worker_size_limit(allocatable_cpu: float, allocatable_memory_gib: float,
                      sidecar_cpu: float = 0, sidecar_memory_gib: float = 0) -> tuple[int, int]:
    """The most CPU and GiB a GPU worker container can request on its node: the machine's
    allocatable minus the system reserve and the gcsfuse sidecar. The one place this is
    computed: the config rules cap a configured size with it, the KubeRay component sizes the
    default worker with it."""
    return (math.floor(allocatable_cpu - SYSTEM_RESERVE_CPU - sidecar_cpu),
            math.floor(allocatable_memory_gib - SYSTEM_RESERVE_MEMORY_GIB - sidecar_memory_gib))
