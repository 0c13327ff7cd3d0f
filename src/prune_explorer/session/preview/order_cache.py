"""The cache of what a slider move needs: one L1 order per tensor state, thrown away precisely.

Moving the amount slider changes only ``k``, never the order of ``|w|``. So, for a tensor in a
given state (its values and its current mask), :class:`~.l1_order.TensorOrder` (in
:mod:`.l1_order`) sorts the unpruned magnitudes
once -- stably, so equal magnitudes keep their flat order, which is exactly the session's tie rule
(lowest flat index first, see :mod:`prune_explorer.session.codegen.tie_split`) -- and keeps

* ``rank``: each unpruned entry's place in that order (-1 where already pruned);
* ``sorted_keys``: the unpruned magnitudes in ascending order.

A ``random_unstructured`` step with a fixed seed ranks fixed draws (one per unpruned entry, the
stream :func:`~prune_explorer.session.steps.seeding.draws_for` gives, largest pruned first,
ties lowest flat index first): the same structure, built from the negated draws, serves its
slider too, one order per (tensor state, seed).

Then, for any ``k``:

* a local L1 mask is ``rank >= k`` (one comparison, no selection);
* a global L1 cut over several tensors needs no order at all: the cache keeps a small
  histogram of each target's keys instead (:mod:`.global_cut`), and the
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

import torch
from torch import nn

from prune_explorer.prune.engine import SMALL, is_sharded

from ..tensors.sharded import tensor_of
from .global_cut import KeyHistogram
from .l1_order import _BITS, TensorOrder
from .slice_scores import SliceScores, slice_spec

__all__ = ["SMALL", "OrderCache", "TensorOrder"]

T = TypeVar("T")


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
    if len(state) != len(now) or not _same_bits(state[-1], now[-1]):
        return False
    return all(ref() is not None and ref() is new_ref() and version == new_version
               and device == new_device
               for (ref, version, device), (new_ref, new_version, new_device) in zip(
                   state[:-1], now[:-1], strict=True))


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two value samples hold the same bits: a NaN is its own value (``torch.equal``
    says NaN != NaN, and a tensor holding one would never find what was computed for it).
    A tensor subclass (a DTensor's sample) is compared by ``torch.equal``."""
    if type(a) is torch.Tensor and type(b) is torch.Tensor:
        return torch.equal(a.view(torch.uint8), b.view(torch.uint8))
    return torch.equal(a, b)


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


class OrderCache:
    """:class:`TensorOrder` by tensor, rebuilt whenever the tensor's state changed; and the
    :class:`~prune_explorer.session.preview.global_cut.KeyHistogram` of each global L1 target.

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
        is now (:class:`~prune_explorer.session.preview.slice_scores.SliceScores`); None where the
        core
        must decide. ``build=False``: only scores already computed."""
        spec = slice_spec(method, seed, tensor_of(module, name).dim())
        if spec is None:
            return None
        found = self._get(module, name, spec, build=build, method=method)
        return found if isinstance(found, SliceScores) else None

    def histogram(self, module: nn.Module, name: str, build: bool = True, *,
                  fresh_small: bool = True,
                  window: tuple[int, int] | None = None) -> KeyHistogram | None:
        """The key histogram of ``module.name`` as it is now (None: not a floating tensor, a
        DTensor, the cache is off, or ``build=False`` and none is cached). Tensors of at most
        ``SMALL`` entries get a fresh one, not kept (it would outweigh them), unless
        ``fresh_small`` is False and ``build`` too (then None: nothing new is built).
        ``window``: bins whose keys a histogram built now gathers in the same pass."""
        current = tensor_of(module, name)
        if self.budget <= 0 or current.dtype not in _FLOATS or is_sharded(current):
            return None
        if current.numel() <= SMALL:
            return KeyHistogram(module, name, window=window) if build or fresh_small else None
        key = (id(module), name)
        now = _state(module, name)
        found = self._hists.get(key)
        if found is not None and _still(found._state, now):
            return found
        self._hists.pop(key, None)
        if not build:
            return None
        found = KeyHistogram(module, name, now, window)
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
