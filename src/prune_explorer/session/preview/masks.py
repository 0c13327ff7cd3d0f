"""Masks computed without touching the model: the engine behind ``Session.preview``.

For one tensor, this does what ``torch.nn.utils.prune`` does inside ``apply`` -- build the method,
take the current mask (or ones) and the current tensor as importance, and, if the tensor is already
pruned, let a ``PruningContainer`` of the existing methods plus the new one combine the masks --
but never registers anything on the module (``prune.preview_mask`` and ``prune.global_masks`` do the
work, on the same fast paths as applying).

Nothing here copies the model: the cost is the mask computation itself. Given an
:class:`~prune_explorer.session.preview.order_cache.OrderCache`, L1 and seeded random_unstructured
masks
of large tensors come from the tensor's precomputed order instead (one comparison per entry, no
selection): the very mask the core computes, since both take tied entries lowest flat index
first. A global L1 preview finds its cut from the targets' cached key histograms
(:mod:`.global_cut`: no order, nothing per entry) and builds each mask
only when asked (:class:`GlobalPreview`); an apply that follows a preview installs the orders'
or the cut's masks (:func:`cached_cuts`, used by the session's transaction).

Examples
--------
>>> import torch
>>> from prune_explorer.session.preview.masks import local_mask
>>> from prune_explorer.session import Step
>>> layer = torch.nn.Linear(4, 2)
>>> mask = local_mask(layer, "weight", Step("l1_unstructured", "weight", amount=0.5))
>>> int(mask.sum()), hasattr(layer, "weight_mask")
(4, False)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from prune_explorer import prune
from prune_explorer.prune import engine

from ..steps.methods import prune_class
from ..steps.seeding import core_kwargs
from ..steps.step import Step, split_address
from ..tensors.sharded import is_dtensor, nonzero_summary, tensor_of
from .global_cut import GlobalCut, KeyHistogram, global_cut, predicted_window
from .order_cache import OrderCache, TensorOrder
from .slice_scores import SliceScores

__all__ = ["BuiltPreview", "GlobalPreview", "LocalPreview", "PreviewMasks", "cached_cuts",
           "cell_counts", "global_masks", "kept_count", "local_mask", "local_masks",
           "make_method", "slices_pruned", "window_reader"]


def make_method(method: str, settings: dict[str, Any], tensor_name: str, device: torch.device,
                seed: int | None = None) -> Any:
    """Instantiate the ``prune`` class for ``method`` with ``settings`` (and a generator seeded
    with ``seed`` for random methods)."""
    obj = prune_class(method)(**core_kwargs(method, settings, seed, device))
    obj._tensor_name = tensor_name
    return obj


def local_mask(module: nn.Module, tensor_name: str, step: Step,
               orders: OrderCache | None = None) -> torch.Tensor:
    """The mask ``step`` (a single-tensor step) would leave on ``module.<tensor_name>``."""
    return local_masks(module, tensor_name, step, orders, tensor_name)[tensor_name]


def local_masks(module: nn.Module, tensor_name: str, step: Step, orders: OrderCache | None,
                address: str, aliases: Mapping[str, str] | None = None) -> PreviewMasks:
    """``{address: the mask of local_mask}``; a :class:`LocalPreview` (built on first access)
    where the cache holds the tensor's order or slice scores. ``aliases`` (alias address ->
    listed address, as the session's) lets an alias of ``address`` read its mask too."""
    order = _local_order(module, tensor_name, step, orders)
    if order is not None:
        return LocalPreview(address, order,
                            prune._compute_nparams_toprune(step.settings["amount"], order.alive),
                            aliases=aliases)
    found = _slice_cut(module, tensor_name, step, orders)
    if found is not None:
        return LocalPreview(address, found[0], found[1], _mask_buffer(module, tensor_name),
                            aliases=aliases)
    device = tensor_of(module, tensor_name).device
    method = make_method(step.method, dict(step.settings), tensor_name, device, step.seed)
    with torch.no_grad():
        return BuiltPreview({address: prune.preview_mask(module, tensor_name, method)}, aliases)


