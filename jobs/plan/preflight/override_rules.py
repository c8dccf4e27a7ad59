"""gke-grpo:job.extraOverrides: syntax, keys the stack config owns, keys unknown to the chosen
release's own config tree (verl: data/verl-<version>-config.json; NeMo RL:
data/nemo-rl-<version>-keys.txt), and no credential in them."""

from __future__ import annotations

import difflib
import functools
import json
from collections.abc import Iterable
from pathlib import Path

from jobs.contract.credentials import looks_like_secret_name, looks_like_secret_value, redact
from jobs.plan.interpolations import refused_resolvers
from jobs.plan.preflight.rules import EXTRA, JOB, Rules
from jobs.plan.render import nemo_rl_overrides, override_key, owned_keys, unsafe_interpolations, verl_overrides

DATA_DIR = Path(__file__).resolve().parents[3] / "data"


def key_file(framework: str, version: str) -> Path:
    """The committed key list of a release (tools/verl_snapshot.py, tools/nemo_rl_keys.py)."""
    if framework == "verl":
        return DATA_DIR / f"verl-{version}-config.json"
    return DATA_DIR / f"nemo-rl-{version}-keys.txt"


def config_name(framework: str, version: str) -> str:
    """The release's config the keys come from, as messages name it."""
    if framework == "verl":
        return f"verl {version}'s ppo_trainer config"
    return f"NeMo RL {version}'s grpo_math_1B.yaml"


@functools.cache
def release_keys(framework: str, version: str) -> frozenset[str]:
    """Dotted keys of a release's config (FileNotFoundError: no committed list)."""
    path = key_file(framework, version)
    if framework == "verl":
        return frozenset(json.loads(path.read_text())["keys"])
    return frozenset(nemo_rl_keys(path))


def verl_keys(version: str) -> frozenset[str]:
    """Dotted keys of verl's composed ppo_trainer config (tools/verl_snapshot.py)."""
    return release_keys("verl", version)


@functools.cache
def nemo_rl_keys(path: Path) -> dict[str, str]:
    """NeMo RL key -> its default (JSON text) in a release's grpo_math_1B.yaml
    (tools/nemo_rl_keys.py)."""
    keys: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if line and not line.startswith("#"):
            key, default = line.split("\t")
            keys[key] = default
    return keys


def _prefixes(keys: Iterable[str]) -> frozenset[str]:
    out: set[str] = set()
    for key in keys:
        parts = key.split(".")
        out.update(".".join(parts[:i]) for i in range(1, len(parts)))
    return frozenset(out)


@functools.cache
def release_prefixes(framework: str, version: str) -> frozenset[str]:
    return _prefixes(release_keys(framework, version))


def other_releases_with(framework: str, version: str, key: str) -> list[str]:
    """The other supported releases of the framework whose config has ``key`` (a key renamed or
    removed between releases)."""
    from jobs.plan.versions import load_versions  # lazily: PyYAML

    found = []
    for row in load_versions().rows_for(framework):
        if row.framework_version == version:
            continue
        try:
            if key in release_keys(framework, row.framework_version) or \
                    key in release_prefixes(framework, row.framework_version):
                found.append(row.framework_version)
        except FileNotFoundError:
            continue
    return found


def _suggest(key: str, known: Iterable[str]) -> str:
    match = difflib.get_close_matches(key, list(known), n=1, cutoff=0.8)
    return f" (did you mean {match[0]}?)" if match else ""


def _carries_credential(override: str) -> bool:
    text = str(override)
    key = text.split("=", 1)[0]
    return looks_like_secret_value(text) or (
        "=" in text and looks_like_secret_name(key) and not text.split("=", 1)[1].startswith("$")
        and text.split("=", 1)[1].strip().lower() not in ("", "null", "none", "~"))


