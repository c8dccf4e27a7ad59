"""The deployed stack, as the jobs CLI sees it: `pulumi stack output`, else the stack file offline.

    target = stack_target("dev", None, err)        # StackTarget: namespace, head service, run...
    with kubeconfig_file(target.kubeconfig) as path:   # the exported kubeconfig, mode 0600
        ...

The CLI targets what is deployed, not what the stack file says now: it reads
``pulumi stack output --json --show-secrets [-s STACK]`` (no STACK: Pulumi's selected stack, as
Pulumi itself does). The format is Pulumi's documented one (docs/cli/commands/pulumi_stack_output,
read 2026-12-01): one JSON object, output name -> value; --show-secrets prints secret outputs
(the kubeconfig) in plaintext. Only when Pulumi is not installed or the stack cannot be read does
it fall back to the stack file, and says so on stderr: then the outputs are computed from the
validated stack file (``python -m tools.stack_target STACK``, run as a subprocess: jobs/ imports
nothing of components/ or tools/; the same values __main__.py exports, without running the
program). There is no kubeconfig offline, so kubectl uses your own.

Standard library only (plus jobs.spec); secrets never appear in messages.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from jobs.contract.credentials import redact
from jobs.contract.spec import GrpoSpec

ROOT = Path(__file__).resolve().parents[2]
SECRET_MASK = "[secret]"          # tools/preview.py prints every secret so
PULUMI_TIMEOUT = 120.0
PREVIEW_TIMEOUT = 600.0


class StackError(Exception):
    """The stack's outputs could not be read (the message names why, nothing secret)."""


class PulumiUnavailable(StackError):
    """No `pulumi` executable on PATH."""


@dataclass(frozen=True)
class StackTarget:
    """What the jobs CLI needs of a stack, from its outputs (names as __main__.py exports them)."""
    stack: str | None
    source: str                         # "deployed" | "offline"
    namespace: str                      # rayNamespace
    ray_cluster_name: str               # rayClusterName
    head_service: str                   # rayDashboardService
    run_id: str | None               # runId
    submission_id: str | None        # submissionId
    checkpoint_dir: str | None       # runCheckpointDir
    spec: GrpoSpec | None            # runSpec
    cost_estimate: dict | None = None    # costEstimate
    gpu_capacity: dict | None = None     # gpuCapacity: sources, rates, idle timeout
    get_credentials: str | None = None   # getCredentials: the gcloud command for this cluster
    dashboard_url: str | None = None     # dashboardUrl: the stack's Cloud Monitoring dashboard
    kubeconfig: str | None = field(default=None, repr=False)   # secret: never printed

    @property
    def describe(self) -> str:
        where = "the deployed stack" if self.source == "deployed" else "the stack file (offline)"
        return f"stack {self.stack or '(selected)'} from {where}"


def _required(outputs: dict[str, Any], key: str, origin: str) -> str:
    value = outputs.get(key)
    if not isinstance(value, str) or not value:
        raise StackError(f"{origin} has no output {key!r}: deploy this version of the program "
                         "(`pulumi up`), or give --address URL and --run-id RUN")
    return value


def target_from_outputs(outputs: dict[str, Any], *, stack: str | None, source: str,
                        origin: str) -> StackTarget:
    """A StackTarget from a stack-outputs object; StackError naming a missing output."""
    if not isinstance(outputs, dict):
        raise StackError(f"{origin}: the outputs are not a JSON object")
    spec = None
    raw_spec = outputs.get("runSpec")
    if isinstance(raw_spec, dict):
        try:
            spec = GrpoSpec.from_json(json.dumps(_whole_numbers(raw_spec)))
        except TypeError as exc:   # an older or newer program's fields
            raise StackError(f"{origin}: output runSpec does not match this checkout's GrpoSpec "
                             f"({str(exc)[:200]}): deploy this version, or check it out") from None
        if outputs.get("runId") and spec.run_id != outputs["runId"]:
            raise StackError(f"{origin}: output runSpec hashes to run {spec.run_id}, not to the "
                             f"exported runId {outputs['runId']}: this checkout's GrpoSpec differs "
                             "from the deployed program's; check out the deployed version")
    kubeconfig = outputs.get("kubeconfig")
    if not isinstance(kubeconfig, str) or not kubeconfig.strip() or kubeconfig == SECRET_MASK:
        kubeconfig = None
    cost = outputs.get("costEstimate")

    def optional(key: str) -> str | None:
        value = outputs.get(key)
        return value if isinstance(value, str) and value else None

    return StackTarget(stack=stack, source=source,
                       namespace=_required(outputs, "rayNamespace", origin),
                       ray_cluster_name=_required(outputs, "rayClusterName", origin),
                       head_service=_required(outputs, "rayDashboardService", origin),
                       run_id=optional("runId"), submission_id=optional("submissionId"),
                       checkpoint_dir=optional("runCheckpointDir"), spec=spec,
                       cost_estimate=cost if isinstance(cost, dict) else None,
                       gpu_capacity=outputs.get("gpuCapacity")
                       if isinstance(outputs.get("gpuCapacity"), dict) else None,
                       get_credentials=optional("getCredentials"), kubeconfig=kubeconfig,
                       dashboard_url=optional("dashboardUrl"))


