"""gke-grpo: one environment stack of GRPO fine-tuning infrastructure on GKE.

Thin on purpose: read and validate the whole stack config (no resource is registered when it
is invalid), build the components, export what operators need. Each component takes its own
args dataclass (<Component>Args), made from the config and its siblings' outputs by the
`*_args` function beside it; no component sees the whole config.
"""

import json

import pulumi

from components.cluster import GkeCluster, gke_cluster_args
from components.config import load_stack_config, read_pulumi_config
from components.cost import estimate_cost
from components.gpu_capacity import GpuCapacity, gpu_capacity_args
from components.grpo_job import GrpoJob, grpo_job_args, require_preflight, run_plan
from components.head_code import head_code_files
from components.kuberay import KubeRay, kuberay_args
from components.networks import GpuNetworks, gpu_networks_args
from components.node_service_account import NodeServiceAccount, node_service_account_args
from components.project_services import ProjectServices, project_services_args
from components.run_spec import spec_from_config
from components.storage import SharedStorage, shared_storage_args

# Raises ConfigError (a pulumi.RunError: printed without a traceback) listing every problem,
# before any resource exists.
config = load_stack_config(*read_pulumi_config(), stack=pulumi.get_stack())
spec = spec_from_config(config)
if config.job.enabled:
    require_preflight(spec, config.gpu.provisioning_model,
                      config.storage.lustre.throughput_tier if config.storage.lustre else None)

# A fresh project: the APIs first; every resource that calls one depends on them.
apis = ProjectServices("apis", project_services_args(config)).services
networks = GpuNetworks("networks", gpu_networks_args(config, services=apis))
node_account = NodeServiceAccount("node-sa", node_service_account_args(config, services=apis))
cluster = GkeCluster("cluster", gke_cluster_args(config, networks, node_service_account=node_account,
                                                  services=apis))
capacity = GpuCapacity("gpu", gpu_capacity_args(config, cluster, networks))
storage = SharedStorage("storage", shared_storage_args(
    config, cluster_network=networks.cluster_network, namespace=cluster.namespace_name,
    kubernetes_provider=cluster.provider, services=apis))
secrets = pulumi.Config("gke-grpo")
kuberay = KubeRay("kuberay", kuberay_args(
    config, networks=networks, cluster=cluster, capacity=capacity, storage=storage,
    hf_token=secrets.require_secret("hfToken"), wandb_api_key=secrets.get_secret("wandbApiKey"),
    head_code=head_code_files(run_plan(spec, config))))
# The submitter runs where the head runs: non-Spot CPU nodes.
job = GrpoJob("job", grpo_job_args(config, spec, kuberay,
                                   submitter_node_selector=cluster.head_node_selector))

pulumi.export("clusterNetwork", networks.cluster_network.name)
pulumi.export("gvnicNetwork", networks.gvnic_network.name)
pulumi.export("rdmaNetwork", networks.rdma_network.name)
pulumi.export("rdmaSubnets", [subnet.name for subnet in networks.rdma_subnets])
pulumi.export("clusterName", cluster.cluster.name)
pulumi.export("clusterLocation", cluster.cluster.location)
pulumi.export("clusterEndpoint", cluster.endpoint)
pulumi.export("nodeServiceAccount", node_account.email)
pulumi.export("kubeconfig", cluster.kubeconfig)
pulumi.export("workloadNamespace", cluster.namespace_name)
pulumi.export("gpuNodePool", capacity.pool_name)
pulumi.export("gpuPodNodeSelector", capacity.pod_node_selector)
pulumi.export("getCredentials", pulumi.Output.concat(
    "gcloud container clusters get-credentials ", cluster.cluster.name,
    " --location ", cluster.cluster.location, " --project ", config.project,
    " --dns-endpoint" if config.cluster.control_plane_access == "dns" else ""))
pulumi.export("sharedClaim", storage.claim_name)
pulumi.export("sharedMountPath", storage.mount_path)
pulumi.export("workloadServiceAccount", storage.service_account_name)
pulumi.export("rayClusterName", kuberay.ray_cluster_name)
pulumi.export("rayNamespace", kuberay.namespace)
pulumi.export("rayDashboardService", kuberay.head_service)
pulumi.export("rayDashboardPortForward", kuberay.port_forward_command)
pulumi.export("rayTokenAuthentication", kuberay.token_auth_message)
pulumi.export("runId", spec.run_id)
pulumi.export("runCheckpointDir", spec.checkpoint_dir)
pulumi.export("submissionId", job.submission_id)
# The run spec itself: the jobs CLI submits and reports the deployed run from it (docs/jobs-cli.md).
pulumi.export("runSpec", json.loads(spec.to_json()))
pulumi.export("runUpdatePolicy", job.update_policy)
pulumi.export("costEstimate", estimate_cost(config))
