"""The deployed identity and what a config change replaces: the outputs of one config, given as the
stack's last outputs to the preview (the program reads them through the engine's
readStackOutputs, answered by the mocks) and to preflight (through the stand-in `pulumi` the CLI
tests use), against the config of another. A data store is refused before anything is
registered; node pools, the cluster and the networks under them are warned about."""

from __future__ import annotations

import logging
import os
import re
from typing import Any

import pytest

from components.change_effects import load_change_effects
from components.replacements import IDENTITY_OUTPUT, compare, stack_identity
from jobs.cli import preflight as preflight_cli
from tests.conftest import DELETE, preview_with, stack_config
from tests.jobs import stand_in_pulumi
from tools.preview import run_with_config

P = "gke-grpo:"
NODE_POOL_TYPE = "gcp:container/nodePool:NodePool"
# Fields a registration sets from another resource's output (or lists in ignore_changes): they
# follow that resource's identity, so the identity does not repeat them.
FROM_OTHER_RESOURCES = {
    "gcp:compute/subnetwork:Subnetwork": {"network"},
    "gcp:container/cluster:Cluster": {"network", "subnetwork"},
    "gcp:container/nodePool:NodePool": {"cluster", "nodeConfig.serviceAccount", "networkConfig",
                                        "networkConfig.additionalNodeNetworkConfigs[].network",
                                        "networkConfig.additionalNodeNetworkConfigs[].subnetwork"},
    "gcp:lustre/instance:Instance": {"network"},
}
VARIANTS = {
    "dev": ("dev", {}),
    "prod": ("prod", {}),
    "prod-flex-compact": ("prod", {P + "gpu.provisioningModel": "flex-start", P + "gpu.reservation": DELETE,
                                   P + "gpu.maxRunDurationSeconds": 3600, P + "gpu.compactPlacement": True}),
    "dev-lustre": ("dev", {P + "storage": {"kind": "lustre"}}),
    "prod-waterfall": ("prod", {P + "gpu.reservation": DELETE, P + "gpu.provisioningModel": DELETE,
                                P + "gpu.capacity": [
                                    {"kind": "reservation", "name": "grpo-b200-reservation",
                                     "nodePool": "a4-highgpu-8g-pool"},
                                    {"kind": "flexStart", "maxRunDurationSeconds": 86400},
                                    {"kind": "spot"}]}),
}


def _at(inputs: dict[str, Any], path: str) -> Any:
    """The value at a wire path; ``a[].b``: the list of b over a's items; absent: None."""
    head, _, rest = path.partition(".")
    if head.endswith("[]"):
        items = inputs.get(head[:-2])
        if items is None:
            return None
        return [_at(item, rest) for item in items] if rest else items
    value = inputs.get(head)
    if not rest or value is None:
        return value
    return _at(value, rest)


def _previews(cache={}):   # noqa: B006 - one preview per variant for the module
    if not cache:
        for name, (stack, changes) in VARIANTS.items():
            cache[name] = preview_with(stack, changes)
            assert cache[name].error is None, cache[name].error
    return cache


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_the_identity_is_what_the_components_register(variant):
    """Every identity field equals the registered input; every ForceNew field a data- or
    run-holding resource sets is in the identity (or follows another resource's identity)."""
    result = _previews()[variant]
    identity = result.outputs[IDENTITY_OUTPUT]["resources"]
    effects = load_change_effects()
    registered = {(r.name, r.type): r for r in result.resources}
    for key, entry in identity.items():
        reg = registered[(key.split("#")[0], entry["type"])]
        for field, value in entry["fields"].items():
            assert _at(reg.raw_inputs, field) == value, (key, field)
    for reg in result.resources:
        role = next((r for r in effects.resources.values() if r.matches(reg.type, reg.name)), None)
        if role is None or role.holds == "none":
            continue
        [entry] = [e for k, e in identity.items() if k.split("#")[0] == reg.name and e["type"] == reg.type]
        ignored = set(reg.ignore_changes) | FROM_OTHER_RESOURCES.get(reg.type, set())
        for field, provider in effects.provider[reg.type].items():
            if not provider.force_new and not provider.unless:
                continue
            value = _at(reg.raw_inputs, field)
            if value is None or any(field == i or field.startswith(i + ".") for i in ignored):
                continue
            if isinstance(value, dict) or (isinstance(value, list) and value and isinstance(value[0], dict)):
                # A block: its presence is in the identity, or the fields inside it are.
                assert field in entry["fields"] or any(f.startswith(field + ".") or f.startswith(field + "[].")
                                                       for f in entry["fields"]), (reg.name, field)
                continue
            assert field in entry["fields"], f"{reg.name} sets ForceNew {field} without it in the identity"


