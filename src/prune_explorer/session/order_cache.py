"""What a slider move needs, computed once per tensor state: the L1 order of the unpruned entries.

Moving the amount slider changes only ``k``, never the order of ``|w|``. So, for a tensor in a
given state (its values and its current mask), :class:`TensorOrder` sorts the unpruned magnitudes
once -- stably, so equal magnitudes keep their flat order, which is exactly the session's tie rule
(lowest flat index first, see :mod:`prune_explorer.session.ties`) -- and keeps

* ``rank``: each unpruned entry's place in that order (-1 where already pruned);
* ``sorted_keys``: the unpruned magnitudes in ascending order.

A ``random_unstructured`` step with a fixed seed ranks fixed draws (one per unpruned entry, the
stream :func:`~prune_explorer.session.seeding.draws_for` gives, largest pruned first, ties lowest
flat index first): the same structure, built from the negated draws, serves its slider too, one
order per (tensor state, seed).

Then, for any ``k``:

* a local L1 mask is ``rank >= k`` (one comparison, no selection);
* a global L1 cut over several tensors needs no order at all: the cache keeps a small
  histogram of each target's keys instead (:mod:`prune_explorer.session.global_cut`), and the
  shown tensor's order turns the cut into its picture's counts;
* the pruned count of every display cell of the picture is a ``searchsorted`` of the cell's
  sorted ranks (:meth:`TensorOrder.pruned_per_cell`), ``O(cells log n)``.

:class:`OrderCache` holds the orders by address and throws one away as soon as its tensor state
changes: apply, undo, commit and device moves replace or rewrite the mask or parameter, and a
write to the weights bumps the parameter's version counter; each is checked on every use (tensor
identity through a weak reference, ``_version`` and device). A write through ``param.data`` does
not bump the counter: a strided sample of 1,024 values, compared on every use, catches those
unless they miss every sampled entry.

Tensors of at most ``SMALL`` entries (where the core uses torch's own ``topk`` and its tie
order) and tensors holding NaN are not cached: callers ask the core, as before.

Examples
--------
>>> import torch
>>> layer = torch.nn.Linear(600, 400)
>>> cache = OrderCache()
>>> order = cache.get(layer, "weight")
>>> mask = order.mask(round(0.3 * order.alive))
>>> int((mask == 0).sum()) == round(0.3 * 240_000)
True
>>> cache.get(layer, "weight") is order
True
>>> with torch.no_grad():
...     layer.weight[0, 0] = 1.0  # a write to the weights: the order is rebuilt
>>> cache.get(layer, "weight") is order
False
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
import torch
from torch import nn

from prune_explorer.prune._sharded import is_sharded

from .distributed import tensor_of
from .global_cut import KeyHistogram
from .seeding import draws_for
from .slice_order import SliceScores, slice_spec

__all__ = ["OrderCache", "TensorOrder"]

T = TypeVar("T")

#: Same bound as the core's: at or below it, the core uses torch.topk (torch's tie order).
try:
    from prune_explorer.prune._select import SMALL
except ImportError:  # pragma: no cover - the core moved it
    SMALL = 1 << 17

_BITS = {torch.float16: torch.int16, torch.bfloat16: torch.int16, torch.float32: torch.int32,
         torch.float64: torch.int64}
_FLOATS = tuple(_BITS)


def _state(module: nn.Module, name: str) -> tuple[Any, ...]:
    """What defines ``module.name``'s state: the parameter (``_orig`` once pruned) and the mask
    buffer, each as (weak reference, version, device), plus a strided sample of the values
    (writes through ``param.data`` bypass the version counter; the sample catches most)."""
    orig = module._parameters.get(name + "_orig")
    mask = module._buffers.get(name + "_mask") if orig is not None else None
    param = orig if orig is not None else module._parameters.get(name)
    tensors = [t for t in (param, mask) if t is not None]
    flat = tensors[0].detach().reshape(-1)
    sample = flat[:: max(1, flat.numel() // 1024)].clone()
    return (*((weakref.ref(t), t._version, t.device) for t in tensors), sample)


def _still(state: tuple[Any, ...], now: tuple[Any, ...]) -> bool:
    if len(state) != len(now) or not torch.equal(state[-1], now[-1]):
        return False
    return all(ref() is not None and ref() is new_ref() and version == new_version
               and device == new_device
               for (ref, version, device), (new_ref, new_version, new_device) in zip(
                   state[:-1], now[:-1], strict=True))


def _fact_state(module: nn.Module, name: str, values_only: bool) -> tuple[Any, ...] | None:
    """The state a memoised fact of ``module.name`` is valid for (see :func:`_state`; with
    ``values_only``, the parameter's alone); None where facts are not memoised (tensors of at
    most ``SMALL`` entries, sharded ones)."""
    param = module._parameters.get(name + "_orig")
    if param is None:
        param = module._parameters.get(name)
    if param is None or param.numel() <= SMALL or is_sharded(param):
        return None
    now = _state(module, name)
    return (now[0], now[-1]) if values_only else now


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
    """The stable L1 order of one tensor's unpruned entries (see the module docstring).

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

    def kept_window(self, pruned: int, rows: slice, cols: slice) -> torch.Tensor:
        """:meth:`kept` of one window only: entries ``[rows, cols]`` of the tensor seen as a
        matrix (``shape[0]`` rows, the other dims as columns; a 1-D tensor is one row), read
        from the ranks in that window -- cost the window's, not the tensor's."""
        matrix = self.rank.reshape(self.shape[0], -1) if len(self.shape) >= 2 \
            else self.rank.reshape(1, -1)
        return matrix[rows, cols] >= pruned

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


