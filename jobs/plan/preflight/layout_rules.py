"""The split layout's rules (gke-grpo:job.layout kind split, docs/layouts.md): the release ships the
asynchronous trainer, the pools add up to the run's nodes, each framework's own arithmetic per pool,
and the settings the asynchronous trainer refuses. The stack config's own layout rules
(components/config/layout_rules.py) check the pools against the capacity sources; these check what
the release and the trainer require of a spec (jobs/plan/render_layouts.py renders it).

verl 0.9.1 (the wheel, read 2026-12-06):
- trainer pool: each local step's batch (ppo_mini_batch_size x rollout.n samples) is split over the
  data-parallel ranks (GPUs / Ulysses size) and must divide evenly (verl/workers/engine_workers.py
  lines 266-270, the assert at line 267); one-step-off also runs validate_config on the trainer pool (one_step_off_policy/
  main_ppo.py lines 52-56: train batch x n a multiple of the trainer GPUs, verl/utils/config.py
  lines 119-127, and train batch >= mini batch, verl/workers/config/actor.py lines 224-231);
- rollout pool: ``rollout GPUs // (TP x DP x PP)`` vLLM replicas, floored (verl/workers/rollout/
  llm_server.py lines 434-460), and a replica larger than a node must span whole nodes
  (verl/workers/rollout/replica.py lines 113-116);
- fully-async reads ``async_training.staleness_threshold`` (fully_async_rollouter.py line 353
  asserts >= 0); one-step-off reads no staleness setting (its config has no ``async_training``,
  one_step_off_policy/config/one_step_off_ppo_trainer.yaml, and its trainer none,
  one_step_off_policy/ray_trainer.py).

NeMo RL async GRPO (v0.7.0 nemo_rl/algorithms/grpo.py; v0.5.0 the same lines noted): the loop runs
``while step < grpo.max_num_steps`` only (line 3650; v0.5.0 line 2082) and its trajectory collector
reads the dataloader ONCE (nemo_rl/algorithms/async_utils/trajectory_collector.py line 252; v0.5.0
nemo_rl/algorithms/async_utils.py line 395), so a run longer than one pass waits for trajectories
that never come (inferred from the code, /work/notes/issue-36-nemo.md section 2), and
max_num_epochs is never read there. The step batch must divide over the training data-parallel
size (lines 3745-3750; v0.5.0 lines 2172-2175): the miniBatchSize rules of nemo_rl_rules.py imply
it (miniBatchSize divides the step's samples and is a multiple of that size).
"""

from __future__ import annotations

from jobs.contract.datasets import GSM8K_TRAINING_ROWS
from jobs.contract.layouts import ASYNCHRONOUS_TRAINERS
from jobs.plan.preflight.rules import GPU_NODES, JOB, Rules
from jobs.plan.render_layouts import VERL_DEFAULT_TRIGGER_PARAMETER_SYNC_STEP

LAYOUT_PREFIX = JOB + "layout."
# The layout's settings: (spec field, stack key, framework, asynchronous trainers that read it).
_SETTINGS = (
    ("staleness_threshold", "stalenessThreshold", "verl", ("fully-async",)),
    ("trigger_parameter_sync_step", "triggerParameterSyncStep", "verl", ("fully-async",)),
    ("max_trajectory_age_steps", "maxTrajectoryAgeSteps", "nemo-rl", ("async-grpo",)),
)


