"""Run All of the quickstart in JupyterLab at 1024x768 with the file browser open (its default):
the view ends on an explorer, no cell shows the results of a step that has not happened, and
the output area is as wide as the notebooks' figures are drawn for (viz.notebook).

JupyterLab's Run All makes the last cell the active one and scrolls it into view at once;
while the outputs render, the active cell keeps its place on screen and what is above it grows
upwards. So the quickstart's last cell opens an explorer, and nothing comes after it. (Seen at
1024x768: the last explorer's top 397 px below the top of the notebook's 647 px visible area:
its tensor picker, tabs, method and amount controls in view; its picture below the fold.)
"""

from __future__ import annotations

import re

import pytest

from helpers.browser import SHOT_DIR, WAIT_MS, chromium_page, open_file_browser, serving, wait_for
from prune_explorer.viz.notebook import NOTEBOOK_WIDTH_PX

pytestmark = pytest.mark.browser

NOTEBOOK = "01_quickstart.ipynb"

# Where the explorers, the notebook's visible area and the output areas are, in CSS px.
LAYOUT_JS = """() => {
  const scroller = document.querySelector('.jp-NotebookPanel .jp-WindowedPanel-outer');
  const view = scroller.getBoundingClientRect();
  const explorers = [...document.querySelectorAll('.jp-OutputArea .pe-explorer')].map(e => {
    const b = e.getBoundingClientRect();
    const drawn = [...e.querySelectorAll('.pe-preview')].some(i => i.complete && i.naturalWidth);
    return [Math.round(b.top), Math.round(b.bottom), drawn];
  });
  const widths = [...document.querySelectorAll('.jp-OutputArea-output')]
    .map(o => Math.round(o.getBoundingClientRect().width)).filter(w => w > 0);
  return {view: [Math.round(view.top), Math.round(view.bottom)], explorers, widths,
          idle: document.querySelector('#jp-main-statusbar').textContent.includes('Idle')};
}"""


@pytest.fixture
def lab(tmp_path):
    with serving(tmp_path) as server:
        yield server


def test_run_all_ends_with_an_explorer_in_view_at_1024x768(lab):
    from playwright.sync_api import expect

    errors: list[str] = []
    with chromium_page(errors, viewport=(1024, 768)) as page:
        page.goto(lab.url(f"/lab/tree/{NOTEBOOK}?reset"), wait_until="domcontentloaded")
        expect(page.locator(".jp-Notebook")).to_be_visible(timeout=WAIT_MS)
        expect(page.locator("#jp-main-statusbar")).to_contain_text("Idle", timeout=WAIT_MS)
        open_file_browser(page)
        page.get_by_role("menuitem", name="Run", exact=True).click()
        page.get_by_role("menuitem", name="Run All Cells", exact=True).click()

        # Done: the kernel idle, both explorers drawn, and nothing moving (the same layout on
        # three reads in a row) -- what the page shows, however long a loaded machine takes.
        seen: list[dict] = []

        def steady(layout: dict) -> bool:
            seen.append(layout)
            done = (layout["idle"] and len(layout["explorers"]) == 2
                    and all(drawn for _, _, drawn in layout["explorers"]))
            return done and len(seen) >= 3 and seen[-3] == seen[-2] == layout

        layout = wait_for(lambda: page.evaluate(LAYOUT_JS), steady,
                          "Run All did not finish with both explorers drawn", timeout=300,
                          poll=0.5)
        SHOT_DIR.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOT_DIR / "quickstart_run_all_1024x768.png"))

        # The notebooks' figures are drawn for this width (prune_explorer.viz.notebook).
        assert set(layout["widths"]) == {NOTEBOOK_WIDTH_PX}, layout["widths"]

        # The view ends on the last explorer: its top inside the notebook's visible area, with
        # at least a third of that area showing it.
        view_top, view_bottom = layout["view"]
        top, bottom, _ = layout["explorers"][-1]
        assert view_top <= top < view_bottom, layout
        assert min(bottom, view_bottom) - top >= (view_bottom - view_top) / 3, layout

        # The cell meant for after pruning says that nothing is pruned yet, and shows no table.
        report = page.locator(".jp-CodeCell", has_text="explorer.session.steps").first
        output = report.locator(".jp-OutputArea").first
        expect(output).to_contain_text("Nothing is pruned yet")
        assert output.locator("table").count() == 0
        assert not re.search(r"\d+\.\d% pruned|sparsity", output.inner_text())
    assert not errors, errors
