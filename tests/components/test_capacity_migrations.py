"""Migrations that keep pools: moving a stack from `gpu.provisioningModel` (reservation, Spot,
flex-start) to the equivalent one-source `gpu.capacity` list, then adding another source and
removing it again, never renames or replaces an existing GPU pool: neither its GKE name nor its
Pulumi resource changes.

Each step is previewed against the outputs of the step before, as `pulumi up` would run it: the
program reads the deployed identity (`deployedIdentity`, components/replacements.py) and warns of
any pool it would replace or delete. The key to write is `nodePool: <machine>-pool`
(docs/gpu-capacity.md, "Moving from provisioningModel to capacity").
"""

from __future__ import annotations

import logging

import pytest

from components.replacements import IDENTITY_OUTPUT, compare
from tests.conftest import DELETE, preview_with, stack_config
from tools.preview import run_with_config

P = "gke-grpo:"
NODE_POOL = "gcp:container/nodePool:NodePool"
KEEP = "a4-highgpu-8g-pool"      # prod's machine: the key the docs tell to write
LEGACY = {P + "gpu.provisioningModel": DELETE, P + "gpu.reservation": DELETE}

# model -> (the provisioningModel config, its one-source list, another source to add)
MODELS = {
    "reservation": (
        {},
        [{"kind": "reservation", "name": "grpo-b200-reservation", "nodePool": KEEP}],
        {"kind": "spot"}),
    "spot": (
        {P + "gpu.provisioningModel": "spot", P + "gpu.reservation": DELETE},
        [{"kind": "spot", "nodePool": KEEP}],
        {"kind": "flexStart", "maxRunDurationSeconds": 86400}),
    "flex-start": (
        {P + "gpu.provisioningModel": "flex-start", P + "gpu.reservation": DELETE,
         P + "gpu.maxRunDurationSeconds": 86400},
        [{"kind": "flexStart", "maxRunDurationSeconds": 86400, "nodePool": KEEP}],
        {"kind": "spot"}),
}


def _as_list(sources: list[dict]) -> dict:
    return {**LEGACY, P + "gpu.maxRunDurationSeconds": DELETE, P + "gpu.capacity": sources}


def _pools(result) -> dict[str, str]:
    """Pulumi resource URN -> GKE pool name, for every GPU pool registered."""
    return {r.urn: r.inputs["name"] for r in result.by_type(NODE_POOL) if r.name.startswith("gpu-pool")}


def _step(changes: dict, deployed: dict | None, caplog):
    raw, secrets = stack_config("prod", changes)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        result = run_with_config("prod", raw, secrets, deployed or {})
    assert result.error is None, result.error
    return result


def _kept(before, after, caplog) -> None:
    """Every GPU pool of `before` is in `after` under the same URN and GKE name, with the same
    ForceNew fields, and the preview against `before`'s outputs warns of no replacement."""
    old, new = _pools(before), _pools(after)
    assert old.items() <= new.items(), (old, new)
    old_identity = before.outputs[IDENTITY_OUTPUT]
    new_identity = after.outputs[IDENTITY_OUTPUT]
    for key, entry in old_identity["resources"].items():
        if key.startswith("gpu-pool"):
            assert new_identity["resources"][key] == entry, key
    assert [r for r in compare(old_identity, new_identity) if not r.removed] == []
    assert "REPLACED" not in caplog.text, caplog.text
    # A pool the step removes is said to go (step 3 below); a pool both have never is.
    kept = [key for key in old_identity["resources"] if key in new_identity["resources"]]
    for line in caplog.text.splitlines():
        assert not any(f"({key})" in line for key in kept), line


@pytest.mark.parametrize("model", list(MODELS))
def test_provisioning_model_to_capacity_and_back_keeps_every_pool(model, caplog):
    legacy_changes, one_source, another = MODELS[model]
    legacy = _step(legacy_changes, None, caplog)
    [(urn, name)] = _pools(legacy).items()
    assert urn.endswith("::gpu-pool") and name.startswith(KEEP)

    # 1. The equivalent one-source list: the same pool, and nothing else of the stack changes.
    migrated = _step({**legacy_changes, **_as_list(one_source)}, legacy.outputs, caplog)
    _kept(legacy, migrated, caplog)
    assert {r.urn: r.inputs for r in migrated.resources} == {r.urn: r.inputs for r in legacy.resources}

    # 2. Another source beside it: a new pool, the old one kept (the class label and taint are
    #    in-place fields of the pool).
    waterfall = _step({**legacy_changes, **_as_list([*one_source, another])}, migrated.outputs, caplog)
    _kept(migrated, waterfall, caplog)
    assert len(_pools(waterfall)) == 2

    # 3. And removed again: the kept pool is still the same; only the added one goes.
    removed = _step({**legacy_changes, **_as_list(one_source)}, waterfall.outputs, caplog)
    _kept(migrated, removed, caplog)
    assert [r.key for r in compare(waterfall.outputs[IDENTITY_OUTPUT], removed.outputs[IDENTITY_OUTPUT])
            if r.removed] == [k for k in waterfall.outputs[IDENTITY_OUTPUT]["resources"]
                              if k.startswith("gpu-pool-")]


def test_removing_a_derived_source_keeps_the_others(caplog):
    both = _step(_as_list([{"kind": "flexStart", "maxRunDurationSeconds": 86400}, {"kind": "spot"}]), None, caplog)
    spot_only = _step(_as_list([{"kind": "spot"}]), both.outputs, caplog)
    [(urn, name)] = _pools(spot_only).items()
    assert _pools(both)[urn] == name and urn.endswith("::gpu-pool-a4-highgpu-8g-spot")
    identity_before = both.outputs[IDENTITY_OUTPUT]["resources"]
    assert spot_only.outputs[IDENTITY_OUTPUT]["resources"]["gpu-pool-a4-highgpu-8g-spot"] == \
        identity_before["gpu-pool-a4-highgpu-8g-spot"]


def test_only_one_source_can_keep_the_former_pool():
    result = preview_with("prod", _as_list([{"kind": "spot", "nodePool": KEEP},
                                            {"kind": "flexStart", "nodePool": KEEP}]))
    assert [p.key for p in result.problems] == [P + "gpu.capacity[1].nodePool"]
    assert "gpu.capacity[0] keeps the former provisioningModel pool" in result.problems[0].allowed
    assert result.register_calls == 0
