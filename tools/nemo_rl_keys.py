"""The NeMo RL key list: every dotted key of NeMo RL's grpo_math_1B.yaml at the pinned tag, with
its default, as NeMo RL itself loads that file.

    python -m tools.nemo_rl_keys                       # (re)write data/nemo-rl-<version>-keys.txt, each release
    python -m tools.nemo_rl_keys --check               # exit 1 with a diff on drift
    python -m tools.nemo_rl_keys --from-git GIT_DIR    # first refresh the committed config files
                                                       # from the tag in a NeMo RL git directory

The tag's config files are committed under data/nemo-rl-<version>/ (CI has no network):
``grpo_math_1B.yaml`` (the default config of examples/run_grpo_math.py) and the 32B recipe the
prod stack follows, each with a comment header naming repository, tag, commit and path; the body
is the file byte for byte (``--from-git`` checks and rewrites it). The key list is built the
way NeMo RL's ``load_config`` builds its config (nemo_rl/utils/config.py at v0.5.0: OmegaConf,
``defaults:`` files merged first), flattened with ``OmegaConf.to_container(resolve=False)`` so
interpolations such as ``${policy.max_total_sequence_length}`` stay as written.

Preflight (jobs/plan/preflight) reads the committed key list to check gke-grpo:job.extraOverrides
without OmegaConf; tests/jobs/plan/test_nemo_rl_keys.py fails when the list drifts from the yaml and
composes the rendered overrides on the yaml in struct mode, as NeMo RL does.

Exit codes: 0 ok; 1 drift (--check) or a committed file differs from the tag (--from-git);
2 OmegaConf missing, or git cannot read the tag.
"""

from __future__ import annotations

import argparse
import difflib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tools.dotted_keys import dotted_keys

ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = ROOT / "data"
REPOSITORY = "NVIDIA-NeMo/RL"
# Each supported release (data/versions.yaml): its tag's commit (read from the mirror, dated).
COMMITS = {
    "0.5.0": "6c7089300fded94abfa49bb9cbf9eb357d862461",   # v0.5.0, read 2026-12-01
    "0.7.0": "81aa43dda4765b0429cf31dab44441e4e4383911",   # v0.7.0 (2026-07-29), read 2026-12-06
}
VERSION = "0.5.0"     # the release a call without a version means (the first key list committed)
# committed file (relative to data/nemo-rl-<version>/) -> path in the NeMo RL repository at the tag
CONFIG_FILES = {
    "grpo_math_1B.yaml": "examples/configs/grpo_math_1B.yaml",
    "recipes/llm/grpo-qwen2.5-32b-32n8g-fsdp2tp8-actckpt.v3.yaml":
        "examples/configs/recipes/llm/grpo-qwen2.5-32b-32n8g-fsdp2tp8-actckpt.v3.yaml",
}
RECIPE_32B_NAME = "recipes/llm/grpo-qwen2.5-32b-32n8g-fsdp2tp8-actckpt.v3.yaml"
HEADER_MARK = "# gke-grpo: "


def config_dir(version: str = VERSION) -> Path:
    return DATA_DIR / f"nemo-rl-{version}"


def base_config(version: str = VERSION) -> Path:
    return config_dir(version) / "grpo_math_1B.yaml"


def recipe_32b(version: str = VERSION) -> Path:
    return config_dir(version) / RECIPE_32B_NAME


CONFIG_DIR = config_dir()
BASE_CONFIG = base_config()
RECIPE_32B = recipe_32b()


class KeysError(Exception):
    """OmegaConf is missing or the tag cannot be read."""


def keys_path(version: str = VERSION) -> Path:
    return DATA_DIR / f"nemo-rl-{version}-keys.txt"


def header(upstream_path: str, version: str = VERSION) -> str:
    return (f"{HEADER_MARK}{REPOSITORY} {upstream_path} at tag v{version} (commit "
            f"{COMMITS[version]}), copied verbatim below this header by python -m "
            "tools.nemo_rl_keys --from-git\n")


def body(path: Path) -> str:
    """The upstream file: the committed file without its header lines."""
    lines = path.read_text().splitlines(keepends=True)
    return "".join(line for line in lines if not line.startswith(HEADER_MARK))


