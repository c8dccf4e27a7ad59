"""The verl key snapshot: every dotted key of verl's composed ``ppo_trainer`` config, with its
default, as shipped by the verl version of data/versions.yaml.

    python -m tools.verl_snapshot            # (re)write data/verl-<version>-config.json
    python -m tools.verl_snapshot --check    # regenerate in memory; exit 1 with a diff on drift

Preflight (jobs/plan/preflight) reads the committed JSON to check gke-grpo:job.extraOverrides
without verl installed (it runs inside ``pulumi up``, which must stay fast and light).

verl must be installed the way the Makefile's setup does it: ``pip install verl==<v> --no-deps``
(about 1 MB: the config tree without torch). verl is located with ``importlib.util.find_spec``
and never imported (``import verl`` needs numpy and torch); hydra composes the config from the
package's ``trainer/config`` directory, and ``OmegaConf.to_container(resolve=False)`` keeps
interpolations such as ``${oc.select:...}`` as written.

Exit codes: 0 ok; 1 drift (--check); 2 verl or hydra missing, or the installed verl is not the
version of data/versions.yaml.
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


class SnapshotError(Exception):
    """verl (of the right version) or hydra is not installed."""


def verl_version() -> str:
    """The verl version of the versions table's verl row."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from components.versions import load_versions

    return load_versions().for_framework("verl").framework_version


def snapshot_path(version: str | None = None) -> Path:
    return DATA_DIR / f"verl-{version or verl_version()}-config.json"


def verl_config_dir() -> Path:
    """verl's trainer/config directory, found without importing verl."""
    spec = importlib.util.find_spec("verl")
    if spec is None or spec.origin is None:
        raise SnapshotError("verl is not installed: pip install 'verl==<version of data/"
                            "versions.yaml>' --no-deps (make setup does it)")
    config_dir = Path(spec.origin).parent / "trainer" / "config"
    if not (config_dir / f"{CONFIG_NAME}.yaml").is_file():
        raise SnapshotError(f"{config_dir} has no {CONFIG_NAME}.yaml")
    return config_dir


def installed_verl_version() -> str:
    try:
        return importlib.metadata.version("verl")
    except importlib.metadata.PackageNotFoundError as err:
        raise SnapshotError("verl is not installed: run `make setup` (verl's config tree, --no-deps)") from err


def compose(overrides: tuple[str, ...] | list[str] = ()) -> Any:
    """verl's ``ppo_trainer`` config composed with ``overrides`` (a DictConfig). Raises hydra's
    ConfigCompositionException on an unknown key, as verl's own entry point would."""
    try:
        from hydra import compose as hydra_compose
        from hydra import initialize_config_dir
        from hydra.core.global_hydra import GlobalHydra
    except ImportError as err:
        raise SnapshotError("hydra-core is not installed: run `make setup` (requirements-dev.txt)") from err
    config_dir = verl_config_dir()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        return hydra_compose(CONFIG_NAME, overrides=list(overrides))


def build_snapshot() -> dict[str, Any]:
    from omegaconf import OmegaConf

    version = verl_version()
    installed = installed_verl_version()
    if installed != version:
        raise SnapshotError(f"installed verl is {installed}, data/versions.yaml says {version}: "
                            f"pip install verl=={version} --no-deps")
    container = OmegaConf.to_container(compose(), resolve=False)
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.verl_snapshot", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true",
                        help="compare with the committed file; exit 1 with a diff on drift")
    args = parser.parse_args(argv)
    try:
        snapshot = build_snapshot()
    except SnapshotError as err:
        print(f"verl_snapshot: {err}", file=sys.stderr)
        return 2
    text = render_snapshot(snapshot)
    path = snapshot_path()
    shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    if args.check:
        committed = path.read_text() if path.exists() else ""
        if committed == text:
            print(f"{shown} is up to date")
            return 0
        diff = difflib.unified_diff(committed.splitlines(keepends=True), text.splitlines(keepends=True),
                                    fromfile=f"{shown} (committed)",
                                    tofile="regenerated from the installed verl")
        sys.stdout.writelines(diff)
        print(f"\n{shown} drifted: run python -m tools.verl_snapshot and commit it",
              file=sys.stderr)
        return 1
    path.write_text(text)
    print(f"wrote {shown} ({len(snapshot['keys'])} keys)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
