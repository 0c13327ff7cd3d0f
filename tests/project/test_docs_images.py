"""Screenshots in README.md and docs/: they exist, are small, and come from docs/screenshots.py."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from helpers import REPO

REPO = REPO
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+\.png)\)")


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
    made = {REPO / "docs" / "img" / f"{stem}-{w}x{h}.png" for stem in module.SHOTS
            for w, h in sizes}
    on_disk = set((REPO / "docs" / "img").glob("*.png"))
    assert on_disk == made  # nothing stale left behind, nothing missing
    shown = {p for paths in referenced().values() for p in paths}
    assert made <= shown
