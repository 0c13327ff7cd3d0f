"""Pruned DTensor parameters on their modules, and FSDP2.

The core calls :func:`attached` once a parameter is pruned and :func:`detached` once it is a
plain parameter again, and the pruning hook passes its mask through :func:`unshard_like`.

Under FSDP2 the parameter's new name ``name_orig`` is reported to FSDP, whose forward then
unshards ``name_orig``; the pruning hook gathers the mask for that forward (one all-gather of
the mask per forward). The pruned tensor ``name`` of a sharded parameter is not kept between
forwards but computed on demand (see below): per rank, pruning adds only the mask's shard.
"""

from __future__ import annotations

import sys
from typing import Any

import torch

from ._sharded import gathered, is_sharded, stand_in

__all__ = ["attached", "detached", "kept_attribute", "pruned_stand_in", "restored",
           "unshard_like"]


def unshard_like(mask: torch.Tensor, orig: torch.Tensor) -> torch.Tensor:
    """``mask`` in the form ``orig`` has now: gathered when FSDP has unsharded ``orig``."""
    return gathered(mask) if not is_sharded(orig) else mask


def attached(module: torch.nn.Module, name: str) -> None:
    """Called by the core once ``name`` of ``module`` is pruned (idempotent)."""
    _follow_rename(module, name, name + "_orig")
    if is_sharded(module._buffers.get(name + "_mask")):
        _on_demand(module, name)


def detached(module: torch.nn.Module, name: str) -> None:
    """Called by the core once ``name`` of ``module`` is a plain parameter again."""
    _follow_rename(module, name + "_orig", name)
    _off_demand(module, name)


def restored(module: torch.nn.Module, name: str) -> None:
    """Called once a snapshot has put ``name`` of ``module`` back as it was (undo, rollback):
    FSDP2's record of the parameter's name and the on-demand pruned tensor follow that state."""
    if name + "_orig" in module._parameters:
        attached(module, name)
    elif name in module._parameters:
        detached(module, name)


def kept_attribute(module: torch.nn.Module, name: str) -> bool:
    """Whether the pruned tensor ``name`` is kept as an attribute between forwards (torch's
    layout); False for sharded masks, whose pruned tensor is computed on demand."""
    return not is_sharded(module._buffers.get(name + "_mask"))


def pruned_stand_in(module: torch.nn.Module, name: str) -> torch.Tensor | None:
    """For a pruned tensor ``name`` computed on demand, what the core prunes it as without
    computing it (:func:`._sharded.stand_in` of ``name_orig``); None for any other tensor."""
    if name not in module.__dict__.get(_ON_DEMAND, ()):
        return None
    stand: torch.Tensor = stand_in(module._parameters[name + "_orig"])
    return stand


# -- the pruned tensor of a sharded parameter, on demand ------------------------------------------
#
# torch keeps the pruned tensor ``name = orig * mask`` as a plain attribute: as large as the
# parameter again. For a sharded parameter it is not kept: the pruning hook computes it for each
# forward (from the unsharded ``name_orig`` under FSDP2), a forward hook drops it afterwards (the
# autograd graph keeps what backward needs), and reading ``module.name`` between forwards computes
# it afresh (``orig * mask``, a DTensor laid out like the mask). For that the module's class is
# swapped for a subclass adding that ``__getattr__`` fallback -- the way FSDP2's ``fully_shard``
# and ``torch.nn.utils.parametrize`` give modules their behaviour -- and swapped back once no
# tensor of the module is pruned on demand.

_ON_DEMAND = "_pruned_on_demand"  # instance attribute: the names computed on demand
_CLASSES: dict[type, type] = {}


def _on_demand_class(cls: type) -> type:
    if getattr(cls, "_pruned_on_demand_base", None) is not None:
        return cls
    if cls not in _CLASSES:
        fallback = cls.__getattr__  # type: ignore[attr-defined]

        def __getattr__(self: torch.nn.Module, attr: str) -> Any:
            if attr in self.__dict__.get(_ON_DEMAND, ()):
                for hook in self._forward_pre_hooks.values():
                    if getattr(hook, "_tensor_name", None) == attr and hasattr(hook,
                                                                               "apply_mask"):
                        return hook.apply_mask(self)
            return fallback(self, attr)

        def __reduce_ex__(self: torch.nn.Module, protocol: Any) -> Any:
            return _reduce_on_demand(self, cls, protocol)

        attrs: dict[str, Any] = {"__getattr__": __getattr__, "__reduce_ex__": __reduce_ex__,
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


def _on_demand(module: torch.nn.Module, name: str) -> None:
    names = module.__dict__.setdefault(_ON_DEMAND, set())
    names.add(name)
    module.__dict__.pop(name, None)
    module.__class__ = _on_demand_class(type(module))
    if not any(isinstance(h, _DropPruned) and h.name == name
               for h in module._forward_hooks.values()):
        module.register_forward_hook(_DropPruned(name))


def _off_demand(module: torch.nn.Module, name: str) -> None:
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


def _follow_rename(module: torch.nn.Module, old: str, new: str) -> None:
    """Tell FSDP2 that the parameter it manages as ``module.old`` is now ``module.new``.

    FSDP2 swaps the unsharded parameter in and out by name around each forward; pruning moves
    the parameter to ``name_orig`` (and ``remove`` moves it back), so FSDP must use the new
    name. FSDP2 has no public API for this: we update its record of the parameter's name
    (``FSDPParam._module_info``). Does nothing for modules FSDP2 does not manage.
    """
    try:
        from torch.distributed._composable_state import _module_state_mapping
    except ImportError:  # pragma: no cover - torch without distributed
        return
    for ref in list(_module_state_mapping.values()):
        state = ref()
        for group in getattr(state, "_fsdp_param_groups", None) or ():
            for fsdp_param in group.fsdp_params:
                info = fsdp_param._module_info
                if info.module is module and info.param_name == old:
                    info.param_name = new