def load_config(path: Path | None = None) -> Any:
    """The config as nemo_rl.utils.config.load_config (v0.5.0) loads it: OmegaConf.load, then
    every ``defaults`` file (relative to the first file's directory) merged under it. v0.7.0
    resolves a parent's own defaults from the parent's directory and honours an ``_override_``
    marker (nemo_rl/utils/config.py merge_with_override): neither occurs in the committed files
    (grpo_math_1B.yaml has no defaults; the 32B recipe's one parent has none), so both releases
    load them alike."""
    try:
        from omegaconf import DictConfig, ListConfig, OmegaConf
    except ImportError as err:
        raise KeysError("omegaconf is not installed: run `make setup` (requirements-dev.txt: hydra-core)") from err

    def load(config_path: Path, base_dir: Path) -> DictConfig:
        config = OmegaConf.load(config_path)
        if "defaults" in config:
            defaults = config.pop("defaults")
            if isinstance(defaults, (str, Path)):
                defaults = [defaults]
            elif isinstance(defaults, ListConfig):
                defaults = [str(d) for d in defaults]
            base = OmegaConf.create({})
            for default in defaults:
                parent = Path(default) if str(default).startswith("/") else base_dir / str(default)
                base = OmegaConf.merge(base, load(parent, base_dir))
            config = OmegaConf.merge(base, config)
        return config

    path = path or BASE_CONFIG
    return load(path, path.parent)


def build_keys(path: Path | None = None, version: str = VERSION) -> dict[str, Any]:
    from omegaconf import OmegaConf

    path = path or base_config(version)
    return dict(sorted(dotted_keys(OmegaConf.to_container(load_config(path), resolve=False)).items()))


def render_key_list(keys: dict[str, Any], version: str = VERSION) -> str:
    entry = "examples/run_grpo_math.py" if version == "0.5.0" else "examples/run_grpo.py"
    lines = [
        f"# NeMo RL {version}: every dotted key of examples/configs/grpo_math_1B.yaml (the default",
        f"# config of {entry}) with its default, one per line: key<TAB>default (JSON;",
        "# ${...} are OmegaConf interpolations as written).",
        f"# Source: {REPOSITORY} tag v{version} (commit {COMMITS[version]}), committed as",
        f"# data/nemo-rl-{version}/grpo_math_1B.yaml. Generated by python -m tools.nemo_rl_keys; CI fails",
        "# when this list drifts from that file (tests/jobs/plan/test_nemo_rl_keys.py).",
    ]
    lines += [f"{key}\t{json.dumps(value, sort_keys=True)}" for key, value in keys.items()]
    return "\n".join(lines) + "\n"


def refresh_from_git(git_dir: Path, version: str = VERSION) -> list[str]:
    """Rewrite the committed config files from the tag; return the ones that changed."""
    changed = []
    for local, upstream in CONFIG_FILES.items():
        try:
            text = subprocess.run(["git", "--git-dir", str(git_dir), "show", f"{COMMITS[version]}:{upstream}"],
                                  capture_output=True, text=True, check=True).stdout
        except (OSError, subprocess.CalledProcessError) as err:
            raise KeysError(f"cannot read {upstream} at {COMMITS[version]} from {git_dir}: {err}") from err
        path = config_dir(version) / local
        if not path.exists() or body(path) != text:
            changed.append(local)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(header(upstream, version) + text)
    return changed


def check_or_write_keys(version: str, check: bool) -> int:
    text = render_key_list(build_keys(version=version), version)
    path = keys_path(version)
    shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    if check:
        committed = path.read_text() if path.exists() else ""
        if committed == text:
            print(f"{shown} is up to date")
            return 0
        sys.stdout.writelines(difflib.unified_diff(
            committed.splitlines(keepends=True), text.splitlines(keepends=True),
            fromfile=f"{shown} (committed)", tofile=f"regenerated from {base_config(version).name}"))
        print(f"\n{shown} drifted: run python -m tools.nemo_rl_keys and commit it", file=sys.stderr)
        return 1
    path.write_text(text)
    print(f"wrote {shown} ({len(text.splitlines()) - 6} keys)")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.nemo_rl_keys", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true",
                        help="compare with the committed key list; exit 1 with a diff on drift")
    parser.add_argument("--from-git", type=Path, default=None, metavar="GIT_DIR",
                        help="refresh data/nemo-rl-<version>/ from the tag in this git directory")
    parser.add_argument("--version", choices=sorted(COMMITS), default=None,
                        help="one release (default: every supported release)")
    args = parser.parse_args(argv)
    worst = 0
    for version in [args.version] if args.version else sorted(COMMITS):
        try:
            if args.from_git is not None:
                changed = refresh_from_git(args.from_git, version)
                for name in changed:
                    print(f"data/nemo-rl-{version}/{name} differed from v{version}: rewritten")
                if changed and args.check:
                    worst = max(worst, 1)
            worst = max(worst, check_or_write_keys(version, args.check))
        except KeysError as err:
            print(f"nemo_rl_keys: {err}", file=sys.stderr)
            return 2
    return worst


if __name__ == "__main__":
    sys.exit(main())
