"""Drive the policy pack the way the Pulumi engine does, without the CLI.

- `serve_pack` runs policy/__main__.py for real: PolicyPack starts its gRPC analyzer server on
  127.0.0.1 and prints the port, as under `pulumi preview --policy-pack policy`. The pack's
  endless sleep is replaced by a probe that talks to the server over gRPC (AnalyzerStub), then
  ends the pack through the KeyboardInterrupt path PolicyPack itself handles (server.stop).
  The analyzer servicer it registered is kept, so tests call its Analyze/AnalyzeStack with the
  same protobuf requests the engine sends: the SDK deserializes the properties, wraps them in its
  unknown-checking proxy, builds ResourceValidationArgs with the resource options (protect),
  runs every policy and turns violations into AnalyzeDiagnostics.
- Resources come from the committed offline previews (tests/golden/<stack>.json): the inputs
  under their wire names, `protect` per resource, the stack in the URN. "[secret]" values are
  sent back as secret envelopes, as the engine sends secrets.
"""

from __future__ import annotations

import copy
import io
import json
import runpy
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import empty_pb2
from pulumi.runtime import proto
from pulumi.runtime.proto import analyzer_pb2_grpc

ROOT = Path(__file__).resolve().parents[2]
POLICY_DIR = ROOT / "policy"
GOLDEN_DIR = ROOT / "tests" / "golden"

SIG_KEY = "4dabf18193072939515e22adb298388d"
SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"
UNKNOWN_STRING = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"
SECRET_MASK = "[secret]"


def load_golden(stack: str) -> dict[str, Any]:
    return json.loads((GOLDEN_DIR / f"{stack}.json").read_text())


def find(document: dict[str, Any], type_: str, name: str) -> dict[str, Any]:
    """A deep copy of one resource of a preview document, to mutate freely."""
    found = [r for r in document["resources"] if r["type"] == type_ and r["name"] == name]
    assert len(found) == 1, f"{document['stack']}: expected one {type_} {name}, found {len(found)}"
    return copy.deepcopy(found[0])


def retype(resource: dict[str, Any], new_type: str, new_name: str | None = None) -> dict[str, Any]:
    """The same resource registered as another type (and name): URN rebuilt to match."""
    resource = copy.deepcopy(resource)
    head, _, _ = resource["urn"].rpartition("::")
    head = head[: len(head) - len(resource["type"])] + new_type
    resource["type"] = new_type
    if new_name:
        resource["name"] = new_name
    resource["urn"] = f"{head}::{resource['name']}"
    return resource


def in_stack(resource: dict[str, Any], stack: str) -> dict[str, Any]:
    """The same resource in another stack (the stack is the URN's third field)."""
    resource = copy.deepcopy(resource)
    _, _, rest = resource["urn"].partition("::")
    resource["urn"] = f"urn:pulumi:{stack}::{rest}"
    return resource


def to_wire(value: Any) -> Any:
    """Preview JSON -> engine wire values: "[secret]" becomes a secret envelope again."""
    if value == SECRET_MASK:
        return {SIG_KEY: SECRET_SIG, "value": SECRET_MASK}
    if isinstance(value, dict):
        return {k: to_wire(v) for k, v in value.items()}
    if isinstance(value, list):
        return [to_wire(v) for v in value]
    return value


def _options(resource: dict[str, Any]) -> proto.AnalyzerResourceOptions:
    return proto.AnalyzerResourceOptions(
        protect=bool(resource.get("protect")),
        ignoreChanges=list(resource.get("ignoreChanges") or []),
        deleteBeforeReplace=bool(resource.get("deleteBeforeReplace")),
        deleteBeforeReplaceDefined=True,
        parent=resource.get("parent") or "",
    )


def analyze_request(resource: dict[str, Any]) -> proto.AnalyzeRequest:
    request = proto.AnalyzeRequest(type=resource["type"], urn=resource["urn"],
                                   name=resource["name"], options=_options(resource))
    request.properties.update(to_wire(resource["inputs"]))
    return request


def analyze_stack_request(document: dict[str, Any]) -> proto.AnalyzeStackRequest:
    request = proto.AnalyzeStackRequest()
    for resource in document["resources"]:
        item = request.resources.add(type=resource["type"], urn=resource["urn"],
                                     name=resource["name"], options=_options(resource),
                                     parent=resource.get("parent") or "",
                                     dependencies=resource.get("dependencies") or [])
        item.properties.update(to_wire(resource["inputs"]))
    return request


@dataclass(frozen=True)
class Diagnostic:
    policy: str
    message: str
    level: int          # proto.MANDATORY / proto.ADVISORY ...
    urn: str

    @property
    def mandatory(self) -> bool:
        return self.level == proto.MANDATORY


def diagnostics(response: proto.AnalyzeResponse) -> list[Diagnostic]:
    return [Diagnostic(d.policyName, d.message, d.enforcementLevel, d.urn)
            for d in response.diagnostics]


@dataclass
class ServedPack:
    servicer: Any                 # the SDK's _PolicyAnalyzerServicer PolicyPack registered
    port: int                     # the port PolicyPack printed
    probe: Any                    # what the probe returned over gRPC

    def analyze(self, resource: dict[str, Any]) -> list[Diagnostic]:
        return diagnostics(self.servicer.Analyze(analyze_request(resource), None))

    def analyze_stack(self, document: dict[str, Any]) -> list[Diagnostic]:
        return diagnostics(self.servicer.AnalyzeStack(analyze_stack_request(document), None))


def serve_pack(probe: Callable[[analyzer_pb2_grpc.AnalyzerStub], Any]) -> ServedPack:
    """Run policy/__main__.py; while its server is up, call `probe` with a gRPC stub to it."""
    import pulumi_policy.policy as sdk

    captured: dict[str, Any] = {}
    original_add = sdk.analyzer_pb2_grpc.add_AnalyzerServicer_to_server

    def add_servicer(servicer, server):
        captured["servicer"] = servicer
        return original_add(servicer, server)

    printed = io.BytesIO()
    fake_stdout = io.TextIOWrapper(printed, write_through=True)

    def sleep(_seconds: float) -> None:
        # PolicyPack calls this once its server is started and its port printed.
        try:
            captured["port"] = int(printed.getvalue().decode().strip())
            with grpc.insecure_channel(f"127.0.0.1:{captured['port']}") as channel:
                captured["probe"] = probe(analyzer_pb2_grpc.AnalyzerStub(channel))
        except BaseException as err:  # reported after the server is stopped
            captured["error"] = err
        raise KeyboardInterrupt  # PolicyPack's own exit: server.stop(0), then return

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sdk.analyzer_pb2_grpc, "add_AnalyzerServicer_to_server", add_servicer)
        patch.setattr(sdk, "time", types.SimpleNamespace(sleep=sleep))
        patch.setattr(sys, "stdout", fake_stdout)
        runpy.run_path(str(POLICY_DIR / "__main__.py"), run_name="__main__")
    if "error" in captured:
        raise captured["error"]
    assert "servicer" in captured, "policy/__main__.py did not build a PolicyPack"
    return ServedPack(captured["servicer"], captured["port"], captured.get("probe"))


def get_analyzer_info(stub: analyzer_pb2_grpc.AnalyzerStub) -> Any:
    return stub.GetAnalyzerInfo(empty_pb2.Empty(), timeout=30)