class OrderCache:
    """:class:`TensorOrder` by tensor, rebuilt whenever the tensor's state changed; and the
    :class:`~prune_explorer.session.global_cut.KeyHistogram` of each global L1 target.

    ``get(module, name)`` returns the order of ``module.name`` as it is now, or None when the
    core's own path must be used (``numel <= SMALL``, not floating, NaN entries, or more than
    ``budget`` entries). At most ``budget`` entries are ordered at once (about 8 bytes each for
    rank and sorted keys); the oldest orders make room for new ones. ``budget=0`` switches the
    cache off, histograms included. ``len()`` counts orders and histograms.
    """

    def __init__(self, budget: int = 1 << 28) -> None:
        self.budget = budget  # at most this many entries ordered at once (oldest dropped)
        self._orders: dict[tuple[int, str, Any], TensorOrder | SliceScores] = {}
        self._facts: dict[tuple[int, str, str], tuple[tuple[Any, ...], Any]] = {}
        self._hists: dict[tuple[int, str], KeyHistogram] = {}

    def get(self, module: nn.Module, name: str, seed: int | None = None) -> TensorOrder | None:
        """The order of ``module.name`` as it is now: by ``|w|``, or by the draws of a
        ``random_unstructured`` step seeded with ``seed`` (built on first use)."""
        found = self._get(module, name, seed, build=True)
        return found if isinstance(found, TensorOrder) else None

    def peek(self, module: nn.Module, name: str, seed: int | None = None) -> TensorOrder | None:
        """Like :meth:`get`, but only an order already built for the tensor as it is now."""
        found = self._get(module, name, seed, build=False)
        return found if isinstance(found, TensorOrder) else None

    def slices(self, module: nn.Module, name: str, method: Any, seed: int | None = None,
               *, build: bool = True) -> SliceScores | None:
        """The slice scores of a structured ``method`` instance (``LnStructured``, or
        ``RandomStructured`` whose generator was seeded with ``seed``) on ``module.name`` as it
        is now (:class:`~prune_explorer.session.slice_order.SliceScores`); None where the core
        must decide. ``build=False``: only scores already computed."""
        spec = slice_spec(method, seed, tensor_of(module, name).dim())
        if spec is None:
            return None
        found = self._get(module, name, spec, build=build, method=method)
        return found if isinstance(found, SliceScores) else None

    def histogram(self, module: nn.Module, name: str, build: bool = True) -> KeyHistogram | None:
        """The key histogram of ``module.name`` as it is now (None: not a floating tensor, a
        DTensor, the cache is off, or ``build=False`` and none is cached). Tensors of at most
        ``SMALL`` entries get a fresh one, not kept (it would outweigh them)."""
        current = tensor_of(module, name)
        if self.budget <= 0 or current.dtype not in _FLOATS or is_sharded(current):
            return None
        if current.numel() <= SMALL:
            return KeyHistogram(module, name)
        key = (id(module), name)
        now = _state(module, name)
        found = self._hists.get(key)
        if found is not None and _still(found._state, now):
            return found
        self._hists.pop(key, None)
        if not build:
            return None
        found = KeyHistogram(module, name, now)
        self._hists[key] = found
        return found

    def _get(self, module: nn.Module, name: str, spec: Any, build: bool,
             method: Any = None) -> TensorOrder | SliceScores | None:
        current = tensor_of(module, name)
        if not SMALL < current.numel() <= self.budget or current.dtype not in _FLOATS \
                or is_sharded(current):  # DTensors: the core's collective path
            return None
        key = (id(module), name, spec)
        if not build and key not in self._orders:
            return None
        now = _state(module, name)
        order = self._orders.get(key)
        if order is not None and _still(order._state, now):
            return order
        self._orders.pop(key, None)  # free the stale one before building
        if not build or (spec is None and bool(torch.isnan(current).any())):
            return None
        kept = module._buffers.get(name + "_mask") if len(now) == 3 else None
        while self._orders and sum(o.cost for o in self._orders.values()) \
                + current.numel() > self.budget:
            del self._orders[next(iter(self._orders))]
        if isinstance(spec, tuple):
            built: TensorOrder | SliceScores = SliceScores(current, kept, spec, method, now)
        else:
            built = TensorOrder(current, kept, now, spec)
        self._orders[key] = built
        return built

    def carry(self, module: nn.Module, name: str, before: TensorOrder | None,
              cut: int | None = None) -> None:
        """After an apply on ``module.name``: keep its L1 order ``before`` (valid before the
        step; see :meth:`peek`) as the order of the new state, restricted to the survivors
        (:meth:`TensorOrder.restricted`), so the next preview does not sort again. ``cut``:
        the step installed ``before.mask(cut)`` itself (then the mask is not read again)."""
        if before is None or before.seed is not None:
            return
        kept = module._buffers.get(name + "_mask")
        current = tensor_of(module, name)
        if kept is None or name + "_orig" not in module._parameters \
                or tuple(kept.shape) != before.shape or kept.device != before.rank.device:
            return
        now = _state(module, name)
        key = (id(module), name, None)
        self._orders.pop(key, None)  # first: restricting by a cut consumes ``before``
        order = before.restricted(current, kept, now, cut)
        if order is not None:
            self._orders[key] = order

    def memo(self, module: nn.Module, name: str, what: str, compute: Callable[[], T], *,
             values_only: bool = False) -> T:
        """``compute()``, or what it returned for ``module.name`` in the same state (checked
        as for the orders): small facts such as a report's counts, computed once per tensor
        state. ``values_only``: a fact of the values alone (the parameter, ``_orig`` once
        pruned), kept across changes of the mask only (apply, undo). Tensors of at most
        ``SMALL`` entries and sharded ones are always computed afresh."""
        now = _fact_state(module, name, values_only)
        if now is None:
            return compute()  # small, or sharded (every rank must join the collectives)
        key = (id(module), name, what)
        hit = self._facts.get(key)
        if hit is not None and _still(hit[0], now):
            return hit[1]
        value = compute()
        self._facts[key] = (now, value)
        return value

    def recall(self, module: nn.Module, name: str, what: str, *,
               values_only: bool = False) -> Any:
        """What :meth:`memo` keeps for ``module.name`` in its state now, or None (nothing kept,
        out of date, or a tensor never memoised); computes nothing."""
        now = _fact_state(module, name, values_only)
        hit = None if now is None else self._facts.get((id(module), name, what))
        return hit[1] if hit is not None and now is not None and _still(hit[0], now) else None

    def clear(self) -> None:
        """Forget every order and histogram."""
        self._orders.clear()
        self._facts.clear()
        self._hists.clear()

    def __len__(self) -> int:
        return len(self._orders) + len(self._hists)

    def __repr__(self) -> str:
        return (f"OrderCache({len(self._orders)} tensor orders, "
                f"{len(self._hists)} key histograms)")
