"""What a config change does to the run's identity: the run id is a hash of the whole run spec
(jobs/contract/spec.py GrpoSpec.run_id), so any changed field starts a new run, with a new, empty
checkpoint directory. That is right for a change of what is computed; for a field the framework
ignores under the new spec it is a surprise, and preflight says so.

    identity_changes(deployed, new) -> list[IdentityChange]

The fields are kept in the identity (rather than dropped when inert) on purpose: dropping them
would change the run id of every stack that sets them today, which is the very surprise this
avoids; and a field that is inert now becomes live again when its condition changes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from jobs.contract.spec import GrpoSpec

# GrpoSpec field -> the stack config key that sets it (components/run_spec.py).
CONFIG_KEYS = {
    "micro_batch_size_per_gpu": "gke-grpo:job.microBatchSizePerGpu",
    "log_prob_micro_batch_size_per_gpu": "gke-grpo:job.logProbMicroBatchSizePerGpu",
    "max_tokens_per_gpu": "gke-grpo:job.maxTokensPerGpu",
    "dynamic_batch_size": "gke-grpo:job.dynamicBatchSize",
    "wandb": "gke-grpo:wandbApiKey",
    "experiment_name": "gke-grpo:job.experimentName",
    "model": "gke-grpo:job.model",
    "model_revision": "gke-grpo:job.modelRevision",
    "learning_rate": "gke-grpo:job.learningRate",
    "nodes": "gke-grpo:gpu.nodes",
    "image": "data/versions.yaml (the framework image)",
}

# Fields the framework does not read under the new spec: (field, applies, why).
INERT: tuple[tuple[str, Callable[[GrpoSpec], bool], str], ...] = (
    # verl 0.7.1 verl/workers/actor/dp_actor.py update_policy: with use_dynamic_bsz the micro
    # batches come from prepare_dynamic_batch(max_token_len=ppo_max_token_len_per_gpu); only the
    # else branch splits by ppo_micro_batch_size_per_gpu.
    ("micro_batch_size_per_gpu", lambda s: s.framework == "verl" and s.dynamic_batch_size,
     "verl splits micro batches by tokens under dynamicBatchSize (dp_actor.py update_policy @v0.7.1)"),
    # compute_log_prob: meta_info use_dynamic_bsz is rollout/ref log_prob_use_dynamic_bsz, which
    # follows the actor's (${oc.select:actor_rollout_ref.actor.use_dynamic_bsz,false} in
    # verl/trainer/config/_generated_ppo_trainer.yaml @v0.7.1).
    ("log_prob_micro_batch_size_per_gpu", lambda s: s.framework == "verl" and s.dynamic_batch_size,
     "verl's log-prob passes split by tokens under dynamicBatchSize (dp_actor.py compute_log_prob @v0.7.1)"),
    # jobs/plan/render.py passes ppo_max_token_len_per_gpu only with dynamic batching.
    ("max_tokens_per_gpu", lambda s: s.framework == "verl" and not s.dynamic_batch_size,
     "it is rendered only with dynamicBatchSize (jobs/plan/render.py)"),
    # The W&B logger changes where metrics go, not what is trained.
    ("wandb", lambda s: True, "W&B logging does not change what is trained"),
)


@dataclass(frozen=True)
class IdentityChange:
    field: str
    deployed: object
    new: object
    inert_because: str | None       # the framework ignores the field under the new spec

    @property
    def key(self) -> str:
        return CONFIG_KEYS.get(self.field, f"the run spec's {self.field}")


def identity_changes(deployed: GrpoSpec, new: GrpoSpec) -> list[IdentityChange]:
    """The fields that differ (those the run id hashes), each with why it is inert, if it is."""
    before, after = dataclasses.asdict(deployed), dataclasses.asdict(new)
    changes = []
    for name in sorted(after):
        if name in ("attempt", "memory_check") or before.get(name) == after[name]:
            continue
        why = next((reason for field, applies, reason in INERT if field == name and applies(new)), None)
        changes.append(IdentityChange(name, before.get(name), after[name], why))
    return changes


def describe_identity_change(deployed: GrpoSpec, new: GrpoSpec) -> list[tuple[str, str]]:
    """(level, line) for preflight: a note that the run id changes and why, and a warning per
    changed field the framework ignores (it starts a new run for nothing)."""
    if deployed.run_id == new.run_id:
        return []
    changes = identity_changes(deployed, new)
    keys = ", ".join(change.key for change in changes) or "the run spec"
    lines = [("note", f"the run id changes from {deployed.run_id} (deployed) to {new.run_id} "
                      f"({keys}): the next attempt starts a new run with an empty checkpoint "
                      f"directory; the deployed run's checkpoints stay in {deployed.checkpoint_dir}")]
    for change in changes:
        if change.inert_because:
            lines.append(("warning", f"{change.key}: changed ({change.deployed!r} -> {change.new!r}) "
                                     f"but {change.inert_because}: the change starts a new run and "
                                     "computes the same; set it back to keep resuming the deployed run"))
    return lines
