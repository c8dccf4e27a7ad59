"""Headroom the GPU worker leaves on its node, shared by the config rules and the KubeRay
component (one owner, no import of Pulumi's Kubernetes SDK from the config).

GKE's system DaemonSets on a GPU node (networking, logging, metrics, the device plugin, the
DCGM exporter, the NCCL installer's pause container) take this much: an estimate, not a
measurement; `kubectl describe node` shows the real figure on a running node.
"""

SYSTEM_RESERVE_CPU = 6
SYSTEM_RESERVE_MEMORY_GIB = 64
