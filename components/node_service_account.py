"""NodeServiceAccount: the GKE nodes' own least-privilege Google service account.

Never the Compute Engine default account (CIS GKE Benchmark 5.2.1: it holds Editor on the
project). The account gets `roles/container.defaultNodeServiceAccount` only: what nodes need to
write logs and metrics and read their own configuration (GKE "Use least privilege IAM service
accounts", read 2026-12-01). No `roles/artifactregistry.reader`: every image the program runs
is public (Docker Hub, nvcr.io, quay.io, the public gce-ai-infra and gke.gcr.io registries;
data/versions.yaml), so the nodes read no private registry. Add it here with the registry's
project if an image moves to a private Artifact Registry.

Workloads do not use this identity: they run as their Kubernetes service account through
Workload Identity Federation (GKE_METADATA on every pool).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from components.config import StackConfig

NODE_ROLES = ("roles/container.defaultNodeServiceAccount",)


@dataclass(frozen=True)
class NodeServiceAccountArgs:
    project: str
    account_id: str
    display_name: str
    services: list[pulumi.Resource]     # the APIs (ProjectServices) the account needs first


def node_service_account_args(config: StackConfig, services: list[pulumi.Resource]) -> NodeServiceAccountArgs:
    return NodeServiceAccountArgs(
        project=config.project, account_id=config.node_service_account_id,
        display_name=f"GKE nodes of {config.cluster.name} (gke-grpo {config.stack})",
        services=list(services))


class NodeServiceAccount(pulumi.ComponentResource):
    account: gcp.serviceaccount.Account
    email: pulumi.Output[str]
    grants: list[gcp.projects.IAMMember]

    def __init__(self, name: str, args: NodeServiceAccountArgs,
                 opts: pulumi.ResourceOptions | None = None):
        super().__init__("gke-grpo:components:NodeServiceAccount", name, None, opts)
        self.account = gcp.serviceaccount.Account(
            f"{name}",
            account_id=args.account_id,
            project=args.project,
            display_name=args.display_name,
            opts=pulumi.ResourceOptions(parent=self, depends_on=args.services),
        )
        self.email = self.account.email
        member = pulumi.Output.concat("serviceAccount:", self.account.email)
        self.grants = [
            gcp.projects.IAMMember(
                f"{name}-{role.split('/')[-1].replace('.', '-').lower()}",
                project=args.project,
                role=role,
                member=member,
                opts=pulumi.ResourceOptions(parent=self, depends_on=args.services),
            )
            for role in NODE_ROLES
        ]
        self.register_outputs({"email": self.email})
