"""The pruning methods: settings plus one pure ``compute_mask(t, default_mask)`` each.

Which entries or slices go is decided by :func:`._select.select`, the one selection routine and
tie rule; attaching to a module, chaining and the forward hook live in :mod:`._base`.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.utils.prune as _torch_prune
from torch import nn

from . import _select_device
from ._base import (
    BasePruningMethod,
    PruningContainer,
    _is_all_ones_view,
    checks_its_settings,
    times_default,
)
from ._select import SMALL, resolve_ties, select, sorted_for_cut
from .validation import (
    ShapeMismatchError,
    check,
    check_dim,
    check_norm_rank,
    check_same_device,
    check_structured,
    count_to_prune,
    problem,
)

__all__ = [
    "BasePruningMethod",
    "CustomFromMask",
    "Identity",
    "L1Unstructured",
    "LnStructured",
    "PruningContainer",
    "RandomStructured",
    "RandomUnstructured",
]


class Identity(BasePruningMethod, _torch_prune.Identity):
    """Prune nothing: attach the ``name_orig``/``name_mask`` machinery with an all-ones mask.

    Examples
    --------
    >>> import torch
    >>> from prune_explorer import prune
    >>> layer = torch.nn.Linear(3, 2)
    >>> _ = prune.Identity.apply(layer, "weight")
    >>> bool(layer.weight_mask.all())
    True
    """

    _sharded_kind = "identity"  # its algorithm on DTensors (see _sharded._kind)

    PRUNING_TYPE = "unstructured"

    def compute_mask(self, t: torch.Tensor, default_mask: torch.Tensor) -> torch.Tensor:
        return default_mask

    # Each class's apply takes torch's documented arguments for that method, narrower than the
    # base's (*args, **kwargs): the [override] ignores here and below are deliberate.
    @classmethod
    def apply(cls, module: nn.Module, name: str) -> BasePruningMethod:  # type: ignore[override]
        """Attach an :class:`Identity` to ``module.name``."""
        return super().apply(module, name)


class _RandomDraws:
    """Uniform [0, 1) draws exactly as torch makes them, or from ``generator`` when given."""

    generator: torch.Generator | None

    def _draw_like(self, t: torch.Tensor) -> torch.Tensor:
        if self.generator is None:
            return torch.rand_like(t)
        return torch.rand(t.shape, generator=self.generator, dtype=t.dtype, device=t.device)

    def __getstate__(self) -> dict[str, Any]:
        # Generators are not picklable; the mask is computed already, so none is needed later.
        state = dict(self.__dict__)
        state["generator"] = None
        return state


class _Unstructured(BasePruningMethod):
    """What the two unstructured methods share: prune the ``amount`` entries whose keys come
    first -- the smallest keys, or the largest ones when ``_LARGEST`` -- under the tie rule
    ``ties`` (see :mod:`prune_explorer.prune._select`)."""

    _LARGEST: bool
    #: rank by |keys| (computed piece by piece inside the selection, never as a tensor)
    _MAGNITUDE: bool = False
    #: the keys are never negative nor NaN (uniform draws): |keys| ranks them as they are, and
    #: the device path's integer keys of |keys| take fewer operations than of signed keys
    _NONNEGATIVE: bool = False
    amount: Any
    ties: str | None

    def _keys(self, t: torch.Tensor) -> torch.Tensor:
        """The keys of ``t``'s entries (flat order), ranked as they are or by magnitude."""
        raise NotImplementedError

    def compute_mask(self, t: torch.Tensor, default_mask: torch.Tensor) -> torch.Tensor:
        if torch.is_grad_enabled():  # called directly: the selection records no graph
            with torch.no_grad():
                return self.compute_mask(t, default_mask)
        k = count_to_prune(self.amount, t.nelement(), self.where, "prunable entries")
        if k == 0:
            return default_mask.clone(memory_format=torch.contiguous_format)
        keys = self._keys(t).ravel()  # flat, contiguous (a view where it can be)
        dtype = default_mask.dtype if default_mask.dtype.is_floating_point else torch.float32
        ties = resolve_ties(self.ties)
        cut = None if ties != "index" else \
            sorted_for_cut(keys, k, largest=self._LARGEST, magnitude=self._MAGNITUDE)
        if cut is not None:
            # the first k at once: the mask is one fill and one write of the first k's
            # zeros, over the keys' sorted copy where there is one (fresh, of their width)
            device = default_mask.device
            values = cut.scratch
            if values is None or values.device != device:
                # the mask in t's shape, written through a flat view: a ``*_like`` factory
                # (one given a shape costs twice the time), no argument it does not need, and
                # no view given a shape (several times the cost of ``view(-1)``)
                if t.dtype == dtype and t.device == device and t.is_contiguous():
                    kept = torch.ones_like(t)
                else:
                    kept = torch.ones_like(t, dtype=dtype, device=device,
                                           memory_format=torch.contiguous_format)
                if cut.ranked.device != device:
                    cut = cut._replace(ranked=cut.ranked.to(device))
                cut.zero_first(kept.view(-1))
            else:
                if values.dtype == dtype:
                    out = values
                elif values.element_size() == dtype.itemsize:
                    out = values.view(dtype)
                else:
                    out = torch.empty(values.shape, dtype=dtype, device=device)
                out.fill_(1)
                kept = cut.zero_first(out).view_as(t)
            # times the default mask (nothing to do for a tensor's first pruning)
            return kept if _is_all_ones_view(default_mask) else times_default(kept, default_mask)
        if keys.dtype == dtype and keys.device == default_mask.device and not self._MAGNITUDE:
            out = keys  # our own draws: the mask is written over them
        else:
            out = torch.empty(keys.shape, dtype=dtype, device=default_mask.device)
        # the mask-to-be is the selection's scratch (device path: its integer keys)
        scratch = [out] if out is not keys and out.device == keys.device else None
        magnitude = self._MAGNITUDE or (self._NONNEGATIVE and keys.numel() > SMALL
                                        and _select_device.wanted(keys))
        chosen = select([keys], k, largest=self._LARGEST, ties=ties,
                        magnitude=magnitude, scratch=scratch)
        kept = chosen.write_kept(keys, out)
        return times_default(kept.view_as(t), default_mask)

    def _settings(self) -> dict[str, Any]:
        out: dict[str, Any] = {"amount": self.amount}
        if self.ties is not None:
            out["ties"] = self.ties
        return out


