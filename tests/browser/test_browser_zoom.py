"""The Zoom panel in a real browser: JupyterLab, headless Chromium, 1024x768.

A one-cell notebook shows the explorer on a 512 x 512 linear layer with a 50% L1 step. The test
opens the Zoom panel, sees the ipympl canvas draw the window entry by entry (kept dark blue and
"pruned by this step" vermillion pixels both present), hovers an entry and reads index, value and
state in ipympl's footer, then drags a rectangle on the picture (the toolbar's zoom is on) and
sees the region boxes follow. Screenshots go to ``test-artifacts/zoom_1024x768*.png``
(or ``$SHOT_DIR``).
"""

from __future__ import annotations

import io
import re

import numpy as np
import pytest

from helpers.browser import SHOT_DIR, WAIT_MS, chromium_page, open_and_run_all, serving, wait_for

pytestmark = pytest.mark.browser

NOTEBOOK = "zoom.ipynb"
CODE = """\
import torch
from prune_explorer.widgets import Explorer
torch.manual_seed(0)
ex = Explorer(torch.nn.Sequential(torch.nn.Linear(512, 512)))
ex.ui.amount.value = 0.5
ex
"""
KEPT = (0x00, 0x22, 0x4E)
PRUNED_NOW = (0xD5, 0x5E, 0x00)


@pytest.fixture
def lab(tmp_path):
    with serving(tmp_path, {NOTEBOOK: [CODE]}) as server:
        yield server


@pytest.fixture
def page():
    errors: list[str] = []
    with chromium_page(errors, viewport=(1024, 768)) as p:
        p.js_errors = errors
        yield p


def colour_share(png: bytes, rgb: tuple[int, int, int]) -> float:
    """Fraction of the picture's pixels within a few levels of ``rgb``."""
    from PIL import Image

    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=int)
    return float((np.abs(pixels - np.array(rgb)).max(axis=-1) <= 12).mean())


def test_zoom_panel_draws_entries_and_hover_names_them(lab, page):
    from playwright.sync_api import expect

    open_and_run_all(page, lab, NOTEBOOK)
    explorer = page.locator(".jp-OutputArea .pe-explorer").first
    expect(explorer).to_be_visible(timeout=WAIT_MS)
    expect(explorer.locator(".pe-preview").first).to_have_attribute(
        "src", re.compile(r"^(blob:|data:image/png)"), timeout=WAIT_MS)

    toggle = explorer.locator(".pe-zoom-toggle")
    toggle.scroll_into_view_if_needed()
    toggle.click()
    figure = explorer.locator(".pe-zoom-canvas .jupyter-matplotlib-figure").first
    expect(figure.locator("canvas").first).to_be_visible(timeout=WAIT_MS)
    expect(explorer.locator(".pe-zoom-rows input")).to_have_value("64")
    figure.scroll_into_view_if_needed()

    # 1. The canvas draws the 64 x 64 window entry by entry: both classes are on screen.
    area = figure.locator(".jupyter-matplotlib-canvas-div").first
    def shares() -> tuple[float, float]:
        png = area.screenshot()
        return colour_share(png, KEPT), colour_share(png, PRUNED_NOW)

    wait_for(shares, lambda both: min(both) > 0.05,
             "zoom canvas never drew the mask (kept and pruned shares)", poll=0.3)

    # 2. Hover: ipympl's footer shows index, value and state of the entry under the pointer.
    box = area.bounding_box()
    assert box is not None
    # the axes' centre (viz.zoom._AXES_RECT: left 0.14 + 0.82/2, top 1 - 0.17 - 0.68/2)
    page.mouse.move(box["x"] + 0.55 * box["width"], box["y"] + 0.49 * box["height"])
    footer = explorer.locator(".pe-zoom-canvas .jupyter-matplotlib-footer").first
    pattern = re.compile(r"0\.weight\[\d+, \d+\] = -?[0-9.e+-]+ · (kept|pruned by this step)")
    expect(footer).to_contain_text(pattern, timeout=WAIT_MS)
    text = footer.inner_text()
    row, col = (int(i) for i in re.search(r"\[(\d+), (\d+)\]", text).groups())
    assert 20 <= row <= 44
    assert 20 <= col <= 44  # near the centre of the 64 x 64 window
    SHOT_DIR.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOT_DIR / "zoom_1024x768.png"))

    # 3. The toolbar's zoom rectangle zooms in; the region boxes follow.
    # (the zoom tool is on from the start: the drag zooms without a click on its button)
    zoom_button = explorer.locator(".pe-zoom-canvas button[title^='Zoom to rectangle']").first
    expect(zoom_button).to_have_class(re.compile(r"\bmod-active\b"))
    x0, y0 = box["x"] + 0.35 * box["width"], box["y"] + 0.35 * box["height"]
    before_drag = area.screenshot()
    page.mouse.move(x0, y0)
    page.mouse.down()
    page.mouse.move(x0 + 0.15 * box["width"], y0 + 0.15 * box["height"], steps=5)
    page.mouse.up()
    rows = explorer.locator(".pe-zoom-rows input")
    expect(rows).not_to_have_value("64", timeout=WAIT_MS)
    assert 1 <= int(rows.input_value()) < 64
    wait_for(lambda: area.screenshot() != before_drag, bool,  # the zoomed frame is drawn
             "the zoom canvas did not redraw after the drag")
    page.screenshot(path=str(SHOT_DIR / "zoom_1024x768_dragged.png"))
    assert not page.js_errors, page.js_errors
