"""The Zoom panel: a window of the shown tensor, down to single entries.

Driven as a user would (toggle, region boxes, buttons, the ipympl toolbar's limits and mouse
events) with synchronous previews. The oracle for what each entry is: the session's own mask
now and its preview of the step, read independently of the explorer.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch
from torch import nn

from helpers.widgets import _tie_free, cnn
from prune_explorer.viz.zoom import MAX_ZOOM_CELLS, Window, as_matrix
from prune_explorer.widgets import Explorer


def make(model: nn.Module | None = None) -> Explorer:
    model = model if model is not None else _tie_free(nn.Sequential(nn.Linear(300, 400)))
    return Explorer(model, debounce=None)


@pytest.fixture
def ex():
    explorer = make()
    yield explorer
    explorer.close()


def step_classes(ex: Explorer, amount: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(kept now, kept after an L1 step of ``amount``) from the session itself."""
    name = ex.tensor
    return (ex.session.mask(name),
            ex.session.preview(name, "l1_unstructured", amount=amount) != 0)


def open_zoom(ex: Explorer):
    ex.ui.zoom_toggle.value = True
    return ex.explore_pane.zoom


def show_region(ex: Explorer, row: int, col: int, rows: int, cols: int) -> None:
    for key, value in (("row", row), ("col", col), ("rows", rows), ("cols", cols)):
        ex.ui[f"zoom_{key}"].value = value
    ex.ui.zoom_show.click()


def three_class_state(ex: Explorer) -> tuple[torch.Tensor, torch.Tensor]:
    """Apply 30%, then preview 50% of what is left: every class is present."""
    ex.ui.amount.value = 0.3
    ex.ui.apply.click()
    ex.ui.amount.value = 0.5
    return step_classes(ex, 0.5)


# -- the window's cells are the mask's entries ----------------------------------------------------
def test_window_cells_equal_the_mask_entries_of_that_region(ex):
    before, after = three_class_state(ex)
    zoom = open_zoom(ex)
    show_region(ex, 10, 20, 30, 40)
    plot = zoom.plot
    assert plot.window == Window(10, 40, 20, 60)
    assert plot.pooled.full_resolution
    region = (slice(10, 40), slice(20, 60))
    np.testing.assert_array_equal(plot.pooled.values, after[region].numpy().astype(float))
    np.testing.assert_array_equal(plot.pooled_before.values, before[region].numpy())
    # the vermillion overlay: exactly the entries this step prunes
    newly = (before & ~after)[region].numpy()
    assert newly.any()
    assert (~before[region]).any()
    assert after[region].any()
    np.testing.assert_array_equal(~np.ma.getmaskarray(plot.new_image.get_array()), newly)
    # the picture's data is what it draws, placed on the entries' coordinates
    assert tuple(plot.image.get_extent()) == (19.5, 59.5, 39.5, 9.5)


def test_zoom_shows_the_same_mask_as_the_preview(ex):
    ex.ui.amount.value = 0.4
    zoom = open_zoom(ex)
    zoom.show_whole()
    pane = ex.explore_pane
    assert zoom.plot.pooled.kept_total == int(pane.preview_mask.sum())
    show_region(ex, 0, 0, 100, 100)
    np.testing.assert_array_equal(zoom.plot.pooled.values,
                                  as_matrix(pane.preview_shown)[:100, :100].numpy())


def test_a_slider_step_with_the_zoom_open_reads_the_window_only(monkeypatch):
    # An unstructured local preview of a tensor the session keeps an order of (over
    # order_cache.SMALL entries): the zoom reads its window's ranks from that order; no mask
    # of the whole tensor is built (it was, every step, before).
    from prune_explorer.session.preview.order_cache import SMALL, TensorOrder

    ex = make(_tie_free(nn.Sequential(nn.Linear(500, 400))))
    assert ex.session.info("0.weight").numel > SMALL

    built = []
    for method in ("mask", "kept"):
        real = getattr(TensorOrder, method)
        monkeypatch.setattr(TensorOrder, method, lambda self, n, _real=real, _m=method:
                            built.append(_m) or _real(self, n))
    zoom = open_zoom(ex)
    show_region(ex, 7, 9, 40, 50)
    for amount in (0.2, 0.35, 0.5):
        ex.ui.amount.value = amount
        assert built == []  # the step and the zoom's redraw built no whole mask
        _, after = step_classes(ex, amount)  # the oracle builds one (the session's preview)
        built.clear()
        np.testing.assert_array_equal(zoom.plot.pooled.values,
                                      after[7:47, 9:59].numpy().astype(float))
    ex.close()


