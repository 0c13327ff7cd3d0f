"""Every Python block of docs/real-models.md's "Files, plans and other libraries" section runs
as written (each in a fresh namespace), so the routes it documents are runnable."""

from __future__ import annotations

import re
import warnings

import pytest

from helpers import REPO

SECTION = "## Files, plans and other libraries"


def _blocks() -> list[str]:
    text = (REPO / "docs" / "real-models.md").read_text(encoding="utf-8")
    section = text[text.index(SECTION):]
    section = section[: section.index("\n## ", len(SECTION))]
    return re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)


def test_the_section_has_a_block_per_route():
    assert len(_blocks()) == 5


@pytest.mark.slow
@pytest.mark.parametrize("index", range(5))
def test_each_block_runs(index):
    block = _blocks()[index]
    if "import peft" in block:
        pytest.importorskip("peft", reason="needs peft (the hf extra)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # the libraries' own deprecations
        exec(compile(block, f"real-models.md block {index}", "exec"), {})
