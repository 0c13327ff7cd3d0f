"""Pruned tensors computed on demand instead of kept between forwards.

torch keeps the pruned tensor ``name = orig * mask`` as a plain attribute: as large as the
parameter again (2 B/param in bfloat16, 4 in float32). A tensor pruned *on demand* keeps only
``name_orig`` and ``name_mask``: the pruning hook computes ``name`` for each forward, as it always
does, a forward hook drops it afterwards (the autograd graph keeps what backward needs), and
reading ``module.name`` between forwards computes it afresh. Masks, state_dict, hooks, ``remove``
and the forward's values are those of torch's layout; only the copy between forwards is gone.

Two things make a tensor pruned on demand: a sharded mask (a DTensor: under FSDP2 the kept copy
would be the full tensor) and :func:`on_demand` on its module, the user's choice for models
too large for a second copy of their weights.

For that the module's class is swapped for a subclass adding the ``__getattr__`` fallback -- the
way FSDP2's ``fully_shard`` and ``torch.nn.utils.parametrize`` give modules their behaviour --
and swapped back once no tensor of the module is pruned on demand.

Examples
--------
>>> import torch
>>> from prune_explorer import prune
>>> layer = prune.on_demand(torch.nn.Linear(4, 3))
>>> _ = prune.l1_unstructured(layer, "weight", amount=0.5)
>>> "weight" in vars(layer), int(layer.weight.count_nonzero())
(False, 6)
>>> _ = prune.on_demand(layer, False)      # torch's layout again: the copy is kept
>>> "weight" in vars(layer)
True
"""

from __future__ import annotations

import sys
from typing import Any

import torch

from ._dtensor import is_sharded
from ._hooks import pruning_hooks
from .validation import problem

__all__ = ["kept_attribute", "on_demand", "start", "stop"]

_ASKED = "_prune_explorer_on_demand"  # instance attribute set by on_demand(): the user's choice


def on_demand(model: torch.nn.Module, enabled: bool = True) -> torch.nn.Module:
    """Prune the tensors of ``model`` and its submodules on demand (or, with ``enabled=False``,
    keep their pruned copies again, torch's layout); returns ``model``.

    On demand, pruning a tensor adds only its mask: the pruned tensor ``name = orig * mask`` is
    computed for each forward (as torch's hook does anyway) and whenever ``module.name`` is read,
    and is not kept in between. Use it for models too large for a second copy of their weights.
    It applies to the tensors pruned now and to those pruned later. Tensors of sharded
    (DTensor) parameters are always pruned on demand.

    Parameters
    ----------
    model : nn.Module
        The modules whose pruned tensors to compute on demand (every submodule too).
    enabled : bool
        ``True`` (default): on demand. ``False``: keep the pruned copies, torch's layout.

    Examples
    --------
    >>> import torch
    >>> from prune_explorer import prune
    >>> net = prune.on_demand(torch.nn.Sequential(torch.nn.Linear(8, 8)))
    >>> _ = prune.global_unstructured([(net[0], "weight")], prune.L1Unstructured, amount=0.25)
    >>> [name for name, _ in net.named_buffers()], "weight" in vars(net[0])
    (['0.weight_mask'], False)
    >>> float(net[0].weight.eq(0).float().mean())
    0.25
    """
    if not isinstance(enabled, bool):
        raise TypeError(problem("prune.on_demand", "enabled", "a bool", enabled))
    for module in model.modules():
        if enabled:
            module.__dict__[_ASKED] = True
        else:
            module.__dict__.pop(_ASKED, None)
        for _, hook, name in pruning_hooks(module):
            if name is None or name + "_mask" not in module._buffers:
                continue
            if enabled:
                start(module, name)
            elif kept_attribute(module, name) and name in module.__dict__.get(_ON_DEMAND, ()):
                stop(module, name)
                setattr(module, name, hook.apply_mask(module))
    return model


def kept_attribute(module: torch.nn.Module, name: str, mask: torch.Tensor | None = None
                   ) -> bool:
    """Whether the pruned tensor ``name`` of ``module`` is kept between forwards (torch's
    layout), rather than computed on demand; ``mask``: its mask (default: the one registered,
    given when it is not registered yet)."""
    if module.__dict__.get(_ASKED, False):
        return False
    if mask is None:
        mask = module._buffers.get(name + "_mask")
    return type(mask) is torch.Tensor or not is_sharded(mask)


_ON_DEMAND = "_pruned_on_demand"  # instance attribute: the names computed on demand
_CLASSES: dict[type, type] = {}


