"""NeMo RL's rules (v0.5.0): global batch and data parallelism, generation placement, sequence
packing and dynamic batching, and what NeMo RL does not read."""

from __future__ import annotations

import functools

from jobs.plan.preflight.rules import EXTRA, GPU_NODES, JOB, NEMO_RL_ENGINES, Rules, as_bool, override_int
from jobs.plan.render import NEMO_RL_KL_TYPES


class NemoRlRules(Rules):
    # ---- NeMo RL ------------------------------------------------------------------------------
    def nemo_rl(self, usable: bool, overrides: dict[str, str]) -> None:
        s = self.spec
        if s.rollout_engine not in NEMO_RL_ENGINES:
            self.error(JOB + "rolloutEngine", f"is {s.rollout_engine!r}; NeMo RL 0.5.0 GRPO "
                       "generates with 'vllm' here")
        if s.kl_loss_type not in NEMO_RL_KL_TYPES:
            self.error(JOB + "klLossType", f"is {s.kl_loss_type!r}; NeMo RL's reference-policy "
                       "KL estimators are k1, k2, k3 (loss_fn.reference_policy_kl_type); "
                       + ", ".join(f"{k} = {v}" for k, v in NEMO_RL_KL_TYPES.items()
                                   if k not in ("k1", "k2", "k3")))
        if s.wandb:
            self.warning("gke-grpo:wandbApiKey", "is set but W&B stays off for NeMo RL: NeMo RL "
                         "copies the driver's whole environment into the job's runtime env "
                         "(visible through Ray's state API), so the head holds no W&B key; "
                         "TensorBoard logs are written instead")
        if s.ulysses_sequence_parallel_size != 1:
            self.error(JOB + "ulyssesSequenceParallelSize",
                       f"is {s.ulysses_sequence_parallel_size}; Ulysses is verl's: set it to 1 "
                       "(NeMo RL: trainingTensorParallelSize with sequenceParallel)")
        if s.max_tokens_per_gpu is not None:
            self.error(JOB + "maxTokensPerGpu", f"is {s.max_tokens_per_gpu}; it is verl's token "
                       "budget: drop it (NeMo RL sizes dynamic batches from the micro batch x the "
                       "sequence length)")
        if s.dynamic_batch_size and s.sequence_packing:
            self.error(JOB + "sequencePacking", "is true while dynamicBatchSize is true; NeMo RL "
                       "allows only one of them (\"Dynamic Batching is exclusive of Sequence "
                       "Packing\"): set one false")
        if s.training_tensor_parallel_size < 1:
            self.error(JOB + "trainingTensorParallelSize",
                       f"is {s.training_tensor_parallel_size}; set 1 or more")
            usable = False
        if s.colocated_generation and s.generation_nodes:
            self.error(JOB + "generationNodes", f"is {s.generation_nodes} while "
                       "colocatedGeneration is true; set it to 0, or set colocatedGeneration "
                       "false to give generation its own nodes")
        gen_nodes = 0
        if not s.colocated_generation:
            if s.generation_nodes < 1:
                self.error(JOB + "generationNodes", "is 0 while colocatedGeneration is false; "
                           "give generation 1 or more nodes")
                usable = False
            elif s.generation_nodes > s.nodes:
                self.error(JOB + "generationNodes",
                           f"is {s.generation_nodes}: more GPU nodes than the run has "
                           f"({GPU_NODES} = {s.nodes}); lower it or add nodes")
                usable = False
            elif s.generation_nodes == s.nodes:
                self.error(JOB + "generationNodes",
                           f"is {s.generation_nodes}, all of the run's {s.nodes} nodes: separate "
                           "generation must leave nodes for training; lower it or add nodes")
                usable = False
            else:
                gen_nodes = s.generation_nodes
        if not usable:
            return
        get = functools.partial(override_int, overrides)
        megatron = as_bool(overrides.get("policy.megatron_cfg.enabled", "False"))
        dtensor = as_bool(overrides.get("policy.dtensor_cfg.enabled", "True"))
        if megatron == dtensor:
            self.error(EXTRA, "NeMo RL trains with exactly one backend: set "
                       "policy.megatron_cfg.enabled and policy.dtensor_cfg.enabled to opposite "
                       "values")
            return
        if megatron:
            tp = get("policy.megatron_cfg.tensor_model_parallel_size", 1)
            pp = get("policy.megatron_cfg.pipeline_model_parallel_size", 1)
            cp = get("policy.megatron_cfg.context_parallel_size", 1)
        else:
            tp = s.training_tensor_parallel_size
            pp = 1
            cp = get("policy.dtensor_cfg.context_parallel_size", 1)
        if min(tp, pp, cp) < 1:
            self.error(EXTRA, "training parallel sizes (TP, PP, CP) must be 1 or more")
            return
        train_gpus = (s.nodes - gen_nodes) * s.gpus_per_node
        gen_gpus = gen_nodes * s.gpus_per_node if gen_nodes else s.total_gpus
        batch = s.prompts_per_step * s.generations_per_prompt
        gbs = s.mini_batch_size
        if batch % gbs:
            self.error(JOB + "miniBatchSize",
                       f"is {gbs} (NeMo RL's policy.train_global_batch_size, in samples), which "
                       f"does not divide the {batch} samples of a step (promptsPerStep x "
                       f"generationsPerPrompt = {s.prompts_per_step} x {s.generations_per_prompt});"
                       f" use a divisor of {batch}")
        model_parallel = tp * pp * cp
        if train_gpus % model_parallel:
            self.error(EXTRA, f"training TP x PP x CP = {model_parallel} does not divide the "
                       f"{train_gpus} training GPUs; choose sizes whose product divides it")
        else:
            dp = train_gpus // model_parallel
            if gbs % dp:
                self.error(JOB + "miniBatchSize",
                           f"is {gbs}, not a multiple of the data-parallel size {dp} ({train_gpus} "
                           f"training GPUs / TP x PP x CP {model_parallel}); use a multiple of {dp}")
            elif not s.sequence_packing and not s.dynamic_batch_size and (gbs // dp) % s.micro_batch_size_per_gpu:
                self.error(JOB + "microBatchSizePerGpu",
                           f"is {s.micro_batch_size_per_gpu}, which does not divide the "
                           f"per-rank batch of {gbs // dp} (miniBatchSize / data-parallel "
                           f"size {dp}) with sequence packing and dynamic batching off; use a "
                           f"divisor of {gbs // dp}")
        if self.rollout_tp():
            vllm_pp = get("policy.generation.vllm_cfg.pipeline_parallel_size", 1)
            per_replica = s.rollout_tensor_parallel_size * max(vllm_pp, 1)
            if gen_gpus % per_replica:
                self.error(JOB + "rolloutTensorParallelSize",
                           f"vLLM TP x PP = {per_replica} does not divide the {gen_gpus} "
                           "generation GPUs; use a divisor")
