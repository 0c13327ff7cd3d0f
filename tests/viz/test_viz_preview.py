"""MaskPreview: a new mask updates the same image in place and renders a PNG quickly."""

from __future__ import annotations

import io

import numpy as np
import PIL.Image
import pytest
import torch
import torch.nn.utils.prune as torch_prune

from prune_explorer.viz import MaskPreview, auto_cells, block_edges, render_png
from prune_explorer.viz.figures import _MIN_AUTO_CELLS
from prune_explorer.viz.pooling import DEFAULT_MAX_CELLS
from prune_explorer.viz.preview import _MIN_AXES_PT, MAX_STRETCH


def decode(png: bytes) -> np.ndarray:
    return np.asarray(PIL.Image.open(io.BytesIO(png)).convert("RGB"))


def test_update_puts_the_exact_pooled_fractions_behind_the_same_image():
    preview = MaskPreview(figsize=(4, 3), dpi=50)
    image, figure = preview.image, preview.figure
    rng = np.random.default_rng(0)
    for density in (0.2, 0.7):
        mask = torch.from_numpy(rng.random((1000, 900)) < density)
        pooled = preview.update(mask)
        rows, cols = preview.max_cells  # one cell per pixel of the axes, shaped to the tensor
        data = np.asarray(preview.image.get_array())
        np.testing.assert_array_equal(data, pooled.values)
        r_edges, c_edges = block_edges(1000, rows), block_edges(900, cols)
        for r in (0, rows // 2, rows - 1):
            for c in (0, cols // 3, cols - 1):
                block = mask.numpy()[r_edges[r] : r_edges[r + 1], c_edges[c] : c_edges[c + 1]]
                assert data[r, c] == block.mean()
    # no new figure, axes or image per frame
    assert preview.image is image
    assert preview.figure is figure
    assert len(preview.ax.images) == 2  # the mask and the overlay of what a step prunes
    assert len(figure.axes) == 2  # the picture and its colour bar


def test_default_cells_match_the_axes_pixels():
    preview = MaskPreview(figsize=(4.8, 4.0), dpi=80)
    rows, cols = preview.max_cells
    height_px = preview.ax.bbox.height
    width_px = preview.ax.bbox.width
    assert rows <= height_px < rows + 1
    assert cols <= width_px < cols + 1


@pytest.mark.parametrize(("figsize", "dpi"), [((1.0, 0.8), 20), ((4.8, 4.0), 80), ((20, 16), 100)])
def test_default_cells_follow_the_static_plots_rule(figsize, dpi):
    preview = MaskPreview(figsize=figsize, dpi=dpi)
    assert preview.max_cells == auto_cells(preview.ax)
    assert all(_MIN_AUTO_CELLS <= n <= DEFAULT_MAX_CELLS for n in preview.max_cells)


def test_title_states_tensor_method_settings_and_sparsity():
    torch.manual_seed(0)
    layer = torch.nn.Linear(300, 200)
    torch_prune.l1_unstructured(layer, "weight", amount=0.35)
    preview = MaskPreview()
    pooled = preview.update(
        layer.weight_mask, name="fc.weight", method="l1_unstructured",
        settings={"amount": 0.35}, module_type="Linear",
    )
    title = preview.ax.get_title()
    assert title == (
        "fc.weight · current state\nl1_unstructured(amount=0.35)\n"
        f"sparsity 35.0% · cell = {pooled.block_text()}"
    )
    assert preview.ax.get_xlabel() == "in features (dim 1)"


@pytest.mark.parametrize("shape", [(32, 16, 3, 3), (512, 8), (8, 512)])
def test_the_title_fits_in_the_figure_however_narrow_the_picture(shape):
    # A narrow (square-celled) picture used to clip "... now -> 65.6% after" at the right edge.
    before = torch.ones(shape, dtype=torch.bool)
    before[: shape[0] // 3] = False
    after = before.clone()
    after[shape[0] // 3: shape[0] // 2] = False
    preview = MaskPreview()
    preview.update(after, before=before, name="features.3.weight", method="ln_structured",
                   settings={"amount": 0.5, "n": 2, "dim": 0})
    preview.png()
    renderer = preview.canvas.get_renderer()
    box = preview.ax.title.get_window_extent(renderer)
    assert "now" in preview.ax.get_title()
    assert box.x0 >= 0
    assert box.x1 <= preview.figure.bbox.x1
    assert box.y1 <= preview.figure.bbox.y1


def test_a_step_is_drawn_as_kept_pruned_before_and_pruned_by_this_step():
    before = torch.ones(4, 6, dtype=torch.bool)
    before[0] = False  # 6 pruned before
    after = before.clone()
    after[1, :3] = False  # 3 pruned by the step
    preview = MaskPreview(figsize=(4, 3), dpi=80)
    preview.update(after, name="fc.weight", method="l1_unstructured", settings={"amount": 3},
                   before=before)
    base = np.asarray(preview.image.get_array())
    new = preview.new_image.get_array()
    assert base[0].tolist() == [0.0] * 6
    assert base[1, :3].tolist() == [0.0] * 3
    assert new.mask[0].all()
    assert not new.mask[1, :3].any()
    assert new.mask[1, 3:].all()
    assert new[1, :3].tolist() == [1.0] * 3
    title = preview.ax.get_title()
    assert title.startswith("fc.weight · preview of the next step\n")
    assert "sparsity 25.0% now → 37.5% after" in title
    labels = [t.get_text() for t in preview.legend.get_texts()]
    assert labels == ["kept", "pruned before", "pruned by this step"]
    # The same picture without a step: the current state, nothing marked as new.
    preview.update(after, name="fc.weight")
    assert preview.new_image.get_array().mask.all()
    assert preview.ax.get_title() == "fc.weight · current state\nsparsity 37.5%"


def test_png_matches_a_full_render_of_the_figure():
    preview = MaskPreview(figsize=(4, 3), dpi=60)
    for mask in (torch.rand(2000, 500) > 0.4, torch.rand(64, 32, 3, 3) > 0.8):
        preview.update(mask, name="w")
        fast = decode(preview.png())
        full = decode(render_png(preview.figure))
        assert fast.shape == full.shape == (180, 240, 3)
        differing = np.any(fast != full, axis=-1).mean()
        assert differing < 0.001  # only anti-aliased tick ends touching the image may differ


def test_png_follows_each_update():
    preview = MaskPreview(figsize=(3, 3), dpi=50)
    preview.update(torch.ones(100, 100))
    all_kept = decode(preview.png())
    preview.update(torch.zeros(100, 100))
    all_pruned = decode(preview.png())
    assert not np.array_equal(all_kept, all_pruned)
    preview.update(torch.ones(100, 100))
    np.testing.assert_array_equal(decode(preview.png()), all_kept)


def test_a_new_shape_or_layout_updates_axes_and_extent():
    preview = MaskPreview()
    preview.update(torch.ones(64, 3, 3, 3), layout="kernels", module_type="Conv2d")
    assert preview.ax.get_ylabel() == "out ch (dim 0); 3x3 tiles"
    kernels_png = decode(preview.png())
    preview.update(torch.ones(10, 20), module_type="Linear")
    assert preview.ax.get_ylabel() == "out features (dim 0)"
    assert list(preview.image.get_extent()) == [-0.5, 19.5, 9.5, -0.5]
    assert preview.ax.get_xlim() == (-0.5, 19.5)
    assert not np.array_equal(decode(preview.png()), kernels_png)


def test_update_validates_layout():
    with pytest.raises(ValueError, match=r"MaskPreview\.update: layout must be one of"):
        MaskPreview().update(torch.ones(2, 2), layout="bars")


def test_repr_describes_the_preview():
    preview = MaskPreview(figsize=(4, 3), dpi=80)
    assert repr(preview) == (
        f"MaskPreview(320x240 px, cells {preview.max_cells}, showing nothing yet)"
    )
    preview.update(torch.zeros(10, 10))
    assert repr(preview).endswith("showing matrix (10, 10) pooled to (10, 10), sparsity 100.0%)")



@pytest.mark.parametrize("layout", ["auto", "channels"])
def test_tick_labels_after_the_kernel_grid_are_the_new_views_own(layout):
    # A conv weight seen as kernels, then as a matrix/channels view: the fixed labels of the
    # kernel grid ("0", "2", "4", ...) must not stay on the new view's ticks.
    conv = torch.ones(16, 8, 3, 3)
    fresh = MaskPreview()
    fresh.update(conv, layout=layout, module_type="Conv2d")
    fresh.figure.canvas.draw()
    reused = MaskPreview()
    reused.update(conv, layout="kernels", module_type="Conv2d")
    reused.figure.canvas.draw()
    reused.update(conv, layout=layout, module_type="Conv2d")
    reused.figure.canvas.draw()

    def labels(ax):
        return ([t.get_text() for t in ax.get_xticklabels()],
                [t.get_text() for t in ax.get_yticklabels()])

    assert labels(reused.ax) == labels(fresh.ax)
    assert all(text for text in labels(reused.ax)[1])  # every y tick keeps a label


@pytest.mark.parametrize(("shape", "layout"), [
    ((32, 64), "auto"), ((64, 10), "auto"), ((300, 200), "auto"), ((16, 6, 3, 3), "kernels"),
])
def test_cells_are_square_and_one_per_pixel_whatever_the_shape(shape, layout):
    preview = MaskPreview(figsize=(4.8, 4.0), dpi=80)
    preview.update(torch.ones(shape, dtype=torch.bool), layout=layout)
    rows, cols = preview.view.shape
    box = preview.ax.get_window_extent()
    # square cells: the axes have the data's aspect (within a pixel of rounding)
    assert box.width / cols == pytest.approx(box.height / rows, rel=0.02)
    assert preview.pooled.shape[0] <= box.height + 1
    assert preview.pooled.shape[1] <= box.width + 1


def test_an_extreme_shape_is_stretched_to_a_bounded_ratio_not_a_sliver():
    preview = MaskPreview(figsize=(20.0, 6.0), dpi=80)  # wide: the bounded ratio binds
    preview.update(torch.ones(2, 4096, dtype=torch.bool))
    box = preview.ax.get_window_extent()
    assert box.width / box.height == pytest.approx(MAX_STRETCH, rel=0.02)


@pytest.mark.parametrize("figsize", [(4.8, 4.0), (8.0, 4.0)])
def test_a_flat_tensor_is_stretched_until_its_y_label_fits_beside_it(figsize):
    # 10x64 with square cells would be shorter than its rotated y label, which then ran into
    # the title: the axes get the least height that holds the label, not less
    preview = MaskPreview(figsize=figsize, dpi=80)
    preview.update(torch.ones(10, 64, dtype=torch.bool), name="fc3.weight",
                   module_type="Linear")
    preview.png()
    renderer = preview.canvas.get_renderer()
    box = preview.ax.get_window_extent(renderer)
    label = preview.ax.yaxis.label.get_window_extent(renderer)
    assert box.height == pytest.approx(_MIN_AXES_PT * 80 / 72, abs=1.0)
    assert box.y0 - 0.5 <= label.y0
    assert label.y1 <= box.y1 + 0.5
    assert not label.overlaps(preview.ax.title.get_window_extent(renderer))
    assert preview.pooled.shape == (10, 64)  # still one cell per entry


def test_the_colour_bar_is_only_for_fractions():
    preview = MaskPreview(figsize=(4.8, 4.0), dpi=80)
    preview.update(torch.ones(10, 64, dtype=torch.bool))  # one entry per cell: legend only
    assert not preview.colorbar.ax.get_visible()
    preview.update(torch.ones(2000, 2000, dtype=torch.bool))  # pooled: kept fraction per cell
    assert preview.colorbar.ax.get_visible()
    preview.update(torch.ones(10, 64, dtype=torch.bool), layout="channels")  # per slice
    assert preview.colorbar.ax.get_visible()
    preview.update(torch.ones(10, 64, dtype=torch.bool))
    assert not preview.colorbar.ax.get_visible()
    assert preview.png()[:4] == b"\x89PNG"


def test_the_live_picture_shows_the_groups_of_a_pattern_at_full_resolution():
    # A 2:4 mask is noise without its groups: the live preview draws a line after every 4th
    # column when each entry has its own cell, and takes the lines away for another method.
    mask = torch.ones(8, 16)
    preview = MaskPreview(figsize=(4, 3), dpi=80)
    preview.update(mask, method="semi_structured", settings={"pattern": "2:4", "dim": -1})
    lines = [line.get_xdata()[0] for line in preview.ax.get_lines()]
    assert lines == [3.5, 7.5, 11.5]
    with_lines = decode(preview.png())
    preview.update(mask, method="l1_unstructured", settings={"amount": 0.5})
    assert preview.ax.get_lines() == []
    assert not np.array_equal(decode(preview.png()), with_lines)


def test_counted_cells_of_a_bfloat16_mask_copy_nothing_and_give_the_same_picture(monkeypatch):
    # Issue 11 (Apply on Linear(4096, 11008) bf16): with the cell counts given, the bf16 mask
    # is not copied to float32 just to read its shape; "now" may come as counts too.
    import prune_explorer.viz.views as views

    g = torch.Generator().manual_seed(0)
    now = (torch.rand(300, 500, generator=g) > 0.3)
    after = now & (torch.rand(300, 500, generator=g) > 0.5)
    plain, counted = MaskPreview(), MaskPreview()
    expected = plain.update(after.to(torch.bfloat16), before=now)
    rows, cols = counted.cell_edges((300, 500))

    def cells(mask):
        return np.add.reduceat(np.add.reduceat(mask.numpy().astype(np.int64), rows[:-1], 0),
                               cols[:-1], 1)

    seen = []
    real = views.as_array
    monkeypatch.setattr(views, "as_array", lambda t: seen.append(t.dtype) or real(t))
    got = counted.update(after.to(torch.bfloat16), kept_cells=cells(after),
                         before_cells=cells(now))
    assert torch.bfloat16 not in seen
    np.testing.assert_array_equal(got.kept, expected.kept)
    np.testing.assert_array_equal(counted.pooled_before.kept, plain.pooled_before.kept)
    assert counted.label == plain.label
    assert counted.ax.get_title(loc="left") == plain.ax.get_title(loc="left")
