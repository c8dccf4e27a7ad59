"""What NCCL's INFO log says about the network a communicator used, parsed for the fabric gate:
its probe actors point NCCL_DEBUG_FILE at a file per process (jobs/head/fabric_gate.py) and
read it back after the collectives.
"""

from __future__ import annotations

import re
from typing import Any

_NCCL_NET = re.compile(r"NET/(?P<net>[A-Za-z0-9_]+)\s*:\s*Using\s+(?P<devices>.*?)(?:\s*;|$)")
_NCCL_USED = re.compile(r"NCCL INFO Using network (?P<net>\S+)")
_NCCL_DEVICE = re.compile(r"\[\d+\](?P<device>[^\s\[\];]+)")
_NCCL_WARN = re.compile(r"NCCL WARN (?P<text>.*NET/.*)$")
# NCCL's socket transport: plain TCP over the pod network, never the RDMA fabric.
TCP_NETWORK = "Socket"


def nccl_nics(log_text: str) -> dict[str, Any]:
    """What NCCL's INFO log says about the network: the network it used ("Using network IB",
    "Using network Socket"), the NICs of that network ("NET/IB : Using [0]mlx5_0:1/IB
    [1]mlx5_1:1/IB ; OOB eth0:10.0.0.1<0>"), and its NET warnings. Formats as NCCL 2.28.9
    prints them (tests/jobs/fixtures/nccl/, read on an H200) and as published (NVIDIA/nccl
    issue 392, siderolabs/docs issue 566). The gIB plugin's own lines are assumed to follow
    NCCL's format (unconfirmed: no published gIB log)."""
    used: list[str] = []
    nics_by_net: dict[str, list[str]] = {}
    warnings: list[str] = []
    for line in log_text.splitlines():
        match = _NCCL_NET.search(line)
        if match:
            devices = nics_by_net.setdefault(match["net"], [])
            for device in _NCCL_DEVICE.finditer(match["devices"]):
                if device["device"] not in devices:
                    devices.append(device["device"])
        match = _NCCL_USED.search(line)
        if match and match["net"] not in used:
            used.append(match["net"])
        warn = _NCCL_WARN.search(line)
        if warn and warn["text"].strip() not in warnings:
            warnings.append(warn["text"].strip())
    nics = [nic for net in (used or list(nics_by_net)) for nic in nics_by_net.get(net, [])]
    return {"nets": used, "nics": list(dict.fromkeys(nics)), "warnings": warnings[:5]}
