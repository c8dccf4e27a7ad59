"""The supported-versions table for the Pulumi program: a re-export of jobs/plan/versions.py.

The reader lives on the jobs/ side (the job code on the Ray head needs it, and jobs/ imports
nothing of components/); the program keeps importing it from here.
"""

from jobs.plan.image_refs import image_reference_problem
from jobs.plan.versions import VERSIONS_FILE, ImageRow, VersionsTable, load_versions

__all__ = ["VERSIONS_FILE", "ImageRow", "VersionsTable", "image_reference_problem", "load_versions", "stack_row"]


def stack_row(framework: str, release: str | None, image: str | None) -> ImageRow:
    """The row a stack runs: job.release, else the row of kuberay.image, else the framework's
    default (the first listed). The config rules have checked both keys (components/config/rules.py)."""
    versions = load_versions()
    row = (versions.by_id(release) if release else None) or (versions.by_image(image) if image else None)
    return row or versions.for_framework(framework)