def test_a_large_window_is_pooled_with_exact_counts(ex):
    before, after = three_class_state(ex)
    zoom = open_zoom(ex)
    ex.ui.zoom_whole.click()
    pooled = zoom.plot.pooled
    assert zoom.plot.window == Window(0, 400, 0, 300)
    assert not pooled.full_resolution
    assert max(pooled.shape) <= MAX_ZOOM_CELLS
    assert pooled.kept_total == int(after.sum())
    assert zoom.plot.pooled_before.kept_total == int(before.sum())
    assert "1 cell = " in zoom.plot.title()
    assert "zoom in for single entries" in zoom.plot.title()


def test_a_large_tensor_opens_on_a_window_at_full_resolution():
    ex = make(nn.Sequential(nn.Linear(1000, 600)))
    try:
        ex.ui.amount.value = 0.5
        plot = open_zoom(ex).plot
        assert plot.window == Window(0, 64, 0, 64)
        assert plot.pooled.full_resolution
        np.testing.assert_array_equal(plot.pooled.values,
                                      ex.preview_mask[:64, :64].numpy().astype(float))
    finally:
        ex.close()


def test_toolbar_zoom_and_pan_reread_the_window_and_move_the_region_boxes(ex):
    _, after = three_class_state(ex)
    zoom = open_zoom(ex)
    zoom.show_whole()
    ax = zoom.plot.ax
    count = zoom.render_count
    ax.set_xlim(99.5, 109.5)  # what the toolbar's zoom rectangle does
    ax.set_ylim(207.5, 199.5)
    assert zoom.plot.window == Window(200, 208, 100, 110)
    assert zoom.render_count > count
    np.testing.assert_array_equal(zoom.plot.pooled.values,
                                  after[200:208, 100:110].numpy().astype(float))
    assert [ex.ui[f"zoom_{k}"].value for k in ("row", "col", "rows", "cols")] == [200, 100, 8, 10]
    ax.set_xlim(99.5, 100.5)  # one entry wide
    ticks = [*ax.get_xticks(), *ax.get_yticks()]
    assert ticks == [round(t) for t in ticks]  # entry indices: no 100.5


def test_real_toolbar_drag_zooms_in(ex):
    zoom = open_zoom(ex)
    zoom.show_whole()
    canvas, ax = zoom.canvas, zoom.plot.ax
    height = canvas.figure.bbox.height

    def event(kind, x, y, button=0):
        canvas.manager.handle_json({"type": kind, "x": x, "y": height - y, "button": button,
                                    "buttons": 1 if kind != "button_release" else 0,
                                    "modifiers": [], "guiEvent": None})

    assert canvas.toolbar.mode.name == "ZOOM"  # on from the start: a drag zooms
    box = ax.bbox
    x0, y0 = box.x0 + 0.1 * box.width, box.y0 + 0.9 * box.height
    x1, y1 = box.x0 + 0.2 * box.width, box.y0 + 0.8 * box.height
    event("button_press", x0, y0)
    event("motion_notify", x1, y1)
    event("button_release", x1, y1)
    rows, cols = zoom.plot.window.shape
    assert rows < 400
    assert cols < 300
    assert zoom.plot.pooled.full_resolution


# -- hover ------------------------------------------------------------------------------------
def test_hover_names_index_value_and_class(ex):
    before, after = three_class_state(ex)
    plot = open_zoom(ex).plot
    plot.show_window(Window(0, 400, 0, 300))
    values = ex.session.tensor("0.weight")
    for expected, where in (("kept", after),
                            ("pruned before", ~before),
                            ("pruned by this step", before & ~after)):
        row, col = (int(i) for i in torch.nonzero(where)[7])
        text = plot.describe(col + 0.3, row - 0.4)
        assert text == (f"0.weight[{row}, {col}] = {float(values[row, col]):.4g} · {expected}")
    assert plot.describe(-0.6, 3) == ""
    assert plot.describe(3, 400.5) == ""


