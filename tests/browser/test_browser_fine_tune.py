"""The Fine-tune tab in a real browser: Run a short schedule and see the chart grow.

A small notebook opens the explorer on the demo MLP with the demo's ``train`` and ``evaluate``,
shows the Fine-tune tab and chooses an iterative schedule of 3 rounds. Chromium (headless, see
``helpers.browser``) records every picture the chart shows and every progress line (a
MutationObserver in the page, so no update is missed between two looks), clicks **Run**, and
waits for the status line to say the run finished. The chart must have shown a new picture as
each round ended (the no-fine-tune line first, then one per round), the progress line must have
named the rounds, and the page must be free again (Run on, Stop off). A screenshot goes to
``test-artifacts/`` (or ``$SHOT_DIR``).

Skipped, with the reason, when Chromium or Playwright is missing.
"""

from __future__ import annotations

import pytest

from helpers.browser import SHOT_DIR, WAIT_MS, chromium_page, open_and_run_all, serving, wait_for

pytestmark = pytest.mark.browser

NOTEBOOK = "fine_tune.ipynb"
ROUNDS = 3
CODE = f"""\
from prune_explorer import explore
from prune_explorer.demo import evaluate, load_mlp, train
from prune_explorer.widgets import TAB_TITLES

ex = explore(load_mlp(), evaluate=evaluate, train=train)
ex.ui.tabs.selected_index = TAB_TITLES.index("Fine-tune")
ex.ui.fine_tune_schedule.value = "iterative"
ex.ui.fine_tune_rounds.value = {ROUNDS}
ex.ui.fine_tune_epochs.value = 1
ex.ui.fine_tune_target.value = 0.9
ex
"""

# Every src the chart's <img> takes and every text of the progress line, from now on.
RECORD_JS = """root => {
  window.peCharts = []; window.peProgress = [];
  const img = root.querySelector('img.pe-fine-tune-chart');
  const text = root.querySelector('.pe-fine-tune-progress-text');
  new MutationObserver(() => window.peCharts.push(img.src))
    .observe(img, {attributes: true, attributeFilter: ['src']});
  new MutationObserver(() => window.peProgress.push(text.textContent))
    .observe(text, {childList: true, subtree: true, characterData: true});
}"""


@pytest.fixture
def lab(tmp_path):
    with serving(tmp_path, {NOTEBOOK: [CODE]}) as server:
        yield server


def test_run_grows_the_chart_one_picture_per_round(lab):
    from playwright.sync_api import expect

    errors: list[str] = []
    with chromium_page(errors) as page:
        open_and_run_all(page, lab, NOTEBOOK)
        explorer = page.locator(".jp-OutputArea .pe-explorer").first
        expect(explorer).to_be_visible(timeout=WAIT_MS)
        run = explorer.locator(".pe-fine-tune-run").first
        expect(run).to_be_visible(timeout=WAIT_MS)
        expect(explorer.locator(".pe-fine-tune-plan").first).to_contain_text(
            "iterative, 3 rounds, 3 epochs: prunes to", timeout=WAIT_MS)
        expect(run).to_be_enabled(timeout=WAIT_MS)
        explorer.evaluate(RECORD_JS)
        run.click()
        status = explorer.locator(".pe-status").first
        expect(status).to_contain_text("finished round 3 of 3", timeout=180_000)
        charts = wait_for(lambda: page.evaluate("window.peCharts"),
                          lambda seen: len(set(seen)) >= 1 + ROUNDS,
                          "the chart's pictures: the no-fine-tune line, then one per round")
        progress = page.evaluate("window.peProgress")
        assert len(set(charts)) >= 1 + ROUNDS
        for k in range(1, ROUNDS + 1):
            assert any(line.startswith(f"round {k} of {ROUNDS}") for line in progress), progress
        expect(run).to_be_enabled(timeout=WAIT_MS)
        expect(explorer.locator(".pe-fine-tune-stop").first).to_be_disabled(timeout=WAIT_MS)
        image = explorer.locator("img.pe-fine-tune-chart").first
        assert image.evaluate("i => i.complete && i.naturalWidth > 0")
        SHOT_DIR.mkdir(parents=True, exist_ok=True)
        image.scroll_into_view_if_needed()
        page.screenshot(path=str(SHOT_DIR / "fine_tune_tab.png"))
    assert not errors, errors
