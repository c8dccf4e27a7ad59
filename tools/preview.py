"""Offline preview: the real ``__main__.py`` under Pulumi's mock runtime, no CLI, no cloud.

    python -m tools.preview STACK [--config-file FILE] [--json] [--deployed-outputs FILE]

Prints, top down, the tree of what will be created (as ``pulumi preview`` draws it), the outputs
(long ones summarised), the capacity plan and cost, the warnings (one line each) and the commands
to run next; or with --json the one JSON document of DESIGN.md (the warnings then on stderr):
resources sorted by URN with their parent, dependencies (from the real registration requests,
recorded by ``RecordingMonitor``), protect flag and inputs as the provider would receive them.
Secrets, wherever they sit, print as "[secret]". An invalid config prints its problems on
stderr, nothing on stdout, and exits 2.
"""

from __future__ import annotations

import argparse
import contextvars
import copy
import json
import logging
import os
import re
import runpy
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PROJECT = "gke-grpo"
SECRET_MASK = "[secret]"
# Pulumi's wire-format signatures (sdk/python/lib/pulumi/runtime/rpc.py).
_SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"
_RESOURCE_SIG = "5cf8f73096256a8f31e491e813e4eb8e"
_SIG_KEY = "4dabf18193072939515e22adb298388d"
_UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"
# SECRET_PLACEHOLDER (jobs/plan/stack_file.py) stands in for a `secure:` value it cannot decrypt.

EXIT_OK, EXIT_ERROR, EXIT_INVALID_CONFIG = 0, 1, 2


class PreviewInputError(Exception):
    """The preview's own input (stack name, config file) is unusable."""


