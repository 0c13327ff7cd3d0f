"""Every change pruning makes to a module, in one place.

A pruned tensor ``name`` of a module is stored as

* parameter ``name_orig`` -- the original ``Parameter`` object, untouched values;
* buffer ``name_mask`` -- the mask (same dtype as torch would give it);
* plain attribute ``name`` -- ``name_mask * name_orig``, recomputed before every forward
  by the pruning method registered as a forward pre-hook.

Masks are always computed *before* the module is touched, and installing them is wrapped in a
snapshot/restore, so a failure leaves the module exactly as it was.
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.utils.prune as _torch_prune
from torch import nn

from . import _fsdp
from ._validation import problem

if TYPE_CHECKING:
    from .methods import BasePruningMethod


class PruningStateError(ValueError, AssertionError):
    """The module is not in the pruning state the call needs (e.g. ``remove`` on an unpruned
    tensor). A ``ValueError`` like torch's ``remove``; also an ``AssertionError`` like the
    checks torch makes inside its method objects."""


#: The pruning hooks we recognise: torch's base class, which ours subclass, so models pruned by
#: either implementation interoperate.
HOOK_TYPE = _torch_prune.BasePruningMethod


def find_hook(module: nn.Module, name: str, where: str) -> tuple[int, Any] | None:
    """The (key, method) of the pruning hook acting on ``name``, or None."""
    found = [
        (key, hook)
        for key, hook in module._forward_pre_hooks.items()
        if isinstance(hook, HOOK_TYPE) and getattr(hook, "_tensor_name", None) == name
    ]
    if len(found) > 1:
        raise PruningStateError(
            f"{where}: tensor {name!r} of {type(module).__name__} has {len(found)} pruning hooks; "
            "there must be at most one (several steps are chained in one PruningContainer)"
        )
    return found[0] if found else None


def current_tensor(module: Any, name: Any, where: str) -> torch.Tensor:
    """The tensor that pruning ``name`` would act on, with clear errors for bad names."""
    if not isinstance(module, nn.Module):
        raise TypeError(problem(where, "module", "a torch.nn.Module", type(module).__name__))
    if not isinstance(name, str):
        raise TypeError(problem(where, "name", "a str naming a parameter", name))
    pruned = name + "_orig" in module._parameters and name + "_mask" in module._buffers
    if not pruned:
        if name in module._buffers:
            raise TypeError(
                problem(where, "name", f"a parameter of {type(module).__name__}, not a buffer",
                        name)
            )
        if name not in module._parameters:
            choices = sorted(n for n, p in module._parameters.items() if p is not None)
            raise AttributeError(
                problem(where, "name", f"a parameter of {type(module).__name__} "
                        f"(it has {choices})", name)
            )
    value = getattr(module, name, None)
    if not isinstance(value, torch.Tensor):
        raise TypeError(
            problem(where, "name", "a parameter holding a tensor", f"{name} = {value!r}")
        )
    return value


class _Snapshot:
    """References (no tensor copies) to everything pruning may change on one module."""

    def __init__(self, module: nn.Module, name: str) -> None:
        self.module = module
        self.name = name
        self.parameters = OrderedDict(module._parameters)
        self.buffers = OrderedDict(module._buffers)
        self.hooks = OrderedDict(module._forward_pre_hooks)
        self.attribute = module.__dict__.get(name, _MISSING)
        self.containers = [
            (hook, hook._pruning_methods)
            for hook in module._forward_pre_hooks.values()
            if hasattr(hook, "_pruning_methods")
        ]

    def restore(self) -> None:
        m = self.module
        m._parameters.clear()
        m._parameters.update(self.parameters)
        m._buffers.clear()
        m._buffers.update(self.buffers)
        m._forward_pre_hooks.clear()
        m._forward_pre_hooks.update(self.hooks)
        for hook, methods in self.containers:
            hook._pruning_methods = methods
        m.__dict__.pop(self.name, None)
        if self.attribute is not _MISSING:
            m.__dict__[self.name] = self.attribute
        if hasattr(m, "_init_flat_weights"):  # RNNs cache their weights in a list
            m._init_flat_weights()


_MISSING = object()


@contextlib.contextmanager
def transaction(pairs: list[tuple[nn.Module, str]]) -> Iterator[None]:
    """Restore every (module, name) in ``pairs`` if the block raises."""
    snaps = [_Snapshot(m, n) for m, n in pairs]
    try:
        yield
    except BaseException:
        for snap in reversed(snaps):
            snap.restore()
        raise


def install(
    module: nn.Module,
    name: str,
    method: BasePruningMethod,
    mask: torch.Tensor,
    old: tuple[int, Any] | None,
) -> BasePruningMethod:
    """Record ``method`` and its finished ``mask`` on ``module``; returns the hook now in charge.

    ``old`` is the existing hook (from :func:`find_hook`); the new method then joins a
    :class:`PruningContainer` with it, as torch does.
    """
    from .methods import PruningContainer

    with transaction([(module, name)]):
        if old is None:
            orig = module._parameters[name]
            module.register_parameter(name + "_orig", orig)
            del module._parameters[name]
            hook: Any = method
        else:
            key, previous = old
            del module._forward_pre_hooks[key]
            if isinstance(previous, PruningContainer):
                previous.add_pruning_method(method)
                hook = previous
            else:
                hook = PruningContainer(previous, method)
        module.register_buffer(name + "_mask", mask)
        setattr(module, name, hook.apply_mask(module))
        module.register_forward_pre_hook(hook)
        if old is None:
            _fsdp.attached(module, name)  # DTensors / FSDP2 (last: cannot fail)
    return hook


def uninstall(module: nn.Module, name: str, *, keep_pruning: bool = True) -> nn.Parameter:
    """Turn a pruned ``name`` back into a plain parameter (the same ``Parameter`` object).

    With ``keep_pruning`` (what ``remove`` does) the pruned values are written into the original
    parameter in place -- no model-sized temporary. Without it the original values come back
    unchanged (an undo).
    """
    orig = module._parameters[name + "_orig"]
    mask = module._buffers[name + "_mask"]
    if keep_pruning:
        with torch.no_grad():
            orig.mul_(mask.to(dtype=orig.dtype))
    if name in module.__dict__:
        delattr(module, name)
    del module._parameters[name + "_orig"]
    del module._buffers[name + "_mask"]
    setattr(module, name, orig)
    _fsdp.detached(module, name)  # DTensors / FSDP2
    return orig
