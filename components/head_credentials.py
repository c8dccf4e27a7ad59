"""What the Ray head gets of the credentials: files, not environment variables.

NeMo RL v0.5.0 hands the driver's whole environment to every actor as runtime_env env_vars
(``init_ray``: ``runtime_env={"env_vars": dict(os.environ)}``, nemo_rl/distributed/
virtual_cluster.py at tag v0.5.0, commit 6c708930), so anything in the head's environment ends up
in the job's runtime env, which Ray's state API and dashboard show. The head therefore carries no
credential as an environment variable: the Hugging Face token is a file from the hf-secret Secret
(read by ``jobs.prepare``, the only head process that needs it), and for NeMo RL the W&B key is not
on the head at all. verl keeps WANDB_API_KEY on the head: its TaskRunner actor logs to W&B from
there, and verl's runtime env lists its own env vars instead of copying the driver's.

The same reasoning gives the head the GPU workers' LD_LIBRARY_PATH: under NeMo RL the head's
value replaces the workers' on every actor, and without /usr/local/gib/lib64 NCCL would not find
the gIB plugin.
"""

from __future__ import annotations

import posixpath

from jobs.contract.layout import HF_TOKEN_FILE

HF_SECRET_NAME, HF_SECRET_KEY = "hf-secret", "hf_api_token"
WANDB_SECRET_NAME, WANDB_SECRET_KEY = "wandb-secret", "api_key"
HF_TOKEN_VOLUME = "hf-token"


def secret_env(name: str, secret: str, key: str) -> dict:
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}


def head_secret_env(framework: str, has_wandb: bool) -> list[dict]:
    """Secret-backed env vars of the head container (never the HF token)."""
    if has_wandb and framework != "nemo-rl":
        return [secret_env("WANDB_API_KEY", WANDB_SECRET_NAME, WANDB_SECRET_KEY)]
    return []


def hf_token_file_volume() -> tuple[dict, dict]:
    """(volume, read-only mount) that put the hf-secret's token at HF_TOKEN_FILE on the head."""
    directory, filename = posixpath.split(HF_TOKEN_FILE)
    volume = {"name": HF_TOKEN_VOLUME, "secret": {
        "secretName": HF_SECRET_NAME,
        "items": [{"key": HF_SECRET_KEY, "path": filename}]}}
    mount = {"name": HF_TOKEN_VOLUME, "mountPath": directory, "readOnly": True}
    return volume, mount