class PreviewMasks(Mapping[str, torch.Tensor]):
    """A preview's masks by address: the base of :class:`BuiltPreview`, :class:`LocalPreview`
    and :class:`GlobalPreview`, and the one place where a tied tensor's alias is resolved.

    Iteration and ``len`` give each tensor once, under the address the session lists it by;
    every lookup (``[]``, ``in``, ``get``, :meth:`kept`, :meth:`window`,
    :meth:`slices_pruned`) also takes any of its aliases (``aliases``: alias address -> listed
    address, as ``Session``'s) and means that tensor, as everywhere in the session.

    Examples
    --------
    >>> import torch
    >>> masks = BuiltPreview({"0.weight": torch.tensor([1.0, 0.0])}, {"1.weight": "0.weight"})
    >>> list(masks), "1.weight" in masks, masks.kept("1.weight"), masks.get("2.weight")
    (['0.weight'], True, 1, None)
    """

    def __init__(self, addresses: Sequence[str], aliases: Mapping[str, str] | None) -> None:
        self._index = {a: i for i, a in enumerate(addresses)}
        # only the aliases of these tensors: a preview holds no more of the session than it needs
        self._aliases = {a: n for a, n in (aliases or {}).items() if n in self._index}

    def listed(self, address: object) -> str:
        """The address ``address`` (or the tensor it is an alias of) is listed under here.

        Raises
        ------
        KeyError
            ``address`` names no tensor of this preview.
        """
        if not isinstance(address, str) or self._aliases.get(address, address) not in self._index:
            raise KeyError(address)
        return self._aliases.get(address, address)

    def __getitem__(self, address: str) -> torch.Tensor:
        return self._mask(self.listed(address))

    def __iter__(self) -> Iterator[str]:
        return iter(self._index)

    def __contains__(self, address: object) -> bool:  # without building a mask
        return isinstance(address, str) and self._aliases.get(address, address) in self._index

    def __len__(self) -> int:
        return len(self._index)

    def kept(self, address: str) -> int:
        """Entries of ``address`` the step keeps (its mask's count of ones)."""
        return self._count_kept(self.listed(address))

    def window(self, address: str) -> Callable[[slice, slice], torch.Tensor | None] | None:
        """A reader of windows of ``address``'s kept mask that builds no whole mask, or None
        (this preview can give none: see :meth:`LocalPreview.window`)."""
        self.listed(address)
        return None

    def slices_pruned(self, address: str) -> int | None:
        """Alive slices of ``address`` a structured step prunes, when the preview tells
        without a mask; else None."""
        self.listed(address)
        return None

    def _mask(self, address: str) -> torch.Tensor:
        raise NotImplementedError

    def _count_kept(self, address: str) -> int:
        mask = self._mask(address)
        return nonzero_summary(mask)[0] if is_dtensor(mask) else int(mask.count_nonzero())


class BuiltPreview(PreviewMasks):
    """Masks computed already (the core's, for small tensors and the other methods), by
    address; see :class:`PreviewMasks` for aliases."""

    def __init__(self, masks: Mapping[str, torch.Tensor],
                 aliases: Mapping[str, str] | None = None) -> None:
        super().__init__(list(masks), aliases)
        self._masks = dict(masks)

    def _mask(self, address: str) -> torch.Tensor:
        return self._masks[address]

    def __repr__(self) -> str:
        return f"BuiltPreview({list(self._masks)})"


