"""Manifest security scan: every Kubernetes object of a stack as YAML, checked by checkov.

    python -m tools.scan_manifests [STACK ...] [--out DIR] [--check] [--baseline FILE]

Runs the offline preview of each STACK (default: dev prod) in this process and writes every
Kubernetes object the program creates into DIR/<stack>/ (default build/manifests), one file
per object named <Kind>.<namespace or _cluster>.<name>.yaml:

- typed objects (Namespace, ServiceAccount, PersistentVolume(Claim), Secret, ConfigMap,
  NetworkPolicy, DaemonSet, ...) as the provider receives them. Secrets keep their shape but
  every value is replaced by a fixed placeholder, so nothing secret is ever written;
- custom resources (RayCluster, RayJob, the GKE network objects) as they are, and the pod
  templates of RayCluster and RayJob as standalone ``Pod`` manifests (<raycluster>-head,
  <raycluster>-worker-<group>, <rayjob>-submitter when the RayJob has a submitterPodTemplate)
  carrying the labels KubeRay puts on them, so checkov's Kubernetes checks see the workload
  containers (checkov does not look inside custom resources);
- not written, listed with the reason in DIR/<stack>/SKIPPED.txt: Helm releases (values, not
  manifests: the chart renders them at deploy time) and yaml ConfigGroups (remote YAML read at
  deploy time: the KubeRay CRDs).

With --check, checkov (.venv-checkov, built by `make .venv-checkov/.installed`) scans exactly
the files written, offline (--skip-download, --skip-results-upload, no API key, no update
check), and every failed check is compared with the committed baseline
(security/checkov-baseline.yaml): each failure not excepted there is printed as
``CHECK_ID  RESOURCE  FILE  check name``.

Exit codes:
    0  manifests written; with --check: no failed check outside the baseline
    1  --check: at least one failed check not in the baseline (each one printed)
    2  invalid input: unknown stack / invalid stack config, or an invalid baseline
    3  the scan could not run: the preview failed, checkov is missing or crashed, or a
       written manifest was not parsed/scanned by checkov
"""

from __future__ import annotations

import argparse
import base64
import copy
import fnmatch
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_STACKS = ("dev", "prod")
DEFAULT_OUT = ROOT / "build" / "manifests"
DEFAULT_BASELINE = ROOT / "security" / "checkov-baseline.yaml"
CHECKOV = ROOT / ".venv-checkov" / "bin" / "checkov"
SKIPPED_FILE = "SKIPPED.txt"
# Written in place of every Secret value: the preview's values are placeholders anyway, but the
# scan never writes a value it did not make up.
SECRET_VALUE = "scan-placeholder"

EXIT_OK, EXIT_FINDINGS, EXIT_INVALID, EXIT_SCAN_ERROR = 0, 1, 2, 3

_K8S_TYPE = re.compile(r"kubernetes:([^/:]+)/([^:]+):(\w+)")
# Registrations under kubernetes: that are not objects of their own.
NOT_MANIFESTS = {
    "helm.sh": "Helm release: its values are not a manifest; the chart renders the objects at "
               "deploy time (not scanned here)",
    "yaml": "yaml ConfigGroup/ConfigFile: remote YAML read by the provider at deploy time "
            "(here the KubeRay CRDs, which have no pod specs; not scanned here)",
    "kustomize": "kustomize directory rendered at deploy time (not scanned here)",
}
CHECK_ID = re.compile(r"^CKV2?_K8S_\d+$")
# Kinds checkov's Kubernetes checks look into for containers.
WORKLOAD_KINDS = {"Pod", "DaemonSet", "Deployment", "StatefulSet", "ReplicaSet", "Job",
                  "CronJob", "ReplicationController", "PodTemplate"}


class ScanError(Exception):
    """The scan could not run (checkov missing, crashed, or a manifest went unscanned)."""


class BaselineError(Exception):
    """The baseline file is unusable; the message lists every problem."""


# ------------------------------------------------------------------------------------------
# Manifests
# ------------------------------------------------------------------------------------------


