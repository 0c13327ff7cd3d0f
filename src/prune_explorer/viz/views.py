"""Any-rank tensor -> a labelled 2-D view.

A picture of a weight tensor needs two axes. This module decides which tensor dimensions go
on which axis and names them, so a reader can tell what a row and a column of the picture are:

* rank 0 -- a single 1 x 1 cell;
* rank 1 (a bias) -- a 1 x n strip;
* rank 2 (Linear) -- ``out x in`` as stored;
* rank >= 3 (Conv1d/2d/3d, ...) -- dim 0 on the rows, all other dims flattened row-major on the
  columns, e.g. ``out x (in·kh·kw)``; the column label names the grouping;
* :func:`kernel_grid_view` -- one ``kh x kw`` tile per (out, in) pair, tiles separated by a
  1-cell gap (NaN);
* :func:`channel_view` -- one cell per slice along the pruning ``dim`` holding the kept
  fraction of that slice, so fully pruned channels read as 0.

Each view is a :class:`TensorView` holding the 2-D array, the axis labels and ``cell``: the
function that maps an element index of the source tensor to its (row, col) in the view.

Examples
--------
>>> import torch
>>> w = torch.arange(2 * 3 * 2 * 2).reshape(2, 3, 2, 2)
>>> view = tensor_view(w, module_type="Conv2d")
>>> view.data.shape
(2, 12)
>>> view.col_label
'in ch · kh · kw (dims 1-3, row-major)'
>>> view.cell((1, 2, 0, 1))
(1, 9)
>>> int(view.data[view.cell((1, 2, 0, 1))]) == int(w[1, 2, 0, 1])
True
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from math import prod
from typing import Any, Literal

import numpy as np
import torch

from prune_explorer.prune.layers import LAYER_AXES

Index = tuple[int, ...]
Layout = Literal["auto", "kernels", "channels"]
LAYOUTS: tuple[str, ...] = ("auto", "kernels", "channels")

# Names of each dimension of a module's weight, and of the one dimension of its 1-D parameters
# (bias, norm scale), by module type: the core's one table of layer axes (prune/layers.py).
_WEIGHT_DIMS: dict[str, tuple[str, ...]] = {k: a.dims for k, a in LAYER_AXES.items() if a.dims}
_VECTOR_DIM: dict[str, str] = {k: a.vector for k, a in LAYER_AXES.items() if a.vector}
_RANK_DIMS: dict[int, tuple[str, ...]] = {
    1: ("element",),
    2: ("out", "in"),
    3: ("out", "in", "k"),
    4: ("out", "in", "kh", "kw"),
    5: ("out", "in", "kd", "kh", "kw"),
}


@dataclass(frozen=True, repr=False)
class TensorView:
    """A 2-D picture of a tensor with named axes.

    Attributes
    ----------
    data : numpy.ndarray
        The 2-D array to draw. Shares memory with the source where possible (plain reshapes).
        Kernel grids hold NaN in the gap cells.
    kind : str
        ``"scalar"``, ``"strip"``, ``"matrix"``, ``"flat"`` (rank >= 3 flattened),
        ``"kernels"`` or ``"channels"``.
    source_shape : tuple of int
        Shape of the tensor the view was made from.
    row_label, col_label : str
        What a row and a column of ``data`` stand for.
    cell : callable
        ``cell(index) -> (row, col)``: where the source element ``index`` lands in ``data``.
        For a channel view, every element of a slice maps to that slice's cell.
    dim : int or None
        The pruning dimension of a channel view, else None.
    dim_names : tuple of str
        Names of the source dimensions.
    tile : (int, int) or None
        ``(kh, kw)`` of one kernel tile in a kernel-grid view, else None.

    Examples
    --------
    >>> import torch
    >>> v = tensor_view(torch.zeros(3, 5))
    >>> v
    TensorView(kind='matrix', source (3, 5) -> 2-D (3, 5), rows='out (dim 0)', cols='in (dim 1)')
    """

    data: np.ndarray
    kind: str
    source_shape: tuple[int, ...]
    row_label: str
    col_label: str
    cell: Callable[[Index], tuple[int, int]] = field(compare=False)
    dim: int | None = None
    dim_names: tuple[str, ...] = ()
    tile: tuple[int, int] | None = None

    @property
    def shape(self) -> tuple[int, int]:
        """Shape of the 2-D ``data``."""
        return (int(self.data.shape[0]), int(self.data.shape[1]))

    def __repr__(self) -> str:
        return (
            f"TensorView(kind={self.kind!r}, source {self.source_shape} -> 2-D {self.shape}, "
            f"rows={self.row_label!r}, cols={self.col_label!r})"
        )


def as_array(t: Any) -> np.ndarray:
    """Return a NumPy view of a tensor or array-like without copying when possible.

    CPU tensors share memory; tensors on other devices are copied to the CPU; dtypes NumPy
    lacks (bfloat16) become float32.

    Examples
    --------
    >>> import torch
    >>> as_array(torch.ones(2, dtype=torch.bool)).dtype
    dtype('bool')
    """
    if isinstance(t, torch.Tensor):
        t = t.detach()
        if t.device.type != "cpu":
            t = t.cpu()
        if t.dtype == torch.bfloat16:
            t = t.float()
        return t.numpy()
    return np.asarray(t)


def shape_only(shape: Sequence[int]) -> np.ndarray:
    """A read-only array of ``shape`` that holds no data (one ``False`` seen everywhere): the
    stand-in for a tensor when only its shape matters, as for a picture drawn from counts.

    Examples
    --------
    >>> a = shape_only((11008, 4096))
    >>> a.shape, a.strides, matrix_view(a).kind
    ((11008, 4096), (0, 0), 'matrix')
    """
    return np.broadcast_to(np.zeros((), dtype=bool), tuple(int(n) for n in shape))


def dim_names_for(
    shape: Sequence[int], module_type: str | None = None, dim_names: Sequence[str] | None = None
) -> tuple[str, ...]:
    """Names of each dimension of a tensor of ``shape``.

    Explicit ``dim_names`` win; otherwise names come from the module type when it matches the
    rank, otherwise from generic names by rank (``d0, d1, ...`` above rank 5).

    Examples
    --------
    >>> dim_names_for((8, 3, 3, 3), "Conv2d")
    ('out ch', 'in ch', 'kh', 'kw')
    >>> dim_names_for((8,), "Conv2d")
    ('out ch',)
    >>> dim_names_for((2, 2, 2, 2, 2, 2))
    ('d0', 'd1', 'd2', 'd3', 'd4', 'd5')
    """
    rank = len(shape)
    if dim_names is not None:
        names = tuple(str(n) for n in dim_names)
        if len(names) != rank:
            raise ValueError(
                f"tensor_view: dim_names must name each of the {rank} dimensions of a tensor of "
                f"shape {tuple(shape)}; got {len(names)} names {names}"
            )
        return names
    if module_type is not None:
        if rank == 1 and module_type in _VECTOR_DIM:
            return (_VECTOR_DIM[module_type],)
        known = _WEIGHT_DIMS.get(module_type)
        if known is not None and len(known) == rank:
            return known
    return _RANK_DIMS.get(rank, tuple(f"d{i}" for i in range(rank)))


def _check_index(index: Index, shape: tuple[int, ...], where: str) -> Index:
    index = tuple(int(i) for i in index)
    if len(index) != len(shape) or any(not 0 <= i < n for i, n in zip(index, shape, strict=True)):
        raise IndexError(f"{where}: index must lie inside shape {shape}; got {index}")
    return index


def _dims_label(names: Sequence[str], first: int) -> str:
    last = first + len(names) - 1
    dims = f"dim {first}" if len(names) == 1 else f"dims {first}-{last}, row-major"
    return f"{' · '.join(names)} ({dims})"


def matrix_view(
    t: Any, *, module_type: str | None = None, dim_names: Sequence[str] | None = None
) -> TensorView:
    """The default 2-D view: strip for rank <= 1, as stored for rank 2, flattened above.

    Parameters
    ----------
    t : torch.Tensor or array-like
        Weight, mask or any tensor.
    module_type : str, optional
        Class name of the owning module (``"Linear"``, ``"Conv2d"``, ...) to name the axes.
    dim_names : sequence of str, optional
        Explicit names, one per dimension.

    Examples
    --------
    >>> import torch
    >>> v = matrix_view(torch.arange(4.0))
    >>> v.kind, v.shape, v.cell((3,))
    ('strip', (1, 4), (0, 3))
    >>> matrix_view(torch.zeros(4, 2, 5), module_type="Conv1d").col_label
    'in ch · k (dims 1-2, row-major)'
    """
    a = as_array(t)
    shape = tuple(int(n) for n in a.shape)
    names = dim_names_for(shape, module_type, dim_names)
    rank = len(shape)
    if rank == 0:

        def scalar_cell(index: Index) -> tuple[int, int]:
            _check_index(index, shape, "TensorView.cell")
            return (0, 0)

        return TensorView(
            data=a.reshape(1, 1),
            kind="scalar",
            source_shape=shape,
            row_label="",
            col_label="scalar",
            cell=scalar_cell,
            dim_names=names,
        )
    if rank == 1:

        def strip_cell(index: Index) -> tuple[int, int]:
            (i,) = _check_index(index, shape, "TensorView.cell")
            return (0, i)

        return TensorView(
            data=a.reshape(1, shape[0]),
            kind="strip",
            source_shape=shape,
            row_label="",
            col_label=_dims_label(names, 0),
            cell=strip_cell,
            dim_names=names,
        )
    inner = shape[1:]
    strides = [prod(inner[k + 1 :]) for k in range(len(inner))]

    def flat_cell(index: Index) -> tuple[int, int]:
        idx = _check_index(index, shape, "TensorView.cell")
        return (idx[0], sum(i * s for i, s in zip(idx[1:], strides, strict=True)))

    return TensorView(
        data=a.reshape(shape[0], prod(inner)),
        kind="matrix" if rank == 2 else "flat",
        source_shape=shape,
        row_label=_dims_label(names[:1], 0),
        col_label=_dims_label(names[1:], 1),
        cell=flat_cell,
        dim_names=names,
    )


def kernel_grid_view(
    t: Any, *, module_type: str | None = None, dim_names: Sequence[str] | None = None,
    gaps: bool = True,
) -> TensorView:
    """Convolution weight as a grid of kernel tiles, one per (out, in) pair.

    A rank-4 tensor ``(out, in, kh, kw)`` becomes an array of shape
    ``(out*(kh+1) - 1, in*(kw+1) - 1)``: tile ``(o, i)`` starts at row ``o*(kh+1)`` and column
    ``i*(kw+1)``; the 1-cell gaps between tiles hold NaN. A rank-3 tensor ``(out, in, k)`` uses
    ``1 x k`` tiles. The result is float (the source values, or 0/1 for a boolean mask).
    ``gaps=False`` packs the tiles edge to edge (``(out*kh, in*kw)``), for a picture that
    draws the tile borders as lines (a quarter more room for the cells of 3x3 kernels).

    Examples
    --------
    >>> import torch
    >>> w = torch.arange(2 * 2 * 2 * 3, dtype=torch.float32).reshape(2, 2, 2, 3)
    >>> v = kernel_grid_view(w)
    >>> v.shape
    (5, 7)
    >>> v.cell((1, 1, 0, 2)), float(v.data[3, 6]) == float(w[1, 1, 0, 2])
    ((3, 6), True)
    >>> bool(np.isnan(v.data[2, 0]))  # the gap row between out channels 0 and 1
    True
    """
    a = as_array(t)
    shape = tuple(int(n) for n in a.shape)
    if len(shape) not in (3, 4):
        raise ValueError(
            "kernel_grid_view: tensor must have 3 dims (out, in, k) or 4 dims "
            f"(out, in, kh, kw); got shape {shape}"
        )
    names = dim_names_for(shape, module_type, dim_names)
    a4 = a.reshape(shape[0], shape[1], 1, shape[2]) if len(shape) == 3 else a
    n_out, n_in, kh, kw = a4.shape
    if n_out == 0 or n_in == 0:
        raise ValueError(f"kernel_grid_view: tensor must not be empty; got shape {shape}")
    dtype = a4.dtype if np.issubdtype(a4.dtype, np.floating) else np.float32
    gap = 1 if gaps else 0
    padded = np.full((n_out, kh + gap, n_in, kw + gap), np.nan, dtype=dtype)
    padded[:, :kh, :, :kw] = a4.transpose(0, 2, 1, 3)
    grid = padded.reshape(n_out * (kh + gap), n_in * (kw + gap))
    if gaps:
        grid = grid[:-1, :-1]

    def tile_cell(index: Index) -> tuple[int, int]:
        idx = _check_index(index, shape, "TensorView.cell")
        o, i, *k = idx
        y, x = (0, k[0]) if len(k) == 1 else (k[0], k[1])
        return (o * (kh + gap) + y, i * (kw + gap) + x)

    tile = f"{kh}x{kw} tile" if len(shape) == 4 else f"1x{kw} tile"
    return TensorView(
        data=grid,
        kind="kernels",
        source_shape=shape,
        row_label=f"{names[0]} (dim 0); {tile}s",
        col_label=f"{names[1]} (dim 1); {tile}s",
        cell=tile_cell,
        dim_names=names,
        tile=(int(kh), int(kw)),
    )


def channel_view(
    mask: Any,
    dim: int = 0,
    *,
    module_type: str | None = None,
    dim_names: Sequence[str] | None = None,
) -> TensorView:
    """Kept fraction of each slice of ``mask`` along ``dim``, as a ``1 x size(dim)`` strip.

    A value of 0 means the whole slice (e.g. an output channel) is pruned, 1 means it is fully
    kept; anything between is a partially pruned slice. Nonzero entries count as kept.

    Examples
    --------
    >>> import torch
    >>> m = torch.ones(3, 4)
    >>> m[1] = 0
    >>> m[2, :2] = 0
    >>> v = channel_view(m, dim=0, module_type="Linear")
    >>> v.data.tolist()
    [[1.0, 0.0, 0.5]]
    >>> v.col_label, v.cell((2, 3))
    ('out features (dim 0)', (0, 2))
    >>> slice_states(v).tolist()
    [2, 0, 1]
    """
    a = as_array(mask)
    shape = tuple(int(n) for n in a.shape)
    rank = len(shape)
    if rank == 0:
        raise ValueError("channel_view: mask must have at least 1 dimension; got a scalar")
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or not -rank <= dim < rank:
        raise ValueError(
            f"channel_view: dim must be an int in [{-rank}, {rank - 1}] for a {rank}-d tensor of "
            f"shape {shape}; got {dim!r}"
        )
    d = int(dim) % rank
    names = dim_names_for(shape, module_type, dim_names)
    n = shape[d]
    per_slice = prod(shape) // n if n else 0
    kept = np.count_nonzero(np.moveaxis(a, d, 0).reshape(n, per_slice), axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        fraction = kept / per_slice if per_slice else np.full(n, np.nan)

    def slice_cell(index: Index) -> tuple[int, int]:
        idx = _check_index(index, shape, "TensorView.cell")
        return (0, idx[d])

    return TensorView(
        data=fraction.reshape(1, n).astype(np.float64),
        kind="channels",
        source_shape=shape,
        row_label="",
        col_label=f"{names[d]} (dim {d})",
        cell=slice_cell,
        dim=d,
        dim_names=names,
    )


PRUNED, PARTIAL, KEPT = 0, 1, 2


def slice_states(view: TensorView) -> np.ndarray:
    """Classify each slice of a channel view: 0 fully pruned, 1 partially pruned, 2 kept.

    Examples
    --------
    >>> import torch
    >>> slice_states(channel_view(torch.tensor([[0.0, 0.0], [1.0, 0.0], [1.0, 1.0]]))).tolist()
    [0, 1, 2]
    """
    if view.kind != "channels":
        raise ValueError(f"slice_states: view must be a channel view; got kind {view.kind!r}")
    f = view.data[0]
    states = np.full(f.shape, PARTIAL, dtype=np.int8)
    states[f == 0] = PRUNED
    states[f == 1] = KEPT
    return states


def tensor_view(
    t: Any,
    *,
    layout: Layout = "auto",
    dim: int = 0,
    module_type: str | None = None,
    dim_names: Sequence[str] | None = None,
    gaps: bool = True,
) -> TensorView:
    """Dispatch to :func:`matrix_view`, :func:`kernel_grid_view` or :func:`channel_view`.

    Parameters
    ----------
    t : torch.Tensor or array-like
        Tensor of any rank.
    layout : {"auto", "kernels", "channels"}
        ``"auto"`` is :func:`matrix_view`.
    dim : int
        Pruning dimension for ``layout="channels"``.
    module_type, dim_names
        Used to name the axes.
    gaps : bool
        Kernel grids only: a 1-cell gap between tiles (see :func:`kernel_grid_view`).

    Examples
    --------
    >>> import torch
    >>> tensor_view(torch.ones(4, 2, 3, 3), layout="kernels").shape
    (15, 7)
    >>> tensor_view(torch.ones(4, 2, 3, 3), layout="channels", dim=1).shape
    (1, 2)
    """
    if layout == "auto":
        return matrix_view(t, module_type=module_type, dim_names=dim_names)
    if layout == "kernels":
        return kernel_grid_view(t, module_type=module_type, dim_names=dim_names, gaps=gaps)
    if layout == "channels":
        return channel_view(t, dim, module_type=module_type, dim_names=dim_names)
    raise ValueError(f"tensor_view: layout must be one of {LAYOUTS}; got {layout!r}")
