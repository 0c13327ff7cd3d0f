"""The Explore tab's Why panel in a real browser, at 1024×768: drawn for its column's width (the
panel's own size probe), its text as large as the explorer's, the comparison's counts shown,
nothing cut, no JavaScript error. A small notebook calibrates a demo MLP and opens the panel."""

from __future__ import annotations

import pytest

from helpers.browser import SHOT_DIR, chromium_page, open_and_run_all, serving, wait_for

pytestmark = pytest.mark.browser

SIZE = (1024, 768)
NOTEBOOK = "why_panel.ipynb"
CELLS = ["""\
import torch
from prune_explorer import Session, explore
from prune_explorer.demo import load_digits_split, load_mlp

s = Session(load_mlp())
s.calibrate([load_digits_split().x_train])
explorer = explore(s.model, session=s, tensor="fc2.weight")
explorer.ui.importance.value = "wanda"
why = explorer.explore_pane.panels.why
why.against.value = "magnitude"
why.open()
explorer"""]


@pytest.fixture
def lab(tmp_path):
    with serving(tmp_path, {NOTEBOOK: CELLS}) as server:
        yield server


def test_the_why_panel_is_drawn_for_its_column(lab):
    from playwright.sync_api import expect

    errors: list[str] = []
    with chromium_page(errors, viewport=SIZE) as page:
        open_and_run_all(page, lab, NOTEBOOK)
        explorer = page.locator(".jp-OutputArea .pe-explorer").first
        expect(explorer).to_be_visible(timeout=120_000)
        panel = explorer.locator(".pe-why-panel").first
        picture = panel.locator(".pe-why-picture").first
        expect(picture).to_be_visible(timeout=120_000)
        expect(panel.locator(".pe-why-text").first).to_contain_text(
            "kept by wanda and pruned by magnitude", timeout=120_000)
        panel.scroll_into_view_if_needed()
        column = panel.locator(".pe-size-probe").first

        def widths() -> tuple[float, float]:
            return (picture.evaluate("img => img.naturalWidth / window.devicePixelRatio"),
                    column.evaluate("el => el.parentElement.clientWidth"))

        # redrawn for the width the probe measured (not the 720 px default), within a few px
        wait_for(widths, lambda w: w[1] > 0 and abs(w[0] - w[1]) <= 24,
                 "the Why picture was not redrawn for its column", timeout=120)
        box = picture.bounding_box()
        assert box["x"] + box["width"] <= SIZE[0] + 1, box
        text_px = float(panel.locator(".pe-why-text").first.evaluate(
            "el => parseFloat(getComputedStyle(el).fontSize)"))
        assert text_px <= 13.0 + 1e-6  # the figure's smallest text (13 CSS px) is not smaller
        assert explorer.locator(".pe-why-panel").first.evaluate(
            "el => el.scrollWidth <= el.clientWidth + 1")
        SHOT_DIR.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOT_DIR / "explorer_why_1024x768.png"))
    assert not errors, errors
