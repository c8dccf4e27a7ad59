"""The provider's ForceNew flags for every resource field this program sets, read from the Go
source of the Terraform provider pulumi-gcp bridges (data/provider-force-new.yaml).

    python -m tools.provider_schema --mirror GITDIR            # (re)write the data file
    python -m tools.provider_schema --mirror GITDIR --check    # exit 1 with a diff on drift
    python -m tools.provider_schema --mirror GITDIR --add-from-previews   # + fields now set

pulumi-gcp bridges hashicorp/terraform-provider-google-beta (pulumi/pulumi-gcp .gitmodules).
The exact upstream of the pinned pulumi-gcp 10.2.0 could not be confirmed (the stored pulumi-gcp
history ends at v9.35.0, which bridges google-beta v7.45.0): the fields are read at ``TAG``
v7.45.0, and their names are checked against the installed pulumi_gcp 10.2.0 SDK by
tests/components/test_change_effects.py. GITDIR is a git directory of google-beta (a mirror).

How a field is found: each path part (Pulumi's wire name, camelCase, lists sometimes plural) is
turned into the Terraform name and looked up inside the enclosing schema block, following the
helpers the provider builds blocks with (``"node_config": schemaNodeConfig()``,
``Elem: masterAuthorizedNetworksConfig``, ``MergeSchemas(schemaNodePool, ...)``). A field's own
``ForceNew: true`` (not a nested one) is what replaces the resource when its value changes: the
SDK applies a list or set block's ForceNew to its element count only, a primitive list's or a
map's to every element (hashicorp/terraform-plugin-sdk helper/schema/schema.go, diffList).
Conditions a CustomizeDiff adds (``ForceNewIfChange``) are in CONDITIONAL, each checked to be in
the source.
"""

from __future__ import annotations

import argparse
import difflib
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
DATA_FILE = ROOT / "data" / "provider-force-new.yaml"
UPSTREAM = "hashicorp/terraform-provider-google-beta"
TAG = "v7.45.0"
SOURCE_DIR = "google-beta"

# Pulumi type -> (Terraform resource, the files its schema lives in, under google-beta/).
RESOURCES: dict[str, tuple[str, tuple[str, ...]]] = {
    "gcp:storage/bucket:Bucket": ("google_storage_bucket", ("services/storage/resource_storage_bucket.go",)),
    "gcp:storage/bucketIAMMember:BucketIAMMember": (
        "google_storage_bucket_iam_member", ("tpgiamresource/resource_iam_member.go", "services/storage/iam_storage_bucket.go")),
    "gcp:compute/network:Network": ("google_compute_network", ("services/compute/resource_compute_network.go",)),
    "gcp:compute/subnetwork:Subnetwork": ("google_compute_subnetwork", ("services/compute/resource_compute_subnetwork.go",)),
    "gcp:compute/firewall:Firewall": ("google_compute_firewall", ("services/compute/resource_compute_firewall.go",)),
    "gcp:compute/globalAddress:GlobalAddress": (
        "google_compute_global_address", ("services/compute/resource_compute_global_address.go",)),
    "gcp:compute/router:Router": ("google_compute_router", ("services/compute/resource_compute_router.go",)),
    "gcp:compute/routerNat:RouterNat": ("google_compute_router_nat", ("services/compute/resource_compute_router_nat.go",)),
    "gcp:container/cluster:Cluster": (
        "google_container_cluster", ("services/container/resource_container_cluster.go", "services/container/node_config.go")),
    "gcp:container/nodePool:NodePool": (
        "google_container_node_pool", ("services/container/resource_container_node_pool.go", "services/container/node_config.go")),
    "gcp:lustre/instance:Instance": ("google_lustre_instance", ("services/lustre/resource_lustre_instance.go",)),
    "gcp:servicenetworking/connection:Connection": (
        "google_service_networking_connection", ("services/servicenetworking/resource_service_networking_connection.go",
                                                "tpgresource/utils.go")),
    "gcp:serviceaccount/account:Account": (
        "google_service_account", ("services/resourcemanager/resource_google_service_account.go",)),
    "gcp:projects/service:Service": (
        "google_project_service", ("services/resourcemanager/resource_google_project_service.go",)),
    "gcp:projects/iAMMember:IAMMember": (
        "google_project_iam_member", ("tpgiamresource/resource_iam_member.go", "services/resourcemanager/iam_project.go")),
    "gcp:monitoring/dashboard:Dashboard": (
        "google_monitoring_dashboard", ("services/monitoring/resource_monitoring_dashboard.go",)),
    "gcp:monitoring/alertPolicy:AlertPolicy": (
        "google_monitoring_alert_policy", ("services/monitoring/resource_monitoring_alert_policy.go",)),
}

