"""How many checkpoints of one run can be on disk at once under the run driver's retention
(jobs/head/checkpoints.py prunes verl's before every start), for preflight's storage estimate.
"""

from __future__ import annotations

# The Hugging Face copy the trainers write into every checkpoint (jobs/contract/converters.py):
# the training master weights as saved, fp32 in both frameworks (verl's actor model_dtype fp32,
# verl/trainer/config/engine/fsdp.yaml; NeMo RL's v2 worker loads in float32,
# dtensor_policy_worker_v2.py): 4 bytes per parameter, read from the code, not measured on a
# run. The export under /data/exports is a copy of one of them.
HF_WEIGHTS_BYTES_PER_PARAM = 4


def checkpoints_on_disk(framework: str, keep: int) -> int:
    """The most checkpoints of one run that can be on disk at once.

    verl, pruned before every start: the ``keep`` newest plus the tracker's one (a save that
    crashed after the newest complete one makes them differ), then the new trainer process
    saves up to max(keep, 2) of its own before its in-memory rotation deletes one (it deletes
    before saving when keep >= 2; with keep 1 it saves first, then deletes:
    ensure_checkpoint_capacity / register_checkpoint in checkpoint_manager.py, v0.7.1).

    NeMo RL: ``keep_top_k`` complete ``step_*`` directories, the ``tmp_step_*`` being written,
    and one ``tmp_step_*`` a crash left behind (renamed to ``step_*`` only once complete:
    CheckpointManager.finalize_checkpoint, v0.5.0).
    """
    if framework == "verl":
        return keep + 1 + max(keep, 2)
    return keep + 2
