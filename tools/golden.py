"""Regenerates the golden preview files (tests/golden/<name>.json). Run on purpose only:

    python -m tools.golden [NAME ...]

Tests never write these files; they fail with a unified diff when the preview changes, and the
regenerated file then shows the change to reviewers in the pull request.

One golden per committed stack, and one per older supported release on that stack's config
(``GOLDENS``): a deployed stack on an older release keeps a reviewed preview, and the KubeRay
scenarios run the RayCluster of every supported Ray version from these files
(tools/kuberay_scenarios.py ``rendered_raycluster``).
"""

import copy
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
GOLDEN_DIR = ROOT / "tests" / "golden"
# name -> (stack, config changes: full config key with a dotted path into its object -> value)
GOLDENS: dict[str, tuple[str, dict[str, Any]]] = {
    "dev": ("dev", {}),
    "prod": ("prod", {}),
    "dev-verl-0.7.1": ("dev", {"gke-grpo:job.release": "verl-0.7.1"}),
    # v0.5.0's 32B recipe sets logprob_batch_size 2 (v0.7.0's follows the micro batch).
    "prod-nemo-rl-0.5.0": ("prod", {"gke-grpo:job.release": "nemo-rl-0.5.0",
                                    "gke-grpo:job.logProbMicroBatchSizePerGpu": 2}),
    # The split layout (docs/layouts.md): verl's fully-async trainer with a weight sync after
    # every step (promptsPerStep = miniBatchSize), and NeMo RL's asynchronous GRPO, each on two
    # pools of the stack's one source.
    "dev-split": ("dev", {"gke-grpo:job.layout": {
        "kind": "split", "rollout": {"nodes": 1}, "trainer": {"nodes": 1},
        "triggerParameterSyncStep": 1}}),
    "prod-split": ("prod", {"gke-grpo:job.layout": {
        "kind": "split", "rollout": {"nodes": 2, "capacity": "reservation"},
        "trainer": {"nodes": 2, "capacity": "reservation"}, "maxTrajectoryAgeSteps": 1}}),
}
STACKS = ("dev", "prod")


def golden_path(name: str) -> Path:
    return GOLDEN_DIR / f"{name}.json"


def golden_config(name: str) -> tuple[str, dict[str, str], set[str]]:
    """(stack, raw config as the engine passes it, secret keys) of a golden."""
    from tools.preview import read_config_file

    stack, changes = GOLDENS[name]
    raw, secret_keys = read_config_file(ROOT / f"Pulumi.{stack}.yaml")
    for dotted, value in changes.items():
        key, _, path = dotted.partition(".")
        document = json.loads(raw[key])
        target = document
        parts = path.split(".")
        for part in parts[:-1]:
            target = target.setdefault(part, {})
        target[parts[-1]] = copy.deepcopy(value)
        raw[key] = json.dumps(document)
    return stack, raw, secret_keys


def main(argv: list[str]) -> int:
    from tools.preview import render_json, run_with_config

    unknown = [name for name in argv if name not in GOLDENS]
    if unknown:
        print(f"unknown golden {', '.join(unknown)}: one of {', '.join(GOLDENS)}", file=sys.stderr)
        return 2
    for name in argv or GOLDENS:
        result = run_with_config(*golden_config(name))
        if result.error or result.unknown_inputs:
            print(f"{name}: preview failed: {result.error or result.unknown_inputs}", file=sys.stderr)
            return 1
        golden_path(name).write_text(render_json(result))
        print(f"wrote {golden_path(name).relative_to(ROOT)} ({len(result.resources)} resources)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