def test_hover_through_the_ipympl_canvas_shows_the_text(ex):
    three_class_state(ex)
    zoom = open_zoom(ex)
    show_region(ex, 0, 0, 10, 10)
    canvas, ax = zoom.canvas, zoom.plot.ax
    x, y = ax.transData.transform((4, 6))  # entry row 6, col 4
    canvas.manager.handle_json({"type": "motion_notify", "x": x,
                                "y": canvas.figure.bbox.height - y, "button": 0, "buttons": 0,
                                "modifiers": [], "guiEvent": None})
    assert canvas._message == zoom.plot.describe(4, 6)
    assert canvas._message.startswith("0.weight[6, 4] = ")


def test_hover_on_a_conv_weight_gives_the_tensor_index():
    ex = make(cnn())
    try:
        ex.ui.amount.value = 0.5
        plot = open_zoom(ex).plot
        assert plot.matrix_shape == (6, 18)
        weight = ex.session.tensor("0.weight")
        text = plot.describe(13, 4)
        assert text.startswith(f"0.weight[4, 1, 1, 1] = {float(weight[4, 1, 1, 1]):.4g} · ")
        kept = bool(ex.preview_mask[4, 1, 1, 1])
        assert text.endswith("kept" if kept else "pruned by this step")
    finally:
        ex.close()


# -- cost and invalidation --------------------------------------------------------------------
def test_closed_panel_costs_nothing_on_the_slider_path(ex):
    zoom = ex.explore_pane.zoom
    for amount in (0.1, 0.2, 0.3):
        ex.ui.amount.value = amount
    assert zoom.render_count == 0
    assert zoom.canvas is None  # not even built
    zoom = open_zoom(ex)
    assert zoom.render_count == 1
    ex.ui.zoom_toggle.value = False
    for amount in (0.4, 0.5, 0.6):
        ex.ui.amount.value = amount
    assert zoom.render_count == 1
    assert zoom.out_of_date
    ex.ui.zoom_toggle.value = True  # reopened: the newest preview, drawn once
    assert zoom.render_count == 2
    assert zoom.plot.window == Window(0, 64, 0, 64)
    np.testing.assert_array_equal(zoom.plot.pooled.values,
                                  step_classes(ex, 0.6)[1][:64, :64].numpy().astype(float))


def test_open_panel_follows_the_slider_and_keeps_the_window(ex):
    zoom = open_zoom(ex)
    show_region(ex, 5, 6, 7, 8)
    ex.ui.amount.value = 0.7
    assert zoom.plot.window == Window(5, 12, 6, 14)
    _, after = step_classes(ex, 0.7)
    np.testing.assert_array_equal(zoom.plot.pooled.values,
                                  after[5:12, 6:14].numpy().astype(float))


def test_apply_invalidates_the_zoom(ex):
    zoom = open_zoom(ex)
    show_region(ex, 0, 0, 50, 50)
    ex.ui.amount.value = 0.5
    ex.ui.apply.click()
    ex.ui.next_preview.click()  # the picture showed the step applied until now
    now = ex.session.mask("0.weight")
    assert int((~now).sum()) == 60_000
    # after Apply the zoom's "now" is the applied mask, and its step the next one
    np.testing.assert_array_equal(zoom.plot.pooled_before.values,
                                  now[:50, :50].numpy().astype(float))
    _, after = step_classes(ex, 0.5)
    np.testing.assert_array_equal(zoom.plot.pooled.values,
                                  after[:50, :50].numpy().astype(float))
    ex.ui.undo.click()
    assert zoom.plot.pooled_before.values.all()  # nothing pruned any more


def test_other_tensor_resets_the_window():
    ex = make(nn.Sequential(nn.Linear(300, 400), nn.ReLU(), nn.Linear(400, 20)))
    try:
        zoom = open_zoom(ex)
        show_region(ex, 100, 100, 10, 10)
        ex.ui.tensor.value = "2.weight"
        assert zoom.plot.name == "2.weight"
        assert zoom.plot.window == Window(0, 20, 0, 64)  # a new tensor starts top left
    finally:
        ex.close()