@checks_its_settings
class RandomUnstructured(_RandomDraws, _Unstructured, _torch_prune.RandomUnstructured):
    """Prune ``amount`` entries chosen uniformly at random.

    Draws exactly what torch draws (``torch.rand_like(t)``, then the ``amount`` largest draws are
    pruned), so after the same ``torch.manual_seed`` the draws are torch's; where draws tie at the
    cut, ``ties`` decides (default: lowest flat index first; ``"torch"``: torch's own choice).

    Parameters
    ----------
    amount : int or float
        Count (int >= 0) or fraction in [0, 1] of the entries to prune.
    generator : torch.Generator, optional
        Keyword only; on the same device as the tensor. Default: the global generator.
    ties : {"index", "torch"}, optional
        Keyword only; default: the rule of the enclosing ``prune.tie_break`` block ("index").

    Examples
    --------
    >>> import torch
    >>> from prune_explorer import prune
    >>> m = prune.RandomUnstructured(amount=3).compute_mask(torch.ones(2, 4), torch.ones(2, 4))
    >>> int((m == 0).sum())
    3
    """

    _sharded_kind = "random"  # its algorithm on DTensors (see _sharded._kind)

    PRUNING_TYPE = "unstructured"
    _LARGEST = True
    _NONNEGATIVE = True

    def __init__(self, amount: float | int, *, generator: torch.Generator | None = None,
                 ties: str | None = None) -> None:
        where = type(self).__name__
        self.amount = check(where, "amount", amount)
        # None, the default, passes its rule: checked only when given
        self.generator = None if generator is None else check(where, "generator", generator)
        self.ties = None if ties is None else check(where, "ties", ties)

    _keys = _RandomDraws._draw_like

    @classmethod
    def apply(  # type: ignore[override]
        cls, module: nn.Module, name: str, amount: float | int, *,
        generator: torch.Generator | None = None, ties: str | None = None,
    ) -> BasePruningMethod:
        """Attach a :class:`RandomUnstructured` to ``module.name``."""
        return super().apply(module, name, amount=amount, generator=generator, ties=ties)