@dataclass
class Manifest:
    manifest: dict[str, Any]
    source: str                      # the Pulumi URN (and template path) it comes from

    @property
    def kind(self) -> str:
        return self.manifest["kind"]

    @property
    def name(self) -> str:
        return self.manifest.get("metadata", {}).get("name", "")

    @property
    def namespace(self) -> str | None:
        return self.manifest.get("metadata", {}).get("namespace")

    @property
    def filename(self) -> str:
        return f"{self.kind}.{self.namespace or '_cluster'}.{self.name}.yaml"


@dataclass
class StackManifests:
    stack: str
    manifests: list[Manifest]
    skipped: list[tuple[str, str]]   # (urn, reason)
    files: list[Path] = field(default_factory=list)


def _strip_meta(inputs: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in inputs.items() if not k.startswith("__")}


def _mask_secret(manifest: dict[str, Any]) -> dict[str, Any]:
    masked = copy.deepcopy(manifest)
    if isinstance(masked.get("stringData"), dict):
        masked["stringData"] = {k: SECRET_VALUE for k in masked["stringData"]}
    if isinstance(masked.get("data"), dict):
        encoded = base64.b64encode(SECRET_VALUE.encode()).decode()
        masked["data"] = {k: encoded for k in masked["data"]}
    return masked


def _template_pod(owner: dict[str, Any], template: dict[str, Any], name: str,
                  labels: dict[str, str], source: str) -> Manifest:
    meta = template.get("metadata") or {}
    owner_meta = owner.get("metadata") or {}
    metadata: dict[str, Any] = {"name": name}
    if owner_meta.get("namespace"):
        metadata["namespace"] = owner_meta["namespace"]
    metadata["labels"] = {**(meta.get("labels") or {}), **labels}
    annotations = dict(meta.get("annotations") or {})
    annotations["gke-grpo/scan-source"] = source
    metadata["annotations"] = annotations
    return Manifest({"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
                     "spec": copy.deepcopy(template.get("spec") or {})}, source)


def workload_pods(manifest: dict[str, Any], urn: str) -> list[Manifest]:
    """The pod templates of a RayCluster or RayJob as standalone Pods, labelled as KubeRay
    labels the pods it creates (so label-based checks such as NetworkPolicy coverage apply)."""
    kind = manifest.get("kind")
    name = (manifest.get("metadata") or {}).get("name", "")
    spec = manifest.get("spec") or {}
    pods: list[Manifest] = []
    if kind == "RayCluster":
        head = (spec.get("headGroupSpec") or {}).get("template")
        if head:
            pods.append(_template_pod(
                manifest, head, f"{name}-head",
                {"ray.io/cluster": name, "ray.io/node-type": "head", "ray.io/group": "headgroup"},
                f"{urn} spec.headGroupSpec.template"))
        for i, group in enumerate(spec.get("workerGroupSpecs") or []):
            if group.get("template"):
                group_name = group.get("groupName", str(i))
                pods.append(_template_pod(
                    manifest, group["template"], f"{name}-worker-{group_name}",
                    {"ray.io/cluster": name, "ray.io/node-type": "worker", "ray.io/group": group_name},
                    f"{urn} spec.workerGroupSpecs[{i}].template"))
    elif kind == "RayJob":
        submitter = spec.get("submitterPodTemplate")
        if submitter:
            pods.append(_template_pod(manifest, submitter, f"{name}-submitter",
                                      {"ray.io/originated-from-cr-name": name},
                                      f"{urn} spec.submitterPodTemplate"))
        cluster_spec = spec.get("rayClusterSpec")
        if cluster_spec:
            pods += workload_pods({"kind": "RayCluster", "metadata": manifest.get("metadata"),
                                   "spec": cluster_spec}, f"{urn} spec.rayClusterSpec")
    return pods


def stack_manifests(result) -> StackManifests:
    """Every Kubernetes object of a tools.preview.PreviewResult, plus the workload Pods."""
    from tools.preview import manifest_from_registration

    manifests: list[Manifest] = []
    skipped: list[tuple[str, str]] = []
    for r in result.resources:
        match = _K8S_TYPE.fullmatch(r.type)
        if not match:
            continue
        group = match.group(1)
        if group in NOT_MANIFESTS:
            skipped.append((r.urn, NOT_MANIFESTS[group]))
            continue
        if r.type == "kubernetes:core/v1:Secret":
            # raw_inputs keep the Secret's shape (inputs mask stringData as a whole).
            manifest = _mask_secret(manifest_from_registration(r.type, _strip_meta(r.raw_inputs)))
        else:
            manifest = manifest_from_registration(r.type, _strip_meta(r.inputs))
        manifests.append(Manifest(manifest, r.urn))
        manifests += workload_pods(manifest, r.urn)
    names = [m.filename for m in manifests]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ScanError(f"{result.stack}: two objects would share a file: {', '.join(duplicates)}")
    return StackManifests(result.stack, manifests, skipped)


