"""Preflight: every rule of shared/reference/grpo-frameworks.md checked on a GRPO spec before
anything is created or submitted.

    check(spec) -> list[Finding]
    gke-grpo preflight --stack STACK [--config-file FILE]       (jobs/cli/preflight.py)

A Finding names the key as a user writes it (``gke-grpo:job.microBatchSizePerGpu``) and says what
to change. Errors stop a run; warnings are printed and do not. ``check`` is pure and fast (no
verl, no hydra, no network: the verl key snapshot and the NeMo RL key list are committed files
read once), because it also runs inside ``pulumi up`` before any resource is registered.

What is checked:
- both frameworks: value ranges (learning rate > 0, 0 < rollout gpu memory utilization <= 0.95,
  KL coefficient >= 0, lengths, batch sizes and steps > 0); generations per prompt > 1;
  checkpoints on (cadence > 0, keep >= 1); prompt + response within the model's context;
  one prompts-per-step batch fits in GSM8K's training rows (the train split less the held-out
  validation slice); rollout tensor parallelism within the run's GPUs; checkpoint size x the
  most checkpoints that can accumulate (jobs/head/checkpoints.py checkpoints_on_disk) against the
  Lustre capacity (warning); model and dataset revisions pinned (warning when absent);
  tensor-parallel sizes divide the model's attention and KV heads (data/model-shapes.yaml):
  vLLM rollout TP as vLLM's Qwen2Attention requires (heads % TP == 0; KV heads % TP == 0, or
  TP % KV heads == 0 when TP exceeds them), NeMo RL training TP both exactly
  (nemo_rl/models/dtensor/parallelize.py, v0.5.0), verl Ulysses as verl's monkey_patch.py;
  gke-grpo:job.extraOverrides: syntax, keys the stack config owns, keys unknown to the chosen
  release's config (verl: data/verl-<version>-config.json; NeMo RL:
  data/nemo-rl-<version>-keys.txt, ``+key=`` for new keys), and a key of another supported
  release named as renamed or removed; OmegaConf resolvers beyond a small
  allowlist, in extraOverrides and in every rendered value (jobs/plan/interpolations.py).
- verl (N = nodes x GPUs per node): rollout engine vllm | sglang; (prompts x n) % N == 0;
  prompts >= mini batch; mini x n / N a positive integer divisible by the per-GPU micro batch
  (verl floors silently: exactness required); N % rollout TP == 0; the rollout TP fits in a node
  or is a multiple of the GPUs per node; generation colocated (no generation nodes); KL type one
  of verl's; Ulysses sequence parallelism needs sequence packing (use_remove_padding) and
  divides the GPUs; no training TP or sequence parallelism (FSDP only); with a dynamic batch
  size the micro-batch rule is verl's token budget instead (maxTokensPerGpu >= prompt +
  response, verl/utils/seqlen_balancing.py).
- NeMo RL: engine vllm; B = prompts x generations divisible by the global batch; training GPUs
  (all, or the nodes left by separate generation) / (TP x CP x PP) an integer dp; global batch
  % dp == 0; without sequence packing or dynamic batching (global batch / dp) % micro batch == 0;
  vLLM GPUs % (vLLM TP x PP) == 0; megatron xor dtensor; separate generation leaves training
  nodes; generation nodes only when generation is not colocated; dynamic batching excludes
  sequence packing (nemo_rl/models/policy/lm_policy.py, v0.5.0); no Ulysses, no
  maxTokensPerGpu (verl keys); W&B is off (warning when a key is configured).
- split layout (gke-grpo:job.layout, layout_rules.py): the release ships the asynchronous
  trainer; the pools add up to the run's nodes; verl's batch arithmetic over the TRAINER pool's
  GPUs and vLLM's over the ROLLOUT pool's, fully-async's prompts per weight version; NeMo RL
  async GRPO's run length (totalSteps within one pass over the data, no totalEpochs).
- GPU memory (jobs/plan/gpu_memory.py, docs/memory-planner.md): the estimated peak per GPU of each
  colocated phase; a warning above 85 %, an error above 100 % (a warning with
  gke-grpo:job.memoryCheck: warn); vLLM's KV cache must hold one whole sequence.

Exit codes of ``main``: 0 no errors (warnings may be printed); 2 the stack config is invalid or
unreadable, or preflight found errors.
"""

from __future__ import annotations

from jobs.contract.spec import GrpoSpec
from jobs.plan.findings import Finding
from jobs.plan.preflight.common_rules import CommonRules
from jobs.plan.preflight.layout_rules import LayoutRules
from jobs.plan.preflight.nemo_rl_rules import NemoRlRules
from jobs.plan.preflight.override_rules import OverrideRules, key_file, nemo_rl_keys, release_keys, verl_keys
from jobs.plan.preflight.rules import JOB
from jobs.plan.preflight.verl_rules import VerlRules

__all__ = ["check", "errors", "key_file", "nemo_rl_keys", "release_keys", "verl_keys"]


class _Checker(CommonRules, VerlRules, NemoRlRules, OverrideRules, LayoutRules):
    def run(self) -> list[Finding]:
        s = self.spec
        self.credentials_in_overrides()
        self.resolvers_in_overrides()
        usable = self.values()
        self.checkpoints()
        self.dataset()
        self.revisions()
        if usable:
            self.model()
        overrides = self.extras()
        if s.framework == "verl":
            # A split run's batch and rollout arithmetic is per pool (layout_rules.py).
            self.verl(usable and not s.split)
        elif s.framework == "nemo-rl":
            self.nemo_rl(usable, overrides)
        else:
            self.error(JOB + "framework", f"is {s.framework!r}; one of 'verl', 'nemo-rl'")
        if s.split and s.framework in ("verl", "nemo-rl"):
            usable = self.layout(usable) and usable
        if usable and s.framework in ("verl", "nemo-rl"):
            from jobs.plan.gpu_memory import memory_findings  # GPU memory (docs/memory-planner.md)
            self.findings.extend(memory_findings(s, s.memory_check))
        return self.findings


def check(spec: GrpoSpec) -> list[Finding]:
    """Every preflight rule on ``spec``: errors first, then warnings, in rule order. A spec of a
    release no row of data/versions.yaml describes (a run spec written by another version of
    this program) is one error: nothing can be rendered or checked for it."""
    from jobs.plan.versions import UnsupportedRelease, load_versions

    try:
        load_versions().for_release(spec.framework, spec.framework_version)
    except UnsupportedRelease as exc:
        if spec.framework in ("verl", "nemo-rl"):
            return [Finding("error", JOB + "release", str(exc))]
    findings = _Checker(spec).run()
    return [f for f in findings if f.level == "error"] + [f for f in findings if f.level == "warning"]


def errors(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.level == "error"]
