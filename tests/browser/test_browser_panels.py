"""The Explore tab's model view and magnitude panels in a real browser, at 1024×768.

Opens the quickstart notebook in JupyterLab (headless Chromium, see ``helpers.browser``), expands
"Model view" and "Magnitudes", and checks that they render inside the window: one row per tensor
with its sparsity, the shown tensor marked, a click on a row selecting that tensor in the picker,
and the histogram's cut line moving with the amount slider. Screenshots go to
``test-artifacts/`` (or ``$SHOT_DIR``).
"""

from __future__ import annotations

import re

import pytest

from helpers.browser import SHOT_DIR, WAIT_MS, chromium_page, open_and_run_all, serving, wait_for

pytestmark = pytest.mark.browser

NOTEBOOK = "01_quickstart.ipynb"
SIZE = (1024, 768)


@pytest.fixture
def lab(tmp_path):
    with serving(tmp_path) as server:
        yield server


def _expand(explorer, css: str, title: str) -> None:
    section = explorer.locator(f".{css}").first
    section.get_by_text(title, exact=True).first.click()


_NAMES = "s => [...s.options].map(o => o.text.split('\u00b7')[0].trim())"
_SHOWN = "s => s.options[s.selectedIndex].text.split('\u00b7')[0].trim()"


def _cut_x(explorer) -> str | None:
    line = explorer.locator(".pe-magnitudes-picture svg .pe-mag-cut")
    return line.first.get_attribute("x1") if line.count() else None


def test_model_view_and_magnitudes_render_and_select(lab):
    from playwright.sync_api import expect

    errors: list[str] = []
    with chromium_page(errors, viewport=SIZE) as page:
        open_and_run_all(page, lab, NOTEBOOK)
        explorer = page.locator(".jp-OutputArea .pe-explorer").first
        expect(explorer).to_be_visible(timeout=WAIT_MS)
        picker = explorer.locator(".pe-tensor select").first

        # Model view: one row per tensor, the shown one marked, percentages drawn by CSS.
        _expand(explorer, "pe-modelview", "Model view")
        rows = explorer.locator(".pe-mv-row")
        expect(rows.first).to_be_visible(timeout=WAIT_MS)
        names = picker.evaluate(_NAMES)
        expect(rows).to_have_count(len(names))
        shown = picker.evaluate(_SHOWN)
        marked = explorer.locator(".pe-mv-selected")
        expect(marked).to_have_count(1)
        expect(marked).to_have_text(shown)
        after = marked.evaluate("b => getComputedStyle(b, '::after').content")
        assert re.search(r"\d+\.\d%", after), after
        box = explorer.locator(".pe-modelview").first.bounding_box()
        assert box["width"] >= 250, box
        assert box["x"] + box["width"] <= SIZE[0], box

        # A click on another row selects that tensor in the picker.
        other = next(n for n in names if n != shown and n.endswith(".weight"))
        rows.filter(has_text=re.compile(rf"^{re.escape(other)}$")).first.click()
        wait_for(lambda: picker.evaluate(_SHOWN), lambda shown: shown == other,
                 f"the picker did not select {other}")
        expect(explorer.locator(".pe-mv-selected")).to_have_text(other, timeout=WAIT_MS)

        # Magnitudes: the histogram with its cut line, which follows the slider.
        _expand(explorer, "pe-magnitudes", "Magnitudes")
        svg = explorer.locator(".pe-magnitudes-picture svg").first
        expect(svg).to_be_visible(timeout=WAIT_MS)
        assert svg.locator("rect").count() > 3
        expect(svg.locator(".pe-mag-cut")).to_have_count(1, timeout=WAIT_MS)
        expect(explorer.locator(".pe-magnitudes-caption")).to_contain_text("smallest")
        explorer.locator(".pe-magnitudes").first.scroll_into_view_if_needed()
        SHOT_DIR.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOT_DIR / "explorer_panels_1024x768.png"))
        start = _cut_x(explorer)
        handle = explorer.locator(".pe-amount [role=slider]").first
        handle.focus()
        for _ in range(10):
            page.keyboard.press("ArrowRight")
        wait_for(lambda: _cut_x(explorer), lambda x: x != start,
                 "the cut line did not move with the slider")
        assert float(_cut_x(explorer)) > float(start)  # more pruned: the line moves right
        mag_box = explorer.locator(".pe-magnitudes").first.bounding_box()
        assert mag_box["x"] + mag_box["width"] <= SIZE[0], mag_box
    assert not errors, errors
