"""Mask, magnitude, diff and history pictures, checked through the data behind the artists."""

from __future__ import annotations

import struct

import numpy as np
import pytest
import torch
import torch.nn.utils.prune as torch_prune
from matplotlib.colors import to_hex, to_rgb
from matplotlib.figure import Figure

from prune_explorer.viz import (
    block_edges,
    kernel_grid_view,
    make_figure,
    plot_diff,
    plot_history,
    plot_mask,
    render_png,
    style,
)


def filled(image) -> np.ndarray:
    """Data behind an AxesImage, masked cells as NaN."""
    return np.ma.filled(np.ma.asarray(image.get_array(), dtype=float), np.nan)


def luminance(colour) -> float:
    def channel(c: float) -> float:
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (channel(c) for c in to_rgb(colour))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def torch_l1_mask(out_features: int = 12, in_features: int = 9, amount: float = 0.4):
    torch.manual_seed(0)
    layer = torch.nn.Linear(in_features, out_features)
    torch_prune.l1_unstructured(layer, "weight", amount=amount)
    return layer.weight_orig.detach().clone(), layer.weight_mask.clone()


def test_make_figure_builds_an_agg_figure_without_pyplot():
    fig, axes = make_figure(2, 3, figsize=(6, 4), dpi=50)
    assert isinstance(fig, Figure)
    assert type(fig.canvas).__name__ == "FigureCanvasAgg"
    assert axes.shape == (2, 3)


def test_render_png_returns_png_bytes_of_the_figure_size():
    fig, _ax = make_figure(figsize=(3, 2), dpi=40)
    png = render_png(fig)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    assert (width, height) == (120, 80)
    width, _ = struct.unpack(">II", render_png(fig, dpi=80)[16:24])
    assert width == 240


def test_plot_mask_shows_kept_and_pruned_cells_of_a_torch_mask():
    _weight, mask = torch_l1_mask()
    _fig, ax = make_figure()
    drawn = plot_mask(
        ax, mask, name="fc.weight", method="l1_unstructured", settings={"amount": 0.4},
        module_type="Linear",
    )
    assert drawn.image in ax.images
    np.testing.assert_array_equal(filled(drawn.image), mask.numpy())
    # kept cells are drawn in the "kept" colour, pruned in the "pruned" colour
    rgba = drawn.image.to_rgba(drawn.image.get_array())
    kept = mask.numpy() == 1
    assert {to_hex(c) for c in rgba[kept]} == {style.KEPT_COLOR}
    assert {to_hex(c) for c in rgba[~kept]} == {style.PRUNED_COLOR}
    # full resolution: a two-entry legend says what the colours mean
    assert drawn.colorbar is None
    assert [t.get_text() for t in drawn.legend.get_texts()] == ["kept", "pruned"]
    sparsity = 1.0 - float(mask.mean())
    assert ax.get_title() == (
        f"fc.weight\nl1_unstructured(amount=0.4) · sparsity {100 * sparsity:.1f}%"
    )
    assert ax.get_xlabel() == "in features (dim 1)"
    assert ax.get_ylabel() == "out features (dim 0)"


def test_kept_and_pruned_colours_differ_in_lightness_not_only_hue():
    # readable without colour vision (and in grey-scale print): large luminance contrast
    assert abs(luminance(style.KEPT_COLOR) - luminance(style.PRUNED_COLOR)) > 0.6
    assert abs(luminance(style.NEW_PRUNED_COLOR) - luminance(style.PRUNED_COLOR)) > 0.3
    assert abs(luminance(style.NEW_PRUNED_COLOR) - luminance(style.KEPT_COLOR)) > 0.1


def test_plot_mask_pools_a_large_mask_to_exact_block_fractions():
    rng = np.random.default_rng(0)
    mask = rng.random((1000, 700)) < 0.3
    _fig, ax = make_figure()
    drawn = plot_mask(ax, torch.from_numpy(mask), max_cells=40)
    data = filled(drawn.image)
    assert data.shape == (40, 40)
    r_edges, c_edges = block_edges(1000, 40), block_edges(700, 40)
    for r in range(0, 40, 7):
        for c in range(0, 40, 5):
            block = mask[r_edges[r] : r_edges[r + 1], c_edges[c] : c_edges[c + 1]]
            assert data[r, c] == block.mean()
    assert drawn.colorbar is not None
    assert drawn.colorbar.ax.get_ylabel() == "kept fraction per 25 x 17-18 block"
    # the image spans source coordinates, so ticks read as element indices
    assert drawn.image.get_extent() == [-0.5, 699.5, 999.5, -0.5]


def test_default_cell_count_follows_the_axes_size_in_pixels():
    _fig, ax = make_figure(figsize=(3, 3), dpi=50, layout=None)
    drawn = plot_mask(ax, torch.ones(4096, 4096))
    assert max(drawn.pooled.shape) <= 150  # never more cells than pixels


