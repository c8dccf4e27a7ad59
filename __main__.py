"""gke-grpo: one environment stack of GRPO fine-tuning infrastructure on GKE.

Thin on purpose: read and validate the whole stack config (no resource is registered when it
is invalid), build the components, export what operators need.
"""

import pulumi

from components.config import load_stack_config, read_pulumi_config
from components.networks import GpuNetworks

# Raises ConfigError (a pulumi.RunError: printed without a traceback) listing every problem,
# before any resource exists.
config = load_stack_config(*read_pulumi_config(), stack=pulumi.get_stack())

networks = GpuNetworks("networks", config)

pulumi.export("clusterNetwork", networks.cluster_network.name)
pulumi.export("gvnicNetwork", networks.gvnic_network.name)
pulumi.export("rdmaNetwork", networks.rdma_network.name)
pulumi.export("rdmaSubnets", [subnet.name for subnet in networks.rdma_subnets])
