"""The supported-versions table for the Pulumi program: a re-export of jobs/plan/versions.py.

The reader lives on the jobs/ side (the job code on the Ray head needs it, and jobs/ imports
nothing of components/); the program keeps importing it from here.
"""

from jobs.plan.image_refs import image_reference_problem
from jobs.plan.versions import VERSIONS_FILE, ImageRow, VersionsTable, load_versions

__all__ = ["VERSIONS_FILE", "ImageRow", "VersionsTable", "image_reference_problem", "load_versions"]
