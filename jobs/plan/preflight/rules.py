"""What every preflight rule family shares: the findings it collects, the spec it reads, the
names of the keys a finding points at, and the rollout tensor-parallel check both frameworks'
rules start from."""

from __future__ import annotations

from jobs.contract.spec import GrpoSpec
from jobs.plan.findings import Finding

JOB = "gke-grpo:job."
GPU_NODES = "gke-grpo:gpu.nodes"
GPU_TYPE = "gke-grpo:gpu.type"
LUSTRE_CAPACITY = "gke-grpo:storage.lustre.capacityGib"
EXTRA = JOB + "extraOverrides"

# Highest rollout gpu_memory_utilization accepted: vLLM's fraction is of TOTAL GPU memory
# (grpo-frameworks.md), and the colocated trainer needs what is left.
MAX_GPU_MEMORY_UTILIZATION = 0.95
VERL_ENGINES = ("vllm", "sglang")
NEMO_RL_ENGINES = ("vllm",)
# verl 0.7.1 verl/trainer/ppo/core_algos.py kl_penalty_forward (read 2026-12-01 from the
# installed package): the estimators actor.kl_loss_type accepts.
VERL_KL_TYPES = ("kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3")
# Checkpoint with optimizer state: fp32 master weights + AdamW moments + bf16 weights, about 12
# bytes per parameter (grpo-frameworks.md: "A 32B checkpoint with optimizer state is about
# 390 GB (12 bytes x params)").
CHECKPOINT_BYTES_PER_PARAM = 12


class Rules:
    """A rule family's view of the run: the spec and the findings so far. The families are
    mixed into one checker (jobs/plan/preflight/__init__.py)."""

    def __init__(self, spec: GrpoSpec):
        self.spec = spec
        self.findings: list[Finding] = []

    def error(self, key: str, message: str) -> None:
        self.findings.append(Finding("error", key, message))

    def warning(self, key: str, message: str) -> None:
        self.findings.append(Finding("warning", key, message))

    def rollout_tp(self) -> bool:
        """Whether one rollout replica fits in the run's GPUs; both frameworks' rules check
        their own divisibility only when it does."""
        s = self.spec
        tp, n = s.rollout_tensor_parallel_size, s.total_gpus
        if tp > n:
            self.error(JOB + "rolloutTensorParallelSize",
                       f"is {tp}: one rollout replica asks for more GPUs than the run has "
                       f"({n} = {s.nodes} nodes x {s.gpus_per_node}); lower it or add nodes "
                       f"({GPU_NODES})")
            return False
        return True


def as_bool(value: str) -> bool:
    return str(value).strip().lower() in ("true", "1", "yes")


def as_int(value: str) -> int | None:
    try:
        return int(str(value).strip())
    except ValueError:
        return None


def override_int(overrides: dict[str, str], key: str, default: int) -> int:
    value = as_int(overrides[key]) if key in overrides else default
    return default if value is None else value


def divisors_text(heads: int, kv: int, *, replicate_kv: bool) -> str:
    fits = [tp for tp in range(1, heads + 1) if heads % tp == 0 and (
        kv % tp == 0 if kv >= tp or not replicate_kv else tp % kv == 0)]
    return "one of " + ", ".join(str(tp) for tp in fits)
