"""Answers to the evaluation's prompts from vLLM's offline engine, on a GPU worker. The
evaluation stage (jobs/head/evaluate.py) runs ``generate_shard`` as a Ray task that holds
``tensor_parallel_size`` GPUs, shipped by value (the workers have no copy of jobs/): this module
imports nothing of the repository, and vLLM only inside the function.

Every sampling parameter is set explicitly (``SamplingParams`` defaults ``max_tokens`` to 16 and
a bare engine applies the model's generation_config.json: vllm/sampling_params.py and
vllm/config/model.py ``generation_config``, identical in vLLM 0.11.2 and 0.17.0, the versions of
the NeMo RL v0.5.0 and verl v0.7.1 images); ``generation_config="vllm"`` keeps the checkpoint's
own defaults (Qwen2.5's repetition penalty and temperature) out; ``dtype="bfloat16"`` serves the
fp32 weights the trainers write in bf16, as the rollout did.
"""

from __future__ import annotations

from typing import Any


def generate_shard(model_path: str, conversations: list[list[dict[str, str]]],
                   sampling: dict[str, Any], engine: dict[str, Any]) -> list[dict[str, Any]]:
    """Greedy (or as ``sampling`` says) answers to ``conversations``, in order: text, finish
    reason ("stop" | "length") and generated token count of each."""
    import vllm
    from vllm import LLM, SamplingParams

    llm = LLM(model=model_path, tokenizer=model_path, **engine)
    params = SamplingParams(**sampling)
    outputs = llm.chat(conversations, params, use_tqdm=False, add_generation_prompt=True)
    results = []
    for output in outputs:
        completion = output.outputs[0]
        results.append({"text": completion.text, "finish_reason": completion.finish_reason,
                        "tokens": len(completion.token_ids), "vllm": vllm.__version__})
    return results