@dataclass
class Registration:
    urn: str
    type: str
    name: str
    parent: str | None
    custom: bool
    protect: bool
    dependencies: list[str]
    inputs: dict[str, Any]
    ignore_changes: list[str]
    delete_before_replace: bool
    provider: str = ""
    # Raw inputs with secrets unwrapped: for tests that check values, never printed.
    raw_inputs: dict[str, Any] = field(repr=False, default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {
            "urn": self.urn, "type": self.type, "name": self.name, "parent": self.parent,
            "custom": self.custom, "protect": self.protect, "dependencies": self.dependencies,
            "ignoreChanges": self.ignore_changes,
            "deleteBeforeReplace": self.delete_before_replace, "inputs": self.inputs,
        }


@dataclass
class PreviewResult:
    stack: str
    resources: list[Registration]
    outputs: dict[str, Any]
    problems: list[Any]          # components.config.Problem, when the config is invalid
    error: str | None         # the message printed for an invalid config or a failed run
    unknown_inputs: list[str]    # "<urn> <path>" of every input left unknown
    register_calls: int          # RegisterResource calls other than the stack's own
    # The program's warnings (pulumi.log.warn), in order; not part of the JSON document.
    warnings: list[str] = field(default_factory=list)

    def by_type(self, type_: str) -> list[Registration]:
        return [r for r in self.resources if r.type == type_]

    def one(self, type_: str) -> Registration:
        found = self.by_type(type_)
        if len(found) != 1:
            raise AssertionError(f"expected one {type_}, found {len(found)}")
        return found[0]

    def document(self) -> dict[str, Any]:
        return {
            "project": PROJECT, "stack": self.stack,
            "resources": [r.as_json() for r in self.resources],
            "outputs": self.outputs,
        }


def _json_value(value: Any, path: str, unknowns: list[str], reveal: bool) -> Any:
    """Wire value -> JSON value: secrets masked (unless reveal), resource references as URNs,
    integral floats (protobuf Struct has only doubles) back to ints, unknowns recorded."""
    if isinstance(value, dict):
        if value.get(_SIG_KEY) == _SECRET_SIG:
            inner = _json_value(value.get("value"), path, unknowns, reveal)
            return inner if reveal else SECRET_MASK
        if value.get(_SIG_KEY) == _RESOURCE_SIG:
            return value.get("urn")
        return {k: _json_value(v, f"{path}.{k}" if path else k, unknowns, reveal)
                for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [_json_value(v, f"{path}[{i}]", unknowns, reveal) for i, v in enumerate(value)]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if value == _UNKNOWN:
        unknowns.append(path)
        return "[unknown]"
    return value


def _digest_binary_data(type_: str, inputs: dict[str, Any]) -> dict[str, Any]:
    """A ConfigMap's binaryData shown as ``sha256:<hex> (<n> bytes)`` of each decoded value: the
    head's code archive (components/head_code.py) is large, opaque base64, and a review wants to
    see only whether it changed. The registration's raw inputs keep the value itself."""
    binary = inputs.get("binaryData")
    if type_ != "kubernetes:core/v1:ConfigMap" or not isinstance(binary, dict):
        return inputs
    import base64
    import hashlib

    shown = {}
    for key, value in binary.items():
        if isinstance(value, str) and value not in (SECRET_MASK, "[unknown]"):
            data = base64.b64decode(value)
            shown[key] = f"sha256:{hashlib.sha256(data).hexdigest()} ({len(data)} bytes)"
        else:
            shown[key] = value
    return {**inputs, "binaryData": shown}


def _make_monitor_class():
    from google.protobuf import json_format
    from pulumi.runtime.mocks import MockMonitor

    class RecordingMonitor(MockMonitor):
        """A MockMonitor that records every registration request as the engine receives it:
        parent, dependencies, protect, and the inputs with their secret envelopes intact (the
        mocks see them unwrapped), so secrets can be masked before anything is printed."""

        def __init__(self, mocks):
            super().__init__(mocks)
            self.registrations: list[Registration] = []
            self.unknown_inputs: list[str] = []
            self.stack_outputs: dict[str, Any] = {}
            self.stack_urn: str | None = None

        def make_urn(self, parent: str, type_: str, name: str) -> str:
            # The engine leaves the root stack's type out of its children's URNs; so do we,
            # so that URNs here are the ones `pulumi preview` shows.
            if parent and parent.split("::")[2] == "pulumi:pulumi:Stack":
                parent = ""
            return super().make_urn(parent, type_, name)

        def RegisterResource(self, request):
            response = super().RegisterResource(request)
            if request.type == "pulumi:pulumi:Stack":
                self.stack_urn = response.urn
                return response
            wire = json_format.MessageToDict(request.object)
            unknowns: list[str] = []
            inputs = _digest_binary_data(request.type, _json_value(wire, "", unknowns, reveal=False))
            raw = _json_value(wire, "", [], reveal=True)
            self.unknown_inputs.extend(f"{response.urn} {path}" for path in unknowns)
            self.registrations.append(Registration(
                urn=response.urn, type=request.type, name=request.name,
                parent=request.parent or None, custom=bool(request.custom),
                protect=bool(request.protect),
                dependencies=sorted(set(request.dependencies)),
                inputs=inputs, ignore_changes=sorted(request.ignoreChanges),
                delete_before_replace=bool(request.deleteBeforeReplace), raw_inputs=raw,
                provider=request.provider,
            ))
            return response

        def RegisterResourceOutputs(self, request):
            if request.urn == self.stack_urn:
                unknowns: list[str] = []
                self.stack_outputs = _json_value(json_format.MessageToDict(request.outputs), "",
                                            unknowns, reveal=False)
                self.unknown_inputs.extend(f"{request.urn} outputs.{p}" for p in unknowns)
            return super().RegisterResourceOutputs(request)

    return RecordingMonitor


def manifest_from_registration(type_token: str, inputs: dict[str, Any]) -> dict[str, Any]:
    """Engine inputs of a ``kubernetes:<group>/<version>:<Kind>`` resource as a manifest:
    apiVersion and kind filled in from the type token when absent ("core" is the legacy group,
    written without a prefix)."""
    match = re.fullmatch(r"kubernetes:([^/:]+)/([^:]+):(\w+)", type_token)
    if not match:
        raise ValueError(f"{type_token!r} is not a Kubernetes resource type")
    group, version, kind = match.groups()
    manifest = copy.deepcopy(inputs)
    manifest.setdefault("apiVersion", version if group == "core" else f"{group}/{version}")
    manifest.setdefault("kind", kind)
    return manifest


# ------------------------------------------------------------------------------------------
# Config files
# ------------------------------------------------------------------------------------------


def read_config_file(path: Path) -> tuple[dict[str, str], set[str]]:
    """A Pulumi.<stack>.yaml -> (config map as the engine hands it to the program, secret keys),
    read by the one stack-file reader (jobs/plan/stack_file.py: size cap, UTF-8, no aliases, bounded
    depth, no duplicate keys) that preflight and the jobs CLI use too."""
    from components.config import OFFLINE_SECRET_KEYS
    from jobs.plan.stack_file import ConfigFileError, read_stack_file

    try:
        return read_stack_file(path, OFFLINE_SECRET_KEYS)
    except ConfigFileError as err:
        raise PreviewInputError(str(err)) from None


# ------------------------------------------------------------------------------------------
# Running the program
# ------------------------------------------------------------------------------------------


def run_preview(stack: str, config_file: Path | None = None,
                deployed_outputs: dict[str, Any] | None = None) -> PreviewResult:
    """Run ``__main__.py`` for STACK under mocks and return what was registered."""
    from jobs.plan.stack_file import ConfigFileError, stack_file_path

    try:
        path = stack_file_path(ROOT, stack, config_file)
    except ConfigFileError as err:
        raise PreviewInputError(str(err)) from None
    raw, secret_keys = read_config_file(path)
    return run_with_config(stack, raw, secret_keys, deployed_outputs)


def run_with_config(stack: str, raw: dict[str, str], secret_keys: set[str],
                    deployed_outputs: dict[str, Any] | None = None) -> PreviewResult:
    """``deployed_outputs``: the stack's last outputs, as if deployed (`pulumi stack output
    --json`); the program compares its deployedIdentity with the config's."""
    # A fresh context per run: the SDK keeps its settings, root resource and config in
    # context variables, so several previews can run in one process (the tests do).
    return contextvars.Context().run(_run_in_fresh_context, stack, raw, secret_keys, deployed_outputs)


def read_deployed_outputs(path: Path) -> dict[str, Any]:
    """A `pulumi stack output --json` document (PreviewInputError when unusable)."""
    from jobs.plan.stack_file import MAX_BYTES

    try:
        text = path.read_text(encoding="utf-8")
        if len(text) > MAX_BYTES:
            raise PreviewInputError(f"{path} is larger than {MAX_BYTES // 1024} KiB")
        value = json.loads(text)
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise PreviewInputError(f"{path}: not a JSON object of stack outputs ({type(err).__name__})") from None
    if not isinstance(value, dict):
        raise PreviewInputError(f"{path}: not a JSON object of stack outputs")
    return value


def _run_in_fresh_context(stack: str, raw: dict[str, str], secret_keys: set[str],
                          deployed_outputs: dict[str, Any] | None = None) -> PreviewResult:
    import pulumi
    from pulumi.runtime import config as runtime_config
    from pulumi.runtime import mocks as runtime_mocks
    from pulumi.runtime import settings as runtime_settings
    from pulumi.runtime.stack import run_in_stack
    from pulumi.runtime.sync_await import _sync_await

    from components.config import ConfigError
    from tools.mocks import GrpoMocks

    mocks = GrpoMocks(project=str(raw.get("gcp:project", "")), region=str(raw.get("gcp:region", "")),
                      deployed_outputs=deployed_outputs)
    monitor = _make_monitor_class()(mocks)
    # A logger of this run's own, so its warnings are this run's even when previews run side by
    # side in one process (the tests); records still reach "gke-grpo.preview"'s handlers.
    logger = logging.getLogger(f"gke-grpo.preview.{id(monitor)}")
    collected = _WarningCollector()
    logger.addHandler(collected)
    settings = runtime_mocks.MockSettings(
        monitor=monitor,
        monitor_features=set(monitor.GetDeploymentInfo(None).supportedFeatures),
        engine=runtime_mocks.MockEngine(logger),
        project=PROJECT, stack=stack, dry_run=True, organization="organization",
        callbacks=None, root_directory=str(ROOT),
    )
    runtime_settings.configure(settings)
    runtime_settings.ROOT.set(None)
    runtime_config.set_all_config(dict(raw), sorted(secret_keys))

    problems: list[Any] = []
    error: str | None = None

    def program() -> None:
        runpy.run_path(str(ROOT / "__main__.py"), run_name="__main__")

    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    try:
        _sync_await(run_in_stack(program))
    except ConfigError as err:
        problems, error = err.problems, str(err)
    except pulumi.RunError as err:
        error = str(err)
    finally:
        logger.removeHandler(collected)
    return PreviewResult(
        stack=stack,
        resources=sorted(monitor.registrations, key=lambda r: r.urn),
        outputs=monitor.stack_outputs, problems=problems, error=error,
        unknown_inputs=sorted(monitor.unknown_inputs),
        register_calls=len(monitor.registrations), warnings=collected.messages,
    )


# ------------------------------------------------------------------------------------------
# Printing
# ------------------------------------------------------------------------------------------


def _display_type(token: str) -> str:
    # gcp:compute/network:Network -> gcp:compute:Network, as `pulumi preview` shows types.
    package, module, kind = [*token.split(":"), "", ""][:3]
    return f"{package}:{module.split('/')[0]}:{kind}" if "/" in module else token


def render_tree(result: PreviewResult) -> str:
    """What will be created, as `pulumi preview` draws it, and the count."""
    stack_urn = f"urn:pulumi:{result.stack}::{PROJECT}::pulumi:pulumi:Stack::{PROJECT}-{result.stack}"
    children: dict[str | None, list[Registration]] = {}
    for r in result.resources:
        children.setdefault(r.parent or stack_urn, []).append(r)
    rows: list[tuple[str, str, str]] = [("", "pulumi:pulumi:Stack", f"{PROJECT}-{result.stack}")]

    def walk(urn: str, prefix: str) -> None:
        kids = sorted(children.get(urn, []), key=lambda r: (r.name, r.type))
        for i, r in enumerate(kids):
            last = i == len(kids) - 1
            flag = " [protect]" if r.protect else ""
            rows.append((prefix + ("└─ " if last else "├─ "), _display_type(r.type), r.name + flag))
            walk(r.urn, prefix + ("   " if last else "│  "))

    walk(stack_urn, "")
    width = max(len(p + t) for p, t, _ in rows) + 2
    name_width = max(len(n) for _, _, n in rows) + 2
    lines = [f"Previewing update ({result.stack}) offline, under Pulumi mocks:", "",
             f"     {'Type'.ljust(width)}{'Name'.ljust(name_width)}Plan"]
    lines += [f" +   {(p + t).ljust(width)}{n.ljust(name_width)}create" for p, t, n in rows]
    lines += ["", "Resources:", f"    + {len(result.resources) + 1} to create"]
    return "\n".join(lines) + "\n"


# An output longer than this (as JSON) is summarised in the text view; --json prints it whole.
OUTPUT_MAX = 100


def output_summary(value: Any) -> str:
    """One short line for an output: the value itself when short, else what it is and how long."""
    text = json.dumps(value, sort_keys=True)
    if len(text) <= OUTPUT_MAX:
        return text
    size = f"{len(text):,} characters"
    if isinstance(value, dict):
        keys = ", ".join(sorted(value))
        keys = keys if len(keys) <= 60 else keys[:57].rsplit(",", 1)[0] + ", ..."
        return f"{{{len(value)} keys: {keys}}} ({size})"
    if isinstance(value, list):
        return f"[{len(value)} items] ({size})"
    return f"{text[:60]}... ({size})"


def render_outputs(result: PreviewResult) -> str:
    lines = [f"Outputs (longer than {OUTPUT_MAX} characters: summarised; --json prints every one in full):"]
    lines += [f"    {key}: {output_summary(value)}" for key, value in sorted(result.outputs.items())]
    if isinstance(result.outputs.get("gpuCapacity"), dict):
        from components.gpu_capacity import describe_capacity
        lines += ["", "Capacity plan:"] + [f"    {line}" for line in describe_capacity(result.outputs["gpuCapacity"])]
    if isinstance(result.outputs.get("costEstimate"), dict):
        from components.cost import describe
        lines += ["", "Cost estimate:"] + [f"    {line}" for line in describe(result.outputs["costEstimate"])]
    return "\n".join(lines) + "\n"


def render_next(stack: str, config_file: Path | None = None) -> str:
    """What to run next, each with why."""
    file = f" --config-file {config_file}" if config_file else ""
    commands = [
        (f"gke-grpo preflight --stack {stack}{file}", "the job config against verl / NeMo RL rules"),
        (f"python -m tools.preview {stack}{file} --json", "every resource's inputs and every output in full"),
        (f"pulumi preview --diff --stack {stack} --policy-pack policy",
         "the real preview against your project (docs/deploy.md)"),
    ]
    width = max(len(command) for command, _ in commands) + 2
    return "Next:\n" + "".join(f"    {command.ljust(width)}# {why}\n" for command, why in commands)


def render_text(result: PreviewResult, *, details: bool = False, config_file: Path | None = None) -> str:
    """The text view, in the order a person reads it: what will be created, the outputs (long
    ones summarised), the warnings (one line each), what to run next."""
    parts = [render_tree(result), render_outputs(result)]
    warnings = render_warnings(result.warnings, details=details)
    if warnings:
        parts.append(warnings.rstrip("\n") + "\n")
    parts.append(render_next(result.stack, config_file))
    return "\n".join(parts)


class _WarningCollector(logging.Handler):
    """The program's warnings (pulumi.log.warn under the mocks), kept for one grouped block."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


# A warning's one-line form: its first sentence (the program writes each warning's summary first).
SUMMARY_MAX = 160


def warning_summary(message: str) -> str:
    first = message.split(". ", 1)[0].split("\n", 1)[0].rstrip(".")
    return first if len(first) <= SUMMARY_MAX else first[:SUMMARY_MAX - 3].rstrip() + "..."


def render_warnings(messages: list[str], *, details: bool) -> str:
    """The warnings as one block: one line each (the whole text with --details), repeats once."""
    unique = list(dict.fromkeys(messages))
    if not unique:
        return ""
    lines = [f"{len(unique)} warning{'s' if len(unique) > 1 else ''}"
             + ("" if details else " (first sentences; --details prints them in full, "
                "docs/troubleshooting.md#preview-warnings says what each means)") + ":"]
    for message in unique:
        lines.append(f"  - {message if details else warning_summary(message)}")
    return "\n".join(lines) + "\n\n"


def render_json(result: PreviewResult) -> str:
    return json.dumps(result.document(), indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.preview", description=__doc__.split("\n\n")[0])
    parser.add_argument("stack", help="stack name: reads Pulumi.STACK.yaml unless --config-file")
    parser.add_argument("--config-file", type=Path, help="a stack file to use instead")
    parser.add_argument("--json", action="store_true", help="print the JSON document of DESIGN.md")
    parser.add_argument("--deployed-outputs", type=Path, metavar="FILE",
                        help="the stack's last outputs (`pulumi stack output --json`): say what the "
                             "config would replace of what they describe")
    parser.add_argument("--details", action="store_true",
                        help="print each warning in full (default: its first sentence, one line each)")
    args = parser.parse_args(argv)
    try:
        deployed = read_deployed_outputs(args.deployed_outputs) if args.deployed_outputs else None
        result = run_preview(args.stack, args.config_file, deployed)
    except PreviewInputError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_INVALID_CONFIG
    except Exception as err:
        if os.environ.get("GKE_GRPO_DEBUG") == "1":
            raise
        from jobs.contract.credentials import redact
        print(f"error: internal error ({type(err).__name__}: {redact(err)[:300]}); this is a bug "
              "of the program: rerun with GKE_GRPO_DEBUG=1 for the traceback", file=sys.stderr)
        return EXIT_ERROR
    if result.problems:
        print(f"error: {result.error}", file=sys.stderr)
        return EXIT_INVALID_CONFIG
    if result.error:
        print(f"error: {result.error}", file=sys.stderr)
        return EXIT_ERROR
    if result.unknown_inputs:
        print("error: inputs left unknown (the mocks must compute them):\n  "
              + "\n  ".join(result.unknown_inputs), file=sys.stderr)
        return EXIT_ERROR
    if args.json:
        # The document alone on stdout; the warnings beside it, one line each.
        sys.stderr.write(render_warnings(result.warnings, details=args.details))
        sys.stdout.write(render_json(result))
    else:
        sys.stdout.write(render_text(result, details=args.details, config_file=args.config_file))
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