class LocalPreview(PreviewMasks):
    """The mask of a single-tensor step by its address, built on first access from the
    tensor's cached :class:`~prune_explorer.session.preview.order_cache.TensorOrder` (``pruned``
    first
    entries cut) or :class:`~prune_explorer.session.preview.slice_scores.SliceScores` (``pruned``
    alive
    slices cut, times the mask buffer ``kept``); :meth:`kept` and :meth:`slices_pruned` count
    without it.

    A slider step that asks for the picture's cell counts (``cell_counts``) and these counts
    thus costs no pass over the tensor. The order is not changed once built -- except by an
    apply that installs this very preview and turns the order's ranks into the next state's in
    place (:attr:`TensorOrder.generation` moves) -- so its mask is the one of the state
    previewed whenever it is built before that; after it, or once a mask buffer was written in
    place since (a slice mask multiplies it), building it is refused.

    Examples
    --------
    >>> import torch
    >>> from prune_explorer.session.preview.order_cache import OrderCache
    >>> layer = torch.nn.Linear(600, 400)
    >>> masks = LocalPreview("weight", OrderCache().get(layer, "weight"), 60_000)
    >>> masks, masks.kept("weight")
    (LocalPreview('weight', 60,000 cut, mask not built), 180000)
    >>> int(masks["weight"].count_nonzero())
    180000
    """

    def __init__(self, address: str, source: TensorOrder | SliceScores, pruned: int,
                 kept: torch.Tensor | None = None, *,
                 aliases: Mapping[str, str] | None = None) -> None:
        super().__init__((address,), aliases)
        self._address = address
        self._source = source
        self._pruned = pruned
        self._kept = kept
        self._version = None if kept is None else kept._version
        self._generation = source.generation if isinstance(source, TensorOrder) else 0
        self._built: torch.Tensor | None = None

    def _mask(self, address: str) -> torch.Tensor:
        if self._built is None:
            if isinstance(self._source, TensorOrder):
                if self._source.generation != self._generation:
                    raise RuntimeError(
                        f"LocalPreview: {address!r} was pruned as previewed since, and the "
                        "order the preview read became the new state's; preview again")
                self._built = self._source.mask(self._pruned)
            else:
                if self._kept is not None and self._kept._version != self._version:
                    raise RuntimeError(
                        f"LocalPreview: the mask of {address!r} was written to after the "
                        f"preview (version {self._version} -> {self._kept._version}); "
                        "preview again")
                self._built = self._source.mask(self._pruned, self._kept)
        return self._built

    def _count_kept(self, address: str) -> int:
        # from the order without a mask, else counted on the mask
        if isinstance(self._source, TensorOrder):
            return self._source.alive - self._pruned
        return int(self._mask(address).count_nonzero())

    def window(self, address: str) -> Callable[[slice, slice], torch.Tensor | None] | None:
        """A reader of any window of ``address``'s kept mask in the matrix layout
        (:meth:`TensorOrder.kept_window`: ``read(rows, cols)``, bool), which reads only that
        window's ranks; None where the mask must be built whole (slice scores). The reader
        gives None once an apply has consumed the order (the previewed state is gone)."""
        self.listed(address)
        source, pruned = self._source, self._pruned
        if not isinstance(source, TensorOrder):
            return None
        generation = source.generation
        return lambda rows, cols: source.kept_window(pruned, rows, cols, generation)

    def slices_pruned(self, address: str) -> int | None:
        """Alive slices of ``address`` a structured step prunes (None: not a structured step)."""
        self.listed(address)
        return None if isinstance(self._source, TensorOrder) else self._pruned

    def __repr__(self) -> str:
        built = "built" if self._built is not None else "not built"
        what = "cut" if isinstance(self._source, TensorOrder) else "slices cut"
        return f"LocalPreview({self._address!r}, {self._pruned:,} {what}, mask {built})"


def _local_order(module: nn.Module, tensor_name: str, step: Step,
                 orders: OrderCache | None) -> TensorOrder | None:
    """The cached order a local unstructured step ranks by (None: ask the core)."""
    if orders is None or step.is_global:
        return None
    if step.method == "l1_unstructured":
        return orders.get(module, tensor_name)
    if step.method == "random_unstructured" and step.seed is not None:
        return orders.get(module, tensor_name, step.seed)
    return None


def _mask_buffer(module: nn.Module, tensor_name: str) -> torch.Tensor | None:
    """``module``'s mask buffer of ``tensor_name`` (None: not pruned)."""
    if tensor_name + "_orig" not in module._parameters:
        return None
    return module._buffers.get(tensor_name + "_mask")


def _slice_cut(module: nn.Module, tensor_name: str, step: Step,
               orders: OrderCache | None) -> tuple[SliceScores, int] | None:
    """The cached slice scores a local structured step ranks by, and how many alive slices it
    prunes (None: ask the core, which also raises where the step does not fit)."""
    if orders is None or step.is_global or step.method not in (
            "ln_structured", "random_structured"):
        return None
    if step.method == "random_structured" and step.seed is None:
        return None
    current = tensor_of(module, tensor_name)
    method = make_method(step.method, dict(step.settings), tensor_name, current.device,
                         step.seed)
    scores = orders.slices(module, tensor_name, method, step.seed)
    if scores is None:
        return None
    amount = step.settings["amount"]
    if isinstance(amount, int) and not isinstance(amount, bool) and amount > scores.alive:
        return None
    return scores, prune._compute_nparams_toprune(amount, scores.alive)


