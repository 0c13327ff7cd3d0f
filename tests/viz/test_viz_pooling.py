"""Pooling to display size keeps each cell's kept fraction exact, and is fast."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from prune_explorer.viz import (
    block_edges,
    block_sums,
    channel_view,
    kernel_grid_view,
    pool_fraction,
    pool_magnitude,
    pool_view,
)


def naive_blocks(mask: np.ndarray, rows: int, cols: int):
    """Per-block kept count and area with a plain double loop over exact integer edges."""
    n, m = mask.shape
    r_edges = [k * n // rows for k in range(rows + 1)]
    c_edges = [k * m // cols for k in range(cols + 1)]
    kept = np.zeros((rows, cols), dtype=np.int64)
    area = np.zeros((rows, cols), dtype=np.int64)
    for r in range(rows):
        for c in range(cols):
            block = mask[r_edges[r] : r_edges[r + 1], c_edges[c] : c_edges[c + 1]]
            valid = ~np.isnan(block) if block.dtype.kind == "f" else np.ones(block.shape, bool)
            kept[r, c] = np.count_nonzero((block != 0) & valid)
            area[r, c] = np.count_nonzero(valid)
    return kept, area


@given(n=st.integers(0, 60), cells=st.integers(1, 70))
def test_block_edges_cover_everything_with_near_equal_blocks(n, cells):
    edges = block_edges(n, cells)
    assert edges[0] == 0
    assert edges[-1] == n
    assert len(edges) == min(n, cells) + 1
    sizes = np.diff(edges)
    if n:
        assert sizes.min() >= 1
        assert sizes.max() - sizes.min() <= 1


def test_block_edges_rejects_bad_arguments():
    expected = "block_edges: need n >= 0 and cells >= 1; got n=5, cells=0"
    with pytest.raises(ValueError, match=expected):
        block_edges(5, 0)


@settings(max_examples=60, deadline=None)
@given(
    rows=st.integers(1, 37),
    cols=st.integers(1, 41),
    max_rows=st.integers(1, 12),
    max_cols=st.integers(1, 12),
    density=st.floats(0.0, 1.0),
    seed=st.integers(0, 2**31 - 1),
)
def test_pool_fraction_matches_a_naive_loop(rows, cols, max_rows, max_cols, density, seed):
    rng = np.random.default_rng(seed)
    mask = rng.random((rows, cols)) < density
    pooled = pool_fraction(mask, max_cells=(max_rows, max_cols))
    kept, area = naive_blocks(mask, min(rows, max_rows), min(cols, max_cols))
    np.testing.assert_array_equal(pooled.kept, kept)
    np.testing.assert_array_equal(pooled.area, area)
    np.testing.assert_array_equal(pooled.values, kept / area)
    # the total is preserved: sum(fraction * area) == kept count
    assert round(float((pooled.values * pooled.area).sum())) == int(mask.sum())
    assert pooled.kept_total == int(mask.sum())
    assert pooled.sparsity == pytest.approx(1 - mask.mean())


def test_uneven_blocks_use_exact_integer_boundaries():
    mask = np.ones((10, 7), dtype=bool)
    mask[0:2, 0:2] = False  # exactly the first block
    pooled = pool_fraction(mask, max_cells=(4, 3))
    assert pooled.row_edges.tolist() == [0, 2, 5, 7, 10]
    assert pooled.col_edges.tolist() == [0, 2, 4, 7]
    assert pooled.area.tolist() == [[4, 4, 6], [6, 6, 9], [4, 4, 6], [6, 6, 9]]
    assert pooled.values[0, 0] == 0.0
    assert (np.delete(pooled.values.ravel(), 0) == 1.0).all()
    assert pooled.block_text() == "2-3 x 2-3"


@pytest.mark.parametrize(
    "convert",
    [
        lambda m: m,
        lambda m: torch.from_numpy(m),
        lambda m: torch.from_numpy(m).float(),
        lambda m: m.astype(np.float64),
        lambda m: m.astype(np.int32),
    ],
    ids=["numpy-bool", "torch-bool", "torch-float", "numpy-float64", "numpy-int"],
)
def test_pool_fraction_accepts_any_mask_dtype(convert):
    rng = np.random.default_rng(3)
    mask = rng.random((50, 33)) < 0.3
    expected = pool_fraction(mask, max_cells=7)
    pooled = pool_fraction(convert(mask), max_cells=7)
    np.testing.assert_array_equal(pooled.kept, expected.kept)
    np.testing.assert_array_equal(pooled.values, expected.values)


def test_nan_gaps_of_a_kernel_grid_are_not_elements():
    torch.manual_seed(0)
    mask = (torch.rand(9, 5, 3, 3) > 0.5).float()
    grid = kernel_grid_view(mask).data
    for gaps in (None, True):
        pooled = pool_fraction(grid, max_cells=(6, 4), gaps=gaps)
        kept, area = naive_blocks(grid, 6, 4)
        np.testing.assert_array_equal(pooled.kept, kept)
        np.testing.assert_array_equal(pooled.area, area)
        assert pooled.area_total == mask.numel()
        assert pooled.kept_total == int(mask.sum())
    # pool_view knows a kernel grid has gaps
    pooled = pool_view(kernel_grid_view(mask), max_cells=(6, 4))
    assert pooled.area_total == mask.numel()


def test_pool_view_of_a_channel_view_counts_source_elements():
    mask = torch.ones(10, 3, 2, 2)
    mask[2] = 0
    mask[7, 0] = 0
    view = channel_view(mask, dim=0)
    pooled = pool_view(view, max_cells=4)
    per_slice = 3 * 2 * 2
    edges = block_edges(10, 4)
    per_channel_kept = mask.flatten(1).sum(1).numpy()
    for c in range(4):
        block = slice(edges[c], edges[c + 1])
        assert pooled.kept[0, c] == per_channel_kept[block].sum()
        assert pooled.area[0, c] == (edges[c + 1] - edges[c]) * per_slice
    assert pooled.kept_total == int(mask.sum())


def test_pool_magnitude_is_the_mean_of_kept_weights_per_block():
    rng = np.random.default_rng(5)
    w = rng.normal(size=(23, 17))
    mask = rng.random((23, 17)) < 0.4
    mask[:6, :5] = False  # a block with nothing kept
    pooled = pool_magnitude(w, mask, max_cells=(4, 3))
    r_edges, c_edges = block_edges(23, 4), block_edges(17, 3)
    for r in range(4):
        for c in range(3):
            rows = slice(r_edges[r], r_edges[r + 1])
            cols = slice(c_edges[c], c_edges[c + 1])
            kept = mask[rows, cols]
            if kept.any():
                assert pooled.values[r, c] == pytest.approx(np.abs(w[rows, cols][kept]).mean())
            else:
                assert np.isnan(pooled.values[r, c])
            assert pooled.kept[r, c] == kept.sum()
    expected = "pool_magnitude: weight and mask must have the same shape"
    with pytest.raises(ValueError, match=expected):
        pool_magnitude(w, mask[:, :3])


def test_block_sums_is_exact_for_counts_and_floats():
    a = np.arange(35).reshape(5, 7)
    edges_r, edges_c = np.array([0, 2, 5]), np.array([0, 3, 7])
    expected = [[a[0:2, 0:3].sum(), a[0:2, 3:7].sum()], [a[2:5, 0:3].sum(), a[2:5, 3:7].sum()]]
    assert block_sums(a, edges_r, edges_c).tolist() == expected
    assert block_sums(a.astype(float) / 2, edges_r, edges_c).tolist() == (
        np.array(expected) / 2
    ).tolist()


def test_pooled_cells_and_blocks_agree():
    pooled = pool_fraction(np.ones((13, 11), dtype=bool), max_cells=(5, 4))
    for i in range(13):
        for j in range(11):
            r, c = pooled.cell_of(i, j)
            rows, cols = pooled.block(r, c)
            assert rows.start <= i < rows.stop
            assert cols.start <= j < cols.stop
    with pytest.raises(IndexError, match=r"PooledView.cell_of: \(i, j\) must lie inside"):
        pooled.cell_of(13, 0)


def test_small_tensors_are_not_pooled():
    mask = np.eye(5, dtype=bool)
    pooled = pool_fraction(mask)
    assert pooled.full_resolution
    np.testing.assert_array_equal(pooled.values, mask.astype(float))


@pytest.mark.parametrize("bad", [0, -3, True, 2.5, (4,), (4, 0), (1, 2, 3)])
def test_max_cells_is_validated(bad):
    with pytest.raises(ValueError, match="pool_fraction: max_cells must be an int >= 1 or a pair"):
        pool_fraction(np.ones((4, 4)), max_cells=bad)


def test_pool_fraction_needs_a_2d_array():
    expected = r"pool_fraction: array must be 2-D .* got shape \(2, 2, 2\)"
    with pytest.raises(ValueError, match=expected):
        pool_fraction(np.ones((2, 2, 2)))


def test_repr_states_shape_blocks_and_sparsity():
    pooled = pool_fraction(np.zeros((100, 40), dtype=bool), max_cells=10)
    assert repr(pooled) == (
        "PooledView(kept fraction, source (100, 40) -> cells (10, 10), blocks 10 x 4, "
        "sparsity 100.0%)"
    )


def check_large(mask: np.ndarray, max_cells: int) -> None:
    pooled = pool_fraction(mask, max_cells=max_cells)
    assert max(pooled.shape) <= max_cells
    assert pooled.kept_total == int(np.count_nonzero(mask))
    assert round(float((pooled.values * pooled.area).sum())) == pooled.kept_total
    # every row band and every column band against a direct count
    for r in range(pooled.shape[0]):
        band = mask[pooled.row_edges[r] : pooled.row_edges[r + 1]]
        assert pooled.kept[r].sum() == np.count_nonzero(band)
    for c in range(pooled.shape[1]):
        band = mask[:, pooled.col_edges[c] : pooled.col_edges[c + 1]]
        assert pooled.kept[:, c].sum() == np.count_nonzero(band)
    # and a sample of single cells
    rng = np.random.default_rng(0)
    sample = zip(
        rng.integers(0, pooled.shape[0], 50), rng.integers(0, pooled.shape[1], 50), strict=True
    )
    for r, c in sample:
        rows, cols = pooled.block(int(r), int(c))
        block = mask[rows, cols]
        assert pooled.values[r, c] == np.count_nonzero(block) / block.size


def test_an_embedding_sized_mask_keeps_exact_fractions():
    rng = np.random.default_rng(1)
    mask = rng.integers(0, 2, size=(50257, 768), dtype=np.uint8).view(bool)
    mask[:1000] = False  # a fully pruned band of tokens
    check_large(mask, 512)


def test_an_8192_square_mask_keeps_exact_fractions():
    rng = np.random.default_rng(2)
    mask = rng.integers(0, 2, size=(8192, 8192), dtype=np.uint8).view(bool)
    check_large(mask, 512)

