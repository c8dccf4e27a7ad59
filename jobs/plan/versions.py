"""The supported-versions table (data/versions.yaml): images and the versions inside them.

The one place that says which Ray, verl or NeMo RL, vLLM and torch go with an image. The
RayCluster's rayVersion, the Ray client pin and the verl version preflight validates against are
read from here, so they cannot drift apart. It lives on the jobs/ side (stdlib + PyYAML) because
the job code reads it on the Ray head too; components/versions.py re-exports it for the program.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path

import yaml

VERSIONS_FILE = Path(__file__).resolve().parents[2] / "data" / "versions.yaml"

@dataclass(frozen=True)
class ImageRow:
    id: str
    framework: str
    image: str
    framework_version: str
    ray: str
    vllm: str
    torch: str
    python: str
    confirmed: dict[str, bool]
    sources: dict[str, str]
    verl_installed_in_image: bool = True
    nemo_rl_entry: str | None = None
    nemo_rl_workdir: str | None = None
    # What to check before the first deploy when the image itself is not confirmed (public,
    # digest): the program prints it as a warning on every preview.
    check_before_deploy: str | None = None
    # What differs between a framework's releases that the renderer follows (jobs/plan/render.py),
    # each read at the release's own files (sources.<field>):
    # verl's ppo_trainer config defines ray_kwargs.ray_init.runtime_env (a `+` override of it
    # then fails to compose);
    verl_runtime_env_in_config: bool = False
    # verl's default trainer calls should_save_ckpt_esi (a save before the capacity ends);
    verl_saves_before_capacity_end: bool = True
    # NeMo RL's data config: "flat" (data.dataset_name, ...) or "nested" (data.train.*, data.validation);
    nemo_rl_data_layout: str = "flat"
    # NeMo RL's DTensor v2 policy saves asynchronously unless checkpointing.is_async says otherwise.
    nemo_rl_async_checkpoint_default: bool = False
    # gke-grpo:job.layout split: the asynchronous trainers the release ships (jobs/contract/layouts.py).
    split_trainers: tuple[str, ...] = ()

    @property
    def ray_tuple(self) -> tuple[int, ...]:
        return tuple(int(part) for part in self.ray.split("."))

    def deploy_warnings(self) -> list[str]:
        """Warnings every preview prints for this image (deterministic, no network)."""
        if self.check_before_deploy:
            return [" ".join(self.check_before_deploy.split())]
        if not self.confirmed.get("image", True):
            return [f"image {self.image} is not confirmed (data/versions.yaml row {self.id}): "
                    "check it can be pulled before the first deploy"]
        return []

    @property
    def unconfirmed(self) -> list[str]:
        return sorted(key for key, ok in self.confirmed.items() if not ok)


class UnsupportedRelease(ValueError):
    """A framework version no row of data/versions.yaml describes."""


@dataclass(frozen=True)
class VersionsTable:
    ray_client: str
    images: tuple[ImageRow, ...]
    system_images: dict[str, dict[str, str]] = field(default_factory=dict)

    def for_framework(self, framework: str) -> ImageRow:
        """The row new stacks of a framework get (the first listed)."""
        for row in self.images:
            if row.framework == framework:
                return row
        raise KeyError(framework)

    def rows_for(self, framework: str) -> tuple[ImageRow, ...]:
        """Every supported row of a framework, the default first."""
        return tuple(row for row in self.images if row.framework == framework)

    def by_id(self, row_id: str) -> ImageRow | None:
        for row in self.images:
            if row.id == row_id:
                return row
        return None

    def for_release(self, framework: str, framework_version: str) -> ImageRow:
        """The row of a framework release (a run spec's framework and framework_version)."""
        for row in self.images:
            if (row.framework, row.framework_version) == (framework, framework_version):
                return row
        supported = ", ".join(row.framework_version for row in self.rows_for(framework))
        raise UnsupportedRelease(f"{framework} {framework_version} is not a supported release "
                                 f"(data/versions.yaml has {supported or 'none'})")

    def by_image(self, image: str) -> ImageRow | None:
        for row in self.images:
            if row.image == image:
                return row
        return None

    def system_image(self, name: str) -> str:
        return self.system_images[name]["image"]


@functools.cache
def load_versions(path: Path = VERSIONS_FILE) -> VersionsTable:
    document = yaml.safe_load(path.read_text())
    rows = tuple(ImageRow(**{**row, "split_trainers": tuple(row.get("split_trainers", ()))})
                 for row in document["images"])
    return VersionsTable(ray_client=document["ray_client"], images=rows,
                         system_images=document.get("system_images", {}))