def write_manifests(stack: StackManifests, out: Path) -> StackManifests:
    """Write into out/<stack>/, first removing what an earlier run wrote there."""
    directory = out / stack.stack
    directory.mkdir(parents=True, exist_ok=True)
    for old in [*directory.glob("*.yaml"), directory / SKIPPED_FILE]:
        if old.is_file():
            old.unlink()
    stack.files = []
    for m in stack.manifests:
        path = directory / m.filename
        path.write_text(f"# {m.source}\n" + yaml.safe_dump(m.manifest, sort_keys=False))
        stack.files.append(path)
    lines = [f"{urn}\n    {reason}\n" for urn, reason in stack.skipped]
    (directory / SKIPPED_FILE).write_text(
        "Kubernetes registrations not written as manifests, and why:\n\n" + "".join(lines)
        if lines else "Every Kubernetes registration was written as a manifest.\n")
    return stack


# ------------------------------------------------------------------------------------------
# checkov
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ManifestFinding:
    check_id: str
    check_name: str
    resource: str         # checkov's <Kind>.<namespace>.<name>
    file: Path            # absolute
    result: str           # PASSED / FAILED / SKIPPED


@dataclass
class CheckovReport:
    findings: list[ManifestFinding]
    parsing_errors: list[str]
    seconds: float
    command: list[str]

    @property
    def failed(self) -> list[ManifestFinding]:
        return [f for f in self.findings if f.result == "FAILED"]

    def scanned_files(self) -> set[Path]:
        return {f.file for f in self.findings}

    def under(self, directory: Path) -> CheckovReport:
        directory = directory.resolve()
        return CheckovReport([f for f in self.findings if f.file.is_relative_to(directory)],
                             [p for p in self.parsing_errors if Path(p).is_relative_to(directory)],
                             self.seconds, self.command)