@checks_its_settings
class L1Unstructured(_Unstructured, _torch_prune.L1Unstructured):
    """Prune the ``amount`` entries with the smallest absolute value (or importance score).

    Same mask as torch's whenever no two entries tie at the cut; where they do, the same number
    of entries, the lowest flat indices first (``ties="torch"``: exactly torch's choice).

    Parameters
    ----------
    amount : int or float
        Count (int >= 0) or fraction in [0, 1] of the entries to prune.
    ties : {"index", "torch"}, optional
        Keyword only; default: the rule of the enclosing ``prune.tie_break`` block ("index").

    Examples
    --------
    >>> import torch
    >>> from prune_explorer import prune
    >>> t = torch.tensor([[0.1, -2.0], [0.5, -0.3]])
    >>> prune.L1Unstructured(amount=0.5).compute_mask(t, torch.ones_like(t)).tolist()
    [[0.0, 1.0], [1.0, 0.0]]
    """

    _sharded_kind = "l1"  # its algorithm on DTensors (see _sharded._kind)

    PRUNING_TYPE = "unstructured"
    _LARGEST = False
    _MAGNITUDE = True

    def __init__(self, amount: float | int, *, ties: str | None = None) -> None:
        where = type(self).__name__
        self.amount = check(where, "amount", amount)
        # None, the default, passes its rule: checked only when given
        self.ties = None if ties is None else check(where, "ties", ties)

    def _keys(self, t: torch.Tensor) -> torch.Tensor:
        return t  # ranked by |t|

    @classmethod
    def apply(  # type: ignore[override]
        cls, module: nn.Module, name: str, amount: float | int,
        importance_scores: torch.Tensor | None = None, *, ties: str | None = None,
    ) -> BasePruningMethod:
        """Attach an :class:`L1Unstructured` to ``module.name``."""
        return super().apply(module, name, amount=amount, importance_scores=importance_scores,
                             ties=ties)


class _Structured(BasePruningMethod):
    """Prune ``amount`` whole slices along ``dim``."""

    amount: Any
    dim: int

    def _slices(self, t: torch.Tensor) -> tuple[int, int]:
        """(dim as a non-negative index, number of slices to prune) for ``t``."""
        where = self.where
        check_structured(t, where, self._tensor_name)
        dim = check_dim(self.dim, t.dim(), where)
        return dim, count_to_prune(self.amount, t.shape[dim], where,
                                   f"prunable slices along dim {self.dim}")

    @staticmethod
    def _mask(t: torch.Tensor, dim: int, keep: torch.Tensor, default_mask: torch.Tensor
              ) -> torch.Tensor:
        """Mask of ``t``'s dtype: ``default_mask`` where ``keep`` (0/1 per slice) along ``dim``."""
        shape = [1] * t.dim()
        shape[dim] = t.shape[dim]
        # one pass: broadcast and converted while written (times_default then reuses it);
        # arguments only where needed (each one parsed costs a call a few percent)
        if t.is_contiguous() and t.device == default_mask.device:
            kept = torch.empty_like(t)
        else:
            kept = torch.empty_like(t, device=default_mask.device,
                                    memory_format=torch.contiguous_format)
        kept.copy_(keep.view(shape).expand_as(t))
        return times_default(kept, default_mask, dtype=t.dtype)


@checks_its_settings
class RandomStructured(_RandomDraws, _Structured, _torch_prune.RandomStructured):
    """Prune ``amount`` whole slices along ``dim`` (e.g. output channels), chosen at random.

    Draws one score per slice from the CPU generator, as torch does, and prunes the slices whose
    draw is at most the ``amount``-th smallest (torch's rule), so seeded runs match torch's masks
    on any device. ``generator=`` (keyword) draws from your own generator.

    Examples
    --------
    >>> import torch
    >>> from prune_explorer import prune
    >>> m = prune.RandomStructured(amount=2, dim=0).compute_mask(torch.ones(4, 3), torch.ones(4, 3))
    >>> int((m.sum(dim=1) == 0).sum())
    2
    """

    _sharded_kind = "random_structured"  # its algorithm on DTensors (see _sharded._kind)

    PRUNING_TYPE = "structured"

    def __init__(
        self, amount: float | int, dim: int = -1, *, generator: torch.Generator | None = None
    ) -> None:
        where = type(self).__name__
        self.amount = check(where, "amount", amount)
        self.dim = check(where, "dim", dim)
        # None, the default, passes its rule: checked only when given
        self.generator = None if generator is None else check(where, "generator", generator)

    def compute_mask(self, t: torch.Tensor, default_mask: torch.Tensor) -> torch.Tensor:
        dim, k = self._slices(t)
        if k == 0:
            return default_mask
        keep = self.keep_slices(self.slice_draws(t.shape[dim]), k)
        return self._mask(t, dim, keep if t.is_cpu else keep.to(t.device), default_mask)

    def slice_draws(self, size: int) -> torch.Tensor:
        """The ``size`` scores this method draws, one per slice (CPU), as torch draws them."""
        if self.generator is None:
            prob = torch.rand(size)
        else:
            prob = torch.rand(size, generator=self.generator, device=self.generator.device)
        return prob if prob.is_cpu else prob.cpu()

    @staticmethod
    def keep_slices(draws: torch.Tensor, k: int) -> torch.Tensor:
        """Which slices stay (bool) when ``k >= 1`` are pruned by their ``draws`` (torch's
        rule: pruned are those at most the ``k``-th smallest draw)."""
        return draws > torch.kthvalue(draws, k)[0]

    def _settings(self) -> dict[str, Any]:
        return {"amount": self.amount, "dim": self.dim}

    @classmethod
    def apply(  # type: ignore[override]
        cls, module: nn.Module, name: str, amount: float | int, dim: int = -1, *,
        generator: torch.Generator | None = None,
    ) -> BasePruningMethod:
        """Attach a :class:`RandomStructured` to ``module.name``."""
        return super().apply(module, name, amount=amount, dim=dim, generator=generator)


