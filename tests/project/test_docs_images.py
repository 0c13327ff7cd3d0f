"""The markdown pages: their screenshots exist, are small and come from docs/screenshots.py, and
every relative link points at a file (and heading) that exists."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from helpers import REPO

REPO = REPO
PAGES = [REPO / "README.md", REPO / "SECURITY.md", REPO / "benchmarks" / "README.md",
         *sorted((REPO / "docs").glob("*.md"))]
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+\.png)\)")
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*$", re.M)
EXTERNAL = ("http://", "https://", "mailto:")


def script():
    spec = importlib.util.spec_from_file_location("pe_docs_screenshots",
                                                  REPO / "docs" / "screenshots.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def referenced() -> dict[Path, list[Path]]:
    return {page: [(page.parent / m).resolve() for m in IMAGE.findall(page.read_text("utf-8"))]
            for page in PAGES}


def test_every_picture_in_the_docs_exists_and_is_small():
    pictures = referenced()
    assert pictures[REPO / "README.md"], "the README shows no screenshot"
    assert pictures[REPO / "docs" / "explorer.md"]
    for page, paths in pictures.items():
        for path in paths:
            assert path.is_file(), f"{page.name} shows missing {path}"
            assert path.stat().st_size < script().MAX_BYTES, path


def test_every_screenshot_is_one_the_script_makes_and_is_shown():
    module = script()
    sizes = module.parser_default_sizes()
    made = {REPO / "docs" / "img" / f"{stem}-{module.size_name(size)}.png"
            for stem in module.SHOTS for size in sizes}
    on_disk = set((REPO / "docs" / "img").glob("*.png"))
    assert on_disk == made  # nothing stale left behind, nothing missing
    shown = {p for paths in referenced().values() for p in paths}
    assert made <= shown


def anchors(page: Path) -> set[str]:
    """The heading anchors GitHub gives ``page``: lower case, punctuation dropped, spaces to -."""
    seen: dict[str, int] = {}
    for title in HEADING.findall(FENCE.sub("", page.read_text("utf-8"))):
        slug = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
        seen[slug] = seen.get(slug, -1) + 1
        if seen[slug]:
            seen[f"{slug}-{seen[slug]}"] = 0
    return set(seen)


def test_slugs_follow_githubs_rule():
    page = REPO / "docs" / "pruning-api.md"
    assert "deliberate-differences-from-torchnnutilsprune" in anchors(page)


def test_every_relative_link_in_the_docs_resolves():
    broken, checked = [], 0
    for page in PAGES:
        for target in LINK.findall(FENCE.sub("", page.read_text("utf-8"))):
            if target.startswith(EXTERNAL):
                continue
            checked += 1
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.exists():
                broken.append(f"{page.relative_to(REPO)} -> {target} (no such file)")
            elif anchor and file.suffix == ".md" and anchor not in anchors(file):
                broken.append(f"{page.relative_to(REPO)} -> {target} (no such heading)")
    assert checked > 20  # the pages link to each other: a pattern that finds nothing is wrong
    assert not broken, broken