def test_magnitude_mode_shows_kept_weights_and_marks_pruned_cells():
    weight, mask = torch_l1_mask()
    _fig, ax = make_figure()
    drawn = plot_mask(ax, mask, weight=weight, mode="magnitude", name="fc.weight")
    data = filled(drawn.image)
    kept = mask.numpy() == 1
    np.testing.assert_allclose(data[kept], weight.abs().numpy()[kept])
    assert np.isnan(data[~kept]).all()
    assert to_hex(drawn.image.get_cmap().get_bad()) == style.MAGNITUDE_PRUNED_COLOR.lower()
    assert [t.get_text() for t in drawn.legend.get_texts()] == ["pruned"]
    assert drawn.colorbar.ax.get_ylabel() == "|w| of kept weights"


def test_magnitude_mode_validates_its_inputs():
    _fig, ax = make_figure()
    with pytest.raises(ValueError, match="plot_mask: mode='magnitude' needs weight=; got weight"):
        plot_mask(ax, torch.ones(3, 3), mode="magnitude")
    with pytest.raises(ValueError, match=r"plot_mask: weight must have the same shape as mask"):
        plot_mask(ax, torch.ones(3, 3), weight=torch.ones(3, 4), mode="magnitude")
    with pytest.raises(ValueError, match="plot_mask: mode='magnitude' needs layout 'auto'"):
        plot_mask(ax, torch.ones(3, 3), weight=torch.ones(3, 3), mode="magnitude",
                  layout="channels")
    with pytest.raises(ValueError, match=r"plot_mask: mode must be one of \('mask', 'magnitude'\)"):
        plot_mask(ax, torch.ones(3, 3), mode="heat")
    with pytest.raises(ValueError, match="plot_mask: layout must be one of"):
        plot_mask(ax, torch.ones(3, 3), layout="tiles")


def test_kernel_layout_draws_the_grid_with_channel_ticks():
    torch.manual_seed(2)
    conv = torch.nn.Conv2d(3, 4, 3)
    torch_prune.ln_structured(conv, "weight", amount=0.5, n=1, dim=0)
    _fig, ax = make_figure()
    drawn = plot_mask(ax, conv.weight_mask, layout="kernels", module_type="Conv2d")
    expected = kernel_grid_view(conv.weight_mask).data
    np.testing.assert_array_equal(filled(drawn.image), expected)
    assert [t.get_text() for t in ax.get_yticklabels()] == ["0", "1", "2", "3"]
    assert ax.get_yticks().tolist() == [1.0, 5.0, 9.0, 13.0]  # tile centres


def test_channel_layout_shows_which_channels_are_gone():
    torch.manual_seed(3)
    conv = torch.nn.Conv2d(4, 8, 3)
    torch_prune.ln_structured(conv, "weight", amount=0.25, n=2, dim=0)
    torch_prune.l1_unstructured(conv, "weight", amount=0.2)
    mask = conv.weight_mask
    _fig, ax = make_figure()
    drawn = plot_mask(ax, mask, layout="channels", dim=0, name="conv.weight",
                      module_type="Conv2d")
    per_channel = mask.flatten(1).mean(1).numpy()
    np.testing.assert_allclose(filled(drawn.image)[0], per_channel)
    gone = int((per_channel == 0).sum())
    partial = int(((per_channel > 0) & (per_channel < 1)).sum())
    assert gone == 2
    assert ax.get_title().endswith(f"out ch (dim 0): {gone} of 8 fully pruned, {partial} partial")
    assert drawn.colorbar.ax.get_ylabel() == "kept fraction of each slice"


def test_plot_diff_highlights_exactly_the_newly_pruned_units():
    torch.manual_seed(4)
    layer = torch.nn.Linear(10, 6)
    torch_prune.l1_unstructured(layer, "weight", amount=0.3)
    before = layer.weight_mask.clone()
    torch_prune.random_unstructured(layer, "weight", amount=0.4)  # a PruningContainer step
    after = layer.weight_mask.clone()
    _fig, ax = make_figure()
    drawn = plot_diff(ax, before, after, name="fc.weight", method="random_unstructured",
                      settings={"amount": 0.4})
    newly = ((before == 1) & (after == 0)).numpy()
    np.testing.assert_array_equal(np.nan_to_num(filled(drawn.newly_pruned)) > 0, newly)
    np.testing.assert_array_equal(filled(drawn.base), after.numpy())
    assert drawn.newly_pruned_total == int(newly.sum()) == round(0.4 * int(before.sum()))
    assert drawn.revived is None
    # newly pruned cells are drawn in the accent colour, opaque
    colours = drawn.newly_pruned.to_rgba(drawn.newly_pruned.get_array())[newly]
    assert {to_hex(c, keep_alpha=True) for c in colours} == {
        to_hex(style.NEW_PRUNED_COLOR, keep_alpha=True).lower()
    }
    assert f"newly pruned {newly.sum()} (" in ax.get_title()
    labels = [t.get_text() for t in drawn.legend.get_texts()]
    assert labels == ["kept", "pruned before", f"newly pruned ({newly.sum()})"]