# ForceNew decided by a CustomizeDiff: (type, path) -> (the condition, text that must be in the file).
CONDITIONAL: dict[tuple[str, str], tuple[str, str, str]] = {
    ("gcp:compute/subnetwork:Subnetwork", "ipCidrRange"): (
        "unless the new range contains the old one (an expansion is in place)",
        "services/compute/resource_compute_subnetwork.go",
        'customdiff.ForceNewIfChange("ip_cidr_range", IsShrinkageIpCidr)'),
}


class SchemaError(Exception):
    pass


def git_show(gitdir: Path, path: str) -> str:
    done = subprocess.run(["git", f"--git-dir={gitdir}", "show", f"{TAG}:{path}"],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SchemaError(f"{UPSTREAM} {TAG}:{path}: {done.stderr.strip()[:200]}")
    return done.stdout


# ---- a small Go scanner: strings, raw strings, comments and braces --------------------------------

def _skip(text: str, i: int) -> int:
    """Index after the string, raw string or comment starting at i (i itself when none)."""
    c = text[i]
    if c == '"':
        j = i + 1
        while j < len(text) and text[j] != '"':
            j += 2 if text[j] == "\\" else 1
        return j + 1
    if c == "`":
        return text.index("`", i + 1) + 1
    if text.startswith("//", i):
        end = text.find("\n", i)
        return len(text) if end == -1 else end
    if text.startswith("/*", i):
        return text.index("*/", i) + 2
    return i


def block_end(text: str, open_at: int) -> int:
    """Index after the brace matching text[open_at] == '{'."""
    depth, i = 0, open_at
    while i < len(text):
        j = _skip(text, i)
        if j != i:
            i = j
            continue
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise SchemaError("unbalanced braces")


def own_text(text: str, start: int, end: int) -> str:
    """text[start:end] (a block, braces included) without its nested blocks or strings."""
    out, depth, i = [], 0, start
    while i < end:
        j = _skip(text, i)
        if j != i:
            i = j
            continue
        c = text[i]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        elif depth == 1:
            out.append(c)
        i += 1
    return "".join(out)


def entries_at_min_depth(text: str, start: int, end: int, key: str) -> list[int]:
    """Offsets just after ``"key":`` inside text[start:end], at the shallowest depth found."""
    found: list[tuple[int, int]] = []
    depth, i, token = 0, start, f'"{key}"'
    while i < end:
        if text.startswith(token, i):
            after = i + len(token)
            rest = text[after:after + 8].lstrip()
            if rest.startswith(":"):
                found.append((depth, after + text[after:].index(":") + 1))
        j = _skip(text, i)
        if j != i:
            i = j
            continue
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
        i += 1
    if not found:
        return []
    least = min(d for d, _ in found)
    return [at for d, at in found if d == least]


class Source:
    """The files of one resource, with lookups of named helpers across them."""

    def __init__(self, gitdir: Path, files: tuple[str, ...]):
        self.files = {f: git_show(gitdir, f"{SOURCE_DIR}/{f}") for f in files}

    def where(self, text: str, offset: int) -> tuple[str, int]:
        for name, body in self.files.items():
            if body is text:
                return name, body.count("\n", 0, offset) + 1
        raise SchemaError("offset outside the files")

    def definition(self, ident: str) -> tuple[str, int, int]:
        """(file text, start, end) of the block a helper function or variable defines."""
        ident = ident.rsplit(".", maxsplit=1)[-1]
        for body in self.files.values():
            m = re.search(rf"^func {re.escape(ident)}\([^)]*\)[^{{]*\{{", body, re.M)
            if m:
                fn_end = block_end(body, m.end() - 1)
                inner = re.search(r"&schema\.(Schema|Resource)\{", body[m.end():fn_end])
                if inner:
                    at = m.end() + inner.end() - 1
                    return body, at, block_end(body, at)
            m = re.search(rf"^\s*(?:var\s+)?{re.escape(ident)}\s*=\s*(?:&schema\.(?:Schema|Resource)|map\[string\]\*schema\.Schema)\{{", body, re.M)
            if m:
                return body, m.end() - 1, block_end(body, m.end() - 1)
        raise SchemaError(f"helper {ident} not found")

    def resource_block(self, tf_resource: str) -> list[tuple[str, int, int]]:
        """The blocks the top-level fields live in: the resource function and the schema maps it
        merges in."""
        parts = "".join(p.capitalize() for p in tf_resource.split("_")[1:])
        blocks = []
        for body in self.files.values():
            for m in re.finditer(r"^func (Resource\w*|resource\w*)\(\) \*schema\.Resource \{", body, re.M):
                if m.group(1).lower() in (f"resource{parts}".lower(), f"resourcegoogle{parts}".lower()):
                    blocks.append((body, m.end() - 1, block_end(body, m.end() - 1)))
            for m in re.finditer(r"^var (\w+) = map\[string\]\*schema\.Schema\{", body, re.M):
                blocks.append((body, m.end() - 1, block_end(body, m.end() - 1)))
        if not blocks:
            raise SchemaError(f"{tf_resource}: resource function not found")
        return blocks


def _tf_names(wire: str) -> list[str]:
    snake = re.sub(r"(?<!^)(?=[A-Z])", "_", wire).lower()
    names = [snake]
    if snake.endswith("ies"):
        names.append(snake[:-3] + "y")
    if snake.endswith("es"):
        names.append(snake[:-2])
    if snake.endswith("s"):
        names.append(snake[:-1])
    return names


def _value_block(source: Source, text: str, at: int) -> tuple[str, int, int]:
    """The schema block of the value at ``at`` (a literal, or a helper call or variable)."""
    rest = text[at:at + 200].lstrip()
    offset = at + (len(text[at:at + 200]) - len(rest))
    if rest.startswith("{"):
        return text, offset, block_end(text, offset)
    m = re.match(r"([A-Za-z_][\w.]*)", rest)
    if not m:
        raise SchemaError(f"cannot read the value at {rest[:40]!r}")
    return source.definition(m.group(1))


def find_field(source: Source, tf_resource: str, path: str) -> dict[str, Any]:
    """{"tf": dotted Terraform path, "forceNew": bool, "line": "file:Lnn"} of one wire path."""
    scopes = source.resource_block(tf_resource)
    tf_parts: list[str] = []
    result: tuple[str, int, int] | None = None
    for part in path.replace("[]", "").split("."):
        hits: list[tuple[str, int, str]] = []
        for name in _tf_names(part):
            for text, start, end in scopes:
                hits += [(text, at, name) for at in entries_at_min_depth(text, start, end, name)]
            if hits:
                break
        if not hits:
            raise SchemaError(f"{tf_resource}: {path}: no field for {part!r}")
        text, at, name = hits[0]
        tf_parts.append(name)
        result = _value_block(source, text, at)
        body, start, end = result
        elem = re.search(r"\bElem:\s*([A-Za-z_][\w.]*)\s*(?:\([^)]*\))?\s*,", own_text(body, start, end))
        scopes = [result]
        if elem and elem.group(1) not in ("schema", "true", "false"):
            scopes.append(source.definition(elem.group(1)))
    assert result is not None
    body, start, end = result
    own = own_text(body, start, end)
    file, line = source.where(body, start)
    return {"tf": ".".join(tf_parts), "forceNew": bool(re.search(r"ForceNew:\s*true", own)),
            "line": f"{file}:L{line}"}


# ---- the data file -----------------------------------------------------------------------------------

HEADER = f"""# ForceNew of every provider field this program sets, per Pulumi resource type: true replaces
# the resource when the value changes, false updates it in place. Generated by
# `python -m tools.provider_schema` from {UPSTREAM} at {TAG} (the version pulumi-gcp v9.35.0
# bridges; the upstream of the pinned pulumi-gcp 10.2.0 is unconfirmed: field names are checked
# against the installed 10.2.0 SDK by tests/components/test_change_effects.py). "line" is where the
# field's schema starts under google-beta/. A block's own entry (placementPolicy) says whether
# adding or removing the block replaces the resource. A map field (labels) stands for its keys.
# components/change_effects.py reads this file; edit the tool, not this file.
"""


def generate(gitdir: Path, wanted: dict[str, list[str]]) -> dict[str, Any]:
    out: dict[str, Any] = {"upstream": UPSTREAM, "tag": TAG, "read": "2026-12-01", "resources": {}}
    for type_, paths in sorted(wanted.items()):
        tf_resource, files = RESOURCES[type_]
        source = Source(gitdir, files)
        fields = {}
        for path in sorted(set(paths) | {p for leaf in paths for p in block_prefixes(leaf)}):
            field = find_field(source, tf_resource, path)
            conditional = CONDITIONAL.get((type_, path))
            if conditional:
                condition, file, text = conditional
                if text not in source.files.get(file, ""):
                    raise SchemaError(f"{type_} {path}: {text!r} not in {file}")
                field["forceNewUnless"] = condition
            fields[path] = field
        out["resources"][type_] = {"terraform": tf_resource, "fields": fields}
    return out


def block_prefixes(path: str) -> list[str]:
    """The enclosing blocks of a path: a.b[].c -> a, a.b[]."""
    parts = path.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def render_force_new_file(data: dict[str, Any]) -> str:
    return HEADER + yaml.safe_dump(data, sort_keys=True, width=120)


def preview_field_paths(stacks: tuple[str, ...] = ("dev", "prod")) -> dict[str, list[str]]:
    """Every provider field path the offline previews of ``stacks`` set, by resource type (a
    list of blocks as ``a[].b``; a map's keys are trimmed to the map by ``_resolvable``)."""
    from tools.preview import run_preview

    found: dict[str, set[str]] = {}

    def walk(value: Any, path: str, out: set[str]) -> None:
        if isinstance(value, dict) and value:
            for key, inner in value.items():
                walk(inner, f"{path}.{key}" if path else key, out)
        elif isinstance(value, list) and value and isinstance(value[0], dict):
            for item in value:
                walk(item, f"{path}[]", out)
        else:
            out.add(path)

    for stack in stacks:
        for reg in run_preview(stack).resources:
            if reg.type in RESOURCES:
                walk(reg.inputs, "", found.setdefault(reg.type, set()))
    return {t: sorted(paths) for t, paths in found.items()}


def _resolvable(gitdir: Path, type_: str, paths: list[str]) -> list[str]:
    """Each path, or the nearest enclosing field the schema has (a map's key -> the map)."""
    tf_resource, files = RESOURCES[type_]
    source = Source(gitdir, files)
    out = set()
    for path in paths:
        candidate = path
        while candidate:
            try:
                find_field(source, tf_resource, candidate)
            except SchemaError:
                candidate = candidate.rsplit(".", 1)[0] if "." in candidate else ""
                continue
            out.add(candidate)
            break
        else:
            raise SchemaError(f"{type_}: {path}: not in the provider's schema")
    return sorted(out)


def wanted_from(data: dict[str, Any]) -> dict[str, list[str]]:
    return {t: list(r["fields"]) for t, r in data.get("resources", {}).items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirror", type=Path, required=True, help=f"git dir of {UPSTREAM}")
    parser.add_argument("--check", action="store_true", help="exit 1 with a diff on drift")
    parser.add_argument("--add-from-previews", action="store_true",
                        help="add every field the test variants' previews set")
    args = parser.parse_args(argv)
    committed = yaml.safe_load(DATA_FILE.read_text()) if DATA_FILE.exists() else {}
    wanted = wanted_from(committed)
    if args.add_from_previews:
        for type_, paths in preview_field_paths().items():
            wanted.setdefault(type_, []).extend(paths)
    try:
        wanted = {t: _resolvable(args.mirror, t, paths) for t, paths in wanted.items()}
        text = render_force_new_file(generate(args.mirror, wanted))
    except SchemaError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    current = DATA_FILE.read_text() if DATA_FILE.exists() else ""
    if args.check:
        if text != current:
            sys.stdout.writelines(difflib.unified_diff(
                current.splitlines(True), text.splitlines(True), "committed", "regenerated"))
            return 1
        return 0
    DATA_FILE.write_text(text)
    print(f"wrote {DATA_FILE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
