"""The explorer at projector sizes, in a real browser (JupyterLab, Chromium), checked by
measuring elements:

* 1024x768 with the file browser open, and 1024x768 at 150 % zoom (a 683x512 CSS viewport
  at 1.5 device pixels per CSS pixel): the picture is drawn for its column (its width is the
  column's), and with the slider's row scrolled to the top the slider, the count line, the
  picture and an input error are all inside the notebook's visible area at once;
* the CNN's 32x16x3x3 kernels view draws a 3x3 tile at least 12 CSS px (1024x768);
* nothing in any tab is cut (elements that hide overflow: scrollWidth vs clientWidth), at
  1024x768 and 1400x1000.

Tick labels and texts inside the PNG are checked in Python with the renderer's own extents
(``tests/viz/test_picture_size.py``); for a 10x64 and a 4096x11008
weight, on the very picture the browser shows (``test_browser_tensor_sizes.py``).
"""

from __future__ import annotations

import re
import time

import pytest

from helpers.browser import (
    CRAMMED_JS,
    CUT_JS,
    SHOT_DIR,
    chromium_page,
    head_to_top,
    open_and_run_all,
    serving,
)

pytestmark = pytest.mark.browser

NOTEBOOK = "projector.ipynb"
CELLS = [
    """\
from prune_explorer import explore
from prune_explorer.demo import evaluate, load_cnn, load_mlp

mlp = explore(load_mlp(), tensor="fc1.weight", evaluate=evaluate)
mlp.ui.amount.value = 0.5
mlp.flush()
mlp""",
    """\
cnn = explore(load_cnn(), tensor="features.3.weight", view="kernels")
cnn.ui.method.value = "ln_structured"
cnn.flush()
cnn""",
]

