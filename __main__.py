"""gke-grpo: one environment stack of GRPO fine-tuning infrastructure on GKE.

Thin on purpose: read and validate the whole stack config (no resource is registered when it
is invalid), build the components, export what operators need. Each component takes its own
args dataclass (<Component>Args), made from the config and its siblings' outputs by the
`*_args` function beside it; no component sees the whole config.
"""

import json

import pulumi

from components.autopilot_limits import autopilot_limit_output
from components.cluster import GkeCluster, gke_cluster_args
from components.config import ConfigError, load_stack_config, read_pulumi_config
from components.cost import estimate_cost, partial_grant_line
from components.gpu_capacity import GpuCapacity, gpu_capacity_args
from components.grpo_job import GrpoJob, grpo_job_args, require_preflight, run_plan
from components.head_code import head_code_files
from components.kuberay import KubeRay, kuberay_args
from components.monitoring import Monitoring, monitoring_args
from components.networks import GpuNetworks, gpu_networks_args
from components.node_service_account import NodeServiceAccount, node_service_account_args
from components.project_services import ProjectServices, project_services_args
from components.releases import keep_deployed_release, release_change_warning
from components.replacements import (
    IDENTITY_OUTPUT,
    compare,
    data_loss_problems,
    read_deployed,
    run_warnings,
    stack_identity,
)
from components.run_spec import preflight_findings, spec_from_config
from components.storage import SharedStorage, shared_storage_args

# Raises ConfigError (a pulumi.RunError: printed without a traceback) listing every problem,
# before any resource exists.
config = load_stack_config(*read_pulumi_config(), stack=pulumi.get_stack())
# The stack's last outputs (an engine call, no resource): what a change replaces, and the
# framework release it was deployed with, which it keeps until job.release says otherwise.
deployed = read_deployed()
config, kept_release = keep_deployed_release(config, deployed.run_spec)
if kept_release:
    pulumi.log.info(kept_release)
spec = spec_from_config(config)
if config.job.enabled:
    require_preflight(preflight_findings(config, spec))
# What this config would replace of the deployed stack, before anything is registered: a data
# store only with storage.allowDataLoss; node pools and networks under a live run, said.
identity = stack_identity(config)
replacements = compare(deployed.identity, identity)
refused = data_loss_problems(replacements, config.storage.allow_data_loss)
if refused:
    raise ConfigError(refused)
for warning in run_warnings(replacements, deployed.checkpoint_dir or spec.checkpoint_dir,
                            config.storage.allow_data_loss):
    pulumi.log.warn(warning)
moved = release_change_warning(config, spec, deployed.run_spec, deployed.checkpoint_dir)
if moved:
    pulumi.log.warn(moved)
if deployed.unread:
    pulumi.log.info(f"replacements not checked: {deployed.unread}")
if config.storage.allow_data_loss:
    pulumi.log.warn("storage.allowDataLoss is true: the bucket or Lustre instance is NOT protected "
                    "and a destroy deletes its objects; remove it after this update")

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
# What managed Prometheus scrapes (the Ray pods and the run driver), the dashboard and the alerts.
monitoring = Monitoring("monitoring", monitoring_args(
    config, kubernetes_provider=cluster.provider, namespace=cluster.namespace_name,
    depends_on=[kuberay.ray_cluster], services=apis))
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
# The capacity waterfall, its rates and the GPU workers' idle timeout (the jobs CLI reads it).
pulumi.export("gpuCapacity", capacity.stack_output)
pulumi.export("getCredentials", pulumi.Output.concat(
    "gcloud container clusters get-credentials ", cluster.cluster.name,
    " --location ", cluster.cluster.location, " --project ", config.project,
    " --dns-endpoint" if config.cluster.control_plane_access == "dns" else ""))
pulumi.export("sharedClaim", storage.claim_name)
pulumi.export("sharedMountPath", storage.mount_path)
pulumi.export("workloadServiceAccount", storage.service_account_name)
# Which Kubernetes service account each Ray pod group runs as, and every right it holds,
# KubeRay's own autoscaler Role included (bound to the head's alone: components/ray_rbac.py).
pulumi.export("rayPodAccounts", kuberay.pod_accounts)
pulumi.export("rayClusterName", kuberay.ray_cluster_name)
pulumi.export("rayNamespace", kuberay.namespace)
pulumi.export("rayDashboardService", kuberay.head_service)
pulumi.export("rayDashboardPortForward", kuberay.port_forward_command)
pulumi.export("rayTokenAuthentication", kuberay.token_auth_message)
# The Cloud Monitoring dashboard (none with monitoring.enabled false); status and report print it.
pulumi.export("dashboardUrl", monitoring.dashboard_url)
pulumi.export("runId", spec.run_id)
pulumi.export("runCheckpointDir", spec.checkpoint_dir)
pulumi.export("submissionId", job.submission_id)
# The run spec itself: the jobs CLI submits and reports the deployed run from it (docs/jobs-cli.md).
pulumi.export("runSpec", json.loads(spec.to_json()))
pulumi.export("runUpdatePolicy", job.update_policy)
cost_estimate = estimate_cost(config)
pulumi.export("costEstimate", cost_estimate)
if "flexStartPartialGrant" in cost_estimate:
    # Said on every preview: what a gang assembling on flex-start may cost before it runs.
    pulumi.log.warn(partial_grant_line(cost_estimate["flexStartPartialGrant"]))
# Read back by the next preview or update (and the CLI's preflight) to say what a change replaces.
pulumi.export(IDENTITY_OUTPUT, identity)
if config.autopilot:
    # The per-pod bound the GPU worker (with its gcsfuse sidecar) is sized against and checked by.
    pod_limit = autopilot_limit_output(config.gpu.type, config.gpus_per_node)
    pulumi.export("autopilotPodLimit", pod_limit)
    if pod_limit is not None and not pod_limit["confirmed"]:
        pulumi.log.warn(f"Autopilot's per-pod maximum for {config.gpus_per_node} x {config.gpu.type} "
                        f"is UNCONFIRMED. The GPU worker pod is sized within {pod_limit['source']} "
                        f"({pod_limit['cpu']:g} CPUs, {pod_limit['memoryGib']:g} GiB)")