def _on_demand_class(cls: type) -> type:
    if getattr(cls, "_pruned_on_demand_base", None) is not None:
        return cls
    if cls not in _CLASSES:
        fallback = cls.__getattr__  # type: ignore[attr-defined]
        fallback_del: Any = cls.__delattr__

        def __getattr__(self: torch.nn.Module, attr: str) -> Any:
            if attr in self.__dict__.get(_ON_DEMAND, ()):
                for hook in self._forward_pre_hooks.values():
                    if getattr(hook, "_tensor_name", None) == attr and hasattr(hook,
                                                                               "apply_mask"):
                        return hook.apply_mask(self)
                # no pruning hook any more: removed by code that does not tell us (torch's
                # own ``remove``); the tensor is a plain parameter again
                stop(self, attr)
            return fallback(self, attr)

        def __delattr__(self: torch.nn.Module, attr: str) -> None:
            if attr in self.__dict__.get(_ON_DEMAND, ()) and attr not in self.__dict__:
                return  # computed on demand: no copy is kept, nothing to delete
            fallback_del(self, attr)

        def __reduce_ex__(self: torch.nn.Module, protocol: Any) -> Any:
            return _reduce_on_demand(self, cls, protocol)

        attrs: dict[str, Any] = {"__getattr__": __getattr__, "__delattr__": __delattr__,
                                 "__reduce_ex__": __reduce_ex__,
                                 "_pruned_on_demand_base": cls,
                                 "__module__": cls.__module__, "__qualname__": cls.__qualname__}
        if hasattr(cls, "_orig_cls_mro_index"):  # FSDP2's class finds the original in its MRO
            attrs["_orig_cls_mro_index"] = cls._orig_cls_mro_index + 1
        _CLASSES[cls] = type(cls.__name__, (cls,), attrs)
    return _CLASSES[cls]


def _reduce_on_demand(module: torch.nn.Module, base: type, protocol: Any) -> Any:
    """Pickle (and ``copy``) a module of an on-demand class as an instance of ``base``, the
    class it had, rebuilt with the on-demand class on load (:func:`_new_on_demand`): the
    on-demand class is made at run time and cannot be found by name. A ``base`` that cannot be
    found by name either (FSDP2's ``FSDP<Module>`` classes) is refused, as torch does."""
    import copyreg
    import pickle

    owner = sys.modules.get(base.__module__)
    found: Any = owner
    for part in base.__qualname__.split("."):
        found = getattr(found, part, None)
    if found is not base:
        raise pickle.PicklingError(
            f"pickle: the module's class {base.__qualname__} is made at run time and cannot be "
            "found by name (FSDP2's fully_shard makes such classes: FSDP2 modules cannot be "
            "pickled or deep-copied, torch's rule); save its state_dict instead, e.g. with "
            "torch.distributed.checkpoint")
    reduced = super(type(module), module).__reduce_ex__(protocol)
    newobj = getattr(copyreg, "__newobj__", None)
    if not (isinstance(reduced, tuple) and reduced[0] is newobj):
        return reduced  # the base class pickles itself its own way
    return (_new_on_demand, (base, *reduced[1][1:]), *reduced[2:])


def _new_on_demand(base: type, *args: Any) -> torch.nn.Module:
    """A new, empty instance of ``base``'s on-demand class (for unpickling)."""
    cls = _on_demand_class(base)
    module: torch.nn.Module = cls.__new__(cls, *args)
    return module


def start(module: torch.nn.Module, name: str) -> None:
    """Compute ``name`` of ``module`` on demand from now on (drops its kept copy)."""
    names = module.__dict__.setdefault(_ON_DEMAND, set())
    names.add(name)
    module.__dict__.pop(name, None)
    module.__class__ = _on_demand_class(type(module))
    if not any(isinstance(h, _DropPruned) and h.name == name
               for h in module._forward_hooks.values()):
        module.register_forward_hook(_DropPruned(name))


def stop(module: torch.nn.Module, name: str) -> None:
    """Stop computing ``name`` of ``module`` on demand (keeps nothing: the caller sets the
    attribute if it wants one)."""
    names = module.__dict__.get(_ON_DEMAND)
    if names is None:
        return
    names.discard(name)
    for key, hook in list(module._forward_hooks.items()):
        if isinstance(hook, _DropPruned) and hook.name == name:
            del module._forward_hooks[key]
    if not names:
        del module.__dict__[_ON_DEMAND]
        base = getattr(type(module), "_pruned_on_demand_base", None)
        if base is not None:
            module.__class__ = base


class _DropPruned:
    """Forward hook: after a forward, drop the pruned tensor ``name`` the pruning hook computed
    for it (the full tensor under FSDP2); it is computed again on demand. The autograd graph
    keeps what backward needs."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, module: torch.nn.Module, inputs: Any, output: Any) -> None:
        if self.name in module.__dict__.get(_ON_DEMAND, ()):
            module.__dict__.pop(self.name, None)

    def __repr__(self) -> str:
        return f"_DropPruned(tensor={self.name!r})"


