"""Pool a large 2-D mask down to display size, keeping each cell's kept fraction exact.

A 4096 x 4096 mask has more cells than a screen has pixels. Drawing it as is lets the renderer
drop rows and columns, so what you see depends on aliasing. Here the array is cut into
``R x C`` blocks with exact integer boundaries ``edges[k] = k * n // cells`` (block sizes differ
by at most one when the size does not divide), and each display cell holds

    kept elements in its block / real elements in its block

as a float, together with both integer counts, so ``sum(fraction * area)`` gives back the
total kept count. NaN entries (the gaps of a kernel-grid view) are not elements: they count
neither as kept nor in the area.

The block sums are computed in two passes -- rows first by gathering one row of every block at a
time (contiguous memory, ``max block height`` vectorised additions), then columns with
:func:`numpy.add.reduceat` on the already small array -- which takes a few milliseconds for a
4096 x 4096 mask.

Examples
--------
>>> import numpy as np
>>> m = np.array([[1, 1, 0, 0, 0],
...               [1, 0, 0, 0, 1]], dtype=bool)
>>> p = pool_fraction(m, max_cells=(1, 2))
>>> p.row_edges.tolist(), p.col_edges.tolist()
([0, 2], [0, 2, 5])
>>> p.kept.tolist(), p.area.tolist(), p.values.tolist()
([[3, 1]], [[4, 6]], [[0.75, 0.16666666666666666]])
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod
from typing import Any

import numpy as np

from prune_explorer.viz.views import TensorView, as_array

MaxCells = int | tuple[int, int]
DEFAULT_MAX_CELLS = 512


def _parse_max_cells(max_cells: Any, where: str) -> tuple[int, int]:
    pair = max_cells if isinstance(max_cells, tuple) else (max_cells, max_cells)
    if len(pair) != 2 or any(
        isinstance(c, bool) or not isinstance(c, (int, np.integer)) or c < 1 for c in pair
    ):
        raise ValueError(
            f"{where}: max_cells must be an int >= 1 or a pair (rows, cols) of such ints; "
            f"got {max_cells!r}"
        )
    return int(pair[0]), int(pair[1])


def block_edges(n: int, cells: int) -> np.ndarray:
    """Exact integer boundaries cutting ``n`` elements into ``min(cells, n)`` blocks.

    ``edges[k] = k * n // cells``; blocks are never empty and their sizes differ by at most 1.

    Examples
    --------
    >>> block_edges(10, 4).tolist()
    [0, 2, 5, 7, 10]
    >>> block_edges(3, 512).tolist()
    [0, 1, 2, 3]
    """
    if n < 0 or cells < 1:
        raise ValueError(f"block_edges: need n >= 0 and cells >= 1; got n={n}, cells={cells}")
    cells = min(int(cells), int(n))
    if cells == 0:
        return np.zeros(1, dtype=np.int64)
    return (np.arange(cells + 1, dtype=np.int64) * int(n)) // cells


def _sum_row_blocks(a: np.ndarray, edges: np.ndarray, dtype: Any) -> np.ndarray:
    # (n, m) -> (blocks, m): add row k of every block at once, k = 0 .. tallest block - 1.
    starts = edges[:-1]
    sizes = np.diff(edges)
    if starts.size == 0:
        return np.zeros((0, a.shape[1]), dtype=dtype)
    acc = a[starts].astype(dtype)
    smallest, tallest = int(sizes.min()), int(sizes.max())
    for k in range(1, tallest):
        if k < smallest:
            acc += a[starts + k]
        else:
            rows = np.flatnonzero(sizes > k)
            acc[rows] += a[starts[rows] + k]
    return acc


def block_sums(a: np.ndarray, row_edges: np.ndarray, col_edges: np.ndarray) -> np.ndarray:
    """Sum of ``a`` over each block ``[row_edges[r]:row_edges[r+1], col_edges[c]:col_edges[c+1]]``.

    Booleans and integers are summed exactly as int64; floats as float64.

    Examples
    --------
    >>> import numpy as np
    >>> a = np.arange(12).reshape(3, 4)
    >>> block_sums(a, np.array([0, 1, 3]), np.array([0, 2, 4])).tolist()
    [[1, 5], [26, 34]]
    """
    if a.dtype == np.bool_:
        a = a.view(np.uint8)
    floating = np.issubdtype(a.dtype, np.floating)
    tallest = int(np.diff(row_edges).max()) if row_edges.size > 1 else 0
    row_dtype: type[np.number[Any]]
    out_dtype: type[np.number[Any]]
    if floating:
        row_dtype, out_dtype = np.float64, np.float64
    elif a.dtype == np.uint8 and tallest < 2**16:
        row_dtype, out_dtype = np.uint16, np.int64
    else:
        row_dtype, out_dtype = np.int64, np.int64
    rows = _sum_row_blocks(a, row_edges, row_dtype)
    if col_edges.size <= 1 or rows.shape[0] == 0:
        return np.zeros((rows.shape[0], max(col_edges.size - 1, 0)), dtype=out_dtype)
    return np.add.reduceat(rows, col_edges[:-1], axis=1, dtype=out_dtype)


@dataclass(frozen=True, repr=False)
class PooledView:
    """A 2-D array pooled into display cells, with exact per-block counts.

    Attributes
    ----------
    values : numpy.ndarray of float64, shape (R, C)
        The statistic per cell (``kept / area`` for a kept fraction); NaN where it is undefined.
    kept : numpy.ndarray of int64, shape (R, C)
        Kept elements per block.
    area : numpy.ndarray of int64, shape (R, C)
        Real (non-gap) elements per block.
    row_edges, col_edges : numpy.ndarray of int64
        Block boundaries in source rows / columns (length R+1 and C+1).
    statistic : str
        What ``values`` holds: ``"kept fraction"`` or ``"mean |w| of kept"``.

    Examples
    --------
    >>> import numpy as np
    >>> p = pool_fraction(np.ones((10, 6), dtype=bool), max_cells=4)
    >>> p
    PooledView(kept fraction, source (10, 6) -> cells (4, 4), blocks 2-3 x 1-2, sparsity 0.0%)
    >>> p.block(1, 3), p.cell_of(4, 5)
    ((slice(2, 5, None), slice(4, 6, None)), (1, 3))
    """

    values: np.ndarray
    kept: np.ndarray
    area: np.ndarray
    row_edges: np.ndarray
    col_edges: np.ndarray
    statistic: str = "kept fraction"

    @property
    def shape(self) -> tuple[int, int]:
        """Number of display cells (rows, cols)."""
        return (int(self.values.shape[0]), int(self.values.shape[1]))

    @property
    def source_shape(self) -> tuple[int, int]:
        """Shape of the 2-D array that was pooled."""
        return (int(self.row_edges[-1]), int(self.col_edges[-1]))

    @property
    def full_resolution(self) -> bool:
        """True when every cell is a single element (nothing was pooled)."""
        return self.shape == self.source_shape

    @property
    def kept_total(self) -> int:
        """Kept elements in the whole array."""
        return int(self.kept.sum())

    @property
    def area_total(self) -> int:
        """Real elements in the whole array."""
        return int(self.area.sum())

    @property
    def sparsity(self) -> float:
        """Fraction of real elements that are pruned (0.0 for an empty array)."""
        total = self.area_total
        return 1.0 - self.kept_total / total if total else 0.0

    def block_text(self) -> str:
        """Block size as text, e.g. ``"8 x 8"`` or ``"18-19 x 1"``."""

        def span(edges: np.ndarray) -> str:
            sizes = np.diff(edges)
            if sizes.size == 0:
                return "0"
            lo, hi = int(sizes.min()), int(sizes.max())
            return str(lo) if lo == hi else f"{lo}-{hi}"

        return f"{span(self.row_edges)} x {span(self.col_edges)}"

    def block(self, row: int, col: int) -> tuple[slice, slice]:
        """Source rows and columns covered by display cell ``(row, col)``."""
        r0, r1 = int(self.row_edges[row]), int(self.row_edges[row + 1])
        c0, c1 = int(self.col_edges[col]), int(self.col_edges[col + 1])
        return slice(r0, r1), slice(c0, c1)

    def cell_of(self, i: int, j: int) -> tuple[int, int]:
        """Display cell that holds source element ``(i, j)``."""
        rows, cols = self.source_shape
        if not (0 <= i < rows and 0 <= j < cols):
            raise IndexError(
                f"PooledView.cell_of: (i, j) must lie inside {self.source_shape}; got {(i, j)}"
            )
        r = int(np.searchsorted(self.row_edges, i, side="right")) - 1
        c = int(np.searchsorted(self.col_edges, j, side="right")) - 1
        return r, c

    def __repr__(self) -> str:
        return (
            f"PooledView({self.statistic}, source {self.source_shape} -> cells {self.shape}, "
            f"blocks {self.block_text()}, sparsity {100.0 * self.sparsity:.1f}%)"
        )


def _kept_and_valid(a: np.ndarray, gaps: bool | None) -> tuple[np.ndarray, np.ndarray | None]:
    """Boolean "kept" (nonzero, not NaN) and "valid" (not NaN; None when there is no NaN)."""
    if a.dtype == np.bool_ or gaps is False or not np.issubdtype(a.dtype, np.floating):
        return (a if a.dtype == np.bool_ else a != 0), None
    if gaps or (a.size and np.isnan(a.min())):
        valid = ~np.isnan(a)
        return (a != 0) & valid, valid
    return a != 0, None


def _edges_for(shape: tuple[int, ...], max_cells: Any, where: str) -> tuple[np.ndarray, ...]:
    if len(shape) != 2:
        raise ValueError(
            f"{where}: array must be 2-D (make a tensor_view first); got shape {shape}"
        )
    max_rows, max_cols = _parse_max_cells(max_cells, where)
    return block_edges(shape[0], max_rows), block_edges(shape[1], max_cols)


def _kept_and_area(
    a: np.ndarray, gaps: Any, row_edges: np.ndarray, col_edges: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-element kept flags, then exact kept and real-element counts per display cell."""
    kept_src, valid = _kept_and_valid(a, gaps)
    kept = block_sums(kept_src, row_edges, col_edges)
    if valid is None:
        area = np.outer(np.diff(row_edges), np.diff(col_edges))
    else:
        area = block_sums(valid, row_edges, col_edges)
    return kept_src, kept, area


