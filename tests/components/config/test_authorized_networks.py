"""Hostile authorized networks: the control plane is never opened to a large slice of the public
internet, whether in one range or split into many (data/config-limits.yaml: the bound and why)."""

from __future__ import annotations

import ipaddress

import pytest

from components.config import ConfigError, load_stack_config
from components.config.limits import load_config_limits
from tests.conftest import stack_config

P = "gke-grpo:"
KEY = P + "cluster.masterAuthorizedNetworks"


def _problems(cidrs: list[str]) -> dict[str, str]:
    raw, secrets = stack_config("dev", {
        P + "cluster.controlPlaneAccess": "authorizedNetworks",
        KEY: [{"cidrBlock": c, "displayName": f"n{i}"} for i, c in enumerate(cidrs)]})
    try:
        load_stack_config(raw, secrets, "dev")
    except ConfigError as err:
        return {p.key: p.allowed for p in err.problems}
    return {}


SPLIT_INTERNET = [
    ["0.0.0.0/1", "128.0.0.0/1"],
    [f"{n}.0.0.0/8" for n in range(1, 50)],                       # 49 ranges, GKE takes 50
    [str(net) for net in ipaddress.IPv4Network("0.0.0.0/0").subnets(new_prefix=4)],
    ["34.0.0.0/15"],                                               # one range, 131,072 addresses
    ["34.0.0.0/16", "35.0.0.0/16"],                                # two sites' worth together
]


@pytest.mark.parametrize("cidrs", SPLIT_INTERNET, ids=lambda c: f"{len(c)}-ranges-{c[0]}")
def test_ranges_that_together_cover_too_much_public_space_are_refused(cidrs):
    found = _problems(cidrs)
    assert KEY in found, found
    assert "public IPv4 addresses" in found[KEY] and "controlPlaneAccess" in found[KEY]


ACCEPTED = [
    ["203.0.113.7/32"],
    ["34.0.0.0/16"],                                   # exactly the bound
    ["34.0.0.0/17", "34.0.0.0/16", "34.0.128.0/17"],   # overlaps count once
    ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "34.1.2.0/24"],   # private space is free
]


@pytest.mark.parametrize("cidrs", ACCEPTED, ids=lambda c: f"{len(c)}-ranges-{c[0]}")
def test_small_or_private_ranges_pass(cidrs):
    assert KEY not in _problems(cidrs)


def test_public_space_arithmetic():
    limits = load_config_limits()
    # 2^32 less the IANA special-purpose blocks and multicast.
    assert limits.public_addresses(["0.0.0.0/0"]) == 3_702_258_432
    assert limits.public_addresses(["0.0.0.0/1", "128.0.0.0/1"]) == 3_702_258_432
    assert limits.public_addresses(["10.0.0.0/8", "224.0.0.0/4"]) == 0
    assert limits.public_addresses(["192.168.0.0/15"]) == 65_536   # 192.169/16 is public
    assert limits.authorized_public_addresses_max == 2 ** 16
