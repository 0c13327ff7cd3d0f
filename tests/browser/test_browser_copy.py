"""The Export tab's Copy button writes the snippet to the browser's clipboard.

A small notebook opens the explorer on a one-layer model with one step applied and shows the
Export tab; Chromium (headless, clipboard permissions granted for the JupyterLab origin) clicks
*Copy snippet*, and the clipboard must then hold exactly the snippet shown in the text area, and
the status line must confirm the copy (the browser's report reached Python).

Skipped, with the reason, when Chromium or Playwright is missing.
"""

from __future__ import annotations

import re

import pytest

from helpers.browser import WAIT_MS, chromium_page, open_and_run_all, serving

pytestmark = pytest.mark.browser

NOTEBOOK = "copy_snippet.ipynb"
CODE = """\
import torch
from prune_explorer import explore

torch.manual_seed(0)
ex = explore(torch.nn.Sequential(torch.nn.Linear(8, 4)))
ex.session.apply("0.weight", "l1_unstructured", amount=0.5)
ex.ui.tabs.selected_index = 4  # Export
ex
"""


@pytest.fixture
def lab(tmp_path):
    with serving(tmp_path, {NOTEBOOK: [CODE]}) as server:
        yield server


def test_copy_puts_the_snippet_on_the_clipboard(lab):
    from playwright.sync_api import expect

    errors: list[str] = []
    with chromium_page(errors) as page:
        page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=lab.base)
        open_and_run_all(page, lab, NOTEBOOK)
        explorer = page.locator(".jp-OutputArea .pe-explorer").first
        expect(explorer).to_be_visible(timeout=WAIT_MS)
        snippet = explorer.locator(".pe-snippet textarea").first
        expect(snippet).to_be_visible(timeout=WAIT_MS)
        expect(snippet).to_have_value(re.compile(r"prune\.l1_unstructured\("), timeout=WAIT_MS)
        text = snippet.input_value()
        assert 'prune.l1_unstructured(model.get_submodule("0"), "weight", amount=0.5)' in text
        button = explorer.locator(".pe-copy-snippet button").first
        expect(button).to_have_text("Copy snippet", timeout=WAIT_MS)
        page.evaluate("navigator.clipboard.writeText('not the snippet')")
        button.click()
        expect(button).to_have_text("Copied ✓", timeout=WAIT_MS)
        assert page.evaluate("navigator.clipboard.readText()") == text
        expect(explorer.locator(".pe-status").first).to_contain_text(
            "Copied the Python snippet to the clipboard.", timeout=WAIT_MS)
    assert not errors, errors