def pool_fraction(
    mask: Any, max_cells: MaxCells = DEFAULT_MAX_CELLS, *, gaps: bool | None = None
) -> PooledView:
    """Kept fraction of ``mask`` per display cell, at most ``max_cells`` cells per side.

    Parameters
    ----------
    mask : 2-D torch.Tensor or array-like
        Nonzero means kept; NaN means "no element here" (kernel-grid gaps).
    max_cells : int or (int, int)
        Upper bound on display cells per side (rows, cols). Sides not larger than the bound are
        kept at full resolution.
    gaps : bool or None
        Whether ``mask`` may hold NaN gaps. None (default) checks; False skips the check (a
        float mask without gaps pools a little faster).

    Returns
    -------
    PooledView
        ``values[r, c] == kept[r, c] / area[r, c]``, exactly the fraction of the block's real
        elements that are kept (NaN for a block made only of gaps).

    Examples
    --------
    >>> import torch
    >>> m = torch.zeros(8192, 8192, dtype=torch.bool)
    >>> m[:, :4096] = True
    >>> p = pool_fraction(m, max_cells=512)
    >>> p.shape, float(p.values[0, 0]), float(p.values[0, -1]), p.kept_total == 8192 * 4096
    ((512, 512), 1.0, 0.0, True)
    """
    a = as_array(mask)
    row_edges, col_edges = _edges_for(a.shape, max_cells, "pool_fraction")
    _, kept, area = _kept_and_area(a, gaps, row_edges, col_edges)
    with np.errstate(invalid="ignore", divide="ignore"):
        values = np.where(area > 0, kept / np.maximum(area, 1), np.nan)
    return PooledView(values, kept, area, row_edges, col_edges, "kept fraction")


