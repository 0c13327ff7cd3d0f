"""The Explore tab's model view: per-layer sparsity now and previewed, from the session."""

from __future__ import annotations

import pytest
from torch import nn

from helpers.widgets import _tie_free, mlp
from prune_explorer.session.preview.masks import GlobalPreview
from prune_explorer.session.preview.order_cache import SMALL
from prune_explorer.widgets import Explorer


def big() -> nn.Module:
    """Two weights over the order cache's SMALL bound (the lazy global preview path)."""
    model = _tie_free(nn.Sequential(nn.Linear(400, 400), nn.ReLU(), nn.Linear(400, 360)))
    assert model[0].weight.numel() > SMALL
    assert model[2].weight.numel() > SMALL
    return model


@pytest.fixture
def opened():
    made = []

    def make(model: nn.Module) -> Explorer:
        ex = Explorer(model, debounce=None)
        ex.explore_pane.panels.model_view.open()
        made.append(ex)
        return ex

    yield make
    for ex in made:
        ex.close()


def report_zeros(ex: Explorer) -> dict[str, tuple[int, int]]:
    frame = ex.session.report()
    return {str(n): (int(k), int(z)) for n, k, z in zip(frame["name"], frame["numel"],
                                                         frame["zeros"], strict=True)}


def shown(ex: Explorer, after: bool = False) -> dict[str, tuple[int, int]]:
    rows = ex.explore_pane.panels.model_view.rows
    return {n: (r.numel, r.zeros_after if after else r.zeros) for n, r in rows.items()}


def test_closed_panel_computes_nothing():
    ex = Explorer(mlp(), debounce=None)
    try:
        ex.ui.amount.value = 0.5
        view = ex.explore_pane.panels.model_view
        assert view.rows == {}
        assert view.list.children == ()
        view.open()  # opening fills it from the current controls
        assert set(view.rows) == set(ex.session.names)
    finally:
        ex.close()


def test_current_values_are_the_report(opened):
    ex = opened(mlp())
    ex.session.apply("0.weight", "l1_unstructured", amount=0.25)
    ex.session.apply("2.weight", "ln_structured", amount=1, n=2, dim=0)
    assert shown(ex) == report_zeros(ex)
    assert ex.explore_pane.panels.model_view.rows["0.weight"].sparsity == 0.25


def test_local_preview_changes_only_the_shown_tensor_and_matches_apply(opened):
    ex = opened(mlp())
    ex.select("2.weight")
    ex.ui.amount.value = 0.5
    before = report_zeros(ex)
    after = shown(ex, after=True)
    assert {n: v for n, v in after.items() if n != "2.weight"} == {
        n: v for n, v in before.items() if n != "2.weight"}
    assert after["2.weight"] != before["2.weight"]
    ex.ui.apply.click()
    assert report_zeros(ex) == after


@pytest.mark.parametrize("amount", [0.05, 0.4], ids=["cut-within-zeros", "cut-past-zeros"])
@pytest.mark.parametrize("model", [mlp, big], ids=["small", "large"])
def test_global_preview_gives_every_target_and_matches_apply(opened, model, amount):
    ex = opened(model())
    ex.session.apply("0.weight", "l1_unstructured", amount=0.2)
    ex.session.commit()  # exact zeros without a mask: the cut takes them first
    ex.ui.method.value = "global_unstructured"
    ex.ui.amount.value = amount
    assert ex.preview_error is None
    after = shown(ex, after=True)
    changed = {n for n in after if after[n] != report_zeros(ex)[n]}
    # Within the committed zeros the step prunes only entries already 0: nothing changes.
    assert changed == (set(ex.controls.global_targets.value) if amount > 0.1 else set())
    ex.ui.apply.click()
    assert report_zeros(ex) == after


def test_zeros_after_of_a_lazy_global_preview_builds_no_mask():
    ex = Explorer(big(), debounce=None)
    try:
        session = ex.session
        session.apply("2.weight", "l1_unstructured", amount=0.3)
        masks = session.preview_global(["0.weight", "2.weight"], amount=0.5)
        assert isinstance(masks, GlobalPreview)
        zeros = session.zeros_after(masks)
        assert "0 masks built" in repr(masks)
        expected = {n: int((~session.alive(n, masks[n])).sum()) for n in masks}
        assert zeros == expected
    finally:
        ex.close()


def test_a_click_selects_the_tensor_and_marks_its_row(opened):
    ex = opened(mlp())
    view = ex.explore_pane.panels.model_view
    assert "pe-mv-selected" in view.buttons[ex.tensor]._dom_classes
    view.buttons["2.bias"].click()
    assert ex.tensor == "2.bias"
    assert ex.preview_request.target == "2.bias"  # the preview followed
    assert "pe-mv-selected" in view.buttons["2.bias"]._dom_classes
    assert "pe-mv-selected" not in view.buttons["0.weight"]._dom_classes


def test_chart_text_says_now_and_after(opened):
    ex = opened(mlp())
    ex.select("0.weight")
    ex.ui.amount.value = 0.5
    css = ex.explore_pane.panels.model_view.style.value
    assert '"0.0% → 50.0%"' in css  # the shown tensor, previewed
    assert css.count("→") == 1  # nothing else changes


def test_failed_preview_dims_the_chart(opened):
    ex = opened(mlp())
    view = ex.explore_pane.panels.model_view
    ex.ui.amount_mode.value = "count"
    ex.ui.count.value = 10_000  # more than the tensor holds
    assert ex.preview_error is not None
    assert "pe-stale" in view.list._dom_classes
    ex.ui.count.value = 3
    assert "pe-stale" not in view.list._dom_classes
    assert view.rows[ex.tensor].zeros_after == 3
