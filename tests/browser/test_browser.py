"""End to end in a real browser: the quickstart notebook in JupyterLab, driven by Chromium.

``prune-explorer lab`` serves a scratch copy of the notebooks (127.0.0.1, a free port, token
on); Playwright drives Debian's ``/usr/bin/chromium`` (no browser download, non-localhost
requests aborted). The test runs every cell of ``01_quickstart.ipynb``, finds the rendered
explorer (the widget itself, not "Loading widget..." or a text repr), moves the amount slider
with the keyboard and sees the heatmap change, applies and undoes and sees the tensor picker
and the status line follow, then reads the plan snippet in the Export tab. Screenshots go to
``test-artifacts/`` (or ``$SHOT_DIR``).

Skipped, with the reason, when Chromium or Playwright is missing. CI installs Chromium with
``apt-get install -y chromium``.
"""

from __future__ import annotations

import json
import re
import time

import pytest

from helpers.browser import (
    SHOT_DIR,
    WAIT_MS,
    chromium_page,
    open_and_run_all,
    serving,
    wait_for,
)

pytestmark = pytest.mark.browser

NOTEBOOK = "01_quickstart.ipynb"


@pytest.fixture
def lab(tmp_path):
    with serving(tmp_path) as server:
        yield server


@pytest.fixture
def page():
    errors: list[str] = []
    with chromium_page(errors) as p:
        p.js_errors = errors
        yield p


def shot(page, name: str) -> None:
    SHOT_DIR.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOT_DIR / name))


def selected_option(page) -> str:
    text = page.locator(".pe-explorer .pe-tensor select").first.evaluate(
        "s => s.options[s.selectedIndex].text"
    )
    return " ".join(text.split())  # the browser shows the option with non-breaking spaces


def test_quickstart_explorer_in_jupyterlab(lab, page):
    from playwright.sync_api import expect

    t0 = time.monotonic()
    open_and_run_all(page, lab, NOTEBOOK)

    # 1. The explorer is rendered as a live widget in the output area.
    explorer = page.locator(".jp-OutputArea .pe-explorer").first
    expect(explorer).to_be_visible(timeout=WAIT_MS)
    preview = explorer.locator(".pe-preview").first
    expect(preview).to_have_attribute("src", re.compile(r"^(blob:|data:image/png)"))
    outputs = page.locator(".jp-OutputArea").all_inner_texts()
    joined = "\n".join(outputs)
    assert "Loading widget" not in joined
    assert "Explorer(" not in joined
    assert "VBox(" not in joined
    assert "test accuracy before pruning" in joined
    explorer.scroll_into_view_if_needed()
    shot(page, "explorer_1_rendered.png")

    # 2. Moving the amount slider (keyboard on its handle) changes the heatmap.
    handle = explorer.locator(".pe-amount [role=slider]").first
    readout = explorer.locator(".pe-amount .widget-readout").first
    start_value = float(readout.inner_text())
    old_src = preview.get_attribute("src")
    old_pixels = preview.screenshot()
    handle.focus()
    for _ in range(5):
        page.keyboard.press("ArrowRight")
    amount = round(start_value + 0.05, 2)
    expect(readout).to_have_text(f"{amount:.2f}")
    expect(preview).not_to_have_attribute("src", old_src, timeout=WAIT_MS)
    wait_for(lambda: preview.screenshot() != old_pixels, bool, "the heatmap pixels never changed")
    shot(page, "explorer_2_slider_moved.png")

    # 2b. The accuracy readout (explore(model, evaluate=evaluate)): now, and after the step.
    accuracy = float(re.search(r"test accuracy before pruning: ([\d.]+)%", joined).group(1))
    metric = explorer.locator(".pe-metric").first
    expect(metric).to_contain_text(re.compile(r"test accuracy: now [\d.]+% → after this step"),
                                   timeout=WAIT_MS)
    # "now" is measured again in the explorer's background thread, on a trial copy: float32
    # rounding in another thread may move one of the 450 test digits (0.22 points) across a
    # near-tie of two logits, no more.
    now = float(re.search(r"now ([\d.]+)%", metric.inner_text()).group(1))
    assert abs(now - accuracy) <= 0.25, (now, accuracy)

    # 3. Apply: the picker shows the new sparsity and the status line says what happened.
    before = selected_option(page)
    assert "0.0% pruned" in before
    status = explorer.locator(".pe-status").first
    explorer.locator(".pe-apply").first.click()
    expect(status).to_contain_text("Applied", timeout=WAIT_MS)
    expected_pct = f"{amount:.1%} pruned"
    expect(explorer.locator(".pe-tensor select")).to_contain_text(expected_pct, timeout=WAIT_MS)
    assert expected_pct in selected_option(page)
    shot(page, "explorer_3_applied.png")

    # 4. Undo: back to the unpruned tensor.
    explorer.locator(".pe-undo").first.click()
    expect(status).to_contain_text("Undid", timeout=WAIT_MS)
    wait_for(lambda: selected_option(page), lambda shown: shown == before,
             "the picker did not go back to the unpruned tensor")

    # 5. Apply again, then read the plan in the Export tab.
    explorer.locator(".pe-apply").first.click()
    expect(status).to_contain_text("Applied", timeout=WAIT_MS)
    explorer.locator(".lm-TabBar-tab", has_text="Export").first.click()
    snippet = explorer.locator(".pe-snippet textarea").first
    expect(snippet).to_be_visible(timeout=WAIT_MS)
    expect(snippet).to_have_value(re.compile(r"prune\.l1_unstructured\("), timeout=WAIT_MS)
    text = snippet.input_value()
    assert "from torch.nn.utils import prune" in text
    assert f'prune.l1_unstructured(model.get_submodule("fc1"), "weight", amount={amount})' in text
    explorer.scroll_into_view_if_needed()
    shot(page, "explorer_4_export.png")

    assert not page.js_errors, page.js_errors
    SHOT_DIR.mkdir(parents=True, exist_ok=True)
    with open(SHOT_DIR / "timings.jsonl", "a", encoding="utf-8") as file:
        file.write(json.dumps({"test": "quickstart_explorer", "server_ready_s": lab.ready_s,
                               "test_s": round(time.monotonic() - t0, 2)}) + "\n")