# The notebook's scrolling area (JupyterLab's windowed panel), as the size probe finds it.
_VIEWPORT = """el => {
  for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) {
    const s = getComputedStyle(p);
    if ((s.overflowY === 'auto' || s.overflowY === 'scroll') && p.clientHeight > 0
        && p.scrollHeight > p.clientHeight + 1) {
      const r = p.getBoundingClientRect();
      return [Math.max(r.top, 0), Math.min(r.top + p.clientHeight, window.innerHeight)];
    }
  }
  return [0, window.innerHeight];
}"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    with serving(tmp_path_factory.mktemp("projector"), {NOTEBOOK: CELLS}) as server:
        yield server


def _shot(page, name: str) -> None:
    SHOT_DIR.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOT_DIR / name))


def _inside(explorer, selectors: list[str]) -> dict[str, tuple[float, float, float]]:
    top, bottom = explorer.locator(".pe-preview").first.evaluate(_VIEWPORT)
    out = {}
    for selector in selectors:
        box = explorer.locator(selector).first.bounding_box()
        assert box is not None, f"{selector} is not on show"
        out[selector] = (box["y"], box["y"] + box["height"], bottom)
        assert box["y"] >= top - 1, (selector, box, (top, bottom))
        assert box["y"] + box["height"] <= bottom + 1, (selector, box, (top, bottom))
    return out


@pytest.mark.parametrize(("size", "scale"), [((1024, 768), 1.0), ((683, 512), 1.5)],
                         ids=["1024x768", "1024x768-zoom150"])
def test_slider_picture_count_and_error_share_one_screen(lab, size, scale):
    from playwright.sync_api import expect

    errors: list[str] = []
    with chromium_page(errors, viewport=size, scale=scale) as page:
        open_and_run_all(page, lab, NOTEBOOK)
        if scale == 1.0 and not page.locator(".jp-FileBrowser").first.is_visible():
            page.keyboard.press("Control+Shift+F")  # the file browser open, as on launch
        mlp = page.locator(".jp-OutputArea .pe-explorer").first
        expect(mlp.locator(".pe-preview").first).to_have_attribute(
            "src", re.compile(r"^(blob:|data:image/png)"), timeout=90_000)
        head_to_top(mlp)
        picture = mlp.locator(".pe-preview").first.bounding_box()
        column = mlp.locator(".pe-explore-picture").first.bounding_box()
        assert picture["width"] >= column["width"] - 12, (picture, column)
        assert picture["width"] > 384 or column["width"] <= 400  # bigger than it used to be
        _inside(mlp, [".pe-amount", ".pe-count-line", ".pe-preview"])
        expect(mlp.locator(".pe-count-line").first).to_contain_text("of fc1.weight pruned")
        expect(mlp.locator(".pe-metric").first).to_contain_text("test accuracy: now",
                                                                timeout=60_000)
        _shot(page, f"projector_{size[0]}x{size[1]}@{scale:g}.png")

        # A bad n: the error over the picture (and under n), on the same screen.
        mlp.locator(".pe-method select").first.select_option("ln_structured")
        n = mlp.locator(".pe-n input").first
        n.fill("abc")
        n.press("Enter")
        error = mlp.locator(".pe-input-error").first
        expect(error).to_contain_text("n must be a number", timeout=30_000)
        expect(mlp.locator(".pe-control-error").first).to_contain_text("n must be a number")
        expect(mlp.locator(".pe-preview").first).to_have_class(re.compile(r"\bpe-stale\b"))
        expect(mlp.locator(".pe-apply").first).to_be_disabled()
        expect(mlp.locator(".pe-button-note").first).to_contain_text("Apply is off")
        head_to_top(mlp)
        _inside(mlp, [".pe-amount", ".pe-input-error", ".pe-count-line", ".pe-preview"])
        _shot(page, f"projector_error_{size[0]}x{size[1]}@{scale:g}.png")
        n.fill("2")
        n.press("Enter")
        expect(error).to_be_hidden(timeout=30_000)

        if scale == 1.0:  # the kernels view: a 3x3 tile of at least 12 CSS px
            cnn = page.locator(".jp-OutputArea .pe-explorer").nth(1)
            expect(cnn.locator(".pe-preview").first).to_have_attribute(
                "src", re.compile(r"^(blob:|data:image/png)"), timeout=90_000)
            head_to_top(cnn)
            words = cnn.locator(".pe-picture-text").first.text_content() or ""
            cell = re.search(r"cell size: ([0-9.]+) x ([0-9.]+) px", words)
            assert cell is not None, words
            assert 3 * min(float(cell.group(1)), float(cell.group(2))) >= 12.0, words
            _inside(cnn, [".pe-amount", ".pe-count-line", ".pe-preview"])
            _shot(page, f"projector_kernels_{size[0]}x{size[1]}.png")
    assert not errors, errors


@pytest.mark.parametrize("size", [(1024, 768), (1400, 1000)], ids=["1024x768", "1400x1000"])
def test_nothing_is_cut_in_any_tab(lab, size):
    from playwright.sync_api import expect

    errors: list[str] = []
    with chromium_page(errors, viewport=size) as page:
        open_and_run_all(page, lab, NOTEBOOK)
        if not page.locator(".jp-FileBrowser").first.is_visible():
            page.keyboard.press("Control+Shift+F")
        for index in (0, 1):
            explorer = page.locator(".jp-OutputArea .pe-explorer").nth(index)
            expect(explorer.locator(".pe-preview").first).to_have_attribute(
                "src", re.compile(r"^(blob:|data:image/png)"), timeout=90_000)
            head_to_top(explorer)
            if index == 0:  # the Model view and Magnitudes panels too
                for title in ("Model view", "Magnitudes"):
                    explorer.get_by_text(title, exact=True).first.click()
                time.sleep(1.5)
                assert explorer.evaluate(CUT_JS) == [], ("panels", size)
            views = ("kernels", "channels", "matrix") if index else ("matrix",)
            for view in views:
                explorer.locator(".pe-layout select").first.select_option(label=view)
                time.sleep(1.0)
                assert explorer.evaluate(CUT_JS) == [], (view, size)
            explorer.locator(".pe-apply").first.click()
            expect(explorer.locator(".pe-status").first).to_contain_text("Applied",
                                                                         timeout=30_000)
            tabs = explorer.locator(".lm-TabBar-tab, .p-TabBar-tab")
            for tab in range(tabs.count()):
                tabs.nth(tab).click()
                time.sleep(1.0)
                if tab == 3:  # Commit: the review row too
                    explorer.locator(".pe-commit-review").first.click()
                    expect(explorer.locator(".pe-commit-confirm").first).to_be_visible(
                        timeout=30_000)
                where = (tabs.nth(tab).text_content(), size)
                assert explorer.evaluate(CUT_JS) == [], where
                assert explorer.evaluate(CRAMMED_JS) == [], where
                device = explorer.locator(".pe-device select").first.bounding_box()
                assert device is not None, where
                assert device["width"] >= 100, (device, where)
                for code in explorer.locator(".pe-snippet textarea, .pe-json textarea").all():
                    if code.is_visible():  # code scrolls sideways, never soft-wraps
                        assert code.evaluate("t => getComputedStyle(t).whiteSpace") == "pre"
                _shot(page, f"tabs_{index}_{tab}_{size[0]}x{size[1]}.png")
            tabs.nth(0).click()
    assert not errors, errors