def test_invalid_controls_dim_the_zoom(ex):
    zoom = open_zoom(ex)
    ex.ui.method.value = "custom_from_mask"  # no custom mask given: the preview fails
    assert ex.preview_error is not None
    assert "pe-stale" in zoom.canvas._dom_classes
    ex.ui.method.value = "l1_unstructured"
    assert "pe-stale" not in zoom.canvas._dom_classes


def test_the_canvas_draws_under_the_plots_lock(ex):
    zoom = open_zoom(ex)
    assert zoom.canvas.draw_lock is zoom.plot.lock
    entered = []

    class Recording:
        def __enter__(self):
            entered.append(zoom.plot.lock.acquire(blocking=False))  # free: nobody changes it

        def __exit__(self, *exc):
            zoom.plot.lock.release()

    zoom.canvas.draw_lock = Recording()
    zoom.canvas.draw()
    assert entered == [True]


def test_opening_the_zoom_leaves_the_matplotlib_backend_alone():
    code = ("import matplotlib; matplotlib.use('agg'); import matplotlib.pyplot as plt\n"
            "from matplotlib.figure import Figure\n"
            "from prune_explorer.widgets.tabs.explore.zoom import ipympl_canvas\n"
            "ipympl_canvas(Figure())\n"
            "print(matplotlib.get_backend(), type(plt.figure().canvas).__module__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.split() == ["agg", "matplotlib.backends.backend_agg"]


@pytest.mark.parametrize("shape", [(64, 8, 16, 20), (140_000,), (300, 600)])
def test_a_preview_window_is_that_window_of_the_whole_mask(shape):
    # LocalPreview.window reads ranks in the zoom's matrix layout (as_matrix): conv weights
    # flattened into columns, a 1-D tensor as one row.
    from prune_explorer.session import Session
    from prune_explorer.session.preview.masks import window_reader

    g = torch.Generator().manual_seed(4)
    model = nn.Module()
    model.w = nn.Parameter((torch.randn(shape, generator=g) * 0.02).to(torch.bfloat16))
    s = Session(model)
    masks = s.preview_masks("w", "l1_unstructured", amount=0.45)
    read = window_reader(masks, "w")
    assert read is not None
    whole = as_matrix(masks["w"]) != 0
    rows, cols = whole.shape
    for r, c in ((slice(0, rows), slice(0, cols)), (slice(rows // 3, rows), slice(5, 9)),
                 (slice(0, 1), slice(cols - 3, cols))):
        assert torch.equal(read(r, c), whole[r, c])


def test_a_window_reader_gives_none_once_an_apply_consumed_its_order():
    # Apply installs the previewed mask from the order and shifts that order's ranks in place
    # (they become the next state's); a reader of the old preview must not read them as the
    # old state. It says None, and the zoom keeps its picture until the next preview.
    from matplotlib.figure import Figure

    from prune_explorer.session import Session
    from prune_explorer.session.preview.masks import window_reader
    from prune_explorer.viz.zoom import UPDATING, ZoomPlot

    g = torch.Generator().manual_seed(6)
    model = nn.Module()
    model.w = nn.Parameter(torch.randn(400, 500, generator=g) * 0.02)
    s = Session(model)
    masks = s.preview_masks("w", "l1_unstructured", amount=0.3)
    read = window_reader(masks, "w")
    assert read is not None
    plot = ZoomPlot(Figure())
    plot.set_state(read, name="w", shape=(400, 500))
    shown = plot.pooled.values.copy()
    np.testing.assert_array_equal(shown, masks["w"][:64, :64].numpy())
    fresh = s.preview_masks("w", "l1_unstructured", amount=0.3)  # its mask not built yet
    s.apply("w", "l1_unstructured", amount=0.3)
    assert read(slice(0, 400), slice(0, 500)) is None
    with pytest.raises(RuntimeError, match="preview again"):
        fresh["w"]  # the whole mask, asked for only now, is refused too
    plot.show_window(Window(100, 164, 100, 164))
    assert plot.stale
    np.testing.assert_array_equal(plot.pooled.values, shown)  # kept as it was
    assert plot.state_of(3, 3) == UPDATING
