"""Pruning method classes: settings plus one pure ``compute_mask(t, default_mask)``.

A method never touches a module by itself; :meth:`BasePruningMethod.apply` computes the mask first
and then hands it to :mod:`._module`, which is the only code that changes modules.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import torch
import torch.nn.utils.prune as _torch_prune
from torch import nn

from . import _fsdp, _module, _sharded
from ._context import caller, calling
from ._select import SMALL, exact_ties, select_smallest, supports_fast_select
from ._validation import (
    ShapeMismatchError,
    check_amount,
    check_amount_fits,
    check_dim,
    check_dim_type,
    check_n,
    check_same_shape,
    check_structured,
    nparams_to_prune,
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


class BasePruningMethod(_torch_prune.BasePruningMethod, ABC):
    """Base class of every pruning method.

    Every class here also subclasses its namesake in ``torch.nn.utils.prune`` -- for
    ``isinstance`` only: all behaviour is defined here and overrides torch's. That keeps the two
    interoperable both ways (torch's ``prune.remove`` and ``prune.is_pruned`` recognise our hooks,
    ours recognise torch's, and ``isinstance(hook, torch.nn.utils.prune.PruningContainer)`` holds).

    Subclasses set ``PRUNING_TYPE`` (``"unstructured"``, ``"structured"`` or ``"global"``) and
    implement :meth:`compute_mask`. Once attached to a module (by :meth:`apply`) a method is also
    that module's forward pre-hook: before each forward it recomputes ``name = name_mask *
    name_orig``.

    Examples
    --------
    >>> import torch
    >>> from prune_explorer import prune
    >>> class KeepPositive(prune.BasePruningMethod):
    ...     PRUNING_TYPE = "unstructured"
    ...     def compute_mask(self, t, default_mask):
    ...         return default_mask * (t > 0).to(default_mask.dtype)
    >>> layer = torch.nn.Linear(3, 2)
    >>> _ = KeepPositive.apply(layer, "weight")
    >>> bool((layer.weight >= 0).all())
    True
    """

    PRUNING_TYPE: str = "unstructured"
    _tensor_name: str | None = None

    def __call__(self, module: nn.Module, inputs: Any) -> None:
        setattr(module, self._require_name("forward pre-hook"), self.apply_mask(module))

    @abstractmethod
    def compute_mask(self, t: torch.Tensor, default_mask: torch.Tensor) -> torch.Tensor:
        """Return the mask for ``t``: ``default_mask`` with this method's choices zeroed.

        Pure: reads ``t`` (importance scores) and ``default_mask`` (the mask so far), changes
        neither.
        """

    def _require_name(self, action: str) -> str:
        if self._tensor_name is None:
            raise _module.PruningStateError(
                f"{type(self).__name__}.{action}: the method is not attached to a tensor yet; "
                "attach it with apply(module, name, ...) first"
            )
        return self._tensor_name

    def apply_mask(self, module: nn.Module) -> torch.Tensor:
        """The pruned tensor ``name_mask * name_orig`` of ``module`` (differentiable in orig)."""
        name = self._require_name("apply_mask")
        mask = getattr(module, name + "_mask")
        orig = getattr(module, name + "_orig")
        mask = _fsdp.unshard_like(mask, orig)  # FSDP2 forward: orig is unsharded
        return mask.to(dtype=orig.dtype) * orig

    @classmethod
    def apply(
        cls,
        module: nn.Module,
        name: str,
        *args: Any,
        importance_scores: torch.Tensor | None = None,
        **kwargs: Any,
    ) -> BasePruningMethod:
        """Prune tensor ``name`` of ``module`` with a new ``cls(*args, **kwargs)``.

        The mask is computed before the module is changed; if anything fails the module is left
        exactly as it was. If ``name`` is pruned already the new method joins a
        :class:`PruningContainer` and prunes only what is still unpruned.

        Returns
        -------
        BasePruningMethod
            The forward pre-hook now in charge of ``name`` (the new method, or the container).
        """
        where = caller(f"{cls.__name__}.apply")
        with calling(where):
            current = _module.current_tensor(module, name, where)
            old = _module.find_hook(module, name, where)
            method = cls(*args, **kwargs)
            method._tensor_name = name
            if importance_scores is not None:
                check_same_shape(importance_scores, current, where, "importance_scores",
                                 f"parameter {name!r}")
                scores = importance_scores
            else:
                scores = current
            mask = method._mask_for(module, name, scores, current, old)
            return _module.install(module, name, method, mask, old)

    def _mask_for(
        self,
        module: nn.Module,
        name: str,
        scores: torch.Tensor,
        current: torch.Tensor,
        old: tuple[int, Any] | None,
    ) -> torch.Tensor:
        """The mask ``apply`` would install, computed without changing anything."""
        if _sharded.is_sharded(current):  # DTensor (e.g. FSDP2): collective, see _sharded
            return _sharded.mask_for(self, module, name, scores, current, old,
                                     caller(type(self).__name__))
        with torch.no_grad():
            if old is None:
                fast = getattr(type(self), "_fresh_mask", None)
                if fast is not None and self._has_own_compute_mask():
                    return fast(self, scores, current)
                return self.compute_mask(scores, default_mask=torch.ones_like(current))
            previous = old[1]
            members = tuple(previous) if hasattr(previous, "_pruning_methods") else (previous,)
            chain = PruningContainer(*members, self)
            return chain.compute_mask(scores, default_mask=getattr(module, name + "_mask"))

    def _has_own_compute_mask(self) -> bool:
        # Fast paths are exact replacements for *our* compute_mask; a subclass override or a
        # mock.patch of compute_mask must be honoured, so they only run when it is untouched.
        own = _COMPUTE_MASK.get(type(self))
        return own is not None and type(self).compute_mask is own

    def prune(
        self,
        t: torch.Tensor,
        default_mask: torch.Tensor | None = None,
        importance_scores: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Return ``t * mask`` without attaching anything to a module."""
        where = f"{type(self).__name__}.prune"
        if importance_scores is not None:
            check_same_shape(importance_scores, t, where, "importance_scores", "tensor t")
        else:
            importance_scores = t
        if default_mask is None:
            default_mask = torch.ones_like(t)
        with calling(where):
            return t * self.compute_mask(importance_scores, default_mask=default_mask)

    def remove(self, module: nn.Module) -> None:
        """Make this method's pruning permanent on ``module`` (the hook itself is not removed;
        use :func:`prune_explorer.prune.remove`)."""
        _module.uninstall(module, self._require_name("remove"), keep_pruning=True)

    def _settings(self) -> dict[str, Any]:
        return {}

    def __repr__(self) -> str:
        parts = [f"{k}={v!r}" for k, v in self._settings().items()]
        if self._tensor_name is not None:
            parts.append(f"tensor={self._tensor_name!r}")
        return f"{type(self).__name__}({', '.join(parts)})"


class PruningContainer(BasePruningMethod, _torch_prune.PruningContainer):
    """The ordered chain of methods applied to one tensor (iterative pruning).

    Each new method only sees what the chain has left unpruned: unstructured methods the
    remaining entries, structured ones the remaining slices along their ``dim``, ``"global"``
    ones the whole tensor.

    Examples
    --------
    >>> import torch
    >>> from prune_explorer import prune
    >>> layer = torch.nn.Linear(4, 4)
    >>> _ = prune.l1_unstructured(layer, "weight", amount=4)
    >>> _ = prune.ln_structured(layer, "weight", amount=1, n=2, dim=0)
    >>> hook = next(iter(layer._forward_pre_hooks.values()))
    >>> [type(m).__name__ for m in hook]
    ['L1Unstructured', 'LnStructured']
    """

    def __init__(self, *args: BasePruningMethod) -> None:
        self._pruning_methods: tuple[BasePruningMethod, ...] = ()
        if args and args[0] is not None:
            self._tensor_name = getattr(args[0], "_tensor_name", None)
        for method in args:
            self.add_pruning_method(method)

    def add_pruning_method(self, method: BasePruningMethod) -> None:
        """Append ``method`` to the chain (it must act on the same tensor name)."""
        if method is None:
            self._pruning_methods += (method,)  # accepted, as torch does
            return
        if not isinstance(method, _module.HOOK_TYPE):
            raise TypeError(problem("PruningContainer.add_pruning_method", "method",
                                    "a BasePruningMethod", type(method).__name__))
        name = getattr(method, "_tensor_name", None)
        if self._tensor_name is None:
            self._tensor_name = name
        elif name != self._tensor_name:
            raise ValueError(problem(
                "PruningContainer.add_pruning_method", "method",
                f"acting on the container's tensor {self._tensor_name!r}",
                f"{type(method).__name__} acting on {name!r}"))
        self._pruning_methods += (method,)

    def __len__(self) -> int:
        return len(self._pruning_methods)

    def __iter__(self):
        return iter(self._pruning_methods)

    def __getitem__(self, idx: int | slice) -> Any:
        return self._pruning_methods[idx]

    def compute_mask(self, t: torch.Tensor, default_mask: torch.Tensor) -> torch.Tensor:
        """Apply the *last* method of the chain to what ``default_mask`` leaves unpruned."""
        method = self._pruning_methods[-1]
        kind = method.PRUNING_TYPE
        if kind == "unstructured" and t.numel() > SMALL and getattr(
            method, "_has_own_compute_mask", lambda: False
        )():
            fast = method._mask_on_alive(t, default_mask)  # type: ignore[attr-defined]
            if fast is not None:
                return fast
        new_mask = default_mask.to(dtype=t.dtype, copy=True)
        if kind == "unstructured":
            index: Any = default_mask == 1
        elif kind == "structured":
            if not hasattr(method, "dim"):
                raise AttributeError(
                    f"PruningContainer.compute_mask: a structured method needs a `dim` attribute; "
                    f"{type(method).__name__} has none"
                )
            dim = check_dim(t, method.dim, type(method).__name__)
            others = [d for d in range(t.dim()) if d != dim]
            alive = default_mask.sum(dim=others) != 0
            index = tuple(alive if d == dim else slice(None) for d in range(t.dim()))
        elif kind == "global":
            index = tuple(slice(None) for _ in range(t.dim()))
        else:
            raise ValueError(problem("PruningContainer.compute_mask", "PRUNING_TYPE",
                                     "'unstructured', 'structured' or 'global'", kind))
        partial = method.compute_mask(t[index], default_mask=default_mask[index])
        new_mask[index] = partial.to(dtype=new_mask.dtype)
        return new_mask

    def __repr__(self) -> str:
        inner = ", ".join(repr(m) for m in self._pruning_methods)
        return f"PruningContainer([{inner}], tensor={self._tensor_name!r})"


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

    PRUNING_TYPE = "unstructured"

    def compute_mask(self, t: torch.Tensor, default_mask: torch.Tensor) -> torch.Tensor:
        return default_mask

    @classmethod
    def apply(cls, module: nn.Module, name: str) -> BasePruningMethod:  # type: ignore[override]
        """Attach an :class:`Identity` to ``module.name``."""
        return super().apply(module, name)


# ----------------------------------------------------------------------------------------------
# Unstructured selection helpers


def _zero_k(mask_flat: torch.Tensor, keys_flat: torch.Tensor, k: int, *, largest: bool) -> None:
    """torch's own rule: zero the entries of ``topk(keys, k)`` in ``mask`` (in place)."""
    idx = torch.topk(keys_flat, k=k, largest=largest).indices
    mask_flat[idx] = 0


def _pruned_entries(keys: torch.Tensor, k: int, *, largest: bool) -> torch.Tensor | None:
    """Boolean (flat) of the k entries to prune, via threshold selection; None = use topk."""
    n = keys.numel()
    if n <= SMALL or not supports_fast_select(keys.dtype):
        return None
    flat = keys.reshape(-1)
    if largest:  # random methods: must match torch's draw exactly, so ties go to topk
        if k == n:
            return torch.ones_like(flat, dtype=torch.bool)
        thr = select_smallest([flat], n - k, exact_ties=True)
        return None if thr is None else ~thr.selected(flat)
    thr = select_smallest([flat], k, exact_ties=exact_ties())
    return None if thr is None else thr.selected(flat)


def _unstructured_mask(
    keys: torch.Tensor, k: int, default_mask: torch.Tensor, *, largest: bool
) -> torch.Tensor:
    """``default_mask`` (cloned, contiguous) with the k smallest/largest ``keys`` zeroed."""
    mask = default_mask.clone(memory_format=torch.contiguous_format)
    if k == 0:
        return mask
    if keys.numel() > SMALL and supports_fast_select(keys.dtype) and keys.is_contiguous():
        # ``keys`` is a fresh tensor of ours (|t| or draws): turn it into the 0/1 "kept"
        # tensor in place and multiply (same as zeroing the pruned entries of a 0/1 mask).
        keep = _fresh_unstructured_mask(keys, k, keys, largest=largest, keys_are_buffer=True)
        return mask.mul_(keep.view(mask.shape).to(device=mask.device, dtype=mask.dtype))
    _zero_k(mask.view(-1), keys.reshape(-1), k, largest=largest)
    return mask


def _fresh_unstructured_mask(
    keys: torch.Tensor, k: int, like: torch.Tensor, *, largest: bool, keys_are_buffer: bool
) -> torch.Tensor:
    """Same as ``_unstructured_mask(keys, k, ones_like(like))`` with one allocation.

    When ``keys_are_buffer`` the keys tensor itself (already of ``like``'s dtype, device and
    shape, contiguous) becomes the mask: the comparison is written over it in place.
    """
    n = keys.numel()
    if keys_are_buffer and n > SMALL and supports_fast_select(keys.dtype) and k > 0:
        flat = keys.view(-1)
        if largest:
            thr = None if k == n else select_smallest([flat], n - k, exact_ties=True)
            if k == n:
                return keys.zero_()
            if thr is not None:  # kept = the n-k smallest, no straddling tie
                return torch.le(flat, thr.value.to(flat.device), out=flat).view_as(keys)
        else:
            thr = select_smallest([flat], k, exact_ties=exact_ties())
            if thr is not None:
                return thr.write_unselected(flat, flat).view_as(keys)
        idx = torch.topk(flat, k=k, largest=largest).indices
        keys.fill_(1)
        flat[idx] = 0
        return keys
    return _unstructured_mask(keys, k, torch.ones_like(like), largest=largest)


def _count_for(amount: Any, size: int, where: str, what: str = "units") -> int:
    check_amount_fits(amount, size, where, what)
    return nparams_to_prune(amount, size)


class _AmountMixin:
    amount: Any

    def _init_amount(self, amount: Any) -> None:
        check_amount(amount, caller(type(self).__name__))
        self.amount = amount


def _check_generator(generator: Any, where: str) -> None:
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(problem(where, "generator", "a torch.Generator or None",
                                type(generator).__name__))


class _RandomMixin:
    generator: torch.Generator | None

    def _draw_like(self, t: torch.Tensor) -> torch.Tensor:
        """Uniform [0, 1) scores of ``t``'s shape, dtype and device, as torch draws them."""
        if self.generator is None:
            return torch.rand_like(t)
        return torch.rand(t.shape, generator=self.generator, dtype=t.dtype, device=t.device)

    def __getstate__(self) -> dict[str, Any]:
        # Generators are not picklable; the mask is computed already, so none is needed later.
        state = dict(self.__dict__)
        state["generator"] = None
        return state


class _UnstructuredMixin(_AmountMixin):
    """What the two unstructured methods share; they differ only in their keys.

    The ``k`` entries with the smallest keys are pruned (``_LARGEST``: the largest).
    """

    _LARGEST: bool

    def _keys(self, t: torch.Tensor, like: torch.Tensor | None = None) -> torch.Tensor:
        """Fresh key tensor for ``t`` (of ``like``'s dtype/device/shape where it can be, so it
        can become the mask in place)."""
        raise NotImplementedError

    def _count(self, size: int) -> int:
        return _count_for(self.amount, size, caller(type(self).__name__), "entries")

    def compute_mask(self, t: torch.Tensor, default_mask: torch.Tensor) -> torch.Tensor:
        k = self._count(t.nelement())
        if k == 0:
            return default_mask.clone(memory_format=torch.contiguous_format)
        return _unstructured_mask(self._keys(t), k, default_mask, largest=self._LARGEST)

    def _fresh_mask(self, t: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
        k = self._count(t.nelement())
        if k == 0:
            return torch.ones_like(like, memory_format=torch.contiguous_format)
        keys = self._keys(t, like)
        buffer = (keys.dtype == like.dtype and keys.device == like.device
                  and keys.shape == like.shape and keys.is_contiguous())
        return _fresh_unstructured_mask(keys, k, like, largest=self._LARGEST,
                                        keys_are_buffer=buffer)

    def _settings(self) -> dict[str, Any]:
        return {"amount": self.amount}


class RandomUnstructured(
    _UnstructuredMixin, _RandomMixin, BasePruningMethod, _torch_prune.RandomUnstructured
):
    """Prune ``amount`` entries chosen uniformly at random.

    Draws exactly what torch draws (``torch.rand_like(t)``, then the ``k`` largest draws are
    pruned), so after the same ``torch.manual_seed`` the mask is the same as torch's. Pass
    ``generator=`` to draw from your own ``torch.Generator`` instead of the global one.

    Parameters
    ----------
    amount : int or float
        Count (int >= 0) or fraction in [0, 1] of the entries to prune.
    generator : torch.Generator, optional
        Keyword only; on the same device as the tensor.

    Examples
    --------
    >>> import torch
    >>> from prune_explorer import prune
    >>> m = prune.RandomUnstructured(amount=3).compute_mask(torch.ones(2, 4), torch.ones(2, 4))
    >>> int((m == 0).sum())
    3
    """

    PRUNING_TYPE = "unstructured"

    def __init__(self, amount: float | int, *, generator: torch.Generator | None = None) -> None:
        self._init_amount(amount)
        _check_generator(generator, caller(type(self).__name__))
        self.generator = generator

    _LARGEST = True

    def _keys(self, t: torch.Tensor, like: torch.Tensor | None = None) -> torch.Tensor:
        return self._draw_like(t)

    def _mask_on_alive(self, t: torch.Tensor, default_mask: torch.Tensor) -> torch.Tensor | None:
        """Container step: draw for the surviving entries exactly as torch does (one
        ``rand_like`` of the gathered vector), then scatter the choice back by position."""
        alive = (default_mask == 1).reshape(-1)
        n_alive = int(torch.count_nonzero(alive))
        k = self._count(n_alive)
        new_mask = default_mask.to(dtype=t.dtype, memory_format=torch.contiguous_format,
                                   copy=True)
        if k == 0:
            return new_mask
        prob = self._draw_like(torch.empty(n_alive, dtype=t.dtype, device=t.device))
        pruned = _pruned_entries(prob, k, largest=True)
        if pruned is None:
            pruned = torch.zeros(n_alive, dtype=torch.bool, device=t.device)
            pruned[torch.topk(prob, k=k).indices] = True
        where = torch.zeros_like(alive).masked_scatter_(alive, pruned)
        new_mask.view(-1).masked_fill_(where, 0)
        return new_mask

    @classmethod
    def apply(  # type: ignore[override]
        cls, module: nn.Module, name: str, amount: float | int, *,
        generator: torch.Generator | None = None,
    ) -> BasePruningMethod:
        """Attach a :class:`RandomUnstructured` to ``module.name``."""
        return super().apply(module, name, amount=amount, generator=generator)


class L1Unstructured(_UnstructuredMixin, BasePruningMethod, _torch_prune.L1Unstructured):
    """Prune the ``amount`` entries with the smallest absolute value (or importance score).

    Same mask as torch's whenever no two entries tie at the cut; on ties, the same number of
    entries, the lowest flat indices first (or exactly torch's choice under
    ``prune.tie_break("torch")``). Large tensors are selected by threshold instead of
    torch's full ``topk`` (see :mod:`prune_explorer.prune._select`).

    Examples
    --------
    >>> import torch
    >>> from prune_explorer import prune
    >>> t = torch.tensor([[0.1, -2.0], [0.5, -0.3]])
    >>> prune.L1Unstructured(amount=0.5).compute_mask(t, torch.ones_like(t)).tolist()
    [[0.0, 1.0], [1.0, 0.0]]
    """

    PRUNING_TYPE = "unstructured"

    _LARGEST = False

    def __init__(self, amount: float | int) -> None:
        self._init_amount(amount)

    def _keys(self, t: torch.Tensor, like: torch.Tensor | None = None) -> torch.Tensor:
        if like is None or (t.dtype, t.device, t.shape) != (like.dtype, like.device, like.shape):
            return torch.abs(t)
        return torch.abs(t, out=torch.empty(like.shape, dtype=like.dtype, device=like.device))

    def _mask_on_alive(self, t: torch.Tensor, default_mask: torch.Tensor) -> torch.Tensor | None:
        """Container step on the entries ``default_mask`` keeps, without gathering them.

        Pruned entries get a NaN key, which ranks after every number, so the k smallest keys are
        the k smallest surviving ones, in the same flat order as torch's gathered vector.
        """
        if not supports_fast_select(t.dtype):
            return None
        alive = default_mask == 1
        k = self._count(int(torch.count_nonzero(alive)))
        new_mask = default_mask.to(dtype=t.dtype, memory_format=torch.contiguous_format,
                                   copy=True)
        if k == 0:
            return new_mask
        keys = torch.abs(t).masked_fill_(~alive, float("nan")).reshape(-1)
        thr = select_smallest([keys], k, exact_ties=exact_ties())
        if thr is None:
            return None
        new_mask.view(-1).masked_fill_(thr.selected(keys), 0)
        return new_mask

    @classmethod
    def apply(  # type: ignore[override]
        cls, module: nn.Module, name: str, amount: float | int,
        importance_scores: torch.Tensor | None = None,
    ) -> BasePruningMethod:
        """Attach an :class:`L1Unstructured` to ``module.name``."""
        return super().apply(module, name, amount=amount, importance_scores=importance_scores)


def _channel_mask(
    t: torch.Tensor, dim: int, keep: torch.Tensor, default_mask: torch.Tensor
) -> torch.Tensor:
    """Mask of ``t``'s shape/dtype/layout: ``default_mask`` where ``keep[i]`` along ``dim``, else 0.

    ``keep`` is a 1-D float tensor of 0/1 of length ``t.shape[dim]``.
    """
    shape = [1] * t.dim()
    shape[dim] = t.shape[dim]
    mask = torch.empty_like(t)
    torch.mul(keep.to(device=t.device, dtype=t.dtype).view(shape),
              default_mask.to(dtype=t.dtype), out=mask)
    return mask


class _StructuredMixin:
    amount: Any
    dim: int

    def _structured_count(self, t: torch.Tensor) -> tuple[int, int]:
        where = caller(type(self).__name__)
        check_structured(t, where, getattr(self, "_tensor_name", None))
        dim = check_dim(t, self.dim, where)
        size = t.shape[dim]
        return dim, _count_for(self.amount, size, where, f"slices along dim {self.dim}")


class RandomStructured(
    _AmountMixin, _StructuredMixin, _RandomMixin, BasePruningMethod,
    _torch_prune.RandomStructured,
):
    """Prune ``amount`` whole slices along ``dim`` (e.g. output channels), chosen at random.

    Draws one score per slice from the CPU generator, as torch does, so seeded runs match
    torch's masks on any device. ``generator=`` (keyword) draws from your own generator.

    Examples
    --------
    >>> import torch
    >>> from prune_explorer import prune
    >>> m = prune.RandomStructured(amount=2, dim=0).compute_mask(torch.ones(4, 3), torch.ones(4, 3))
    >>> int((m.sum(dim=1) == 0).sum())
    2
    """

    PRUNING_TYPE = "structured"

    def __init__(
        self, amount: float | int, dim: int = -1, *, generator: torch.Generator | None = None
    ) -> None:
        self._init_amount(amount)
        check_dim_type(dim, caller(type(self).__name__))
        _check_generator(generator, caller(type(self).__name__))
        self.dim = dim
        self.generator = generator

    def compute_mask(self, t: torch.Tensor, default_mask: torch.Tensor) -> torch.Tensor:
        dim, k = self._structured_count(t)
        if k == 0:
            return default_mask
        size = t.shape[dim]
        if self.generator is None:
            prob = torch.rand(size)
        else:
            prob = torch.rand(size, generator=self.generator, device=self.generator.device)
        cut = torch.kthvalue(prob.cpu(), k=k).values
        keep = (prob.cpu() > cut).to(t.dtype)
        return _channel_mask(t, dim, keep, default_mask)

    def _settings(self) -> dict[str, Any]:
        return {"amount": self.amount, "dim": self.dim}

    @classmethod
    def apply(  # type: ignore[override]
        cls, module: nn.Module, name: str, amount: float | int, dim: int = -1, *,
        generator: torch.Generator | None = None,
    ) -> BasePruningMethod:
        """Attach a :class:`RandomStructured` to ``module.name``."""
        return super().apply(module, name, amount=amount, dim=dim, generator=generator)


class LnStructured(
    _AmountMixin, _StructuredMixin, BasePruningMethod, _torch_prune.LnStructured
):
    """Prune the ``amount`` slices along ``dim`` with the smallest ``n``-norm.

    ``n`` is any order ``torch.norm`` takes: a number (``inf``, ``-inf`` included), ``'fro'``,
    or ``'nuc'`` for 3-D tensors. The norm of each slice is computed over all other dims.

    Examples
    --------
    >>> import torch
    >>> from prune_explorer import prune
    >>> t = torch.tensor([[1.0, 1.0], [0.1, 0.2], [3.0, 0.0]])
    >>> prune.LnStructured(amount=1, n=2, dim=0).compute_mask(t, torch.ones_like(t)).tolist()
    [[1.0, 1.0], [0.0, 0.0], [1.0, 1.0]]
    """

    PRUNING_TYPE = "structured"

    def __init__(self, amount: float | int, n: Any, dim: int = -1) -> None:
        where = caller(type(self).__name__)
        self._init_amount(amount)
        check_n(n, where)
        check_dim_type(dim, where)
        self.n = n
        self.dim = dim

    def compute_mask(self, t: torch.Tensor, default_mask: torch.Tensor) -> torch.Tensor:
        dim, k = self._structured_count(t)
        check_n(self.n, caller(type(self).__name__), t, dim)
        if k == 0:
            return default_mask
        others = [d for d in range(t.dim()) if d != dim]
        norms = torch.norm(t, p=self.n, dim=others)
        kept = torch.topk(norms, k=t.shape[dim] - k, largest=True).indices
        keep = torch.zeros(t.shape[dim], dtype=t.dtype, device=t.device)
        keep[kept] = 1
        return _channel_mask(t, dim, keep, default_mask)

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

    PRUNING_TYPE = "global"

    def __init__(self, mask: torch.Tensor) -> None:
        if not isinstance(mask, torch.Tensor):
            raise TypeError(problem(caller("CustomFromMask"), "mask", "a torch.Tensor",
                                    type(mask).__name__))
        self.mask = mask

    def compute_mask(self, t: torch.Tensor, default_mask: torch.Tensor) -> torch.Tensor:
        if default_mask.shape != self.mask.shape:
            raise ShapeMismatchError(problem(
                caller("CustomFromMask"), "mask",
                f"the shape of the pruned tensor {tuple(default_mask.shape)}",
                tuple(self.mask.shape)))
        return default_mask * self.mask.to(dtype=default_mask.dtype, device=default_mask.device)

    def _settings(self) -> dict[str, Any]:
        kept = int(torch.count_nonzero(self.mask))
        return {"mask": f"<{tuple(self.mask.shape)}, {kept} kept>"}

    @classmethod
    def apply(  # type: ignore[override]
        cls, module: nn.Module, name: str, mask: torch.Tensor
    ) -> BasePruningMethod:
        """Attach a :class:`CustomFromMask` to ``module.name``."""
        return super().apply(module, name, mask=mask)


# The compute_mask each fast path stands in for (see BasePruningMethod._has_own_compute_mask).
_COMPUTE_MASK = {
    RandomUnstructured: RandomUnstructured.compute_mask,
    L1Unstructured: L1Unstructured.compute_mask,
}
