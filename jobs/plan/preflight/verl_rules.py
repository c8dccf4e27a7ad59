"""verl's rules (verl v0.7.1): batch arithmetic over all GPUs, rollout parallelism, KL types,
Ulysses sequence parallelism and the dynamic batch size's token budget."""

from __future__ import annotations

from jobs.plan.preflight.rules import JOB, VERL_ENGINES, VERL_KL_TYPES, Rules


class VerlRules(Rules):
    # ---- verl ---------------------------------------------------------------------------------
    def verl(self, usable: bool) -> None:
        s = self.spec
        if s.rollout_engine not in VERL_ENGINES:
            self.error(JOB + "rolloutEngine", f"is {s.rollout_engine!r}; verl rolls out with "
                       + " or ".join(repr(e) for e in VERL_ENGINES))
        if s.kl_loss_type not in VERL_KL_TYPES:
            self.error(JOB + "klLossType", f"is {s.kl_loss_type!r}; verl's KL estimators are "
                       + ", ".join(VERL_KL_TYPES) + " (GRPO recipes use low_var_kl)")
        if not s.colocated_generation:
            self.error(JOB + "colocatedGeneration", "is false; verl's FSDP GRPO here rolls out on "
                       "the training GPUs (hybrid engine): set it true (separate generation nodes "
                       "are a NeMo RL option)")
        if s.generation_nodes:
            self.error(JOB + "generationNodes", f"is {s.generation_nodes}; verl rolls out on the "
                       "training GPUs: set it to 0")
        if s.training_tensor_parallel_size != 1:
            self.error(JOB + "trainingTensorParallelSize",
                       f"is {s.training_tensor_parallel_size}; verl's FSDP actor has no tensor "
                       "parallelism: set it to 1 (ulyssesSequenceParallelSize splits long "
                       "sequences instead)")
        if s.sequence_parallel:
            self.error(JOB + "sequenceParallel", "is true; it is NeMo RL's DTensor sequence "
                       "parallelism: set it false (verl: ulyssesSequenceParallelSize)")
        sp = s.ulysses_sequence_parallel_size
        if sp < 1:
            self.error(JOB + "ulyssesSequenceParallelSize", f"is {sp}; set 1 or more")
            usable = False
        elif sp > 1 and not s.sequence_packing:
            self.error(JOB + "ulyssesSequenceParallelSize",
                       f"is {sp} while sequencePacking is false; verl's Ulysses sequence "
                       "parallelism needs use_remove_padding: set sequencePacking true")
        if s.max_tokens_per_gpu is not None:
            if not s.dynamic_batch_size:
                self.error(JOB + "maxTokensPerGpu", f"is {s.max_tokens_per_gpu} while "
                           "dynamicBatchSize is false; set dynamicBatchSize true or drop it")
            elif s.max_tokens_per_gpu < s.max_prompt_length + s.max_response_length:
                self.error(JOB + "maxTokensPerGpu",
                           f"is {s.max_tokens_per_gpu}, less than one sequence "
                           f"(maxPromptLength + maxResponseLength = "
                           f"{s.max_prompt_length + s.max_response_length}); verl packs whole "
                           "sequences into a micro batch: raise it")
        if not usable:
            return
        n_gpus = s.total_gpus
        n = s.generations_per_prompt
        if (s.prompts_per_step * n) % n_gpus:
            self.error(JOB + "promptsPerStep",
                       f"promptsPerStep x generationsPerPrompt = {s.prompts_per_step} x {n} = "
                       f"{s.prompts_per_step * n} responses per step do not split evenly over "
                       f"{n_gpus} GPUs; make promptsPerStep x generationsPerPrompt a multiple of "
                       f"{n_gpus}")
        if s.prompts_per_step < s.mini_batch_size:
            self.error(JOB + "miniBatchSize",
                       f"is {s.mini_batch_size}, more than promptsPerStep ({s.prompts_per_step}); "
                       "verl's mini batch counts prompts: set it to promptsPerStep or a divisor")
        per_gpu, rest = divmod(s.mini_batch_size * n, n_gpus)
        if rest or per_gpu < 1:
            self.error(JOB + "miniBatchSize",
                       f"miniBatchSize x generationsPerPrompt / GPUs = {s.mini_batch_size} x {n} "
                       f"/ {n_gpus} is not a positive integer; make miniBatchSize x "
                       f"generationsPerPrompt a multiple of {n_gpus}")
        elif not s.dynamic_batch_size and per_gpu % s.micro_batch_size_per_gpu:
            self.error(JOB + "microBatchSizePerGpu",
                       f"is {s.micro_batch_size_per_gpu}, which does not divide the per-GPU mini "
                       f"batch of {per_gpu} (miniBatchSize x generationsPerPrompt / GPUs); use a "
                       f"divisor of {per_gpu}")
        if self.rollout_tp():
            tp, gpn = s.rollout_tensor_parallel_size, s.gpus_per_node
            if n_gpus % tp:
                self.error(JOB + "rolloutTensorParallelSize",
                           f"is {tp}, which does not divide the run's {n_gpus} GPUs; use a "
                           f"divisor of {n_gpus}")
            elif tp > gpn and tp % gpn:
                self.error(JOB + "rolloutTensorParallelSize",
                           f"is {tp}: a rollout replica must fit in one node ({gpn} GPUs) or span "
                           f"whole nodes; use a divisor or a multiple of {gpn}")
        if sp > 1 and n_gpus % sp:
            self.error(JOB + "ulyssesSequenceParallelSize",
                       f"is {sp}, which does not divide the run's {n_gpus} GPUs; use a divisor "
                       f"of {n_gpus}")