def _exact_norms_wanted(t: torch.Tensor) -> bool:
    """Whether :func:`slice_norms` accumulates ``t`` in float64: 2-byte floats off the CPU
    (devices whose own bf16/fp16 reductions round in their own order). On the CPU, torch's
    norm already gives the correctly rounded norm in the tested cases
    (tests/prune/test_prune_device_path.py) and a float64 pass there is ~50x slower."""
    return not t.is_cpu and t.element_size() == 2 and t.is_floating_point()


def slice_norms(t: torch.Tensor, n: Any, dim: int) -> torch.Tensor:
    """The ``n``-norm of each slice of ``t`` along ``dim`` (over all other dims), as torch.norm
    computes it. On a non-CPU device, 2-byte floats are accumulated in float64 and rounded to
    ``t``'s dtype once: the norms the CPU's torch.norm gives, not the device's own rounding
    (one tie rule on every device)."""
    others = [d for d in range(t.dim()) if d != dim]
    if _exact_norms_wanted(t) and n != "nuc":
        order = 2 if n == "fro" else n
        return torch.linalg.vector_norm(t, ord=order, dim=others,
                                        dtype=torch.float64).to(t.dtype)
    if type(n) in (int, float) and type(t) in _PLAIN_TENSORS and t.layout is torch.strided \
            and (t.is_cpu or t.is_cuda):
        # the call torch.norm makes for a numeric order there, without its Python layers
        return torch.linalg.vector_norm(t, n, others)
    return torch.norm(t, p=n, dim=others)


_PLAIN_TENSORS = (torch.Tensor, nn.Parameter)