class LayoutRules(Rules):
    def layout(self, usable: bool) -> bool:
        """The split layout's findings; False when the pools cannot be planned."""
        s = self.spec
        if not self.layout_release():
            return False
        self.layout_settings()
        if not self.layout_pools() or not usable:
            return False
        if s.framework == "verl":
            self.verl_trainer_pool()
            self.verl_rollout_pool()
        else:
            self.nemo_rl_async_length()
        return True

    def layout_release(self) -> bool:
        from jobs.plan.versions import load_versions  # lazily: PyYAML

        s = self.spec
        trainer = s.asynchronous_trainer
        if trainer not in ASYNCHRONOUS_TRAINERS.get(s.framework, ()):
            self.error(LAYOUT_PREFIX + "asynchronousTrainer",
                       f"is {trainer!r}; {s.framework}'s asynchronous trainers are "
                       + ", ".join(ASYNCHRONOUS_TRAINERS.get(s.framework, ())))
            return False
        table = load_versions()
        row = table.for_release(s.framework, s.framework_version)
        if trainer in row.split_trainers:
            return True
        able = [r.id for r in table.rows_for(s.framework) if trainer in r.split_trainers]
        self.error(LAYOUT_PREFIX + "asynchronousTrainer",
                   f"is {trainer!r}, which {s.framework} {s.framework_version} (data/versions.yaml "
                   f"row {row.id}) does not ship; "
                   + (f"releases that do: {', '.join(able)} (gke-grpo:job.release)" if able else
                      "no supported release does: use layout kind colocated"))
        return False

    def layout_settings(self) -> None:
        s = self.spec
        for field, key, framework, trainers in _SETTINGS:
            value = getattr(s, field)
            if value is not None and (s.framework != framework or s.asynchronous_trainer not in trainers):
                self.error(LAYOUT_PREFIX + key, f"is {value}; only {framework} {' or '.join(trainers)} reads "
                           f"it (this run: {s.framework} {s.asynchronous_trainer}): remove it")
        if s.staleness_threshold is not None and s.staleness_threshold < 0:
            self.error(LAYOUT_PREFIX + "stalenessThreshold", f"is {s.staleness_threshold}; verl asserts "
                       "staleness_threshold >= 0 (fully_async_rollouter.py line 353)")
        for field, key in (("trigger_parameter_sync_step", "triggerParameterSyncStep"),
                           ("max_trajectory_age_steps", "maxTrajectoryAgeSteps")):
            value = getattr(s, field)
            if value is not None and value < 1:
                self.error(LAYOUT_PREFIX + key, f"is {value}; set 1 or more")

    def layout_pools(self) -> bool:
        s = self.spec
        if s.rollout_nodes < 1 or s.trainer_nodes < 1:
            name = "rollout" if s.rollout_nodes < 1 else "trainer"
            self.error(LAYOUT_PREFIX + f"{name}.nodes", f"is {getattr(s, name + '_nodes')}; each pool of a "
                       "split layout needs 1 node or more")
            return False
        if s.rollout_nodes + s.trainer_nodes != s.nodes:
            self.error(LAYOUT_PREFIX + "rollout.nodes",
                       f"rollout.nodes + trainer.nodes = {s.rollout_nodes} + {s.trainer_nodes} = "
                       f"{s.rollout_nodes + s.trainer_nodes}, not the run's {s.nodes} GPU nodes "
                       f"({GPU_NODES}); make them add up")
            return False
        if s.framework == "nemo-rl" and (s.colocated_generation or s.generation_nodes != s.rollout_nodes):
            self.error(LAYOUT_PREFIX + "rollout.nodes",
                       f"the spec's generation ({'colocated' if s.colocated_generation else s.generation_nodes} "
                       f"node(s)) is not the rollout pool's {s.rollout_nodes} node(s): the run spec "
                       "was not built by this program's config (components/run_spec.py)")
            return False
        return True

    # ---- verl ---------------------------------------------------------------------------------
    def verl_trainer_pool(self) -> None:
        s = self.spec
        gpus = s.trainer_nodes * s.gpus_per_node
        n = s.generations_per_prompt
        pool = f"the trainer pool's {gpus} GPUs ({s.trainer_nodes} node(s) x {s.gpus_per_node})"
        sp = max(s.ulysses_sequence_parallel_size, 1)
        if gpus % sp:
            self.error(JOB + "ulyssesSequenceParallelSize",
                       f"is {sp}, which does not divide {pool}; use a divisor of {gpus}")
            return
        dp = gpus // sp
        if s.asynchronous_trainer == "one-step-off":
            if (s.prompts_per_step * n) % gpus:
                self.error(JOB + "promptsPerStep",
                           f"promptsPerStep x generationsPerPrompt = {s.prompts_per_step} x {n} = "
                           f"{s.prompts_per_step * n} responses per step do not split evenly over "
                           f"{pool}; make it a multiple of {gpus}")
            if s.prompts_per_step < s.mini_batch_size:
                self.error(JOB + "miniBatchSize",
                           f"is {s.mini_batch_size}, more than promptsPerStep ({s.prompts_per_step}); "
                           "verl's mini batch counts prompts: set it to promptsPerStep or a divisor")
        else:
            trigger = s.trigger_parameter_sync_step or VERL_DEFAULT_TRIGGER_PARAMETER_SYNC_STEP
            per_sync = s.mini_batch_size * trigger
            if s.prompts_per_step % per_sync:
                said = ("" if s.trigger_parameter_sync_step is not None
                        else ", verl's default; set layout.triggerParameterSyncStep to change it")
                self.error(JOB + "promptsPerStep",
                           f"is {s.prompts_per_step}: verl's fully-async trainer takes miniBatchSize "
                           f"x require_batches prompts per local step and syncs the weights (one "
                           f"step) every triggerParameterSyncStep local steps, so a step's prompts "
                           f"are a multiple of miniBatchSize x triggerParameterSyncStep = "
                           f"{s.mini_batch_size} x {trigger}{said} = {per_sync}; use a multiple of "
                           f"{per_sync}")
        per_rank, rest = divmod(s.mini_batch_size * n, dp)
        if rest or per_rank < 1:
            self.error(JOB + "miniBatchSize",
                       f"miniBatchSize x generationsPerPrompt = {s.mini_batch_size} x {n} = "
                       f"{s.mini_batch_size * n} samples do not split over the {dp} data-parallel "
                       f"ranks of {pool} (verl/workers/engine_workers.py line 267); make it a "
                       f"multiple of {dp}")
        elif not s.dynamic_batch_size and per_rank % s.micro_batch_size_per_gpu:
            self.error(JOB + "microBatchSizePerGpu",
                       f"is {s.micro_batch_size_per_gpu}, which does not divide the per-GPU mini "
                       f"batch of {per_rank} (miniBatchSize x generationsPerPrompt over {pool}); "
                       f"use a divisor of {per_rank}")

    def verl_rollout_pool(self) -> None:
        s = self.spec
        gpus = s.rollout_nodes * s.gpus_per_node
        tp, gpn = s.rollout_tensor_parallel_size, s.gpus_per_node
        pool = f"the rollout pool's {gpus} GPUs ({s.rollout_nodes} node(s) x {gpn})"
        if tp > gpus:
            self.error(JOB + "rolloutTensorParallelSize",
                       f"is {tp}: one vLLM replica asks for more than {pool}; lower it or give the "
                       "rollout pool more nodes (gke-grpo:job.layout.rollout.nodes)")
        elif gpus % tp:
            self.error(JOB + "rolloutTensorParallelSize",
                       f"is {tp}, which does not divide {pool}: verl starts {gpus} // {tp} = "
                       f"{gpus // tp} replicas and leaves {gpus % tp} GPU(s) idle; use a divisor "
                       f"of {gpus}")
        elif tp > gpn and tp % gpn:
            self.error(JOB + "rolloutTensorParallelSize",
                       f"is {tp}: a vLLM replica must fit in one node ({gpn} GPUs) or span whole "
                       f"nodes; use a divisor or a multiple of {gpn}")

    # ---- NeMo RL ------------------------------------------------------------------------------
    def nemo_rl_async_length(self) -> None:
        s = self.spec
        if s.total_epochs is not None:
            self.error(JOB + "totalEpochs",
                       f"is {s.total_epochs}; NeMo RL's async GRPO stops only at grpo.max_num_steps "
                       "and reads the training data once: set totalSteps instead (at most one "
                       "pass over the data)")
            return
        one_pass = GSM8K_TRAINING_ROWS // max(s.prompts_per_step, 1)
        if s.dataset == "gsm8k" and s.total_steps is not None and s.total_steps > one_pass:
            self.error(JOB + "totalSteps",
                       f"is {s.total_steps}, more than one pass over GSM8K's {GSM8K_TRAINING_ROWS} "
                       f"training rows at promptsPerStep {s.prompts_per_step} ({one_pass} steps); "
                       "NeMo RL's async GRPO reads the data once and would wait for trajectories "
                       f"that never come: set at most {one_pass}")
