"""The machinery every pruning method shares: attaching to a module, chaining, forward hook.

:class:`BasePruningMethod` computes a mask first (``compute_mask``, pure) and then hands it to
:mod:`._module`, the only code that changes modules; :class:`PruningContainer` chains several
methods on one tensor, each seeing only what the chain left unpruned.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import Any, TypeVar

import torch
import torch.nn.utils.prune as _torch_prune
from torch import nn

from . import _fsdp, _module, _sharded
from ._dtensor import is_sharded
from ._hooks import HOOK_TYPE
from .validation import (
    CONSTRAINTS,
    METHOD_PARAMETERS,
    check,
    check_dim,
    check_same_shape,
    problem,
)

__all__ = ["BasePruningMethod", "PruningContainer", "all_ones_like", "checks_its_settings",
           "times_default"]

_M = TypeVar("_M", bound=type)

#: class name -> pruning function name (whose constraints :meth:`_create` checks)
_FUNCTION_OF = {cls: function for function, (cls, _) in METHOD_PARAMETERS.items()}
#: The ``__init__`` of the methods that check every constrained setting they take
#: (:func:`checks_its_settings`): :meth:`BasePruningMethod._create` does not check them twice.
_SELF_CHECKED: set[Any] = set()


def checks_its_settings(cls: _M) -> _M:
    """Class decorator: ``cls.__init__`` checks each setting of :data:`CONSTRAINTS` it takes,
    under the rule :meth:`BasePruningMethod._create` would check it by (a subclass with its own
    ``__init__`` is checked by ``_create`` again)."""
    _SELF_CHECKED.add(vars(cls)["__init__"])  # its own, not an inherited one
    return cls


#: One 0-d 1 per (dtype, device), the base of every :func:`all_ones_like` view: no allocation
#: (on a GPU, no launch) per call. A broadcast view cannot be written in place, so the base
#: stays 1.
_ONES: dict[tuple[torch.dtype, torch.device], torch.Tensor] = {}
#: The views :func:`all_ones_like` made, by (dtype, device) and shape: a model's layers share
#: a few shapes, and a view cannot be written (every entry is the one base value).
_VIEWS: dict[tuple[tuple[torch.dtype, torch.device], torch.Size], torch.Tensor] = {}
_VIEWS_MAX = 1024
#: Marks the views :func:`all_ones_like` makes: told apart by the mark, never by reading a
#: value (on a GPU, a read waits for every queued kernel).
_MARK = "_prune_explorer_all_ones"


def all_ones_like(t: torch.Tensor) -> torch.Tensor:
    """An all-ones mask for ``t`` as a broadcast view: the default mask of a fresh tensor,
    without allocating or filling a tensor-sized buffer (read-only)."""
    shape = t.shape
    if type(t) is not torch.Tensor and type(t) is not nn.Parameter:
        # a tensor subclass (a FakeTensor while a model is traced, say): its own ones, never
        # cached -- a cached plain tensor cannot meet it, nor it a later plain one
        own = t.new_ones(()).expand(shape)
        setattr(own, _MARK, True)
        return own
    key = (t.dtype, t.device)
    ones = _VIEWS.get((key, shape))
    if ones is not None:
        return ones
    base = _ONES.get(key)
    if base is None:
        with torch.inference_mode(False), torch.no_grad():  # a plain tensor, whatever the mode
            base = _ONES[key] = torch.ones((), dtype=t.dtype, device=t.device)
    ones = base.expand(shape)
    setattr(ones, _MARK, True)
    if len(_VIEWS) >= _VIEWS_MAX:
        _VIEWS.clear()
    if ones.numel() > 1:  # a write into one entry would reach the base: never shared
        _VIEWS[key, shape] = ones
    return ones


def _is_all_ones_view(mask: torch.Tensor) -> bool:
    """Whether ``mask`` is a view :func:`all_ones_like` made (by its mark: no value is read;
    any other all-ones mask is simply multiplied)."""
    return getattr(mask, _MARK, False) is True


def times_default(
    kept: torch.Tensor, default_mask: torch.Tensor, dtype: torch.dtype | None = None
) -> torch.Tensor:
    """New contiguous mask ``kept * default_mask`` (``kept`` 0/1, broadcastable; default dtype:
    ``default_mask``'s). Reuses ``kept``'s buffer where the default is all ones."""
    dtype = dtype or default_mask.dtype
    device = default_mask.device
    if kept.shape == default_mask.shape and _is_all_ones_view(default_mask):
        if kept.dtype == dtype and kept.device == device and kept.is_contiguous():
            return kept  # (no ``to`` call: parsing its arguments is most of its cost)
        return kept.to(device=device, dtype=dtype, memory_format=torch.contiguous_format)
    kept = kept.to(device=device)
    out = torch.empty(default_mask.shape, dtype=dtype, device=device)
    return torch.mul(kept.to(dtype), default_mask.to(dtype), out=out)


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
    # torch's stubs declare ``str``, but a method has no tensor until it is applied
    _tensor_name: str | None = None  # type: ignore[assignment]
    #: The public call that made this method, named in its error messages: the class's name
    #: (set for each subclass) unless an ``apply`` made it. A plain attribute, not a property:
    #: the methods read it on every call.
    where: str = "BasePruningMethod"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.where = cls.__name__

    def __call__(self, module: nn.Module, inputs: Any) -> None:
        setattr(module, self._require_name("forward pre-hook"), self.apply_mask(module))

    @abstractmethod
    def compute_mask(self, t: torch.Tensor, default_mask: torch.Tensor) -> torch.Tensor:
        """Return the mask for ``t``: ``default_mask`` with this method's choices zeroed.

        Pure: reads ``t`` (importance scores) and ``default_mask`` (the mask so far), changes
        neither. For a tensor pruned for the first time ``default_mask`` is an all-ones
        broadcast view (read-only; ``default_mask.clone()`` gives a writable copy).
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
        # where apply put them (read without Module.__getattr__), else wherever they are
        mask = module._buffers.get(name + "_mask")
        if mask is None:
            mask = getattr(module, name + "_mask")
        orig = module._parameters.get(name + "_orig")
        if orig is None:
            orig = getattr(module, name + "_orig")
        return self.apply_mask_to(_fsdp.unshard_like(mask, orig), orig)  # FSDP2: unsharded

    @staticmethod
    def apply_mask_to(mask: torch.Tensor, orig: torch.Tensor) -> torch.Tensor:
        """The pruned tensor ``mask * orig``, in ``orig``'s dtype (differentiable in orig)."""
        return (mask if mask.dtype == orig.dtype else mask.to(dtype=orig.dtype)) * orig

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
        return cls._attach(f"{cls.__name__}.apply", module, name, importance_scores,
                           *args, **kwargs)

    @classmethod
    def _attach(
        cls, where: str, module: nn.Module, name: str, importance_scores: Any,
        *args: Any, **kwargs: Any,
    ) -> BasePruningMethod:
        """:meth:`apply` on behalf of the public call ``where`` (named in error messages)."""
        current = _module.current_tensor(module, name, where)
        old = _module.find_hook(module, name, where) if module._forward_pre_hooks else None
        method = cls._create(where, *args, **kwargs)
        method._tensor_name = name
        if importance_scores is not None:
            check_same_shape(importance_scores, current, where, "importance_scores",
                             f"parameter {name!r}")
        scores = current if importance_scores is None else importance_scores
        mask = method._mask_for(module, name, scores, current, old)
        return _module.install(module, name, method, mask, old, PruningContainer)

    @classmethod
    def _create(cls, where: str, *args: Any, **kwargs: Any) -> BasePruningMethod:
        """``cls(*args, **kwargs)`` made for the public call ``where``: keyword settings are
        checked against the constraint table, errors naming ``where``.

        The package's own methods check their settings when made (:data:`_SELF_CHECKED`):
        those are checked once, and again in ``where``'s name only if they fail."""
        if cls.__init__ not in _SELF_CHECKED:
            cls._check_settings(where, kwargs)
            method = cls(*args, **kwargs)
        else:
            try:
                method = cls(*args, **kwargs)
            except (TypeError, ValueError, RuntimeError, OverflowError):
                cls._check_settings(where, kwargs)  # the same rule, told in where's name
                raise
        method.where = where
        return method

    @classmethod
    def _check_settings(cls, where: str, kwargs: dict[str, Any]) -> None:
        method_name = _FUNCTION_OF.get(cls.__name__)
        for param, value in kwargs.items():
            if param in CONSTRAINTS:
                check(where, param, value, method_name)

    def _mask_for(
        self,
        module: nn.Module,
        name: str,
        scores: torch.Tensor,
        current: torch.Tensor,
        old: tuple[int, Any] | None,
    ) -> torch.Tensor:
        """The mask ``apply`` would install, computed without changing anything."""
        if is_sharded(current):  # DTensor (e.g. FSDP2): collective, see _sharded
            return _sharded.mask_for(self, PruningContainer, module, name, scores, current, old,
                                     self.where)
        # gradients off, as ``torch.no_grad()`` does without its Python layers (it is
        # switched inside the try: a Ctrl-C anywhere after it finds the finally)
        grad = torch.is_grad_enabled()
        try:
            if grad:
                torch._C._set_grad_enabled(False)
            if old is None:
                ones = all_ones_like(current)
                mask = self.compute_mask(scores, default_mask=ones)
                if mask is ones:  # nothing pruned: a real buffer, laid out as torch's would be
                    return torch.ones_like(current)
                if mask.is_contiguous():  # the common case: no broadcast view
                    return mask
                if mask.numel() > 1 and 0 in mask.stride():
                    return mask.clone(memory_format=torch.contiguous_format)
                return mask
            previous = old[1]
            members = tuple(previous) if hasattr(previous, "_pruning_methods") else (previous,)
            chain = PruningContainer(*members, self)
            return chain.compute_mask(scores, default_mask=getattr(module, name + "_mask"))
        finally:
            if grad:
                torch._C._set_grad_enabled(True)

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
            default_mask = all_ones_like(t)
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
    remaining entries (gathered in flat order, as torch does), structured ones the remaining
    slices along their ``dim``, ``"global"`` ones the whole tensor.

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

    def __init__(self, *args: _torch_prune.BasePruningMethod) -> None:
        # ours or torch's methods (None too, accepted as torch does)
        self._pruning_methods: tuple[_torch_prune.BasePruningMethod, ...] = ()
        if args and args[0] is not None:
            self._tensor_name = getattr(args[0], "_tensor_name", None)
        for method in args:
            self.add_pruning_method(method)

    def add_pruning_method(self, method: _torch_prune.BasePruningMethod) -> None:
        """Append ``method`` to the chain (it must act on the same tensor name)."""
        where = "PruningContainer.add_pruning_method"
        if method is None:
            self._pruning_methods += (method,)  # accepted, as torch does
            return
        if not isinstance(method, HOOK_TYPE):
            raise TypeError(problem(where, "method", "a BasePruningMethod", type(method).__name__))
        name = getattr(method, "_tensor_name", None)
        if self._tensor_name is None:
            self._tensor_name = name
        elif name != self._tensor_name:
            raise ValueError(problem(where, "method",
                                     f"acting on the container's tensor {self._tensor_name!r}",
                                     f"{type(method).__name__} acting on {name!r}"))
        self._pruning_methods += (method,)

    def __len__(self) -> int:
        return len(self._pruning_methods)

    def __iter__(self) -> Iterator[_torch_prune.BasePruningMethod]:
        return iter(self._pruning_methods)

    def __getitem__(self, idx: int | slice) -> Any:
        return self._pruning_methods[idx]

    def compute_mask(self, t: torch.Tensor, default_mask: torch.Tensor) -> torch.Tensor:
        """Apply the *last* method of the chain to what ``default_mask`` leaves unpruned."""
        method = self._pruning_methods[-1]
        kind = method.PRUNING_TYPE  # type: ignore[attr-defined]  # torch declares it per subclass
        new_mask = default_mask.to(dtype=t.dtype, memory_format=torch.contiguous_format,
                                   copy=True)
        if kind == "unstructured":
            index: Any = default_mask == 1
        elif kind == "structured":
            where = getattr(method, "where", type(method).__name__)
            if not hasattr(method, "dim"):
                raise AttributeError(
                    f"PruningContainer.compute_mask: a structured method needs a `dim` attribute; "
                    f"{type(method).__name__} has none"
                )
            dim = check_dim(method.dim, t.dim(), where)
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
