"""Which framework release (a row of data/versions.yaml) a stack runs, and what moving it between
releases does, said before anything happens.

A deployed stack keeps the release it was deployed with until its owner sets
``gke-grpo:job.release``: a new default row in data/versions.yaml (a newer verl or NeMo RL) does
not move it, which would recreate its Ray pods and start its run again from step 0 on the next
``pulumi up``. The deployed release is read from the stack's own last ``runSpec`` output (its
framework and framework_version), through the same engine call as the replacement check
(components/replacements.py ``read_deployed``). A new stack, or one whose output cannot be read,
gets the framework's first row.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from components.change_effects import effect_of
from components.config import PROJECT, StackConfig
from components.versions import ImageRow, load_versions, stack_row
from jobs.contract.spec import GrpoSpec
from jobs.plan.versions import UnsupportedRelease

RELEASE_KEY = f"{PROJECT}:job.release"


def deployed_row(run_spec: Any) -> ImageRow | None:
    """The supported row a deployed runSpec output ran, or None (no output, another framework
    version than any row, an unreadable output)."""
    if not isinstance(run_spec, dict):
        return None
    framework, version = run_spec.get("framework"), run_spec.get("framework_version")
    if not isinstance(framework, str) or not isinstance(version, str):
        return None
    try:
        return load_versions().for_release(framework, version)
    except UnsupportedRelease:
        return None


def keep_deployed_release(config: StackConfig, run_spec: Any) -> tuple[StackConfig, str | None]:
    """The config with job.release set to the deployed release when the config names none (no
    job.release, no kuberay.image) and the stack was deployed with a supported release of the
    same framework; and the line the preview says about it (None when nothing was kept)."""
    job = config.job
    row = deployed_row(run_spec)
    if job.release is not None or config.kuberay.image is not None or row is None \
            or row.framework != job.framework:
        return config, None
    default = load_versions().for_framework(job.framework)
    kept = dataclasses.replace(config, job=job.model_copy(update={"release": row.id}))
    if row.id == default.id:
        return kept, None
    return kept, (f"{RELEASE_KEY} is not set: this stack keeps {row.id}, the release it was "
                  f"deployed with (new stacks get {default.id}). To move it, set {RELEASE_KEY} "
                  f"{default.id}: that {effect_of(RELEASE_KEY)} (docs/frameworks.md, \"Moving a "
                  "stack to another release\")")


def release_change_warning(config: StackConfig, spec: GrpoSpec, run_spec: Any,
                           checkpoint_dir: str | None) -> str | None:
    """What moving the deployed stack to another release does: its Ray pods are recreated with
    the new image and Ray, and the run id changes (the framework version is part of the run
    spec), so the next attempt starts a new run from step 0. None when the release stays."""
    before = deployed_row(run_spec)
    after = stack_row(config.job.framework, config.job.release, config.kuberay.image)
    if before is None or before.id == after.id:
        return None
    changes = [f"image {before.image} -> {after.image}"]
    if before.ray != after.ray:
        changes.append(f"Ray {before.ray} -> {after.ray}")
    kept = f"; the deployed run's checkpoints stay in {checkpoint_dir}" if checkpoint_dir else ""
    return (f"{RELEASE_KEY}: {before.id} (deployed) -> {after.id} ({', '.join(changes)}): "
            f"{effect_of(RELEASE_KEY)}. The run id becomes {spec.run_id} (the framework version "
            f"is part of the run spec): the next attempt starts a new run from step 0{kept}")
