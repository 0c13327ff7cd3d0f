"""Reading and restoring the pruning state ``torch.nn.utils.prune`` leaves on a module.

Pruning ``module.weight`` turns it into a ``weight_orig`` parameter, a ``weight_mask`` buffer, a
plain ``weight`` attribute (``orig * mask``) and a forward pre-hook (a pruning method, or a
``PruningContainer`` of them). This module is the only place in the session that touches those
module internals; it captures them before a step and puts them back exactly on undo: the same
Parameter object, the mask, the same hook object with the same contents, and the same order of
parameters, buffers and hooks (so ``state_dict`` keys come back in the same order).

Examples
--------
>>> import torch
>>> from prune_explorer import prune
>>> from prune_explorer.session.hooks import capture, capture_order, restore, restore_order
>>> layer = torch.nn.Linear(3, 2)
>>> weight = layer.weight
>>> state, order = capture(layer, "weight"), capture_order(layer)
>>> _ = prune.l1_unstructured(layer, "weight", amount=0.5)
>>> restore(layer, state); restore_order(layer, order)
>>> layer.weight is weight, list(layer.state_dict())
(True, ['weight', 'bias'])
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.utils.prune as torch_prune
from torch import nn

from .packed import PackedMask

__all__ = [
    "ModuleOrder",
    "TensorState",
    "capture",
    "capture_order",
    "find_hook",
    "hook_methods",
    "method_name",
    "refresh_pruned",
    "restore",
    "restore_order",
]

_CLASS_TO_NAME = {
    "Identity": "identity",
    "RandomUnstructured": "random_unstructured",
    "L1Unstructured": "l1_unstructured",
    "RandomStructured": "random_structured",
    "LnStructured": "ln_structured",
    "CustomFromMask": "custom_from_mask",
    "SemiStructured": "semi_structured",
    "BlockStructured": "block_structured",
}


# Hooks are recognised by torch's base classes, which prune_explorer.prune's classes subclass:
# models pruned by either implementation work.
_BASE = torch_prune.BasePruningMethod
_CONTAINER = torch_prune.PruningContainer


def find_hook(module: nn.Module, tensor_name: str) -> tuple[int, Any] | None:
    """The ``(key, hook)`` of the pruning pre-hook acting on ``tensor_name``, or None."""
    for key, hook in module._forward_pre_hooks.items():
        if isinstance(hook, _BASE) and getattr(hook, "_tensor_name", None) == tensor_name:
            return key, hook
    return None


def hook_methods(hook: Any) -> tuple[Any, ...]:
    """The pruning methods of a hook in the order applied (a container's children, or itself)."""
    if isinstance(hook, _CONTAINER):
        return tuple(hook)
    return (hook,)


def method_name(method: Any) -> str:
    """Function-style name of a pruning method (``L1Unstructured`` -> ``l1_unstructured``)."""
    cls = type(method).__name__
    return _CLASS_TO_NAME.get(cls, cls)


@dataclass
class TensorState:
    """Everything needed to put one tensor back as it was (masks as bits, the rest by reference)."""

    tensor_name: str
    param: nn.Parameter
    hook_key: int | None = None
    hook: Any = None
    container_methods: tuple[Any, ...] | None = None
    mask: PackedMask | None = None
    mask_dtype: torch.dtype | None = None

    @property
    def pruned(self) -> bool:
        return self.hook is not None


@dataclass
class ModuleOrder:
    """Key order of a module's parameters, buffers and forward pre-hooks."""

    parameters: tuple[str, ...]
    buffers: tuple[str, ...]
    hooks: tuple[int, ...]


def capture(module: nn.Module, tensor_name: str) -> TensorState:
    """Record the pruning state of ``module.<tensor_name>``."""
    found = find_hook(module, tensor_name)
    if found is None:
        return TensorState(tensor_name, module._parameters[tensor_name])
    key, hook = found
    mask = getattr(module, tensor_name + "_mask")
    return TensorState(
        tensor_name=tensor_name,
        param=module._parameters[tensor_name + "_orig"],
        hook_key=key,
        hook=hook,
        container_methods=tuple(hook) if isinstance(hook, _CONTAINER) else None,
        mask=PackedMask.from_tensor(mask),
        mask_dtype=mask.dtype,
    )


def capture_order(module: nn.Module) -> ModuleOrder:
    """Record the key order of ``module``'s parameters, buffers and forward pre-hooks."""
    return ModuleOrder(
        tuple(module._parameters), tuple(module._buffers), tuple(module._forward_pre_hooks)
    )


def _set_container_methods(container: Any, methods: tuple[Any, ...]) -> None:
    # A container is grown in place by later steps; shrink it back to what it held.
    container._pruning_methods = tuple(methods)


def restore(module: nn.Module, state: TensorState) -> None:
    """Put ``module.<tensor_name>`` back as captured (then call :func:`restore_order`)."""
    name = state.tensor_name
    found = find_hook(module, name)
    if found is not None:
        del module._forward_pre_hooks[found[0]]
    module._parameters.pop(name + "_orig", None)
    module._buffers.pop(name + "_mask", None)
    module._parameters.pop(name, None)
    module.__dict__.pop(name, None)
    if not state.pruned:
        # setattr (not register_parameter) so modules that cache their weights (LSTM/GRU flat
        # weights) see the restored Parameter.
        setattr(module, name, state.param)
        return
    mask, dtype = state.mask, state.mask_dtype
    if mask is None or dtype is None:  # capture() sets both whenever there is a hook
        raise RuntimeError(f"restore: the captured state of {name!r} has a hook but no mask")
    module.register_parameter(name + "_orig", state.param)
    module.register_buffer(name + "_mask", mask.unpack(dtype, state.param.device))
    if state.container_methods is not None:
        _set_container_methods(state.hook, state.container_methods)
    module._forward_pre_hooks[state.hook_key] = state.hook
    refresh_pruned(module, name)


def refresh_pruned(module: nn.Module, tensor_name: str) -> bool:
    """Recompute the pruned copy ``tensor_name = mask * orig`` now, as the forward pre-hook would.

    The pruned copy is a plain attribute: ``Module.to`` does not move it and
    ``load_state_dict`` does not update it. Returns False (and does nothing) when the tensor is
    not pruned.

    Examples
    --------
    >>> import torch
    >>> from prune_explorer import prune
    >>> layer = prune.identity(torch.nn.Linear(2, 1), "weight")
    >>> with torch.no_grad():
    ...     _ = layer.weight_mask.zero_()
    ...     _ = refresh_pruned(layer, "weight")
    >>> int(layer.weight.count_nonzero()), refresh_pruned(layer, "bias")
    (0, False)
    """
    found = find_hook(module, tensor_name)
    if found is None:
        return False
    setattr(module, tensor_name, found[1].apply_mask(module))
    return True


def _reorder(mapping: dict, order: tuple) -> None:
    items = dict(mapping)
    mapping.clear()
    for key in order:
        if key in items:
            mapping[key] = items.pop(key)
    mapping.update(items)


def restore_order(module: nn.Module, order: ModuleOrder) -> None:
    """Reorder ``module``'s parameters, buffers and pre-hooks as captured (same dict objects)."""
    _reorder(module._parameters, order.parameters)
    _reorder(module._buffers, order.buffers)
    _reorder(module._forward_pre_hooks, order.hooks)
