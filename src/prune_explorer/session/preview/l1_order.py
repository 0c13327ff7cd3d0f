"""The stable L1 order of one tensor's unpruned entries: what a slider move reads.

:class:`TensorOrder` sorts a tensor's keys once per tensor state (``|w|``, or the draws of a
seeded ``random_unstructured`` step) and keeps each entry's rank, so a mask for any amount is one
comparison, a picture's per-cell counts a ``searchsorted``, and a window of the mask (the zoom)
a comparison of that window's ranks. :mod:`.order_cache` holds the orders and says when one is
stale; its docstring tells the design.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ..steps.seeding import draws_for

__all__ = ["TensorOrder"]

_BITS = {torch.float16: torch.int16, torch.bfloat16: torch.int16, torch.float32: torch.int32,
         torch.float64: torch.int64}

#: "Few" exact zeros among a tensor's unpruned entries: at most one in this many (then their
#: flat indices are kept with the order; see TensorOrder.kept_per_cell).
_FEW_ZEROS = 100


def _few_zeros(current: torch.Tensor, dead: torch.Tensor | None) -> torch.Tensor | None:
    """Flat indices of the unpruned entries that are exactly 0, when few (else None)."""
    zero = current.detach().reshape(-1) == 0
    if dead is not None:
        zero &= ~dead
    few = int(zero.sum()) <= max(1, current.numel() // _FEW_ZEROS)
    return torch.nonzero(zero)[:, 0] if few else None


class TensorOrder:
    """The stable L1 order of one tensor's unpruned entries (:mod:`.order_cache` tells the design).

    Attributes
    ----------
    rank : torch.Tensor
        int32/int64, the tensor's shape: place of each unpruned entry in ascending ``|w|``
        (ties: lowest flat index first); -1 where already pruned.
    sorted_keys : torch.Tensor
        1-D, the ``alive`` unpruned magnitudes, ascending, as their bit patterns (an integer
        dtype of the same width, which orders non-negative floats exactly as their values).
    alive : int
        Unpruned entries.
    mask_dtype : torch.dtype
        dtype of the masks the core would return (the tensor's).
    """

    def __init__(self, current: torch.Tensor, kept: torch.Tensor | None, state: tuple[Any, ...],
                 seed: int | None = None):
        with torch.no_grad():
            n = current.numel()
            dead = None if kept is None else kept.reshape(-1) == 0
            self.alive = n if dead is None else n - int(dead.sum())
            # Keys as integers that sort exactly as the core ranks the entries: the bit patterns
            # of |w| (non-negative floats, NaN after them, order as their bits do), or, for the
            # seeded draws pruned largest first, their negated bit patterns. Pruned entries get
            # the largest integer: they sort last. A stable sort of those integers is the core's
            # order (ties: lowest flat index first), and several times faster than of floats.
            bits_dtype = _BITS[current.dtype]
            if seed is None:
                bits = current.detach().abs().reshape(-1).view(bits_dtype)
            else:
                draws = draws_for(seed, self.alive, current.dtype, current.device)
                drawn = draws.view(bits_dtype).neg()
                if dead is None:
                    bits = drawn
                else:
                    bits = torch.empty(n, dtype=bits_dtype, device=current.device)
                    bits.masked_scatter_(~dead, drawn)
                del draws, drawn
            if dead is not None:
                bits = bits.masked_fill(dead, torch.iinfo(bits_dtype).max)
            sorted_keys, order = torch.sort(bits, stable=True)
            del bits
            index_dtype = torch.int32 if n < 2**31 else torch.int64
            rank = torch.empty(n, dtype=index_dtype, device=current.device)
            rank[order] = torch.arange(n, dtype=index_dtype, device=current.device)
            del order
            if dead is not None:
                rank.masked_fill_(dead, -1)
            # Unpruned entries that are exactly 0 (dead in the forward pass all the same): kept
            # by index when few, so the alive count of a cell is O(zeros) per step.
            self.zeros = _few_zeros(current, dead)
        self.rank = rank.view(current.shape)
        self.sorted_keys = sorted_keys[: self.alive].clone()  # bit patterns, comparable as ints
        self.mask_dtype = current.dtype
        self.seed = seed
        self.shape = tuple(current.shape)
        self._state = state
        self._cells: tuple[bytes, bytes, torch.Tensor] | None = None
        self._counted: tuple[int, np.ndarray] | None = None  # the last pruned_per_cell
        self.generation = 0  # moves when restricted() consumes these ranks (shifts them)

    @property
    def cost(self) -> int:
        """Entries this holds, for the cache's budget."""
        return self.rank.numel()

    def restricted(self, current: torch.Tensor, kept: torch.Tensor,
                   state: tuple[Any, ...], cut: int | None = None) -> TensorOrder | None:
        """This (L1) order after a step that only masked entries: the order of the entries
        ``kept`` still keeps, exactly what building it afresh for ``current`` gives, in
        ``O(n)`` instead of a sort (None where ``kept`` keeps an entry this order had pruned).

        The survivors keep their values and relative order (ascending ``|w|``, ties lowest
        flat index first), so a survivor's new rank is how many survivors rank before it.
        When the step pruned exactly the first entries of this order (an L1 cut), the per-cell
        ranks of the picture carry over too. ``cut``: the caller knows ``kept`` is
        ``self.mask(cut)`` (it installed that very mask), so ``kept`` is not read at all, and
        it drops this order: its ranks are shifted in place to become the new order's.
        """
        with torch.no_grad():
            flat = self.rank.reshape(-1)
            minus_one = torch.tensor(-1, dtype=flat.dtype, device=flat.device)
            survives: torch.Tensor | None = None
            consume = cut is not None
            if consume:
                self.generation += 1  # before the shift: readers of windows see it (kept_window)
            if cut is not None:
                prefix = True
                alive = self.alive - cut
            else:
                survives = kept.reshape(-1) != 0
                alive = int(survives.sum())
                cut = self.alive - alive
                prefix = cut >= 0 and torch.equal(survives, flat >= cut)  # an L1 cut
            by_rank: slice | torch.Tensor
            zeros: torch.Tensor | None
            if self.zeros is not None:  # few before: the survivors among them are fewer
                zeros = self.zeros[flat[self.zeros] >= cut] if survives is None \
                    else self.zeros[survives[self.zeros]]
            else:
                zeros = _few_zeros(current, flat < cut if survives is None else ~survives)
            if prefix:
                by_rank = slice(cut, None)
                # the first `cut` (and the dead): -1; in place when this order is dropped
                rank = (flat.sub_(cut) if consume else flat - cut).clamp_(min=-1)
            else:
                assert survives is not None  # set above whenever the cut was not given
                was_alive = flat >= 0
                if bool((survives & ~was_alive).any()):
                    return None
                keep = torch.zeros(self.alive, dtype=torch.bool, device=flat.device)
                keep[flat[was_alive].long()] = survives[was_alive]
                new_rank = (torch.cumsum(keep, 0) - 1).to(flat.dtype)
                rank = torch.where(survives, new_rank[flat.clamp(min=0).long()], minus_one)
                by_rank = keep
            out = object.__new__(TensorOrder)
            out.alive = alive
            out.rank = rank.view(self.shape)
            # a slice of the keys is a view (both orders only read them)
            out.sorted_keys = self.sorted_keys[by_rank]
            out.zeros = zeros
            out.mask_dtype = self.mask_dtype
            out.seed = None
            out.shape = self.shape
            out._state = state
            out._cells = None
            out._counted = None
            out.generation = 0
            if self._cells is not None and prefix:
                # pruned = this order's first `cut` entries: shifting keeps each cell sorted
                # (the padding shifts too: still above every rank, it is never counted)
                cells = self._cells[2]
                out._cells = (*self._cells[:2],
                              (cells.sub_(cut) if consume else cells - cut).clamp_(min=-1))
        return out

    def kept(self, pruned: int) -> torch.Tensor:
        """:meth:`mask` as a bool tensor (True = kept)."""
        return self.rank >= pruned

    def kept_window(self, pruned: int, rows: slice, cols: slice,
                    generation: int | None = None) -> torch.Tensor | None:
        """:meth:`kept` of one window only: entries ``[rows, cols]`` of the tensor seen as a
        matrix (``shape[0]`` rows, the other dims as columns; a 1-D tensor is one row), read
        from the ranks in that window -- cost the window's, not the tensor's.

        ``generation``: the :attr:`generation` the caller's ``pruned`` refers to; None is
        returned when the ranks have been consumed since (an apply shifted them in place),
        during the read included -- the window can no longer be told from them."""
        if generation is not None and self.generation != generation:
            return None
        matrix = self.rank.reshape(self.shape[0], -1) if len(self.shape) >= 2 \
            else self.rank.reshape(1, -1)
        out = matrix[rows, cols] >= pruned
        if generation is not None and self.generation != generation:
            return None  # shifted while it was read
        return out

    def mask(self, pruned: int) -> torch.Tensor:
        """The mask (1 = kept, the tensor's dtype) that prunes the ``pruned`` first entries."""
        out = torch.empty(self.shape, dtype=self.mask_dtype, device=self.rank.device)
        return torch.ge(self.rank, pruned, out=out)

    def kept_per_cell(self, pruned: int, row_edges: np.ndarray, col_edges: np.ndarray,
                      *, alive: bool = False) -> np.ndarray | None:
        """Entries each display cell keeps with the ``pruned`` first entries cut (see
        :meth:`pruned_per_cell`). ``alive=True``: less the kept entries that are exactly 0, as
        :meth:`Session.alive` counts; None when such zeros are too many to subtract one by one.
        """
        kept = np.outer(np.diff(row_edges), np.diff(col_edges)) - self.pruned_per_cell(
            pruned, row_edges, col_edges)
        if not alive:
            return kept
        if self.zeros is None:
            return None
        flat = self.zeros[self.rank.reshape(-1)[self.zeros] >= pruned].cpu().numpy()
        if flat.size:
            cols = self.rank.numel() // self.shape[0]
            at_row = np.searchsorted(row_edges, flat // cols, side="right") - 1
            at_col = np.searchsorted(col_edges, flat % cols, side="right") - 1
            np.subtract.at(kept, (at_row, at_col), 1)
        return kept

    def pruned_per_cell(self, pruned: int, row_edges: np.ndarray,
                        col_edges: np.ndarray) -> np.ndarray:
        """Entries each display cell would lose *or has lost* with ``pruned`` first entries cut.

        The cells are the blocks ``[row_edges[r]:row_edges[r+1], col_edges[c]:col_edges[c+1]]``
        of the tensor seen as ``(shape[0], numel / shape[0])`` (int64 array of shape (R, C)).
        Already pruned entries count as pruned. The first call for a grid sorts each cell's
        ranks (once); every call after is a batched ``searchsorted``: ``O(R * C * log(cell))``.
        """
        key = (row_edges.tobytes(), col_edges.tobytes())
        if self._cells is None or self._cells[:2] != key:
            self._cells = (*key, self._cell_ranks(row_edges, col_edges))
            self._counted = None
        if self._counted is not None and self._counted[0] == pruned:  # asked again (kept, alive)
            return self._counted[1].copy()
        cells = self._cells[2]
        # the query built by NumPy: torch.full is a parallel region, a wait on a busy machine
        query = torch.from_numpy(np.full((cells.shape[0], 1), pruned, dtype=np.int64)).to(
            cells.device, cells.dtype)
        below = torch.searchsorted(cells, query).reshape(row_edges.size - 1, col_edges.size - 1)
        self._counted = (pruned, below.cpu().numpy().astype(np.int64))
        return self._counted[1].copy()

    def _cell_ranks(self, row_edges: np.ndarray, col_edges: np.ndarray) -> torch.Tensor:
        # (cells, tallest * widest): each cell's ranks, ascending, padded with the largest int.
        device = self.rank.device
        ncols = self.rank.numel() // self.shape[0]

        def spans(edges: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
            sizes = np.diff(edges)
            offsets = np.arange(int(sizes.max()))
            index = edges[:-1, None] + offsets[None, :]
            return (torch.from_numpy(index).to(device),
                    torch.from_numpy(offsets[None, :] < sizes[:, None]).to(device))

        rows, row_ok = spans(row_edges)
        cols, col_ok = spans(col_edges)
        flat = rows[:, None, :, None] * ncols + cols[None, :, None, :]  # (R, C, h, w)
        valid = row_ok[:, None, :, None] & col_ok[None, :, None, :]
        flat = torch.where(valid, flat, 0)
        ranks = self.rank.reshape(-1)[flat].masked_fill_(~valid, torch.iinfo(self.rank.dtype).max)
        cells = ranks.reshape(rows.shape[0] * cols.shape[0], -1)
        return torch.sort(cells, dim=1).values

    def __repr__(self) -> str:
        return (f"TensorOrder(shape={self.shape}, alive={self.alive:,}, "
                f"dtype={self.mask_dtype})")