class OverrideRules(Rules):
    # ---- extra overrides ------------------------------------------------------------------------
    def extras(self) -> dict[str, str]:
        """Syntax, ownership and known keys of gke-grpo:job.extraOverrides; returns the plain
        key -> value map for the rules that read them."""
        s = self.spec
        values: dict[str, str] = {}
        owned = owned_keys(s)
        try:
            known = release_keys(s.framework, s.framework_version)
        except FileNotFoundError:
            tool = "tools.verl_snapshot" if s.framework == "verl" else "tools.nemo_rl_keys"
            self.error(EXTRA, f"no key list {key_file(s.framework, s.framework_version).name} of "
                       f"{s.framework} {s.framework_version} to check overrides against: run "
                       f"python -m {tool}")
            return values
        prefixes = release_prefixes(s.framework, s.framework_version)
        where = f"{config_name(s.framework, s.framework_version)} ({key_file(s.framework, s.framework_version).name})"
        for override in s.extra_overrides:
            if _carries_credential(override):
                continue
            prefix, key = override_key(override)
            if ("=" not in override and prefix != "~") or not key or " " in key:
                self.error(EXTRA, f"{override!r} is not a key=value override")
                continue
            if key in owned:
                self.error(EXTRA, f"{key} is set from the stack config ({override!r}); change "
                           "the gke-grpo:job or gke-grpo:gpu value that owns it instead")
                continue
            exists = key in known or key in prefixes
            if prefix == "+":
                if exists:
                    self.error(EXTRA, f"{key} already exists in {where}: drop the '+' "
                               f"({override!r})")
                continue
            if prefix == "++":
                continue
            if not exists:
                elsewhere = other_releases_with(s.framework, s.framework_version, key)
                if elsewhere:
                    self.error(EXTRA, f"{key} is a key of {s.framework} {', '.join(elsewhere)} but "
                               f"not of {where}, the release this stack runs (job.release): renamed "
                               f"or removed{_suggest(key, known)}; docs/frameworks.md lists what "
                               "changed between the releases")
                    continue
                self.error(EXTRA, f"{key} is not a key of {where}{_suggest(key, known)}; "
                           "fix the spelling, or write +" + key + "=... to add a new key")
                continue
            if prefix == "":
                values[key] = override.split("=", 1)[1]
        return values

    def credentials_in_overrides(self) -> None:
        """No credential in gke-grpo:job.extraOverrides: they end up in the RayJob's entrypoint,
        which the RayJob object and the Ray dashboard show to anyone who can read them. The
        override is named by position and key, never echoed."""
        for i, override in enumerate(self.spec.extra_overrides):
            if _carries_credential(override):
                key = redact(str(override).split("=", 1)[0])
                self.error(EXTRA, f"item {i} ({key}=...) carries a credential: overrides reach "
                           "the RayJob's entrypoint, which the dashboard shows; give secrets to "
                           "the pods as Kubernetes Secrets (gke-grpo:hfToken, gke-grpo:wandbApiKey)")

    def resolvers_in_overrides(self) -> None:
        """OmegaConf resolvers beyond the allowlist of jobs/plan/interpolations.py, in
        gke-grpo:job.extraOverrides (named by position and key) and in every value the renderer
        writes from the stack config. Nothing of the value is echoed."""
        s = self.spec
        extras = set(s.extra_overrides)
        for i, override in enumerate(s.extra_overrides):
            for reason in refused_resolvers(str(override)):
                key = redact(override_key(str(override))[1])
                self.error(EXTRA, f"item {i} ({key}=...) uses {reason}: the trainer would resolve "
                           "it when it reads its config, and a resolver that reads the environment "
                           "or evaluates a string can copy a credential into the config the "
                           "frameworks print and log")
        rendered = verl_overrides(s) if s.framework == "verl" else nemo_rl_overrides(s)
        own = tuple(o for o in rendered if o not in extras)
        for key, reason in unsafe_interpolations(s, own):
            self.error(JOB.rstrip("."), f"the rendered override {key} uses {reason}: a value of "
                       "the stack config carries an OmegaConf interpolation; remove the ${...} "
                       "from it")