def test_the_waterfall_has_one_identity_per_pool():
    identity = _previews()["prod-waterfall"].outputs[IDENTITY_OUTPUT]["resources"]
    pools = {key: entry["fields"]["name"] for key, entry in identity.items() if key.startswith("gpu-pool")}
    assert set(pools) == {"gpu-pool", "gpu-pool-a4-highgpu-8g-flex", "gpu-pool-a4-highgpu-8g-spot"}
    assert pools["gpu-pool"] == "a4-highgpu-8g-pool"          # the reservation's: a fixed name
    assert re.fullmatch(r"a4-highgpu-8g-flex-[0-9a-f]{6}", pools["gpu-pool-a4-highgpu-8g-flex"])
    assert re.fullmatch(r"a4-highgpu-8g-spot-[0-9a-f]{6}", pools["gpu-pool-a4-highgpu-8g-spot"])


def test_only_fixed_name_pools_are_deleted_before_they_are_replaced():
    registered = {r.name: r for r in _previews()["prod-waterfall"].by_type(NODE_POOL_TYPE)}
    assert registered["gpu-pool"].delete_before_replace is True
    assert registered["gpu-pool-a4-highgpu-8g-spot"].delete_before_replace is False
    assert registered["gpu-pool-a4-highgpu-8g-flex"].delete_before_replace is False


def test_a_spot_pool_is_replaced_create_before_delete_and_says_so(caplog):
    deployed = _previews()["prod-waterfall"].outputs
    changes = dict(VARIANTS["prod-waterfall"][1], **{P + "gpu.driverVersion": "LATEST"})
    result = _preview_against("prod", changes, deployed, caplog)
    assert result.error is None, result.error
    spot = next(line for line in caplog.text.splitlines() if "(gpu-pool-a4-highgpu-8g-spot)" in line)
    assert "the new pool is created first, under its new name" in spot and "a4-highgpu-8g-spot-" in spot
    reservation = next(line for line in caplog.text.splitlines() if "(gpu-pool) would be REPLACED" in line)
    assert "the old pool is deleted first" in reservation


def test_adding_sources_beside_the_kept_pool_replaces_nothing():
    """components/config/capacity.py: a pool's name comes from its source alone, and nodePool keeps
    a provisioningModel config's pool, so turning prod into a waterfall adds pools and replaces none."""
    before = _previews()["prod"].outputs[IDENTITY_OUTPUT]
    after = _previews()["prod-waterfall"].outputs[IDENTITY_OUTPUT]
    assert [r for r in compare(before, after) if not r.removed] == []


def test_an_unchanged_config_replaces_nothing():
    for result in _previews().values():
        identity = result.outputs[IDENTITY_OUTPUT]
        assert compare(identity, identity) == []


# ---- the preview of one config against the outputs of another --------------------------------------

def _preview_against(stack: str, changes: dict, deployed: dict, caplog) -> Any:
    raw, secrets = stack_config(stack, changes)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        return run_with_config(stack, raw, secrets, deployed)


REFUSED = [
    ("lustre-tier", "prod", {P + "storage.lustre.throughputTier": 1000}, P + "storage.lustre.throughputTier"),
    ("lustre-filesystem", "prod", {P + "storage.lustre.filesystem": "grpofs"}, P + "storage.lustre.filesystem"),
    ("zone-moves-lustre", "prod", {P + "cluster.zone": "us-central1-a"}, P + "cluster.zone"),
    ("bucket-hns", "dev", {P + "storage.gcs.hierarchicalNamespace": False}, P + "storage.gcs.hierarchicalNamespace"),
    ("bucket-name", "dev", {P + "storage.gcs.bucketName": "grpo-dev-new-bucket"}, P + "storage.gcs.bucketName"),
    ("storage-kind", "dev", {P + "storage": {"kind": "lustre"}}, P + "storage.kind"),
]


@pytest.mark.parametrize("name,stack,changes,key", REFUSED, ids=[r[0] for r in REFUSED])
def test_a_change_that_destroys_data_is_refused_before_anything_is_registered(name, stack, changes, key, caplog):
    deployed = _previews()[stack].outputs
    result = _preview_against(stack, changes, deployed, caplog)
    assert result.problems, name
    assert [p.key for p in result.problems] == [key], result.error
    message = str(result.problems[0])
    assert "DELETED" in message and "storage.allowDataLoss" in message and "1. " in message and "3. " in message
    assert result.register_calls == 0 and result.resources == []


def test_allow_data_loss_lets_it_through_and_says_so(caplog):
    deployed = _previews()["prod"].outputs
    result = _preview_against("prod", {P + "storage.lustre.throughputTier": 1000,
                                       P + "storage.allowDataLoss": True}, deployed, caplog)
    assert result.error is None, result.error
    [lustre] = result.by_type("gcp:lustre/instance:Instance")
    assert lustre.protect is False
    assert "its data is deleted with it" in caplog.text and "NOT protected" in caplog.text