def deployed_run_spec(outputs: dict[str, Any]) -> GrpoSpec | None:
    """The runSpec output as this checkout's GrpoSpec; None when absent or of another version."""
    raw_spec = outputs.get("runSpec")
    if not isinstance(raw_spec, dict):
        return None
    try:
        return GrpoSpec.from_json(json.dumps(_whole_numbers(raw_spec)))
    except (TypeError, ValueError):
        return None


def _whole_numbers(fields: dict[str, Any]) -> dict[str, Any]:
    """Integer fields back to int: Pulumi carries numbers as doubles (google.protobuf Value), and
    2.0 would hash to another run than 2."""
    types = {f.name: str(f.type) for f in dataclasses.fields(GrpoSpec)}
    fixed = dict(fields)
    for name, value in fields.items():
        kind = types.get(name, "")
        if isinstance(value, float) and value.is_integer() and "int" in kind and "float" not in kind:
            fixed[name] = int(value)
    return fixed


def _run_tool(argv: Sequence[str], what: str, timeout: float) -> str:
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout,
                              cwd=ROOT, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise PulumiUnavailable(f"{argv[0]} not found") from None
    except subprocess.TimeoutExpired:
        raise StackError(f"{what} did not finish in {timeout:.0f} s") from None
    if done.returncode != 0:
        # Pulumi's and the preview's messages name the problem; no output value is in them. Kept
        # line by line: a config error lists one problem per line.
        lines = [line.rstrip() for line in redact(done.stderr).splitlines() if line.strip()]
        detail = "\n".join(lines[-60:])[-4000:] or f"exit {done.returncode}"
        raise StackError(f"{what} failed: {detail}")
    return done.stdout