def checkov_env() -> dict[str, str]:
    """The environment for checkov: no platform credentials (so it never talks to Prisma
    Cloud / Bridgecrew), no PyPI update check, no mapping download."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("BC_", "PRISMA_", "CKV_", "CHECKOV_"))}
    env.update({"CKV_SKIP_PACKAGE_UPDATE_CHECK": "true", "BC_SKIP_MAPPING": "TRUE",
                "CHECKOV_NO_OUTPUT": "false", "PYTHONWARNINGS": "ignore"})
    return env


def checkov_command(files: Iterable[Path], checkov: Path = CHECKOV) -> list[str]:
    return [str(checkov), "--framework", "kubernetes", "--skip-download", "--skip-results-upload",
            "--compact", "--output", "json", "--file", *(str(f) for f in files)]


def run_checkov(files: list[Path], checkov: Path = CHECKOV, timeout: float = 600) -> CheckovReport:
    """One checkov run over exactly `files` (one JSON document); every result, passed too."""
    if not Path(checkov).exists():
        raise ScanError(f"{checkov} not found: run `make .venv-checkov/.installed`")
    files = [f.resolve() for f in files]
    command = checkov_command(files, checkov)
    started = time.monotonic()
    try:
        done = subprocess.run(command, check=False, capture_output=True, text=True, env=checkov_env(),
                              cwd=os.path.commonpath([str(f.parent) for f in files]),
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        raise ScanError(f"checkov did not finish in {timeout:.0f} s") from None
    seconds = time.monotonic() - started
    # checkov exits 1 when a check failed; anything else but 0 is a crash.
    if done.returncode not in (0, 1):
        raise ScanError(f"checkov exited {done.returncode}:\n{done.stderr[-4000:]}")
    try:
        document = json.loads(done.stdout)
    except json.JSONDecodeError:
        raise ScanError(f"checkov printed no JSON document:\n{done.stdout[:2000]}\n{done.stderr[-2000:]}") from None
    if isinstance(document, list):
        document = next((d for d in document if d.get("check_type") == "kubernetes"), {})
    results = document.get("results") or {}
    findings = []
    for key, outcome in (("passed_checks", "PASSED"), ("failed_checks", "FAILED"),
                         ("skipped_checks", "SKIPPED")):
        for item in results.get(key) or []:
            findings.append(ManifestFinding(item["check_id"], item.get("check_name") or "",
                                    item["resource"], Path(item["file_abs_path"]).resolve(), outcome))
    parsing_errors = [str(p) for p in results.get("parsing_errors") or []]
    return CheckovReport(findings, parsing_errors, seconds, command)


def require_scanned(report: CheckovReport, files: list[Path]) -> None:
    """Every written workload manifest (a Pod or a built-in workload) must have been checked:
    a manifest checkov silently failed to read would otherwise pass."""
    problems = [f"checkov could not parse {p}" for p in report.parsing_errors]
    scanned = report.scanned_files()
    for path in files:
        kind = yaml.safe_load(path.read_text()).get("kind")
        if kind in WORKLOAD_KINDS and path.resolve() not in scanned:
            problems.append(f"checkov reported nothing for {path}")
    if problems:
        raise ScanError("\n".join(problems))



# ------------------------------------------------------------------------------------------
# Baseline
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BaselineEntry:
    check: str
    resource: str       # fnmatch pattern over checkov's <Kind>.<namespace>.<name>
    reason: str

    def matches(self, finding: ManifestFinding) -> bool:
        return finding.check_id == self.check and fnmatch.fnmatchcase(finding.resource, self.resource)


BASELINE_KEYS = {"check", "resource", "reason"}


def load_baseline(path: Path = DEFAULT_BASELINE) -> list[BaselineEntry]:
    """The committed exceptions. Refused (BaselineError, every problem listed): not a list,
    an entry without a non-empty reason, an unknown key, a check id that is not a Kubernetes
    check, a resource that is not <Kind>.<namespace>.<name> or is a global pattern (wildcard
    kind or a name that is only wildcards), a duplicate."""
    try:
        document = yaml.safe_load(Path(path).read_text())
    except OSError as err:
        raise BaselineError(f"cannot read {path}: {err.strerror}") from None
    except yaml.YAMLError as err:
        raise BaselineError(f"{path} is not valid YAML: {err}") from None
    if document is None:
        return []
    if not isinstance(document, list):
        raise BaselineError(f"{path}: expected a list of {{check, resource, reason}} entries")
    problems: list[str] = []
    entries: list[BaselineEntry] = []
    seen: set[tuple[str, str]] = set()
    for i, entry in enumerate(document):
        where = f"{path}: entry {i + 1}"
        if not isinstance(entry, dict):
            problems.append(f"{where}: expected a mapping with check, resource and reason")
            continue
        where += f" ({entry.get('check')} {entry.get('resource')})"
        unknown = sorted(set(map(str, entry)) - BASELINE_KEYS)
        if unknown:
            problems.append(f"{where}: unknown key(s) {', '.join(unknown)}")
        check, resource, reason = entry.get("check"), entry.get("resource"), entry.get("reason")
        if not isinstance(reason, str) or not reason.strip():
            problems.append(f"{where}: no reason: every exception says why it is accepted")
        if not isinstance(check, str) or not CHECK_ID.match(check):
            problems.append(f"{where}: check must be one Kubernetes check id (CKV_K8S_n or CKV2_K8S_n)")
        parts = resource.split(".", 2) if isinstance(resource, str) else []
        if len(parts) != 3 or not all(parts):
            problems.append(f"{where}: resource must be <Kind>.<namespace>.<name> (a pattern allowed)")
        elif any(c in parts[0] for c in "*?[") or not parts[2].strip("*?"):
            problems.append(f"{where}: resource {resource!r} is too broad: name the kind and the object")
        key = (check, resource)
        if key in seen:
            problems.append(f"{where}: duplicate entry")
        seen.add(key)
        if isinstance(check, str) and isinstance(resource, str) and isinstance(reason, str):
            entries.append(BaselineEntry(check, resource, reason.strip()))
    if problems:
        raise BaselineError("\n".join(problems))
    return entries


@dataclass
class Gate:
    new_failures: list[ManifestFinding]              # failed and not excepted: the scan fails
    accepted: list[tuple[ManifestFinding, BaselineEntry]]
    unused: list[BaselineEntry]              # entries that matched no failure

    @property
    def ok(self) -> bool:
        return not self.new_failures


def apply_baseline(report: CheckovReport, baseline: list[BaselineEntry]) -> Gate:
    new: list[ManifestFinding] = []
    accepted: list[tuple[ManifestFinding, BaselineEntry]] = []
    used: set[BaselineEntry] = set()
    for finding in report.failed:
        entry = next((e for e in baseline if e.matches(finding)), None)
        if entry is None:
            new.append(finding)
        else:
            accepted.append((finding, entry))
            used.add(entry)
    return Gate(sorted(new, key=lambda f: (str(f.file), f.check_id)), accepted,
                [e for e in baseline if e not in used])


def _display(path: Path, base: Path) -> str:
    try:
        return str(path.relative_to(base))
    except ValueError:
        return str(path)


# ------------------------------------------------------------------------------------------
# CLI
# ------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.scan_manifests",
                                     description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="Exit codes:" + __doc__.split("Exit codes:")[1])
    parser.add_argument("stacks", nargs="*", metavar="STACK",
                        help=f"stacks to scan (default: {' '.join(DEFAULT_STACKS)})")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help="where the manifests go, one folder per stack (default: build/manifests)")
    parser.add_argument("--check", action="store_true",
                        help="run checkov on the manifests and fail on checks not in the baseline")
    parser.add_argument("--baseline", type=Path, default=DEFAULT_BASELINE,
                        help="the exceptions file (default: security/checkov-baseline.yaml)")
    parser.add_argument("--checkov", type=Path, default=CHECKOV, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    import logging

    from tools.preview import PreviewInputError, run_preview

    logging.basicConfig(level=logging.ERROR, stream=sys.stderr, format="%(levelname)s: %(message)s")
    baseline: list[BaselineEntry] = []
    if args.check:
        try:
            baseline = load_baseline(args.baseline)
        except BaselineError as err:
            print(f"error: invalid baseline:\n{err}", file=sys.stderr)
            return EXIT_INVALID

    written: list[StackManifests] = []
    for stack in args.stacks or list(DEFAULT_STACKS):
        try:
            result = run_preview(stack)
        except PreviewInputError as err:
            print(f"error: {err}", file=sys.stderr)
            return EXIT_INVALID
        if result.problems:
            print(f"error: {stack}: {result.error}", file=sys.stderr)
            return EXIT_INVALID
        if result.error:
            print(f"error: {stack}: the preview failed: {result.error}", file=sys.stderr)
            return EXIT_SCAN_ERROR
        try:
            manifests = write_manifests(stack_manifests(result), args.out)
        except ScanError as err:
            print(f"error: {err}", file=sys.stderr)
            return EXIT_SCAN_ERROR
        written.append(manifests)
        print(f"{stack}: {len(manifests.files)} manifests in {args.out / stack}"
              + (f" ({len(manifests.skipped)} registrations not manifests: see {SKIPPED_FILE})"
                 if manifests.skipped else ""))
    if not args.check:
        return EXIT_OK
    return _check(written, baseline, args.checkov, args.out)


def _check(written: list[StackManifests], baseline: list[BaselineEntry], checkov: Path, out: Path) -> int:
    """--check: checkov over the written manifests, gated by the baseline; the exit code."""
    files = [f for s in written for f in s.files]
    try:
        report = run_checkov(files, checkov)
        require_scanned(report, files)
    except ScanError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_SCAN_ERROR
    gate = apply_baseline(report, baseline)
    passed = sum(1 for f in report.findings if f.result == "PASSED")
    print(f"checkov {len(files)} files in {report.seconds:.1f} s: {passed} passed, "
          f"{len(report.failed)} failed ({len(gate.accepted)} in the baseline, "
          f"{len(gate.new_failures)} not)")
    for entry in gate.unused:
        print(f"note: baseline entry matched nothing in this scan: {entry.check} {entry.resource}")
    if gate.new_failures:
        print("failed checks not in the baseline:", file=sys.stderr)
        for f in gate.new_failures:
            print(f"  {f.check_id}  {f.resource}  {_display(f.file, out.resolve())}  {f.check_name}",
                  file=sys.stderr)
        return EXIT_FINDINGS
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
