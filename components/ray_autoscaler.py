"""The Ray v2 autoscaler's time-based settings per Ray version (data/ray-autoscaler-settings.yaml):
one small typed loader, and the environment the program gives KubeRay's autoscaler sidecar.

Pure (no Pulumi): components/ray_pods.py puts ``sidecar_env`` into the RayCluster's
``autoscalerOptions.env``; the config reads the bring-up budget to say what a configured allocate
timeout leaves out.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import yaml

SETTINGS_FILE = Path(__file__).resolve().parent.parent / "data" / "ray-autoscaler-settings.yaml"
ALLOCATE_TIMEOUT_ENV = "RAY_AUTOSCALER_RECONCILE_ALLOCATE_STATUS_TIMEOUT_S"


@dataclass(frozen=True)
class RayVersionSource:
    tag: str            # ray-project/ray tag
    commit: str         # the tag's commit, as the wheel built from it names it


@dataclass(frozen=True)
class AutoscalerSetting:
    env: str
    field: str
    bounds: str                      # what the setting times
    file: str                        # where its default is defined, in ray-project/ray
    defaults: dict[str, int]         # Ray version -> default seconds
    on_expiry: dict[str, str]        # Ray version -> what happens when it runs out
    program: str                     # "sets" or "keeps"
    why: str


@dataclass(frozen=True)
class BringUpPart:
    seconds: int
    source: str
    confirmed: bool


@dataclass(frozen=True)
class AutoscalerSettings:
    read: str
    versions: dict[str, RayVersionSource]
    settings: tuple[AutoscalerSetting, ...]
    bring_up: dict[str, BringUpPart]     # node_creation_seconds, image_pull_seconds, gib_wait_seconds

    @property
    def bring_up_seconds(self) -> int:
        """A GPU node's bring-up as budgeted: node creation + image pull + the gIB wait."""
        return sum(part.seconds for part in self.bring_up.values())

    def setting(self, env: str) -> AutoscalerSetting:
        return next(s for s in self.settings if s.env == env)

    def default(self, env: str, ray_version: str) -> int:
        return self.setting(env).defaults[ray_version]

    def allocate_timeout(self, gpu_wait_seconds: int, configured: int | None = None) -> int:
        """The allocate timeout the program sets: configured, else the GPU wait plus a node's
        bring-up, so that a worker still starting within the run's GPU wait is never recycled."""
        return configured if configured is not None else gpu_wait_seconds + self.bring_up_seconds


@functools.cache
def load_autoscaler_settings(path: Path = SETTINGS_FILE) -> AutoscalerSettings:
    data = yaml.safe_load(path.read_text())
    versions = {str(v): RayVersionSource(tag=row["tag"], commit=row["commit"])
                for v, row in data["versions"].items()}
    settings = tuple(AutoscalerSetting(
        env=row["env"], field=row["field"], bounds=row["bounds"], file=row["file"],
        defaults={str(v): int(s) for v, s in row["defaults"].items()},
        on_expiry={str(v): str(t) for v, t in row["on_expiry"].items()},
        program=row["program"], why=row["why"]) for row in data["settings"])
    bring_up = {name: BringUpPart(seconds=int(part["value"]), source=part["source"],
                                  confirmed=bool(part["confirmed"]))
                for name, part in data["bring_up"].items()}
    return AutoscalerSettings(read=str(data["read"]), versions=versions, settings=settings,
                              bring_up=bring_up)


def sidecar_env(allocate_timeout_seconds: int) -> list[dict]:
    """``autoscalerOptions.env``: KubeRay v1.7.0 appends it to the autoscaler container alone
    (ray-operator/controllers/ray/common/pod.go mergeAutoscalerOverrides). Plain decimal digits:
    Ray's ``env_integer`` takes a value only when ``value.isdigit()`` and otherwise falls back to
    its default without a warning (python/ray/_private/ray_constants.py)."""
    value = str(int(allocate_timeout_seconds))
    assert value.isdigit(), value
    return [{"name": ALLOCATE_TIMEOUT_ENV, "value": value}]


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def markdown_tables(settings: AutoscalerSettings | None = None) -> str:
    """The settings and the bring-up budget as the docs show them (docs/cost.md and
    docs/gpu-capacity.md carry this text verbatim; tests/components/test_ray_autoscaler.py)."""
    settings = settings or load_autoscaler_settings()
    versions = list(settings.versions)
    header = ["setting (autoscaler sidecar env)", "what it times", *[f"Ray {v}" for v in versions],
              "when it runs out", "the program"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for s in settings.settings:
        expiries = [s.on_expiry[v] for v in versions]
        expiry = expiries[0] if len(set(expiries)) == 1 else "; ".join(
            f"Ray {v}: {text}" for v, text in zip(versions, expiries, strict=True))
        program = ("**sets it**: " if s.program == "sets" else "keeps the default: ") + s.why
        row = [f"`{s.env}` (`{s.file}`)", s.bounds, *[f"{s.defaults[v]} s" for v in versions], expiry, program]
        lines.append("| " + " | ".join(_cell(c) for c in row) + " |")
    tags = ", ".join(f"`{src.tag}` ({src.commit[:8]})" for src in settings.versions.values())
    lines += ["", f"Read on {settings.read} in ray-project/ray at {tags}.", "",
              "| a GPU node's bring-up | seconds | source |", "|---|---|---|"]
    for name, part in settings.bring_up.items():
        label = name.removesuffix("_seconds").replace("_", " ")
        source = part.source if part.confirmed else f"{part.source} (unconfirmed)"
        lines.append(f"| {label} | {part.seconds} | {_cell(source)} |")
    lines.append(f"| **total** | **{settings.bring_up_seconds}** | added to `job.gpuWaitSeconds` |")
    return "\n".join(lines) + "\n"
