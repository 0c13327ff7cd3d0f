"""Why these weights: the sorted importances a magnitude step cuts, computed once per tensor state.

An ``l1_unstructured`` step prunes the unpruned entries with the smallest ``|w|``; an
``ln_structured`` step the unpruned slices along ``dim`` with the smallest ``n``-norm. For a
tensor in a given state, :class:`Magnitudes` holds those importances sorted ascending, so that

* a histogram of them (log-spaced bins) is ``O(bins log n)`` (:meth:`Magnitudes.histogram`);
* the cut of a step that prunes ``k`` of them is the ``k``-th smallest, the smallest importance
  that stays kept (:meth:`Magnitudes.cut`): ``O(1)``, so a slider move only moves a line.

The importances are kept as the bit patterns of the non-negative floats (an integer dtype of the
same width, which orders them exactly as their values). For large tensors these are the sorted
keys of the session's own :class:`~.order_cache.TensorOrder` (no second
sort, no copy); small tensors and channel norms are sorted here. :class:`MagnitudeCache` keeps one
per (tensor, norm, dim) and throws it away when the tensor's state changes -- apply, undo,
commit, device moves, writes to the weights -- with the order cache's own state check
(:func:`~prune_explorer.session.preview.order_cache._state`).

Examples
--------
>>> import torch
>>> layer = torch.nn.Linear(3, 2)
>>> with torch.no_grad():
...     _ = layer.weight.copy_(torch.tensor([[0.5, -2.0, 0.1], [1.0, 0.0, -0.25]]))
>>> cache = MagnitudeCache()
>>> mags = cache.get(layer, "weight")
>>> mags
Magnitudes(6 entries, 1 exactly 0, max 2)
>>> mags.cut(2), mags.cut(6)  # pruning 2 entries keeps |w| >= 0.25; pruning all keeps none
(0.25, None)
>>> cache.get(layer, "weight") is mags
True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from prune_explorer.prune.methods import LnStructured, slice_norms

from ..analysis.bins import log_edges
from ..analysis.wording import noun, slice_unit
from .l1_order import _BITS
from .order_cache import OrderCache, _state, _still
from .slice_scores import alive_slices

__all__ = ["MagnitudeCache", "Magnitudes"]


def _keys(values: torch.Tensor) -> torch.Tensor:
    """Sorted bit patterns of non-negative floats ``values`` (1-D)."""
    if values.dtype not in _BITS:
        values = values.float()
    return torch.sort(values.reshape(-1).view(_BITS[values.dtype])).values


@dataclass(frozen=True, repr=False)
class Magnitudes:
    """The importances a magnitude step ranks, for one tensor state, sorted ascending.

    Attributes
    ----------
    keys : torch.Tensor
        1-D, the importances of the unpruned units as bit patterns of ``dtype``, ascending
        (``|w|`` of the unpruned entries, or the norms of the unpruned slices).
    dtype : torch.dtype
        The float dtype the keys are patterns of.
    unit : str
        ``"entries"`` or the slices (``"kernel rows (dim 2)"``:
        :func:`~prune_explorer.session.analysis.wording.slice_unit`).
    pruned : int
        Units already pruned (not among the keys).
    norm : str
        What is ranked: ``"|w|"`` or, e.g., ``"L2 norm"``.
    """

    keys: torch.Tensor
    dtype: torch.dtype
    unit: str
    pruned: int
    norm: str

    @property
    def count(self) -> int:
        """Units still unpruned (what ``amount`` is a fraction of)."""
        return int(self.keys.numel())

    def _key(self, value: float) -> torch.Tensor:
        return torch.tensor([value], dtype=self.dtype).view(self.keys.dtype).to(self.keys.device)

    def _below(self, value: float, right: bool = False) -> int:
        return int(torch.searchsorted(self.keys, self._key(value), right=right))

    @property
    def zeros(self) -> int:
        """Unpruned units of importance exactly 0 (cut first; off a log axis)."""
        return self._below(0.0, right=True)

    def value(self, index: int) -> float:
        """The ``index``-th smallest importance (0-based)."""
        return float(self.keys[index:index + 1].cpu().view(self.dtype)[0])

    @property
    def finite(self) -> int:
        """Unpruned units of finite importance (NaN and inf sort last)."""
        return self._below(float("inf"))

    def cut(self, pruned: int) -> float | None:
        """The smallest importance kept when a step prunes the ``pruned`` smallest units: the
        line between what it prunes (at or below it) and what it keeps (at or above it); None
        when it prunes every unit."""
        if pruned >= self.count:
            return None
        return self.value(max(pruned, 0))

    def histogram(self, bins: int = 40) -> tuple[np.ndarray, np.ndarray]:
        """``(edges, counts)`` of the positive finite importances over ``bins`` log-spaced bins
        (``len(edges) == bins + 1``; empty arrays when none is positive). Exactly-zero units
        are :attr:`zeros`, outside the bins."""
        first, last = self.zeros, self.finite
        if last <= first:
            return np.zeros(0), np.zeros(0, dtype=np.int64)
        edges = torch.tensor(log_edges(self.value(first), self.value(last - 1), bins),
                             dtype=self.dtype)
        at = torch.searchsorted(self.keys, edges.view(self.keys.dtype).to(self.keys.device))
        at[-1] = last  # the last bin is closed: it holds the largest value
        counts = torch.diff(at).cpu().numpy().astype(np.int64)
        return edges.double().numpy(), counts

    def __repr__(self) -> str:
        top = f", max {self.value(self.finite - 1):.4g}" if self.finite else ""
        return f"Magnitudes({self.count:,} {self.unit}, {self.zeros:,} exactly 0{top})"


def _build(module: nn.Module, name: str, orders: OrderCache | None, n: Any,
           dim: int | None) -> Magnitudes:
    current = getattr(module, name).detach()  # orig * mask once pruned: what the core ranks
    mask = module._buffers.get(name + "_mask")
    if dim is None:
        order = orders.get(module, name) if orders is not None else None
        if order is not None:  # the session's own sorted |w| of the unpruned entries
            keys = order.sorted_keys
        else:
            alive = current.abs() if mask is None else current.abs()[mask != 0]
            keys = _keys(alive)
        dtype = current.dtype if current.dtype in _BITS else torch.float32
        return Magnitudes(keys, dtype, "entries", current.numel() - keys.numel(), "|w|")
    # As PruningContainer ranks a structured step: the slices the mask still keeps any of,
    # by the n-norm of the current values (the core's own slice_norms).
    dim = dim % current.dim()
    scores = None if orders is None else orders.slices(module, name, LnStructured(0.0, n, dim))
    if scores is not None:  # the session's own slice norms (the slider's), no second pass
        norms, alive_count = scores.scores, scores.alive
    else:
        _, rest = alive_slices(current, mask, dim)
        norms, alive_count = slice_norms(rest, n, dim), rest.shape[dim]
    keys = _keys(norms)
    label = f"L{n:g} norm" if isinstance(n, (int, float)) else f"{n} norm"
    return Magnitudes(keys, norms.dtype if norms.dtype in _BITS else torch.float32,
                      noun(2, slice_unit(current.dim(), dim)),
                      current.shape[dim] - alive_count, label)


class MagnitudeCache:
    """:class:`Magnitudes` by (tensor, norm, dim), rebuilt when the tensor's state changes
    (the :class:`~prune_explorer.session.preview.order_cache.OrderCache` state check); at most
    ``size`` held (the oldest dropped first)."""

    def __init__(self, size: int = 8) -> None:
        self.size = size
        self._held: dict[tuple[Any, ...], tuple[tuple[Any, ...], Magnitudes]] = {}

    def get(self, module: nn.Module, name: str, orders: OrderCache | None = None, *,
            n: Any = None, dim: int | None = None) -> Magnitudes:
        """The importances of ``module.name`` as it is now: ``|w|`` (``dim=None``) or the
        ``n``-norms of the slices along ``dim``; ``orders`` lends its sorted keys."""
        key = (id(module), name, None if dim is None else str(n), dim)
        now = _state(module, name)
        held = self._held.pop(key, None)
        if held is not None and _still(held[0], now):
            self._held[key] = held  # most recently used last
            return held[1]
        while len(self._held) >= self.size:
            del self._held[next(iter(self._held))]
        with torch.no_grad():
            mags = _build(module, name, orders, n, dim)
        self._held[key] = (now, mags)
        return mags

    def clear(self) -> None:
        """Forget everything."""
        self._held.clear()

    def __len__(self) -> int:
        return len(self._held)

    def __repr__(self) -> str:
        return f"MagnitudeCache({len(self._held)} held)"
