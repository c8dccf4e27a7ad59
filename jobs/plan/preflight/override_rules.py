"""gke-grpo:job.extraOverrides: syntax, keys the stack config owns, keys unknown to the
framework's own config tree (verl: data/verl-<version>-config.json; NeMo RL:
data/nemo-rl-0.5.0-keys.txt), and no credential in them."""

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
NEMO_RL_KEYS_VERSION = "0.5.0"
NEMO_RL_KEYS_FILE = DATA_DIR / f"nemo-rl-{NEMO_RL_KEYS_VERSION}-keys.txt"


@functools.cache
def verl_keys(version: str) -> frozenset[str]:
    """Dotted keys of verl's composed ppo_trainer config (tools/verl_snapshot.py)."""
    path = DATA_DIR / f"verl-{version}-config.json"
    return frozenset(json.loads(path.read_text())["keys"])


@functools.cache
def nemo_rl_keys(path: Path = NEMO_RL_KEYS_FILE) -> dict[str, str]:
    """NeMo RL key -> its default (JSON text) in v0.5.0's grpo_math_1B.yaml
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
def _verl_prefixes(version: str) -> frozenset[str]:
    return _prefixes(verl_keys(version))


@functools.cache
def _nemo_rl_prefixes() -> frozenset[str]:
    return _prefixes(nemo_rl_keys())


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
        if s.framework == "verl":
            try:
                known = verl_keys(s.framework_version)
            except FileNotFoundError:
                self.error(EXTRA, f"no verl key snapshot data/verl-{s.framework_version}-config.json"
                           " to check overrides against: run python -m tools.verl_snapshot")
                return values
            prefixes = _verl_prefixes(s.framework_version)
            where = f"verl {s.framework_version}'s ppo_trainer config"
        else:
            if s.framework_version != NEMO_RL_KEYS_VERSION:
                self.warning(EXTRA, f"NeMo RL {s.framework_version}: overrides are checked against "
                             f"the {NEMO_RL_KEYS_VERSION} key list ({NEMO_RL_KEYS_FILE.name})")
            known = frozenset(nemo_rl_keys())
            prefixes = _nemo_rl_prefixes()
            where = "NeMo RL 0.5.0's grpo_math_1B.yaml (data/nemo-rl-0.5.0-keys.txt)"
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
