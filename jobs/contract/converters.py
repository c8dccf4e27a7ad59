"""The frameworks' own checkpoint-to-Hugging-Face paths at the pinned tags: where each trainer
writes Hugging Face weights itself, and the converter commands for checkpoints that have none.

Trainer-written (what every run rendered by this program has: jobs/plan/render.py asks for it):

- verl v0.7.1: ``actor_rollout_ref.actor.checkpoint.save_contents`` with ``hf_model``
  (verl/trainer/config/actor/actor.yaml; CheckpointConfig in verl/trainer/config/config.py)
  makes FSDPCheckpointManager.save_checkpoint (verl/utils/checkpoint/fsdp_checkpoint_manager.py)
  gather the full state dict on rank 0 (offloaded to CPU) and ``save_pretrained`` it into
  ``global_step_<n>/actor/huggingface/``, beside the config and tokenizer rank 0 writes there on
  every save.
- NeMo RL v0.5.0: ``checkpointing.save_consolidated=true`` makes NeMo Automodel's Checkpointer
  (nemo_automodel/components/checkpoint/checkpointing.py at the commit NeMo RL v0.5.0 pins,
  1d42deb9) write ``model-*.safetensors``, ``model.safetensors.index.json``, ``config.json`` and
  ``generation_config.json`` into ``step_<n>/policy/weights/model/consolidated/`` (safetensors
  format, no PEFT); the tokenizer is saved apart, in ``step_<n>/policy/tokenizer/``.

Converters, for a checkpoint without those (a run trained before, or with them turned off):

- verl v0.7.1 ``python -m verl.model_merger merge --backend fsdp --local_dir
  <global_step_n>/actor --target_dir <out>`` (verl/model_merger/base_model_merger.py
  ``parse_args``: underscore spellings; __main__.py dispatches fsdp to FSDPModelMerger). CPU
  only; it holds every shard in host RAM at once (fsdp_model_merger.py) and writes bf16
  safetensors with transformers' defaults, config and tokenizer from ``<actor>/huggingface``.
  FSDP + tensor parallel checkpoints are not supported by it.
- NeMo RL v0.5.0 ``examples/converters/convert_dcp_to_hf.py --config <step>/config.yaml
  --dcp-ckpt-path <step>/policy/weights --hf-ckpt-path <out>`` (its three flags), for torch DCP
  checkpoints (a ``.metadata`` file: the v1 DTensor policy). At v0.5.0 it cannot read what the
  default v2 policy writes (sharded safetensors, no DCP metadata: NVIDIA-NeMo/RL issues #1427
  and #1391, fixed only after v0.5.0 by PR #1881); it writes ``pytorch_model.bin``, which the
  export then re-saves as safetensors (``SAFETENSORS_RESAVE``), and the tokenizer is copied from
  ``<step>/policy/tokenizer``.

Standard library only.
"""

from __future__ import annotations

import posixpath

VERL_HF_SUBDIR = "huggingface"
NEMO_RL_CONSOLIDATED = ("policy", "weights", "model", "consolidated")
NEMO_RL_TOKENIZER = ("policy", "tokenizer")
NEMO_RL_DCP_WEIGHTS = ("policy", "weights")
NEMO_RL_DCP_METADATA = ".metadata"
# The converter script, relative to the NeMo RL image's workdir (data/versions.yaml).
NEMO_RL_CONVERTER = "examples/converters/convert_dcp_to_hf.py"
PYTHON = "python3"

# The hydra key and value the verl trainer gets (jobs/plan/render.py): verl's default contents
# plus hf_model.
VERL_SAVE_CONTENTS = ("model", "optimizer", "extra", "hf_model")
VERL_SAVE_CONTENTS_OVERRIDE = ("actor_rollout_ref.actor.checkpoint.save_contents="
                               f"[{','.join(VERL_SAVE_CONTENTS)}]")
NEMO_RL_SAVE_CONSOLIDATED_OVERRIDE = "checkpointing.save_consolidated=true"


def verl_actor_dir(checkpoint_dir: str, step: int) -> str:
    return posixpath.join(checkpoint_dir, f"global_step_{step}", "actor")


def verl_hf_dir(checkpoint_dir: str, step: int) -> str:
    return posixpath.join(verl_actor_dir(checkpoint_dir, step), VERL_HF_SUBDIR)


def nemo_rl_step_dir(checkpoint_dir: str, step: int) -> str:
    return posixpath.join(checkpoint_dir, f"step_{step}")


def nemo_rl_consolidated_dir(checkpoint_dir: str, step: int) -> str:
    return posixpath.join(nemo_rl_step_dir(checkpoint_dir, step), *NEMO_RL_CONSOLIDATED)


def nemo_rl_tokenizer_dir(checkpoint_dir: str, step: int) -> str:
    return posixpath.join(nemo_rl_step_dir(checkpoint_dir, step), *NEMO_RL_TOKENIZER)


def verl_merger_argv(checkpoint_dir: str, step: int, target_dir: str) -> tuple[str, ...]:
    """verl's model merger on one FSDP checkpoint."""
    return (PYTHON, "-m", "verl.model_merger", "merge", "--backend", "fsdp",
            "--local_dir", verl_actor_dir(checkpoint_dir, step), "--target_dir", target_dir)


def nemo_rl_converter_argv(checkpoint_dir: str, step: int, target_dir: str) -> tuple[str, ...]:
    """NeMo RL's DCP-to-HF converter on one DCP checkpoint, run with the image's ``uv run``
    from its workdir as the trainer is (jobs/plan/render.py); ``target_dir`` must not exist."""
    step_dir = nemo_rl_step_dir(checkpoint_dir, step)
    return ("uv", "run", "python", NEMO_RL_CONVERTER,
            "--config", posixpath.join(step_dir, "config.yaml"),
            "--dcp-ckpt-path", posixpath.join(step_dir, *NEMO_RL_DCP_WEIGHTS),
            "--hf-ckpt-path", target_dir)


# Re-save a converter's pytorch_model.bin as safetensors, with transformers (in the image):
# ``python -c SAFETENSORS_RESAVE <src> <dst>``.
SAFETENSORS_RESAVE = (
    "import sys\n"
    "from transformers import AutoModelForCausalLM\n"
    "model = AutoModelForCausalLM.from_pretrained(sys.argv[1], torch_dtype='auto')\n"
    "model.save_pretrained(sys.argv[2], safe_serialization=True)\n"
)


def nemo_rl_resave_argv(source_dir: str, target_dir: str) -> tuple[str, ...]:
    return ("uv", "run", "python", "-c", SAFETENSORS_RESAVE, source_dir, target_dir)