def pool_magnitude(weight: Any, mask: Any, max_cells: MaxCells = DEFAULT_MAX_CELLS) -> PooledView:
    """Mean ``|weight|`` over the kept elements of each display cell.

    Cells whose block has no kept element are NaN (drawn in the "pruned" colour); ``kept`` and
    ``area`` are the same exact counts as in :func:`pool_fraction`.

    Examples
    --------
    >>> import numpy as np
    >>> w = np.array([[1.0, -3.0, 5.0, 2.0]])
    >>> m = np.array([[1, 1, 0, 0]])
    >>> p = pool_magnitude(w, m, max_cells=2)
    >>> p.values.tolist(), p.kept.tolist()
    ([[2.0, nan]], [[2, 0]])
    """
    w = as_array(weight)
    a = as_array(mask)
    if w.shape != a.shape:
        raise ValueError(
            f"pool_magnitude: weight and mask must have the same shape; got {w.shape} and {a.shape}"
        )
    row_edges, col_edges = _edges_for(a.shape, max_cells, "pool_magnitude")
    kept_src, kept, area = _kept_and_area(a, None, row_edges, col_edges)
    magnitude = np.where(kept_src, np.abs(w.astype(np.float64, copy=False)), 0.0)
    sums = block_sums(magnitude, row_edges, col_edges)
    with np.errstate(invalid="ignore", divide="ignore"):
        values = np.where(kept > 0, sums / np.maximum(kept, 1), np.nan)
    return PooledView(values, kept, area, row_edges, col_edges, "mean |w| of kept")


