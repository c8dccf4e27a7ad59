"""What changing a config key does to a deployed stack, in one of four words: "in place",
"replaces <resource> (data kept)", "replaces <resource>: deletes its data", "replaces
<resource>: stops a live run".

Two data files, one owner each: data/change-effects.yaml says which provider fields (and which
Kubernetes objects) each key sets; data/provider-force-new.yaml says, from the provider's own
schema (tools/provider_schema.py), which of those fields replace their resource. ``effect_of``
joins them; the config reference, the JSON schema (tools/config_reference.py), preflight and the
preview all read it from here.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

DATA_DIR = Path(__file__).resolve().parent.parent / "data"
EFFECTS_FILE = DATA_DIR / "change-effects.yaml"
FORCE_NEW_FILE = DATA_DIR / "provider-force-new.yaml"
IGNORED = " (ignored)"
JOB_WILDCARD = "gke-grpo:job.*"
CONSEQUENCE = {"data": ": deletes its data", "run": ": stops a live run", "none": " (data kept)"}
SEVERITY = {"data": 0, "run": 1, "none": 2}


@dataclass(frozen=True)
class Resource:
    key: str
    name: str            # regex of the Pulumi name the component gives it
    type: str
    label: str
    holds: str           # data | run | none

    def matches(self, type_: str, name: str) -> bool:
        return type_ == self.type and re.search(self.name, name) is not None


@dataclass(frozen=True)
class Feed:
    resource: str
    field: str
    ignored: bool        # listed in the component's ignore_changes

    @classmethod
    def parse(cls, text: str) -> Feed:
        ignored = text.endswith(IGNORED)
        resource, _, field = text.removesuffix(IGNORED).partition(" ")
        return cls(resource, field, ignored)


@dataclass(frozen=True)
class ProviderField:
    force_new: bool
    unless: str | None   # a CustomizeDiff condition under which it does not replace
    line: str


@dataclass(frozen=True)
class KeyEntry:
    feeds: tuple[Feed, ...]
    kubernetes: tuple[str, ...]
    removes: tuple[str, ...]
    in_place: str | None


@dataclass(frozen=True)
class ChangeEffects:
    resources: dict[str, Resource]
    kubernetes: dict[str, tuple[str, str]]        # name -> (text, holds)
    fixed: tuple[Feed, ...]
    keys: dict[str, KeyEntry]
    provider: dict[str, dict[str, ProviderField]]  # type -> wire path -> field
    provider_tag: str

    def field(self, feed: Feed) -> ProviderField | None:
        return self.provider.get(self.resources[feed.resource].type, {}).get(feed.field)

    def entry(self, key: str) -> KeyEntry | None:
        if key in self.keys:
            return self.keys[key]
        if key.startswith("gke-grpo:job.") and not self.children(key):
            return self.keys.get(JOB_WILDCARD)
        return None

    def children(self, key: str) -> list[str]:
        return [k for k in self.keys if k.startswith((key + ".", key + "[]."))]

    def replaced(self, key: str) -> list[tuple[Resource, str | None]]:
        """(resource, condition) of each resource a change of ``key`` replaces; the condition
        names when it does not (None: always)."""
        entry = self.entry(key)
        if entry is None:
            return []
        found: dict[str, tuple[Resource, str | None]] = {}
        for name in entry.removes:
            found[name] = (self.resources[name], None)
        for feed in entry.feeds:
            field = self.field(feed)
            if feed.ignored or field is None or not (field.force_new or field.unless):
                continue
            unless = None if field.force_new else field.unless
            if feed.resource not in found or found[feed.resource][1] is not None:
                found[feed.resource] = (self.resources[feed.resource], unless)
        return sorted(found.values(), key=lambda r: (SEVERITY[r[0].holds], r[0].key))

    def effect_of(self, key: str) -> str:
        """The effect text of one key (an object key: the worst effect of its keys)."""
        entry = self.entry(key)
        if entry is None:
            parts = sorted({self.effect_of(child) for child in self.children(key)}, key=_worst_first)
            if not parts:
                raise KeyError(f"{key}: no entry in {EFFECTS_FILE.name}")
            return parts[0] if len(parts) == 1 else f"by key; at worst: {parts[0]}"
        phrases = []
        always: dict[tuple[str, str], list[str]] = {}
        for resource, unless in self.replaced(key):
            verb = "removes" if resource.key in entry.removes else "replaces"
            if unless:
                phrases.append(f"{verb} {resource.label} {unless}{CONSEQUENCE[resource.holds]}")
            else:
                always.setdefault((resource.holds, verb), []).append(resource.label)
        grouped = [f"{verb} {_and(labels, 'or' if verb == 'removes' else 'and')}"
                   f"{CONSEQUENCE[holds] if len(labels) == 1 or holds != 'data' else ': deletes their data'}"
                   for (holds, verb), labels in sorted(always.items(), key=lambda i: SEVERITY[i[0][0]])]
        phrases = grouped + phrases
        in_place = []
        for name in entry.kubernetes:
            text, holds = self.kubernetes[name]
            if holds == "none":
                in_place.append(text)
            else:
                phrases.append(f"{text}{CONSEQUENCE[holds]}")
        if entry.in_place:
            in_place.append(entry.in_place)
        if phrases:
            return "; ".join(phrases) + ("" if not in_place else "; in place: " + "; ".join(in_place))
        return "in place" + (f" ({'; '.join(in_place)})" if in_place else "")

    def owners(self, resource: str, field: str) -> list[str]:
        """The keys whose entries feed ``resource field``, the most specific first (a key that
        sets fewer fields: storage.gcs.bucketName before cluster.name before gcp:project)."""
        found = [(len(entry.feeds), key) for key, entry in self.keys.items()
                 if any(f.resource == resource and f.field == field for f in entry.feeds)]
        return [key for _, key in sorted(found)]


def _and(labels: list[str], word: str = "and") -> str:
    return labels[0] if len(labels) == 1 else ", ".join(labels[:-1]) + f" {word} " + labels[-1]


def _worst_first(text: str) -> tuple[int, str]:
    for rank, marker in enumerate((CONSEQUENCE["data"], CONSEQUENCE["run"], CONSEQUENCE["none"])):
        if marker in text:
            return rank, text
    return 3, text


@functools.cache
def load_change_effects(effects_file: Path = EFFECTS_FILE,
                        force_new_file: Path = FORCE_NEW_FILE) -> ChangeEffects:
    raw = yaml.safe_load(effects_file.read_text())
    provider = yaml.safe_load(force_new_file.read_text())
    resources = {key: Resource(key, str(r["name"]), str(r["type"]), str(r["label"]), str(r["holds"]))
                 for key, r in raw["resources"].items()}
    keys = {}
    for key, given in raw["keys"].items():
        entry = given or {}
        keys[key] = KeyEntry(
            feeds=tuple(Feed.parse(f) for f in entry.get("feeds", ())),
            kubernetes=tuple(entry.get("kubernetes", ())), removes=tuple(entry.get("removes", ())),
            in_place=entry.get("inPlace"))
    return ChangeEffects(
        resources=resources,
        kubernetes={k: (str(v["text"]), str(v["holds"])) for k, v in raw["kubernetes"].items()},
        fixed=tuple(Feed.parse(f) for f in raw.get("fixed", ())),
        keys=keys,
        provider={type_: {path: ProviderField(bool(f["forceNew"]), f.get("forceNewUnless"), str(f["line"]))
                          for path, f in r["fields"].items()}
                  for type_, r in provider["resources"].items()},
        provider_tag=f"{provider['upstream']} {provider['tag']}")


def effect_of(key: str) -> str:
    return load_change_effects().effect_of(key)