class GlobalPreview(PreviewMasks):
    """The masks of a global L1 step by address, each built on first access from the step's
    :class:`~prune_explorer.session.preview.global_cut.GlobalCut` (the targets as they were when the
    preview ran); :meth:`kept` counts without a mask. See :class:`PreviewMasks` for aliases.

    A global slider step thus costs the cut (a sum of small histograms) and the shown target's
    mask only, and holds no mask it was not asked for.
    """

    def __init__(self, addresses: Sequence[str], cut: GlobalCut,
                 aliases: Mapping[str, str] | None = None) -> None:
        super().__init__(addresses, aliases)
        self._cut = cut
        self._masks: dict[str, torch.Tensor] = {}

    def _mask(self, address: str) -> torch.Tensor:
        if address not in self._masks:
            self._masks[address] = self._cut.mask(self._index[address])
        return self._masks[address]

    def _count_kept(self, address: str) -> int:
        return self._cut.kept(self._index[address])

    def zeros(self, address: str) -> int:
        """Entries of ``address`` that are exactly 0 once the step is applied (``report()``'s
        ``zeros`` after it), without a mask (:meth:`GlobalCut.zeros_after`)."""
        return self._cut.zeros_after(self._index[self.listed(address)])

    def __repr__(self) -> str:
        return f"GlobalPreview({len(self._index)} targets, {len(self._masks)} masks built)"


def kept_count(masks: Mapping[str, torch.Tensor], address: str) -> int:
    """Entries of ``address`` kept by a preview's masks, without building a lazy one."""
    if isinstance(masks, PreviewMasks):
        return masks.kept(address)
    mask = masks[address]
    return nonzero_summary(mask)[0] if is_dtensor(mask) else int(mask.count_nonzero())


def window_reader(masks: Mapping[str, torch.Tensor], address: str
                  ) -> Callable[[slice, slice], torch.Tensor | None] | None:
    """A reader of windows of ``address``'s mask that builds no whole mask
    (:meth:`LocalPreview.window`), where the preview can give one; else None."""
    return masks.window(address) if isinstance(masks, PreviewMasks) else None


def slices_pruned(masks: Mapping[str, torch.Tensor], address: str) -> int | None:
    """Alive slices of ``address`` a structured preview prunes, when its masks tell without
    being built (a :class:`LocalPreview` of slice scores); else None."""
    return masks.slices_pruned(address) if isinstance(masks, PreviewMasks) else None


def global_masks(model: nn.Module, step: Step, orders: OrderCache | None = None,
                 aliases: Mapping[str, str] | None = None) -> PreviewMasks:
    """The masks a ``global_unstructured`` step would leave on each of its targets (an alias
    in ``aliases`` reads its tensor's: see :class:`PreviewMasks`)."""
    pairs = []
    for address in step.targets:
        module_name, tensor_name = split_address(address)
        pairs.append((model.get_submodule(module_name), tensor_name))
    method = step.settings["pruning_method"]
    if orders is not None and method == "l1_unstructured":
        cached = _global_from_orders(pairs, step, orders, aliases)
        if cached is not None:
            return cached
    kwargs = core_kwargs(method, {"amount": step.settings["amount"]}, step.seed,
                         tensor_of(*pairs[0]).device)
    with torch.no_grad():
        masks = prune.global_masks(pairs, prune_class(method), **kwargs)
    return BuiltPreview(dict(zip(step.targets, masks, strict=True)), aliases)


def cached_cuts(model: nn.Module, step: Step, orders: OrderCache
                ) -> list[tuple[Any, int]] | None:
    """What a preview of ``step`` left for the apply to install, from what the cache holds for
    the targets as they are now: per target a pair ``(source, n)`` whose mask is
    ``source.mask(n)`` -- the target's order and how many of its first entries ``step``
    prunes, or, for a global L1 step, the :class:`GlobalCut` and the target's place. None:
    some target has nothing cached, or ``step`` is not an unstructured L1 or seeded
    random_unstructured step. Builds no order, no key histogram of a tensor above
    ``SMALL`` entries (a global L1 step without a preview: the core's selection is the
    lighter way to apply it and to tell how it split a tie), and none at all when every target
    is small."""
    pairs = [(model.get_submodule(split_address(a)[0]), split_address(a)[1])
             for a in step.targets]
    if step.is_global:
        if step.settings.get("pruning_method") != "l1_unstructured":
            return None
        # The core's one selection beats building histograms (a pass with a bincount per
        # target, then a gather and a mask pass), and it says how it split a tie on the way:
        # use them only where a preview cached them. On a GPU a small tensor's is not built
        # either (never cached: building it costs a host read per target); on the CPU it is
        # (small: one quick pass), beside a large target's cached one only: when every target
        # is small none is cached, and the core's selection costs no 2**16-bin passes (each a
        # parallel region that waits for a time slice on a busy CPU: a schedule's rounds on
        # DigitsMLP built 3 per step).
        fresh_small = not engine.device_path(tensor_of(*pairs[0])) and not all(
            tensor_of(m, n).numel() <= engine.SMALL for m, n in pairs)
        cut = _global_cut(pairs, step, orders, build=False, sort=False,
                          fresh_small=fresh_small)
        return None if cut is None else [(cut, i) for i in range(len(pairs))]
    seed = step.seed if step.method == "random_unstructured" else None
    if step.method not in ("l1_unstructured", "random_unstructured") or (
            step.method == "random_unstructured" and seed is None):
        return None
    order = orders.peek(*pairs[0], seed)
    if order is None:
        return None
    return [(order, prune._compute_nparams_toprune(step.settings["amount"], order.alive))]