@checks_its_settings
class LnStructured(_Structured, _torch_prune.LnStructured):
    """Prune the ``amount`` slices along ``dim`` with the smallest ``n``-norm.

    ``n`` is any order ``torch.norm`` takes: a number (``inf``, ``-inf`` included), ``'fro'``,
    or ``'nuc'`` for 3-D tensors. The norm of each slice is computed over all other dims. The
    slices kept are torch's (the ``topk`` of the norms) wherever no two norms tie across the cut;
    where they do, the same number is kept, the tied slices of lowest index first, on every
    device (torch's ``topk`` picks among tied norms differently on a CPU and a GPU). Inside
    ``prune.tie_break("torch")``: torch's own ``topk`` choice on the tensor's device.

    Examples
    --------
    >>> import torch
    >>> from prune_explorer import prune
    >>> t = torch.tensor([[1.0, 1.0], [0.1, 0.2], [3.0, 0.0]])
    >>> prune.LnStructured(amount=1, n=2, dim=0).compute_mask(t, torch.ones_like(t)).tolist()
    [[1.0, 1.0], [0.0, 0.0], [1.0, 1.0]]
    """

    _sharded_kind = "ln"  # its algorithm on DTensors (see _sharded._kind)

    PRUNING_TYPE = "structured"

    def __init__(self, amount: float | int, n: Any, dim: int = -1) -> None:
        where = type(self).__name__
        self.amount = check(where, "amount", amount)
        self.n = check(where, "n", n)
        self.dim = check(where, "dim", dim)

    def compute_mask(self, t: torch.Tensor, default_mask: torch.Tensor) -> torch.Tensor:
        dim, k = self._slices(t)
        check_norm_rank(self.n, t.dim(), self.where)
        if k == 0:
            return default_mask
        norms = slice_norms(t, self.n, dim)
        ties = resolve_ties(None)
        # a small first pruning: the kept slices filled in (two operations); a large one
        # writes its mask in one pass below (the fill would write it one and a half times)
        if t.numel() <= SMALL and _is_all_ones_view(default_mask):
            kept = self._kept_by_sorting(norms, k, ties)
            if kept is not None:
                mask = torch.zeros_like(t, device=default_mask.device,
                                        memory_format=torch.contiguous_format)
                return mask.index_fill_(dim, kept.to(mask.device), 1)
        return self._mask(t, dim, self.keep_slices(norms, k, ties), default_mask)

    @staticmethod
    def keep_slices(norms: torch.Tensor, k: int, ties: str = "index") -> torch.Tensor:
        """Which slices stay (bool) when the ``k`` with the smallest ``norms`` are pruned.

        The ``norms.numel() - k`` largest norms are kept (NaN counts as the largest, as in
        ``torch.topk``); among norms tied at the cut, the lowest slice indices are kept first
        (``ties="index"``: one answer on every device), or torch's own ``topk`` choice
        (``ties="torch"``, which differs between a CPU and a GPU).

        >>> LnStructured.keep_slices(torch.tensor([2.0, 1.0, 2.0, 2.0, 3.0]), 2).tolist()
        [True, False, True, False, True]
        """
        # (inside a session step, the selection records whether tied norms straddled the cut)
        kept = LnStructured._kept_by_sorting(norms, k, ties)
        if kept is not None:
            flags = torch.zeros_like(norms, dtype=torch.bool)
            return flags.index_fill_(0, kept, True)
        return select([norms], norms.numel() - k, largest=True, ties=ties).selected(norms)

    @staticmethod
    def _kept_by_sorting(norms: torch.Tensor, k: int, ties: str) -> torch.Tensor | None:
        """The indices of the slices :meth:`keep_slices` keeps, where :func:`._select.select`
        would take them from one stable sort (the index rule, a vector that
        :func:`._select.sorted_for_cut` sorts, one slice kept at least); None elsewhere."""
        kept = norms.numel() - k
        cut = None if ties != "index" or kept <= 0 else \
            sorted_for_cut(norms, kept, largest=True, magnitude=False)
        return None if cut is None else cut.ranked[:kept]

    def _settings(self) -> dict[str, Any]:
        return {"amount": self.amount, "n": self.n, "dim": self.dim}

    @classmethod
    def apply(  # type: ignore[override]
        cls, module: nn.Module, name: str, amount: float | int, n: Any, dim: int,
        importance_scores: torch.Tensor | None = None,
    ) -> BasePruningMethod:
        """Attach an :class:`LnStructured` to ``module.name``."""
        return super().apply(module, name, amount=amount, n=n, dim=dim,
                             importance_scores=importance_scores)


@checks_its_settings
class CustomFromMask(BasePruningMethod, _torch_prune.CustomFromMask):
    """Prune where a user-given ``mask`` is 0 (on top of any earlier pruning).

    Examples
    --------
    >>> import torch
    >>> from prune_explorer import prune
    >>> keep = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    >>> prune.CustomFromMask(keep).compute_mask(torch.ones(2, 2), torch.ones(2, 2)).tolist()
    [[1.0, 0.0], [0.0, 1.0]]
    """

    _sharded_kind = "custom"  # its algorithm on DTensors (see _sharded._kind)

    PRUNING_TYPE = "global"

    def __init__(self, mask: torch.Tensor) -> None:
        self.mask = check(type(self).__name__, "mask", mask)

    def compute_mask(self, t: torch.Tensor, default_mask: torch.Tensor) -> torch.Tensor:
        if default_mask.shape != self.mask.shape:
            raise ShapeMismatchError(problem(
                self.where, "mask", f"the shape of the pruned tensor {tuple(default_mask.shape)}",
                tuple(self.mask.shape)))
        mask = self.mask
        if mask.device != default_mask.device:  # (the check named only where it fails)
            check_same_device(mask, default_mask, self.where, "mask", "the pruned tensor")
        return default_mask * (mask if mask.dtype == default_mask.dtype else
                               mask.to(default_mask.dtype))

    def _settings(self) -> dict[str, Any]:
        kept = int(torch.count_nonzero(self.mask))
        return {"mask": f"<{tuple(self.mask.shape)}, {kept} kept>"}

    @classmethod
    def apply(  # type: ignore[override]
        cls, module: nn.Module, name: str, mask: torch.Tensor
    ) -> BasePruningMethod:
        """Attach a :class:`CustomFromMask` to ``module.name``."""
        return super().apply(module, name, mask=mask)