def _json_object(text: str, what: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        raise StackError(f"{what} did not print JSON") from None   # never echo: it may hold secrets
    if not isinstance(value, dict):
        raise StackError(f"{what} did not print a JSON object")
    return value


def deployed_outputs(stack: str | None, pulumi: str = "pulumi") -> dict[str, Any]:
    """`pulumi stack output --json --show-secrets [-s STACK]`; PulumiUnavailable when pulumi is not
    installed, StackError when it fails (not logged in, no such stack) or the stack has no outputs
    (never deployed)."""
    if shutil.which(pulumi) is None:
        raise PulumiUnavailable(f"{pulumi} is not installed (not on PATH)")
    argv = [pulumi, "stack", "output", "--json", "--show-secrets", "--non-interactive"]
    if stack:
        argv += ["--stack", stack]
    what = f"`pulumi stack output{' -s ' + stack if stack else ''}`"
    outputs = _json_object(_run_tool(argv, what, PULUMI_TIMEOUT), what)
    if not outputs:
        raise StackError(f"{what}: the stack has no outputs (not deployed yet?)")
    return outputs


def selected_stack(pulumi: str = "pulumi") -> str | None:
    """The name Pulumi's selected stack has (`pulumi stack --show-name`), None when unknown."""
    try:
        return _run_tool([pulumi, "stack", "--show-name", "--non-interactive"], "`pulumi stack`",
                    PULUMI_TIMEOUT).strip() or None
    except StackError:
        return None


def _module(module: str, args: Sequence[str], what: str) -> str:
    return _run_tool([sys.executable, "-m", module, *args], what, PREVIEW_TIMEOUT)


def _config_file_args(config_file: str | Path | None) -> list[str]:
    # The tools run in the repository root: a path given relative to the user's directory is
    # passed on absolute, so it names the same file from anywhere.
    return ["--config-file", os.path.abspath(config_file)] if config_file else []


def offline_outputs(stack: str, config_file: str | Path | None = None) -> dict[str, Any]:
    """The outputs the CLI targets a stack by, computed from the stack file alone (`python -m
    tools.stack_target`: the config validated, and the job preflight run, as `pulumi up` would;
    no Pulumi program, so about the time reading and validating the file takes)."""
    args = [stack, *_config_file_args(config_file)]
    what = f"reading {config_file or f'Pulumi.{stack}.yaml'}"
    try:
        text = _module("tools.stack_target", args, what)
    except PulumiUnavailable:
        raise
    except StackError as exc:
        # The tool's own message names the file and every problem: show it alone.
        raise StackError(str(exc).removeprefix(f"{what} failed: ").removeprefix("error: ")) from None
    return _json_object(text, what)


RAY_CLUSTER_TYPE = "kubernetes:ray.io/v1:RayCluster"


def offline_ray_cluster(stack: str, config_file: str | Path | None = None) -> dict[str, Any]:
    """The RayCluster the program would create from the stack file, as `kubectl get raycluster
    -o json` shows its spec: from the offline preview (`python -m tools.preview STACK --json`,
    the whole program under mocks), for `serve --dry-run` without a cluster."""
    args = [stack, "--json", *_config_file_args(config_file)]
    what = f"the offline preview of {config_file or f'Pulumi.{stack}.yaml'}"
    try:
        text = _module("tools.preview", args, what)
    except StackError as exc:
        raise StackError(str(exc).removeprefix(f"{what} failed: ").removeprefix("error: ")) from None
    resources = _json_object(text, what).get("resources")
    found = [r for r in resources if isinstance(r, dict) and r.get("type") == RAY_CLUSTER_TYPE] \
        if isinstance(resources, list) else []
    if len(found) != 1 or not isinstance((found[0].get("inputs") or {}).get("spec"), dict):
        raise StackError(f"{what}: no RayCluster in it")
    return found[0]["inputs"]


def offline_spec(stack: str, config_file: str | Path | None = None) -> GrpoSpec:
    """The run spec of a stack file (the command tools/run_spec.py)."""
    args = [stack, *_config_file_args(config_file)]
    what = f"reading {config_file or f'Pulumi.{stack}.yaml'}"
    try:
        text = _module("tools.run_spec", args, what)
    except StackError as exc:
        # run_spec prints the config's problems alone: show them as they are.
        raise StackError(str(exc).removeprefix(f"{what} failed: ")) from None
    try:
        return GrpoSpec.from_json(text)
    except (ValueError, TypeError):
        raise StackError(f"{what}: tools.run_spec printed no spec") from None


def stack_target(stack: str | None, config_file: str | Path | None, err: TextIO, *,
                 pulumi: str = "pulumi") -> StackTarget:
    """The deployed stack's target; with --config-file, or when Pulumi cannot give the outputs,
    the stack file's (offline), with a note on stderr saying so."""
    if config_file is None:
        try:
            outputs = deployed_outputs(stack, pulumi)
        except StackError as exc:
            if stack is None:
                raise StackError(f"{exc}; give --stack STACK (the stack file is then read "
                                 "offline) or --address URL") from None
            print(f"[gke-grpo] {exc}: falling back to the stack file Pulumi.{stack}.yaml (offline): "
                  "what it says now, which may not be what is deployed", file=err, flush=True)
        else:
            name = stack or selected_stack(pulumi)
            return target_from_outputs(outputs, stack=name, source="deployed",
                                       origin=f"the deployed stack {name or '(selected)'}")
    else:
        print(f"[gke-grpo] --config-file: targeting {config_file} (offline), not the deployed "
              "stack", file=err, flush=True)
    assert stack is not None
    outputs = offline_outputs(stack, config_file)
    return target_from_outputs(outputs, stack=stack, source="offline",
                               origin=f"the stack file {config_file or f'Pulumi.{stack}.yaml'}")


@contextlib.contextmanager
def kubeconfig_file(kubeconfig: str | None) -> Iterator[str | None]:
    """The exported kubeconfig in a private temporary file (mode 0600, removed afterwards), or
    None when there is none (kubectl then uses your own)."""
    if not kubeconfig:
        yield None
        return
    fd, path = tempfile.mkstemp(prefix="gke-grpo-kubeconfig-", suffix=".yaml")   # mode 0600
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(kubeconfig)
        yield path
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


# The outputs the replacement check reads; nothing else of a deployed stack leaves this process.
REPLACEMENT_OUTPUTS = ("deployedIdentity", "runCheckpointDir")


def capacity_findings(stack: str, config_file: str | Path | None) -> list[str]:
    """What the stack's GPU capacity may cost before a run starts (tools/capacity_findings.py,
    run as a subprocess: jobs/ imports nothing of components/)."""
    what = f"the capacity of {config_file or f'Pulumi.{stack}.yaml'}"
    text = _module("tools.capacity_findings", [stack, *(["--config-file", str(config_file)] if config_file else [])],
                   what)
    try:
        found = json.loads(text)
    except ValueError:
        raise StackError(f"{what}: tools.capacity_findings printed no list") from None
    if not isinstance(found, list):
        raise StackError(f"{what}: tools.capacity_findings printed no list")
    return [str(line) for line in found]


def replacement_report(stack: str, config_file: str | Path | None,
                       outputs: dict[str, Any]) -> dict[str, Any]:
    """What the stack file would replace of the deployed stack whose outputs are given
    (tools/replacement_report.py, run as a subprocess: jobs/ imports nothing of components/).
    Only the identity and the checkpoint directory are written to the temporary file (mode
    0600, removed afterwards): never the kubeconfig or another secret output."""
    fd, path = tempfile.mkstemp(prefix="gke-grpo-deployed-", suffix=".json")
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump({k: outputs[k] for k in REPLACEMENT_OUTPUTS if k in outputs}, handle)
        args = [stack, "--deployed-outputs", path,
                *_config_file_args(config_file)]
        what = f"comparing {config_file or f'Pulumi.{stack}.yaml'} with the deployed stack"
        text = _module("tools.replacement_report", args, what)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
    report = _json_object(text, what)
    for key in ("refused", "replaced"):
        if not isinstance(report.get(key), list):
            raise StackError(f"{what}: no {key!r} list in the report")
    return report