def pool_view(view: TensorView, max_cells: MaxCells = DEFAULT_MAX_CELLS) -> PooledView:
    """Pool any :class:`~prune_explorer.viz.views.TensorView` of a mask by kept fraction.

    Element views (strip, matrix, flat, kernels) go through :func:`pool_fraction`. A channel
    view already holds one fraction per slice; its cells are pooled by summing the exact
    per-slice kept counts, so ``kept`` and ``area`` still count elements of the source tensor.

    Examples
    --------
    >>> import torch
    >>> from prune_explorer.viz.views import channel_view
    >>> m = torch.ones(6, 4)
    >>> m[:3] = 0
    >>> p = pool_view(channel_view(m, dim=0), max_cells=2)
    >>> p.values.tolist(), p.kept.tolist(), p.area.tolist()
    ([[0.0, 1.0]], [[0, 12]], [[12, 12]])
    """
    if view.kind != "channels":
        # Only kernel grids hold NaN gaps; other views skip the NaN scan.
        return pool_fraction(view.data, max_cells, gaps=view.kind == "kernels")
    _, max_cols = _parse_max_cells(max_cells, "pool_view")
    n = view.shape[1]
    per_slice = prod(view.source_shape) // n if n else 0
    counts = np.rint(np.nan_to_num(view.data) * per_slice).astype(np.int64)
    row_edges = np.array([0, 1], dtype=np.int64)
    col_edges = block_edges(n, max_cols)
    kept = block_sums(counts, row_edges, col_edges)
    area = (np.diff(col_edges) * per_slice).reshape(1, -1)
    with np.errstate(invalid="ignore", divide="ignore"):
        values = np.where(area > 0, kept / np.maximum(area, 1), np.nan)
    return PooledView(values, kept, area, row_edges, col_edges, "kept fraction")