WARNED = [
    ("gpu-driver", "prod", {P + "gpu.driverVersion": "LATEST"}, "the GPU node pool (gpu-pool) would be REPLACED",
     "gke-grpo:gpu.driverVersion"),
    ("gpu-spot", "prod", {P + "gpu.provisioningModel": "spot", P + "gpu.reservation": DELETE},
     "the GPU node pool (gpu-pool) would be REPLACED", "gke-grpo:gpu.provisioningModel"),
    ("gpu-compact", "prod", {P + "gpu.compactPlacement": True}, "placementPolicy", "gke-grpo:gpu.compactPlacement"),
    ("zone-on-gcs", "dev", {P + "cluster.zone": "us-central1-a"}, "the RDMA VPC", "gke-grpo:cluster.zone"),
    ("rdma-range-moved", "dev", {P + "network.rdmaSubnetCidrs": [f"192.168.{n + 11}.0/24" for n in range(8)]},
     "an RDMA subnet", "gke-grpo:network.rdmaSubnetCidrs"),
    ("mode", "prod", {P + "cluster.mode": "autopilot", P + "cluster.headPool": DELETE, P + "gpu.minNodes": DELETE,
                      P + "gpu.maxNodes": DELETE, P + "gpu.compactPlacement": DELETE},
     "the GKE cluster (cluster) would be REPLACED", "gke-grpo:cluster.mode"),
]


@pytest.mark.parametrize("name,stack,changes,what,key", WARNED, ids=[w[0] for w in WARNED])
def test_a_change_that_replaces_capacity_says_so_in_the_preview(name, stack, changes, what, key, caplog):
    deployed = _previews()[stack].outputs
    result = _preview_against(stack, changes, deployed, caplog)
    assert result.error is None, result.error
    assert what in caplog.text and "STOPPED" in caplog.text, caplog.text
    assert key in caplog.text or name == "mode"
    assert "resumes from its checkpoint (/data/checkpoints/" in caplog.text


def test_an_expanded_subnet_range_is_in_place(caplog):
    deployed = _previews()["dev"].outputs
    result = _preview_against("dev", {P + "network.clusterSubnetCidr": "10.0.0.0/19"}, deployed, caplog)
    assert result.error is None and "REPLACED" not in caplog.text


def test_without_deployed_outputs_nothing_is_compared(caplog):
    result = _preview_against("prod", {P + "storage.lustre.throughputTier": 1000}, {}, caplog)
    assert result.error is None and "REPLACED" not in caplog.text


# ---- preflight, through the stand-in pulumi ----------------------------------------------------------

@pytest.fixture
def deployed_prod(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    outputs = dict(_previews()["prod"].outputs, kubeconfig="apiVersion: v1\nkind: Config\n")
    stand_in_pulumi.install(bin_dir, {"prod": {"outputs": outputs, "secrets": ["kubeconfig"]}}, selected="prod")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    return tmp_path


def _stack_file(tmp_path, changes) -> str:
    import json

    import yaml

    raw, _ = stack_config("prod", changes)
    config = {k: (json.loads(v) if isinstance(v, str) and v[:1] in "{[" else v) for k, v in raw.items()
              if k != "gke-grpo:hfToken"}
    path = tmp_path / "Pulumi.prod-changed.yaml"
    path.write_text(yaml.safe_dump({"config": config}))
    return str(path)


def test_preflight_refuses_a_lustre_tier_change_against_the_deployed_stack(deployed_prod, capsys):
    path = _stack_file(deployed_prod, {P + "storage.lustre.throughputTier": 1000})
    assert preflight_cli.main(["--stack", "prod", "--config-file", path]) == 2
    out = capsys.readouterr().out
    assert "error: gke-grpo:storage.lustre.throughputTier" in out and "storage.allowDataLoss" in out
    assert "apiVersion" not in out          # no secret output is ever printed


def test_preflight_warns_which_gpu_pool_a_change_replaces(deployed_prod, capsys):
    path = _stack_file(deployed_prod, {P + "gpu.driverVersion": "LATEST"})
    assert preflight_cli.main(["--stack", "prod", "--config-file", path]) == 0
    out = capsys.readouterr().out
    assert "warning: the GPU node pool (gpu-pool) would be REPLACED" in out
    assert "a live run on it is STOPPED" in out and "gke-grpo:gpu.driverVersion" in out


def test_preflight_without_pulumi_says_it_did_not_compare(tmp_path, monkeypatch, capsys):
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    assert preflight_cli.main(["--stack", "prod"]) == 0
    assert "replacements not checked" in capsys.readouterr().out


def test_stack_identity_is_json_and_small():
    import json

    from components.run_spec import load_stack_file

    text = json.dumps(stack_identity(load_stack_file("prod")))
    assert len(text) < 8000