def _global_cut(pairs: list[tuple[nn.Module, str]], step: Step, orders: OrderCache,
                build: bool = True, sort: bool = True, fresh_small: bool = True
                ) -> GlobalCut | None:
    """The cut of the global L1 step from the targets' key histograms (None: not every target
    has one, or the core must decide; ``sort``: as :func:`global_cut`'s; ``fresh_small``: as
    :meth:`OrderCache.histogram`'s)."""
    # the large targets first: a small one's fresh histogram (a pass and 2**16 bins) is built
    # only once every large one has its histogram
    small = [tensor_of(m, n).numel() <= engine.SMALL for m, n in pairs]
    hists: list[Any] = [None] * len(pairs)
    window: tuple[int, int] | None = None  # a preview's first pass: the cut's window too
    predicted = False
    for i in sorted(range(len(pairs)), key=small.__getitem__):
        if build and sort and not small[i] and not predicted and \
                orders.histogram(*pairs[i], False) is None:
            window, predicted = predicted_window(pairs, step.settings["amount"]), True
        hists[i] = orders.histogram(*pairs[i], build, fresh_small=fresh_small, window=window)
        if hists[i] is None:
            return None
    ready: list[KeyHistogram] = hists
    pruned = prune._compute_nparams_toprune(step.settings["amount"], sum(h.alive for h in ready))
    with torch.no_grad():
        return global_cut(pairs, ready, pruned, sort)


def _global_from_orders(pairs: list[tuple[nn.Module, str]], step: Step, orders: OrderCache,
                        aliases: Mapping[str, str] | None) -> GlobalPreview | None:
    """Global L1 masks, lazily, from the targets' key histograms (None: the core decides)."""
    cut = _global_cut(pairs, step, orders)
    return None if cut is None else GlobalPreview(step.targets, cut, aliases)


def cell_counts(model: nn.Module, step: Step, address: str, orders: OrderCache,
                row_edges: np.ndarray, col_edges: np.ndarray,
                alive: bool = False) -> np.ndarray | None:
    """Entries of ``address`` that stay kept after ``step``, per display cell, from the order
    (``alive=True``: kept and not exactly 0; see :meth:`TensorOrder.kept_per_cell`), or, for
    a local structured step, from the slice scores (:meth:`SliceScores.kept_per_cell`).

    The cells are blocks of the tensor seen as ``(shape[0], numel / shape[0])``, row-major (the
    matrix view of the pictures). None when the cache cannot tell (neither an L1 step, nor a
    local seeded random_unstructured, ln_structured or seeded random_structured step, or a
    tensor the cache does not hold): then pool the mask.
    """
    if address not in step.targets:
        return None
    pairs = [(model.get_submodule(split_address(a)[0]), split_address(a)[1])
             for a in step.targets]
    if step.is_global:
        if step.settings.get("pruning_method") != "l1_unstructured":
            return None
        found_cut = _global_cut(pairs, step, orders)
        at = step.targets.index(address)
        shown = orders.get(*pairs[at])  # the shown target's order only
        if found_cut is None or shown is None or shown.alive != found_cut.alive[at]:
            return None
        order, cut = shown, found_cut.pruned(at)
    else:
        sliced = _slice_cut(*pairs[0], step, orders)
        if sliced is not None:
            module, tensor_name = pairs[0]
            scores, cut = sliced
            if int(row_edges[-1]) != scores.shape[0] or int(col_edges[-1]) * scores.shape[0] \
                    != math.prod(scores.shape):
                return None
            return scores.kept_per_cell(cut, row_edges, col_edges, getattr(module, tensor_name),
                                        _mask_buffer(module, tensor_name), alive=alive)
        found = _local_order(*pairs[0], step, orders)
        if found is None:
            return None
        order = found
        cut = prune._compute_nparams_toprune(step.settings["amount"], order.alive)
    rows, cols = np.diff(row_edges), np.diff(col_edges)
    if int(row_edges[-1]) != order.shape[0] or int(rows.sum() * cols.sum()) != order.rank.numel():
        return None
    return order.kept_per_cell(cut, row_edges, col_edges, alive=alive)
