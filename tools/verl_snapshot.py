"""The verl key snapshots: every dotted key of verl's composed ``ppo_trainer`` config, with its
default, one per supported verl release of data/versions.yaml.

    python -m tools.verl_snapshot            # (re)write data/verl-<version>-config.json, each release
    python -m tools.verl_snapshot --check    # regenerate in memory; exit 1 with a diff on drift
    python -m tools.verl_snapshot --version 0.9.1 [--check]

Preflight (jobs/plan/preflight) reads the committed JSON to check gke-grpo:job.extraOverrides
without verl installed (it runs inside ``pulumi up``, which must stay fast and light).

Each release is installed the way the Makefile does it: ``pip install verl==<v> --no-deps
--target .verl-trees/<v>`` (about 1 MB: the config tree and sources, without torch), so the
releases sit side by side. verl is never imported (``import verl`` needs numpy and torch); hydra
composes the config from the tree's ``verl/trainer/config`` directory, and
``OmegaConf.to_container(resolve=False)`` keeps interpolations such as ``${oc.select:...}`` as
written.

Exit codes: 0 ok; 1 drift (--check); 2 a release's tree or hydra missing, or a tree holds
another version.
"""

from __future__ import annotations

import argparse
import difflib
import importlib.metadata
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

from tools.dotted_keys import dotted_keys

ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = ROOT / "data"
CONFIG_NAME = "ppo_trainer"


TREES_DIR = ROOT / ".verl-trees"


class SnapshotError(Exception):
    """A release's tree (of the right version) or hydra is not installed."""


def supported_versions() -> list[str]:
    """The verl versions of data/versions.yaml's verl rows, the default first."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from components.versions import load_versions

    return [row.framework_version for row in load_versions().rows_for("verl")]


def verl_version() -> str:
    """The version of the versions table's default verl row."""
    return supported_versions()[0]


def snapshot_path(version: str | None = None) -> Path:
    return DATA_DIR / f"verl-{version or verl_version()}-config.json"


def tree(version: str) -> Path:
    """The installed package of a release: .verl-trees/<version>/verl."""
    return TREES_DIR / version / "verl"


def verl_config_dir(version: str | None = None) -> Path:
    """A release's trainer/config directory (its tree, never an import of verl)."""
    version = version or verl_version()
    config_dir = tree(version) / "trainer" / "config"
    if not (config_dir / f"{CONFIG_NAME}.yaml").is_file():
        raise SnapshotError(f"verl {version} is not installed in {TREES_DIR / version}: pip install "
                            f"'verl=={version}' --no-deps --target .verl-trees/{version} (make "
                            "setup does it)")
    return config_dir


def installed_verl_version(version: str | None = None) -> str:
    """The version the tree of ``version`` actually holds (its dist-info)."""
    version = version or verl_version()
    found = sorted((TREES_DIR / version).glob("verl-*.dist-info"))
    if not found:
        raise SnapshotError(f"verl {version} is not installed in {TREES_DIR / version}: run `make setup`")
    return importlib.metadata.Distribution.at(found[0]).version


def compose(overrides: tuple[str, ...] | list[str] = (), version: str | None = None) -> Any:
    """A release's ``ppo_trainer`` config composed with ``overrides`` (a DictConfig; the default
    release when ``version`` is None). Raises hydra's ConfigCompositionException on an unknown
    key, as verl's own entry point would."""
    try:
        from hydra import compose as hydra_compose
        from hydra import initialize_config_dir
        from hydra.core.global_hydra import GlobalHydra
    except ImportError as err:
        raise SnapshotError("hydra-core is not installed: run `make setup` (requirements-dev.txt)") from err
    config_dir = verl_config_dir(version)
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        return hydra_compose(CONFIG_NAME, overrides=list(overrides))


def build_snapshot(version: str | None = None) -> dict[str, Any]:
    from omegaconf import OmegaConf

    version = version or verl_version()
    installed = installed_verl_version(version)
    if installed != version:
        raise SnapshotError(f".verl-trees/{version} holds verl {installed}: pip install "
                            f"verl=={version} --no-deps --target .verl-trees/{version}")
    container = OmegaConf.to_container(compose(version=version), resolve=False)
    return {
        "verl_version": version,
        "config": CONFIG_NAME,
        "source": (f"pip install verl=={version} --no-deps; hydra compose of "
                   f"verl/trainer/config/{CONFIG_NAME}.yaml; OmegaConf.to_container(resolve=False)"),
        "generated_by": "python -m tools.verl_snapshot",
        "keys": dict(sorted(dotted_keys(container).items())),
    }


def render_snapshot(snapshot: dict[str, Any]) -> str:
    # One key per line: a verl upgrade shows up as a readable diff in review.
    head = {k: v for k, v in snapshot.items() if k != "keys"}
    lines = ["{"]
    for key, value in head.items():
        lines.append(f"  {json.dumps(key)}: {json.dumps(value)},")
    lines.append('  "keys": {')
    items = list(snapshot["keys"].items())
    for i, (key, value) in enumerate(items):
        comma = "," if i < len(items) - 1 else ""
        lines.append(f"    {json.dumps(key)}: {json.dumps(value, sort_keys=True)}{comma}")
    lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def check_or_write_snapshot(version: str, check: bool) -> int:
    try:
        snapshot = build_snapshot(version)
    except SnapshotError as err:
        print(f"verl_snapshot: {err}", file=sys.stderr)
        return 2
    text = render_snapshot(snapshot)
    path = snapshot_path(version)
    shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    if check:
        committed = path.read_text() if path.exists() else ""
        if committed == text:
            print(f"{shown} is up to date")
            return 0
        diff = difflib.unified_diff(committed.splitlines(keepends=True), text.splitlines(keepends=True),
                                    fromfile=f"{shown} (committed)",
                                    tofile=f"regenerated from .verl-trees/{version}")
        sys.stdout.writelines(diff)
        print(f"\n{shown} drifted: run python -m tools.verl_snapshot and commit it",
              file=sys.stderr)
        return 1
    path.write_text(text)
    print(f"wrote {shown} ({len(snapshot['keys'])} keys)")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.verl_snapshot", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true",
                        help="compare with the committed file; exit 1 with a diff on drift")
    parser.add_argument("--version", default=None,
                        help="one supported release (default: every verl row of data/versions.yaml)")
    args = parser.parse_args(argv)
    versions = supported_versions()
    if args.version is not None and args.version not in versions:
        print(f"verl_snapshot: verl {args.version} is not a supported release (data/versions.yaml "
              f"has {', '.join(versions)})", file=sys.stderr)
        return 2
    return max(check_or_write_snapshot(version, args.check) for version in ([args.version] if args.version else versions))


if __name__ == "__main__":
    sys.exit(main())
