"""The head's code (the archive components/head_code.py ships) on every Python a supported image
carries: 3.12 (the verl images, NeMo RL v0.5.0) and 3.13 (NeMo RL v0.7.0, data/versions.yaml). The
suite runs it on this machine's 3.11; what would break it on a later Python is a module that
Python removed, which this checks in every shipped file, imports inside functions included.

The removed modules, as Python's own docs list them (read 2026-12-06): 3.12 removed distutils,
imp, asynchat, asyncore and smtpd (Doc/whatsnew/3.12.rst); 3.13 removed PEP 594's 19 "dead
batteries" and lib2to3 (Doc/whatsnew/3.13.rst, "PEP 594: dead batteries";
docs.python.org/3/deprecations/pending-removal-in-3.13.html)."""

from __future__ import annotations

import ast
import io
import zipfile

import pytest

from components.head_code import head_code_archive
from jobs.plan.versions import load_versions

REMOVED = {
    "3.12": {"distutils", "imp", "asynchat", "asyncore", "smtpd"},
    "3.13": {"aifc", "audioop", "cgi", "cgitb", "chunk", "crypt", "imghdr", "mailcap", "msilib",
             "nis", "nntplib", "ossaudiodev", "pipes", "sndhdr", "spwd", "sunau", "telnetlib",
             "uu", "xdrlib", "lib2to3"},
}


def shipped_sources() -> dict[str, str]:
    with zipfile.ZipFile(io.BytesIO(head_code_archive())) as archive:
        return {name: archive.read(name).decode() for name in archive.namelist() if name.endswith(".py")}


def imported_modules(source: str) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


def removed_by(python: str) -> set[str]:
    wanted = tuple(int(part) for part in python.split("."))
    return set().union(*(modules for version, modules in REMOVED.items()
                         if tuple(int(p) for p in version.split(".")) <= wanted))


def test_every_supported_python_is_covered():
    pythons = {row.python for row in load_versions().images}
    assert pythons == {"3.12", "3.13"}, "a new Python in data/versions.yaml: list what it removed"


@pytest.mark.parametrize("python", sorted({row.python for row in load_versions().images}))
def test_the_head_code_imports_no_module_the_images_python_removed(python):
    sources = shipped_sources()
    assert "jobs/head/driver.py" in sources and "jobs/head/gpu_gang.py" in sources
    gone = removed_by(python)
    found = {name: sorted(imported_modules(source) & gone) for name, source in sources.items()}
    assert {name: modules for name, modules in found.items() if modules} == {}


def test_the_check_finds_a_removed_import():
    """The check can fail: an import inside a function counts."""
    source = "def f():\n    import telnetlib\n    from distutils import util\n"
    assert imported_modules(source) & removed_by("3.13") == {"telnetlib", "distutils"}
    assert imported_modules(source) & removed_by("3.12") == {"distutils"}