# Buttons and the slider must read in full: the text fits its box (no "A…" ellipsis).
_TRUNCATED = """root => [...root.querySelectorAll(
    '.pe-apply, .pe-undo, .pe-reset, .pe-reset-confirm, .pe-reset-cancel, '
    + '.pe-amount .widget-label, .pe-method .widget-label, .pe-zoom-toggle, '
    + '.pe-explore-panels .p-Accordion-title, '
    + '.pe-explore-panels .lm-AccordionPanel-title')]
  .filter(e => e.offsetParent !== null && e.scrollWidth > e.clientWidth)
  .map(e => e.className + ': ' + e.textContent)"""


@pytest.mark.parametrize("size", [(1024, 768), (1400, 1000)], ids=["1024x768", "1400x1000"])
def test_explore_tab_reflows_with_the_file_browser_open(lab, size):
    """The projector case: nothing truncated, the slider visible, the picture not stretched, a
    stale picture marked and its error cleared once the controls are valid again."""
    from playwright.sync_api import expect

    errors: list[str] = []
    with chromium_page(errors, viewport=size) as page:
        open_and_run_all(page, lab, NOTEBOOK)
        if not page.locator(".jp-FileBrowser").first.is_visible():
            page.keyboard.press("Control+Shift+F")  # open the file browser
        expect(page.locator(".jp-FileBrowser").first).to_be_visible(timeout=WAIT_MS)
        explorer = page.locator(".jp-OutputArea .pe-explorer").first
        expect(explorer).to_be_visible(timeout=WAIT_MS)
        preview = explorer.locator(".pe-preview").first
        expect(preview).to_have_attribute("src", re.compile(r"^(blob:|data:image/png)"))
        explorer.scroll_into_view_if_needed()
        shot(page, f"explorer_layout_{size[0]}x{size[1]}.png")

        assert explorer.evaluate(_TRUNCATED) == []
        for name in ("Apply", "Undo", "Reset"):
            button = explorer.locator(f".pe-{name.lower()}").first
            expect(button).to_have_text(name)
            assert button.bounding_box()["width"] >= 60
        slider = explorer.locator(".pe-amount .slider-container, .pe-amount .noUi-target").first
        expect(slider).to_be_visible()
        box = slider.bounding_box()
        assert box["width"] >= 100, box
        assert box["x"] + box["width"] <= size[0]
        # The PNG keeps its aspect ratio (drawn at its natural size or scaled evenly).
        page.wait_for_function(  # a new blob URL loads asynchronously (naturalWidth 0 until then)
            "img => img.complete && img.naturalWidth > 0", arg=preview.element_handle(),
            timeout=WAIT_MS)
        natural, shown = preview.evaluate(
            "img => [img.naturalWidth / img.naturalHeight, img.clientWidth / img.clientHeight]")
        assert shown == pytest.approx(natural, rel=0.03)
        # Controls and picture share the row when there is room, else the picture goes below.
        controls = explorer.locator(".pe-explore-controls").first.bounding_box()
        picture = preview.bounding_box()
        assert picture["x"] >= controls["x"] + controls["width"] - 1 or (
            picture["y"] >= controls["y"] + controls["height"] - 1)

        # A bad count: the stale picture is marked, Apply disabled, one error message.
        explorer.locator(".pe-amount-mode button", has_text="count").first.click()
        count = explorer.locator(".pe-count input").first
        count.fill("999999")
        count.press("Enter")
        expect(preview).to_have_class(re.compile(r"\bpe-stale\b"), timeout=WAIT_MS)
        expect(explorer.locator(".pe-apply").first).to_be_disabled()
        status = explorer.locator(".pe-input-error").first  # over the picture, by the slider
        expect(status).to_contain_text("Preview failed", timeout=WAIT_MS)
        expect(explorer.locator(".pe-status").first).to_contain_text(
            "the message is by the controls")
        assert explorer.inner_text().count("999999") <= 2  # the input and the one message
        shot(page, f"explorer_stale_{size[0]}x{size[1]}.png")
        count.fill("2.5")  # refused, never read as 25
        count.press("Enter")
        expect(status).to_contain_text("whole number", timeout=WAIT_MS)
        expect(status).to_contain_text("'2.5'")
        count.fill("10")
        count.press("Enter")
        expect(preview).not_to_have_class(re.compile(r"\bpe-stale\b"), timeout=WAIT_MS)
        expect(status).to_be_hidden(timeout=WAIT_MS)
        expect(explorer.locator(".pe-apply").first).to_be_enabled()

        # Reset asks first; its question and buttons read in full at this size too.
        explorer.locator(".pe-apply").first.click()
        expect(explorer.locator(".pe-status").first).to_contain_text("Applied", timeout=WAIT_MS)
        explorer.locator(".pe-reset").first.click()
        confirm = explorer.locator(".pe-reset-confirm").first
        expect(confirm).to_be_visible(timeout=WAIT_MS)
        expect(confirm).to_have_text("Confirm reset")
        assert explorer.evaluate(_TRUNCATED) == []
        explorer.locator(".pe-reset-cancel").first.click()
        expect(confirm).to_be_hidden(timeout=WAIT_MS)
        expect(explorer.locator(".pe-undo").first).to_be_enabled()  # the step is still there
    assert not errors, errors
