"""Any-rank tensor -> 2-D view: every element lands in the right cell, axes are named."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.utils.prune as torch_prune

from prune_explorer.viz import (
    TensorView,
    channel_view,
    kernel_grid_view,
    matrix_view,
    slice_states,
    tensor_view,
)
from prune_explorer.viz.views import as_array, dim_names_for


def numbered(*shape: int) -> torch.Tensor:
    """Tensor whose entries are all distinct (their flat index), so a wrong cell is caught."""
    return torch.arange(int(np.prod(shape)), dtype=torch.float32).reshape(shape)


def assert_every_element_maps(view: TensorView, t: torch.Tensor) -> None:
    a = t.numpy()
    cells = set()
    for index in np.ndindex(*a.shape):
        cell = view.cell(index)
        assert view.data[cell] == a[index], (index, cell)
        cells.add(cell)
    assert len(cells) == a.size  # no two elements share a cell


@pytest.mark.parametrize(
    ("shape", "module_type", "rows", "cols"),
    [
        ((5, 7), "Linear", "out features (dim 0)", "in features (dim 1)"),
        ((6, 3, 4), "Conv1d", "out ch (dim 0)", "in ch · k (dims 1-2, row-major)"),
        ((4, 3, 2, 5), "Conv2d", "out ch (dim 0)", "in ch · kh · kw (dims 1-3, row-major)"),
        (
            (3, 2, 2, 3, 2),
            "Conv3d",
            "out ch (dim 0)",
            "in ch · kd · kh · kw (dims 1-4, row-major)",
        ),
        ((2, 3, 2, 2, 2, 2), None, "d0 (dim 0)", "d1 · d2 · d3 · d4 · d5 (dims 1-5, row-major)"),
        (
            (3, 4, 2, 2),
            "ConvTranspose2d",
            "in ch (dim 0)",
            "out ch · kh · kw (dims 1-3, row-major)",
        ),
    ],
)
def test_matrix_view_maps_each_element_and_names_the_grouping(shape, module_type, rows, cols):
    t = numbered(*shape)
    view = matrix_view(t, module_type=module_type)
    assert view.shape == (shape[0], int(np.prod(shape[1:])))
    assert (view.row_label, view.col_label) == (rows, cols)
    assert_every_element_maps(view, t)
    # torch's own flatten is the oracle for the row-major grouping
    np.testing.assert_array_equal(view.data, t.flatten(1).numpy())


def test_matrix_view_shares_memory_with_a_cpu_tensor():
    t = torch.rand(64, 32)
    view = tensor_view(t)
    assert np.shares_memory(view.data, t.numpy())


def test_bias_is_a_one_row_strip():
    t = numbered(9)
    view = tensor_view(t, module_type="Linear")
    assert view.kind == "strip"
    assert view.shape == (1, 9)
    assert view.col_label == "out features (dim 0)"
    assert_every_element_maps(view, t)
    assert tensor_view(numbered(4), module_type="BatchNorm2d").col_label == "channel (dim 0)"
    assert tensor_view(numbered(4)).col_label == "element (dim 0)"


def test_scalar_is_one_cell():
    view = tensor_view(torch.tensor(3.5))
    assert view.kind == "scalar"
    assert view.shape == (1, 1)
    assert view.cell(()) == (0, 0)
    assert view.data[0, 0] == 3.5


@pytest.mark.parametrize("shape", [(3, 2, 3, 3), (2, 4, 1, 5), (5, 1, 2, 2)])
def test_kernel_grid_places_one_tile_per_out_in_pair(shape):
    t = numbered(*shape)
    n_out, n_in, kh, kw = shape
    view = kernel_grid_view(t, module_type="Conv2d")
    assert view.shape == (n_out * (kh + 1) - 1, n_in * (kw + 1) - 1)
    assert view.tile == (kh, kw)
    assert_every_element_maps(view, t)
    for o in range(n_out):
        for i in range(n_in):
            r, c = o * (kh + 1), i * (kw + 1)
            np.testing.assert_array_equal(view.data[r : r + kh, c : c + kw], t[o, i].numpy())
    # exactly the cells that no element maps to are NaN gaps, forming 1-cell lines
    mapped = np.zeros(view.shape, dtype=bool)
    for index in np.ndindex(*shape):
        mapped[view.cell(index)] = True
    np.testing.assert_array_equal(np.isnan(view.data), ~mapped)
    if n_out > 1:
        assert np.isnan(view.data[kh]).all()
    if n_in > 1:
        assert np.isnan(view.data[:, kw]).all()


def test_kernel_grid_of_conv1d_uses_one_row_tiles():
    t = numbered(3, 2, 4)
    view = kernel_grid_view(t)
    assert view.shape == (3 * 2 - 1, 2 * 5 - 1)
    assert view.cell((2, 1, 3)) == (4, 8)
    assert_every_element_maps(view, t)


def test_kernel_grid_of_a_bool_mask_is_float_with_gaps():
    mask = torch.rand(2, 2, 3, 3) > 0.5
    view = kernel_grid_view(mask)
    assert view.data.dtype.kind == "f"
    assert np.nansum(view.data) == int(mask.sum())


def test_kernel_grid_rejects_other_ranks():
    expected = r"kernel_grid_view: tensor must have 3 dims .* got shape \(4, 4\)"
    with pytest.raises(ValueError, match=expected):
        kernel_grid_view(torch.ones(4, 4))


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_channel_view_holds_the_kept_fraction_of_each_slice(dim):
    torch.manual_seed(0)
    mask = (torch.rand(6, 5, 3, 2) > 0.4).float()
    mask.select(dim, 1).zero_()  # a fully pruned slice
    mask.select(dim, 0).fill_(1.0)  # a fully kept slice
    view = channel_view(mask, dim=dim, module_type="Conv2d")
    d = dim % 4
    expected = mask.movedim(d, 0).reshape(mask.shape[d], -1).mean(dim=1).numpy()
    np.testing.assert_allclose(view.data[0], expected)
    assert view.dim == d
    assert view.col_label == f"{('out ch', 'in ch', 'kh', 'kw')[d]} (dim {d})"
    for index in np.ndindex(*mask.shape):
        assert view.cell(index) == (0, index[d])
    states = slice_states(view)
    assert states[0] == 2
    assert states[1] == 0
    partial = (expected > 0) & (expected < 1)
    np.testing.assert_array_equal(states == 1, partial)


def test_channel_view_finds_the_channels_torch_ln_structured_removed():
    torch.manual_seed(1)
    conv = torch.nn.Conv2d(8, 12, 3)
    torch_prune.ln_structured(conv, "weight", amount=0.25, n=2, dim=0)
    view = channel_view(conv.weight_mask, dim=0)
    gone = (conv.weight_mask.flatten(1).sum(1) == 0).numpy()
    np.testing.assert_array_equal(slice_states(view) == 0, gone)
    assert int((slice_states(view) == 0).sum()) == 3  # round(0.25 * 12)


def test_channel_view_rejects_a_bad_dim():
    with pytest.raises(ValueError, match=r"channel_view: dim must be an int in \[-2, 1\] .* got 2"):
        channel_view(torch.ones(3, 4), dim=2)
    with pytest.raises(ValueError, match="channel_view: mask must have at least 1 dimension"):
        channel_view(torch.tensor(1.0))


def test_slice_states_needs_a_channel_view():
    expected = "slice_states: view must be a channel view; got kind 'matrix'"
    with pytest.raises(ValueError, match=expected):
        slice_states(tensor_view(torch.ones(2, 2)))


def test_tensor_view_dispatches_and_validates_layout():
    t = numbered(4, 2, 3, 3)
    assert tensor_view(t).kind == "flat"
    assert tensor_view(t, layout="kernels").kind == "kernels"
    assert tensor_view(t, layout="channels", dim=1).shape == (1, 2)
    with pytest.raises(ValueError, match=r"tensor_view: layout must be one of .*; got 'grid'"):
        tensor_view(t, layout="grid")


def test_dim_names_must_match_the_rank():
    assert dim_names_for((2, 3), dim_names=["rows", "cols"]) == ("rows", "cols")
    with pytest.raises(ValueError, match=r"tensor_view: dim_names must name each of the 2 dim"):
        matrix_view(torch.ones(2, 3), dim_names=["only one"])


def test_cell_rejects_an_index_outside_the_tensor():
    view = tensor_view(torch.ones(2, 3))
    expected = r"TensorView.cell: index must lie inside shape \(2, 3\); got \(2, 0\)"
    with pytest.raises(IndexError, match=expected):
        view.cell((2, 0))


def test_as_array_handles_grad_and_bfloat16():
    w = torch.nn.Parameter(torch.ones(2, 2))
    assert as_array(w).shape == (2, 2)
    assert as_array(torch.ones(3, dtype=torch.bfloat16)).dtype == np.float32


def test_repr_says_what_the_view_holds():
    text = repr(tensor_view(torch.ones(8, 3, 3, 3), module_type="Conv2d"))
    assert "kind='flat'" in text
    assert "(8, 3, 3, 3) -> 2-D (8, 27)" in text
    assert "out ch (dim 0)" in text
