"""Pictures that never lie, in a real browser at 1024x768 and 1400x1000.

A one-cell notebook opens the explorer on the demo CNN's ``features.3.weight`` in the kernels
view. Each picture comes with its description in words, off screen for screen readers (its
title, and each axis with its label and tick labels: ``MaskPreview.describe``, in
``.pe-picture-text``), which the test reads in the DOM:

1. after kernels -> matrix -> channels, the tick labels are those of a fresh picture of that view
   (the kernel grid's fixed ticks used to survive the switch);
2. after Apply the picture is labelled a preview of the next step and says "now -> after" from
   the applied state, agreeing with the picker and the counts;
3. after Commit, the committed zeros still count: picker, "already pruned" and the picture agree.
"""

from __future__ import annotations

import re

import pytest
import torch

from helpers.browser import WAIT_MS, chromium_page, open_and_run_all, serving, wait_for
from prune_explorer.viz import MaskPreview

pytestmark = pytest.mark.browser

NOTEBOOK = "pictures.ipynb"
TENSOR = "features.3.weight"
CODE = f"""\
from prune_explorer import explore
from prune_explorer.demo import load_cnn
ex = explore(load_cnn(), tensor={TENSOR!r}, view="kernels")
ex
"""
SHAPE = (32, 16, 3, 3)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    with serving(tmp_path_factory.mktemp("pictures"), {NOTEBOOK: [CODE]}) as server:
        yield server


def ticks(description: str) -> list[str]:
    """The two "ticks ..." parts (rows, columns) of a picture's description."""
    return re.findall(r"; ticks (.*)$", description, flags=re.M)


def fresh_ticks(layout: str, described: str = "") -> list[str]:
    """The tick labels of a picture drawn in ``layout`` from scratch (no view before it), in
    the room the explorer's picture was drawn for (its description's "room:" line)."""
    picture = MaskPreview()
    room = re.search(r"room: (\d+) x (\d+) px, pixel ratio ([0-9.]+)", described)
    if room is not None:
        picture.resize(int(room.group(1)), int(room.group(2)),
                       pixel_ratio=float(room.group(3)))
    picture.update(torch.ones(SHAPE, dtype=torch.bool), layout=layout, module_type="Conv2d")
    return ticks(picture.describe())


@pytest.mark.parametrize("size", [(1024, 768), (1400, 1000)], ids=["1024x768", "1400x1000"])
def test_pictures_tell_the_state_after_view_switches_apply_and_commit(lab, size):
    from playwright.sync_api import expect

    errors: list[str] = []
    with chromium_page(errors, viewport=size) as page:
        open_and_run_all(page, lab, NOTEBOOK)
        explorer = page.locator(".jp-OutputArea .pe-explorer").first
        expect(explorer).to_be_visible(timeout=WAIT_MS)
        words = explorer.locator(".pe-picture-text").first
        title = lambda: words.inner_text() if words.count() else ""  # noqa: E731
        wait_for(title, lambda t: "3x3 tiles" in t, "the kernels view was not drawn")

        # 1. Ticks after a view switch are those of a fresh picture of the new view.
        view = explorer.locator(".pe-layout select").first
        for label, layout in (("matrix", "auto"), ("channels", "channels"),
                              ("kernels", "kernels"), ("matrix", "auto")):
            view.select_option(label=label)
            seen = wait_for(title, lambda t, e=layout: ticks(t) == fresh_ticks(e, t),
                            f"ticks after switching to {label} are not a fresh picture's")
            if layout != "channels":  # a strip of channels has no row ticks
                assert "none" not in ticks(seen), seen  # both axes have their ticks

        # 2. After Apply: the step applied, said so, until the next preview is asked for;
        # then a preview of the next step, "now" being the applied state.
        picker = explorer.locator(".pe-tensor select").first
        explorer.locator(".pe-apply").first.click()
        status = explorer.locator(".pe-status").first
        expect(status).to_contain_text("Applied", timeout=WAIT_MS)
        shown = lambda: picker.evaluate(  # noqa: E731 (the browser shows no-break spaces)
            "s => s.options[s.selectedIndex].text.replace(/\\u00a0/g, ' ')")
        share = lambda t: (re.findall(r"(\d+\.\d)% pruned", t) or [""])[0]  # noqa: E731
        now = wait_for(shown, lambda t: share(t) not in ("", "0.0"), "the picker kept 0.0%")
        pruned = share(now)
        applied = wait_for(title, lambda t: "step 1, applied" in t,
                           "the picture does not say it shows the step applied")
        assert f"→ {pruned}% after" in applied
        expect(explorer.locator(".pe-count-line").first).to_contain_text("Step 1 applied")
        explorer.locator(".pe-next-preview").first.click()
        described = wait_for(title, lambda t: f"sparsity {pruned}% now" in t,
                             f"the picture does not start from the applied {pruned}%")
        assert "preview of the next step" in described
        already = explorer.locator(".pe-info-already").first
        expect(already).to_contain_text(f"({pruned}%)", timeout=WAIT_MS)

        # 3. After Commit the zeros are still counted as pruned, everywhere.
        explorer.locator(".p-TabBar-tab, .lm-TabBar-tab", has_text="Commit").first.click()
        explorer.locator(".pe-commit-review").first.click()
        confirm = explorer.locator(".pe-commit-confirm").first
        expect(confirm).to_be_enabled(timeout=WAIT_MS)
        confirm.click()
        expect(status).to_contain_text("Committed", timeout=WAIT_MS)
        explorer.locator(".p-TabBar-tab, .lm-TabBar-tab", has_text="Explore").first.click()
        wait_for(shown, lambda t: f"{pruned}% pruned" in t, "the picker lost the committed zeros")
        expect(already).to_contain_text(f"({pruned}%)", timeout=WAIT_MS)
        wait_for(title, lambda t: f"sparsity {pruned}% now" in t,
                 "the picture ignores the committed zeros")
    assert not errors, errors
