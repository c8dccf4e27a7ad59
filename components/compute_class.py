"""ComputeClass: the GPU capacity waterfall as GKE runs it. A custom ComputeClass
(``cloud.google.com/v1``) whose priorities are the GPU node pools, one per capacity source, in
the order of ``gke-grpo:gpu.capacity``: GKE's cluster autoscaler scales up the first pool that
can supply a pending GPU worker pod, and falls to the next when it cannot (GKE "About custom
ComputeClasses", https://docs.cloud.google.com/kubernetes-engine/docs/concepts/
about-custom-compute-classes, updated 2026-04-13, read 2026-12-01).

Standard clusters only (the config refuses a waterfall on Autopilot: components/config/
gpu_rules.py says why). The pools are this program's own (``nodepools`` rules, auto-creation
off); they carry the class's node label and taint themselves (components/gpu_capacity.py),
which GKE requires of manually created pools, and the GPU worker pods select the class with
``nodeSelector: cloud.google.com/compute-class``. The spec is validated in tests against a
schema written from Google's reference (tests/fixtures/computeclass.schema.json).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

CLASS_LABEL = "cloud.google.com/compute-class"


def compute_class_spec(pool_names: list[str]) -> dict:
    """The ComputeClass spec: one `nodepools` priority per pool, in order."""
    return {
        "priorities": [{"nodepools": [pool]} for pool in pool_names],
        # The pools exist; GKE must not create others (the RDMA networks, the GPU taint and the
        # reservation affinity are the pools' own).
        "nodePoolAutoCreation": {"enabled": False},
        # Stated: the default changed at GKE 1.33 (ScaleUpAnyway before). Nothing but these
        # pools can run a GPU worker, so a node of another kind would only cost money.
        "whenUnsatisfiable": "DoNotScaleUp",
        # Stated: never move a running GPU worker to a node of a higher priority that becomes
        # available (it would stop the run's NCCL job); the next run gets the better source.
        "activeMigration": {"optimizeRulePriority": False},
    }


@dataclass(frozen=True)
class ComputeClassArgs:
    name: str                          # cluster-scoped: named after the cluster
    pool_names: list[str]              # in priority order
    kubernetes_provider: k8s.Provider
    pools: list[pulumi.Resource]       # created first (GKE resolves the names)


class ComputeClass(pulumi.ComponentResource):
    resource: k8s.apiextensions.CustomResource
    name: str

    def __init__(self, name: str, args: ComputeClassArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gke-grpo:components:ComputeClass", name, None, opts)
        self.name = args.name
        self.resource = k8s.apiextensions.CustomResource(
            f"{name}-compute-class",
            api_version="cloud.google.com/v1",
            kind="ComputeClass",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=args.name, labels={"app.kubernetes.io/part-of": "gke-grpo"}),
            spec=compute_class_spec(args.pool_names),
            opts=pulumi.ResourceOptions(parent=self, provider=args.kubernetes_provider,
                                        depends_on=list(args.pools)))
        self.register_outputs({"name": self.name, "priorities": args.pool_names})