def test_plot_diff_shows_revived_units_when_there_are_any():
    before = torch.tensor([[1.0, 0.0, 0.0, 1.0]])
    after = torch.tensor([[0.0, 1.0, 0.0, 1.0]])
    _fig, ax = make_figure()
    drawn = plot_diff(ax, before, after)
    assert drawn.revived_total == 1
    np.testing.assert_array_equal(np.nan_to_num(filled(drawn.revived)), [[0, 1, 0, 0]])
    assert "revived (1)" in [t.get_text() for t in drawn.legend.get_texts()]


def test_plot_diff_pools_newly_pruned_fractions_exactly():
    rng = np.random.default_rng(6)
    before = rng.random((300, 200)) < 0.7
    after = before & (rng.random((300, 200)) < 0.8)
    _fig, ax = make_figure()
    drawn = plot_diff(ax, before, after, max_cells=(30, 20))
    newly = before & ~after
    data = np.nan_to_num(filled(drawn.newly_pruned))
    for r in range(30):
        for c in range(20):
            block = newly[r * 10 : r * 10 + 10, c * 10 : c * 10 + 10]
            assert data[r, c] == block.mean()
    assert drawn.new.kept_total == int(newly.sum())


def test_plot_diff_on_a_kernel_grid_ignores_the_gaps():
    before = torch.ones(2, 2, 3, 3)
    after = before.clone()
    after[1, 0] = 0
    _fig, ax = make_figure()
    drawn = plot_diff(ax, before, after, layout="kernels")
    assert drawn.newly_pruned_total == 9
    data = np.nan_to_num(filled(drawn.newly_pruned))
    assert data[4:7, 0:3].tolist() == [[1.0] * 3] * 3
    assert data.sum() == 9


def test_plot_diff_needs_masks_of_one_shape():
    _fig, ax = make_figure()
    with pytest.raises(ValueError, match=r"plot_diff: before and after must have the same shape"):
        plot_diff(ax, torch.ones(2, 3), torch.ones(3, 2))


def test_history_strip_has_one_panel_per_container_step():
    torch.manual_seed(5)
    layer = torch.nn.Linear(8, 6)
    steps = [
        ("l1_unstructured", lambda: torch_prune.l1_unstructured(layer, "weight", amount=0.25)),
        ("random_unstructured", lambda: torch_prune.random_unstructured(layer, "weight", 0.3)),
        ("ln_structured", lambda: torch_prune.ln_structured(layer, "weight", 0.5, n=1, dim=0)),
    ]
    masks, labels = [], []
    for label, apply in steps:
        apply()
        masks.append(layer.weight_mask.clone())
        labels.append(label)
    fig = Figure(figsize=(9, 3), layout="constrained")
    drawn = plot_history(fig, masks, labels, name="fc.weight")
    assert len(fig.axes) == 3
    previous = torch.ones_like(masks[0])
    for panel, mask, label, ax in zip(drawn.panels, masks, labels, fig.axes, strict=True):
        newly = ((previous == 1) & (mask == 0)).numpy()
        np.testing.assert_array_equal(np.nan_to_num(filled(panel.newly_pruned)) > 0, newly)
        np.testing.assert_array_equal(filled(panel.base), mask.numpy())
        assert ax.get_title().startswith(label + "\n")
        previous = mask
    assert next(p.newly_pruned_total for p in drawn.panels) == 12  # 25% of 48
    assert drawn.panels[0].legend is None  # one shared legend for the strip
    assert [t.get_text() for t in drawn.legend.get_texts()] == [
        "kept", "pruned before", "newly pruned"
    ]
    assert fig.get_suptitle() == "fc.weight: mask after each step"
    assert "HistoryPlot(3 steps" in repr(drawn)


def test_history_draws_into_given_axes_and_validates():
    masks = [torch.ones(2, 2), torch.zeros(2, 2)]
    fig, axes = make_figure(1, 2)
    drawn = plot_history(list(axes), masks)
    assert [p.base.axes for p in drawn.panels] == list(axes)
    assert drawn.labels == ["step 1", "step 2"]
    expected = r"plot_history: labels must give one label per mask \(2\)"
    with pytest.raises(ValueError, match=expected):
        plot_history(list(axes), masks, ["only one"])
    with pytest.raises(ValueError, match=r"plot_history: target must be a Figure or 2 Axes"):
        plot_history([axes[0]], masks)
    with pytest.raises(ValueError, match="plot_history: masks must hold at least one mask; got 0"):
        plot_history(fig, [])


def test_records_have_informative_reprs():
    _fig, ax = make_figure()
    drawn = plot_mask(ax, torch.ones(4, 4))
    assert repr(drawn).startswith("MaskPlot(mode='mask', TensorView(kind='matrix'")
    _fig, ax = make_figure()
    diff = plot_diff(ax, torch.ones(4, 4), torch.zeros(4, 4))
    assert "newly pruned 16" in repr(diff)
