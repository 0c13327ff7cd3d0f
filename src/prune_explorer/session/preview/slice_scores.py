"""What a structured slider move needs, computed once per tensor state: one score per slice.

``ln_structured`` ranks the slices along ``dim`` by their ``n``-norm and ``random_structured``
by one seeded draw per slice; neither score changes when only ``amount`` does. So, for a tensor
in a given state, :class:`SliceScores` computes them once -- exactly as the core does: the
norms of the slices still alive (what a ``PruningContainer`` hands the method), the draws of
the method's own generator -- and, for any amount, the kept slices are the core's own rule
(:meth:`LnStructured.keep_slices <prune_explorer.prune.LnStructured.keep_slices>`,
:meth:`RandomStructured.keep_slices <prune_explorer.prune.RandomStructured.keep_slices>`)
applied to that short vector: the very slices apply keeps, ties included.

A structured mask is the current mask times a 0/1 factor per slice, so the kept count of a
display cell is a sum over the slices that cross it: :meth:`SliceScores.kept_per_cell` keeps,
per grid, the count of each line (matrix row for ``dim=0``, matrix column otherwise) in each
cell, and a slider step is a weighted sum of those, ``O(cells + lines)``-ish, with no mask.

The entries live in the session's :class:`~prune_explorer.session.preview.order_cache.OrderCache`,
beside the L1 orders, and are thrown away on the same changes (apply, undo, commit, device
moves, writes to the weights).

Examples
--------
>>> import torch
>>> from prune_explorer.session.preview.order_cache import OrderCache
>>> layer = torch.nn.Linear(600, 400)
>>> from prune_explorer import prune
>>> scores = OrderCache().slices(layer, "weight", prune.LnStructured(0.5, n=2, dim=0))
>>> scores
SliceScores(ln_structured, shape=(400, 600), dim=0, 400 slices alive)
>>> int(scores.keep(round(0.25 * scores.alive)).sum())
300
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
import torch

from prune_explorer import prune
from prune_explorer.prune.methods import slice_norms

__all__ = ["SliceScores", "alive_slices", "slice_spec"]

_GRIDS = 4  # line counts kept per tensor state: (grid, alive) pairs


def alive_slices(current: torch.Tensor, kept: torch.Tensor | None,
                 dim: int) -> tuple[torch.Tensor | None, torch.Tensor]:
    """(which slices along ``dim`` are alive, ``current`` restricted to them): a slice is alive
    while the mask ``kept`` keeps any of its entries (the rule a ``PruningContainer`` uses to
    hand a structured step what it may still prune). ``(None, current)`` without a mask.

    >>> alive, rest = alive_slices(torch.ones(3, 2), torch.tensor([[1, 0], [0, 0], [0, 1]]), 0)
    >>> alive.tolist(), tuple(rest.shape)
    ([True, False, True], (2, 2))
    """
    if kept is None:
        return None, current
    others = [d for d in range(current.dim()) if d != dim]
    lines = kept.sum(dim=others) != 0
    return lines, current[tuple(lines if d == dim else slice(None) for d in range(current.dim()))]


def slice_spec(method: Any, seed: int | None, ndim: int) -> tuple[Any, ...] | None:
    """The cache key of a structured method's scores on a tensor of rank ``ndim``:
    ``(method name, n or seed, dim as an index)``; None when the core must decide (other
    methods, unseeded draws, settings the core would refuse or that are not plain numbers)."""
    dim = getattr(method, "dim", None)
    if ndim < 2 or isinstance(dim, bool) or not isinstance(dim, int) or not -ndim <= dim < ndim:
        return None
    if isinstance(method, prune.LnStructured):
        n = method.n
        if isinstance(n, bool) or not isinstance(n, numbers.Real):
            return None  # 'fro', 'nuc' and the like: the core checks and computes them
        return ("ln_structured", n, dim % ndim)
    if isinstance(method, prune.RandomStructured) and seed is not None:
        return ("random_structured", int(seed), dim % ndim)
    return None


class SliceScores:
    """One score per slice still alive along ``dim``, as the core ranks them.

    Attributes
    ----------
    scores : torch.Tensor
        1-D (CPU for draws, the tensor's device for norms), one per alive slice, in order.
    alive : int
        Slices still alive (``scores.numel()``): what ``amount`` is a fraction of.
    dim : int
        Non-negative pruning dim.
    """

    def __init__(self, current: torch.Tensor, kept: torch.Tensor | None, spec: tuple[Any, ...],
                 method: Any, state: tuple[Any, ...]) -> None:
        name, _, dim = spec
        with torch.no_grad():
            t = current.detach()
            self.lines, t = alive_slices(t, kept, dim)  # lines None: all alive
            size = t.shape[dim]
            # the core's own computations, on what the core's compute_mask would be handed
            if name == "ln_structured":
                self.scores = slice_norms(t, method.n, dim)
            else:
                self.scores = method.slice_draws(size)
        self.method = name
        self.alive = size
        self.dim = dim
        self.shape = tuple(current.shape)
        self.mask_dtype = current.dtype
        self.device = current.device
        self._state = state
        # line counts per grid and alive flag (the picture asks for both: kept, and alive)
        self._cells: dict[Any, np.ndarray] = {}

    @property
    def cost(self) -> int:
        """Entries this holds, for the cache's budget (the slices; grids come and go)."""
        return self.alive

    def keep(self, pruned: int) -> torch.Tensor:
        """Bool per slice along ``dim`` (all of them): kept after pruning ``pruned`` of the
        alive ones. Slices already dead are False."""
        if pruned == 0:
            local = torch.ones(self.alive, dtype=torch.bool)
        elif self.method == "ln_structured":
            local = prune.LnStructured.keep_slices(self.scores, pruned)
        else:
            local = prune.RandomStructured.keep_slices(self.scores, pruned)
        local = local.to(self.device)
        if self.lines is None:
            return local
        out = torch.zeros(self.shape[self.dim], dtype=torch.bool, device=self.device)
        out[self.lines] = local
        return out

    def mask(self, pruned: int, kept: torch.Tensor | None) -> torch.Tensor:
        """The mask apply installs with ``pruned`` slices cut: the current mask ``kept`` (the
        tensor's mask buffer; None if not pruned yet) times the kept slices, in the tensor's
        dtype."""
        view = [1] * len(self.shape)
        view[self.dim] = self.shape[self.dim]
        factor = self.keep(pruned).to(self.mask_dtype).view(view)
        if kept is None:
            return factor.expand(self.shape).contiguous()
        out = torch.empty(self.shape, dtype=self.mask_dtype, device=self.device)
        return torch.mul(kept.to(self.mask_dtype), factor, out=out)

    def kept_per_cell(self, pruned: int, row_edges: np.ndarray, col_edges: np.ndarray,
                      current: torch.Tensor, kept: torch.Tensor | None, *,
                      alive: bool = False) -> np.ndarray | None:
        """Entries each display cell keeps (``alive``: kept and not exactly 0) with ``pruned``
        slices cut; cells as in :meth:`TensorOrder.pruned_per_cell
        <prune_explorer.session.preview.order_cache.TensorOrder.pruned_per_cell>` (int64, (R, C)).

        ``current`` and ``kept`` are the tensor and its mask buffer (None if not pruned) in the
        state these scores were computed for. None for a grid with empty cells.
        """
        if (np.diff(row_edges) <= 0).any() or (np.diff(col_edges) <= 0).any():
            return None
        lines = self._line_counts(row_edges, col_edges, current, kept, alive)
        keep = self.keep(pruned).cpu().numpy()
        if self.dim == 0:  # lines are matrix rows, one slice each: (rows, C)
            return np.add.reduceat(lines * keep[:, None], row_edges[:-1], axis=0)
        # lines are matrix columns; column j lies in slice (j // inner) % size: (R, cols)
        inner = int(np.prod(self.shape[self.dim + 1:], dtype=np.int64))
        cols = lines.shape[1]
        of_col = (np.arange(cols) // inner) % self.shape[self.dim]
        return np.add.reduceat(lines * keep[of_col][None, :], col_edges[:-1], axis=1)

    def _line_counts(self, row_edges: np.ndarray, col_edges: np.ndarray, current: torch.Tensor,
                     kept: torch.Tensor | None, alive: bool) -> np.ndarray:
        # Per grid: how many entries of each line each cell holds that the current state keeps
        # (alive: and that are not exactly 0). Built once per grid with one pass.
        key = (row_edges.tobytes(), col_edges.tobytes(), alive)
        if key in self._cells:
            return self._cells[key]
        rows = self.shape[0]
        with torch.no_grad():
            if alive:
                live = current.detach() != 0
                if kept is not None:
                    live &= kept != 0
            elif kept is not None:
                live = kept != 0
            else:
                live = None
            matrix = None if live is None else live.reshape(rows, -1).cpu().numpy()
        cols = int(np.prod(self.shape, dtype=np.int64)) // rows
        if self.dim == 0:
            if matrix is None:
                counts = np.broadcast_to(np.diff(col_edges), (rows, col_edges.size - 1)).copy()
            else:
                counts = np.add.reduceat(matrix, col_edges[:-1], axis=1, dtype=np.int64)
        elif matrix is None:
            counts = np.broadcast_to(np.diff(row_edges)[:, None],
                                     (row_edges.size - 1, cols)).copy()
        else:
            counts = np.add.reduceat(matrix, row_edges[:-1], axis=0, dtype=np.int64)
        if len(self._cells) >= _GRIDS:
            del self._cells[next(iter(self._cells))]  # the oldest grid goes
        self._cells[key] = counts
        return counts

    def __repr__(self) -> str:
        return (f"SliceScores({self.method}, shape={self.shape}, dim={self.dim}, "
                f"{self.alive:,} slices alive)")
