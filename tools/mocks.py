"""Pulumi mocks for the offline preview and the tests: realistic computed outputs per type.

Every value a provider would compute and the program reads (ids, self links, endpoints, the
cluster CA, Lustre's mount point, the project number) is returned here, derived from the
resource's own inputs so that the output is deterministic: the same config always gives the
same preview, byte for byte.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import ipaddress
from typing import Any

import pulumi

COMPUTE = "https://www.googleapis.com/compute/v1"
# A fixed, obviously fake certificate: the kubeconfig needs a CA and the preview never dials.
FAKE_CA = base64.b64encode(
    b"-----BEGIN CERTIFICATE-----\nMOCK-CLUSTER-CA-FOR-OFFLINE-PREVIEW\n-----END CERTIFICATE-----\n"
).decode()


def _digits(seed: str, length: int) -> str:
    return str(int(hashlib.sha256(seed.encode()).hexdigest(), 16))[:length]


def project_number(project_id: str) -> str:
    return "1" + _digits(project_id, 11)


class GrpoMocks(pulumi.runtime.Mocks):
    """Outputs per resource type; anything not listed echoes its inputs, as most GCP fields do."""

    def __init__(self, project: str, region: str, deployed_outputs: dict[str, Any] | None = None):
        self.project = project
        self.region = region
        # The outputs of the stack's last update, as the engine's readStackOutputs returns them
        # (components/replacements.py); none: a stack never deployed.
        self.deployed_outputs = deployed_outputs or {}

    def call(self, args: pulumi.runtime.MockCallArgs):
        if args.token == "gcp:organizations/getProject:getProject":
            project = args.args.get("projectId") or self.project
            return {"projectId": project, "number": project_number(project),
                    "name": project, "id": f"projects/{project}"}, []
        if args.token == "pulumi:pulumi:readStackOutputs":
            return {"name": args.args.get("name"), "outputs": copy.deepcopy(self.deployed_outputs),
                    "secretOutputNames": []}, []
        if args.token == "gcp:organizations/getClientConfig:getClientConfig":
            return {"project": self.project, "region": self.region,
                    "accessToken": "mock-access-token", "id": "client-config"}, []
        return {}, []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        inputs: dict[str, Any] = copy.deepcopy(args.inputs)
        kind = args.typ
        name = inputs.get("name", args.name)
        project = inputs.get("project", self.project)
        state = dict(inputs)

        if kind == "gcp:compute/network:Network":
            resource_id = f"projects/{project}/global/networks/{name}"
            state.update(selfLink=f"{COMPUTE}/{resource_id}", numericId=_digits(resource_id, 19))
        elif kind == "gcp:compute/subnetwork:Subnetwork":
            region = inputs.get("region", self.region)
            resource_id = f"projects/{project}/regions/{region}/subnetworks/{name}"
            network = ipaddress.ip_network(inputs["ipCidrRange"])
            state.update(selfLink=f"{COMPUTE}/{resource_id}", gatewayAddress=str(network[1]),
                         fingerprint=_digits(resource_id, 12))
        elif kind == "gcp:compute/firewall:Firewall":
            resource_id = f"projects/{project}/global/firewalls/{name}"
            state.update(selfLink=f"{COMPUTE}/{resource_id}")
        elif kind == "gcp:compute/globalAddress:GlobalAddress":
            resource_id = f"projects/{project}/global/addresses/{name}"
            state.update(selfLink=f"{COMPUTE}/{resource_id}", address=inputs.get("address", "10.96.0.0"))
        elif kind == "gcp:compute/router:Router":
            region = inputs.get("region", self.region)
            resource_id = f"projects/{project}/regions/{region}/routers/{name}"
            state.update(selfLink=f"{COMPUTE}/{resource_id}")
        elif kind == "gcp:compute/routerNat:RouterNat":
            region = inputs.get("region", self.region)
            resource_id = f"{project}/{region}/{inputs.get('router')}/{name}"
        elif kind == "gcp:projects/service:Service":
            resource_id = f"{project}/{inputs.get('service')}"
        elif kind == "gcp:serviceaccount/account:Account":
            email = f"{inputs['accountId']}@{project}.iam.gserviceaccount.com"
            resource_id = f"projects/{project}/serviceAccounts/{email}"
            state.update(email=email, name=resource_id, member=f"serviceAccount:{email}",
                         uniqueId="1" + _digits(email, 20))
        elif kind == "gcp:projects/iAMMember:IAMMember":
            resource_id = f"{project}/{inputs.get('role')}/{inputs.get('member')}"
            state.update(etag="BwY" + _digits(resource_id, 8))
        elif kind == "gcp:container/cluster:Cluster":
            location = inputs.get("location", self.region)
            resource_id = f"projects/{project}/locations/{location}/clusters/{name}"
            state.update(
                selfLink=f"https://container.googleapis.com/v1/{resource_id}",
                endpoint="34.118.0." + str(int(_digits(resource_id, 3)) % 250 + 2),
                masterAuth={"clusterCaCertificate": FAKE_CA, "clientCertificateConfig": {
                    "issueClientCertificate": False}},
                masterVersion=inputs.get("minMasterVersion", "1.35"),
                # The DNS-based endpoint GKE gives every cluster: gke-<hash>.<location>.gke.goog.
                controlPlaneEndpointsConfig={
                    **(inputs.get("controlPlaneEndpointsConfig") or {}),
                    "dnsEndpointConfig": {
                        **((inputs.get("controlPlaneEndpointsConfig") or {}).get("dnsEndpointConfig") or {}),
                        "endpoint": f"gke-{hashlib.sha256(resource_id.encode()).hexdigest()[:32]}"
                                    f"-{project_number(project)}.{location}.gke.goog"}},
            )
        elif kind == "gcp:container/nodePool:NodePool":
            location = inputs.get("location", self.region)
            resource_id = f"projects/{project}/locations/{location}/clusters/{inputs.get('cluster')}/nodePools/{name}"
        elif kind == "gcp:lustre/instance:Instance":
            resource_id = f"projects/{project}/locations/{inputs.get('location')}/instances/{inputs.get('instanceId')}"
            state.update(mountPoint=f"10.96.0.5@tcp:/{inputs.get('filesystem')}", name=resource_id)
        elif kind == "gcp:storage/bucket:Bucket":
            resource_id = name
            state.update(url=f"gs://{name}", selfLink=f"https://www.googleapis.com/storage/v1/b/{name}")
        elif kind.startswith("kubernetes:"):
            metadata = dict(inputs.get("metadata") or {})
            metadata.setdefault("name", args.name)
            namespace = metadata.get("namespace")
            resource_id = f"{namespace}/{metadata['name']}" if namespace else metadata["name"]
            metadata["uid"] = _uuid(f"{kind}/{resource_id}")
            state["metadata"] = metadata
        else:
            resource_id = f"{name}"
        return resource_id, state


def _uuid(seed: str) -> str:
    h = hashlib.sha256(seed.encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"
