"""README.md is a front page and docs/ holds the rest: short, every relative link resolves, no
page is an orphan."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import ROOT

README = ROOT / "README.md"
DOCS = ROOT / "docs"
MAX_README_LINES = 250

_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^[ \t]*(```|~~~).*?^[ \t]*\1", re.MULTILINE | re.DOTALL)


def pages() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def relative_links(page: Path) -> list[str]:
    text = _FENCE.sub("", page.read_text())   # a code block's brackets are not links
    text = re.sub(r"`[^`\n]*`", "", text)       # nor an inline code span's
    targets = [a or b for a, b in _LINK.findall(text)]
    return [t for t in targets if not re.match(r"^[a-z][a-z0-9+.-]*:", t)]   # http:, mailto:


def github_anchors(page: Path) -> set[str]:
    """The heading anchors GitHub renders: lower case, punctuation dropped, spaces to hyphens."""
    anchors: set[str] = set()
    counts: dict[str, int] = {}
    for line in _FENCE.sub("", page.read_text()).splitlines():
        match = re.match(r"^#{1,6} (.*?)\s*#*\s*$", line)
        if not match:
            continue
        slug = re.sub(r"[^\w\- ]", "", match.group(1).lower()).replace(" ", "-")
        n = counts.get(slug, 0)
        counts[slug] = n + 1
        anchors.add(slug if n == 0 else f"{slug}-{n}")
    return anchors


def test_readme_is_a_front_page():
    lines = len(README.read_text().splitlines())
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines; at most {MAX_README_LINES}: move text to docs/"


def test_the_anchor_rule_matches_github():
    page = DOCS / "deploy.md"
    assert {"1-apis-and-deployer-roles", "2-how-reviewers-reach-the-control-plane",
            "nccl-on-standard"} <= github_anchors(page)


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path):
    broken = []
    for target in relative_links(page):
        path_part, _, anchor = target.partition("#")
        resolved = (page.parent / path_part).resolve() if path_part else page
        if not resolved.exists():
            broken.append(f"{target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in github_anchors(resolved):
            broken.append(f"{target}: no heading with anchor #{anchor}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_every_docs_page_is_reachable_from_the_readme():
    seen, todo = set(), [README]
    while todo:
        page = todo.pop()
        if page in seen or not page.exists():
            continue
        seen.add(page)
        for target in relative_links(page):
            path_part = target.partition("#")[0]
            if path_part.endswith(".md"):
                todo.append((page.parent / path_part).resolve())
    orphans = sorted(str(p.relative_to(ROOT)) for p in DOCS.glob("*.md") if p.resolve() not in seen)
    assert not orphans, f"docs pages no link path from README.md reaches: {orphans}"


# `jobs` typed in bash is the shell's job-control builtin: the command is `gke-grpo` (or
# `python -m jobs`) in every page and every message.
_SUBCOMMANDS = "submit|attach|logs|status|list|stop|plot|report|health|export|serve|preflight"
_OLD_NAME = re.compile(rf"(?<!-m )(?<![\w./\[-])jobs ({_SUBCOMMANDS})\b")


def _sources_with_messages() -> list[Path]:
    files = [*pages(), *sorted((ROOT / "data").glob("*.yaml"))]
    for package in ("jobs", "components", "tools", "policy"):
        files += sorted(p for p in (ROOT / package).rglob("*.py") if "venv" not in p.parts)
    return [*files, ROOT / "__main__.py", ROOT / "Makefile"]


def test_the_command_is_called_gke_grpo_everywhere():
    found = [f"{path.relative_to(ROOT)}:{n}: {line.strip()[:120]}"
             for path in _sources_with_messages()
             for n, line in enumerate(path.read_text().splitlines(), 1)
             if _OLD_NAME.search(line) or "[jobs] " in line]
    assert not found, "say `gke-grpo <subcommand>` (bash's `jobs` is job control):\n" + "\n".join(found)


@pytest.mark.parametrize("text,old", [("run `jobs serve RUN`", True), ("`jobs submit` exits 3", True),
                                      ("python -m jobs submit", False), ("[jobs.evaluate] RESULT", False),
                                      ("the jobs CLI", False), ("gke-grpo status", False)])
def test_the_old_name_is_recognised(text, old):
    assert bool(_OLD_NAME.search(text)) is old


def test_no_page_says_destroy_removes_the_protected_data_store(dev_preview):
    # The bucket (and Lustre) is protected in every stack (components/storage.py): a destroy
    # stops before it.
    assert any(r.protect for r in dev_preview.resources if r.type == "gcp:storage/bucket:Bucket")
    for page in pages():
        for line in page.read_text().splitlines():
            if "destroy" in line and re.search(r"removes everything(?! but)", line):
                pytest.fail(f"{page.name}: {line.strip()}")


# The data files state facts a user can check: what was measured or read, on which machine or
# from which source, and when; not how the program was developed.
_DEVELOPMENT_WORDS = re.compile(r"this session|this workplace|device tool|\blent\b|lent-GPU|withheld|"
                                r"before the split|as we know them", re.IGNORECASE)


def test_data_files_and_pages_describe_their_figures_as_facts():
    files = [p for p in sorted((ROOT / "data").iterdir()) if p.suffix in (".yaml", ".json", ".txt")]
    found = [f"{path.name}:{n}: {line.strip()[:120]}"
             for path in files + pages()
             for n, line in enumerate(path.read_text().splitlines(), 1) if _DEVELOPMENT_WORDS.search(line)]
    assert not found, "\n".join(found)
