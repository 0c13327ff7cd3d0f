"""Reading the pruning state ``torch.nn.utils.prune`` leaves on a module.

Pruning ``module.weight`` turns it into a ``weight_orig`` parameter, a ``weight_mask`` buffer, a
plain ``weight`` attribute (``orig * mask``) and a forward pre-hook (a pruning method, or a
``PruningContainer`` of them). This module finds that hook and its methods. Capturing and
restoring the state is the core's one snapshot,
:class:`prune_explorer.prune.engine.ModuleSnapshot`.

Examples
--------
>>> import torch
>>> from prune_explorer import prune
>>> layer = prune.l1_unstructured(torch.nn.Linear(3, 2), "weight", amount=0.5)
>>> key, hook = find_hook(layer, "weight")
>>> [type(m).__name__ for m in hook_methods(hook)]
['L1Unstructured']
"""

from __future__ import annotations

from typing import Any

import torch.nn.utils.prune as torch_prune
from torch import nn

from prune_explorer.prune.engine import find_hook as _core_find_hook
from prune_explorer.prune.engine import kept_attribute

__all__ = ["find_hook", "hook_methods", "refresh_pruned"]

# Hooks are recognised by torch's base classes, which prune_explorer.prune's classes subclass:
# models pruned by either implementation work.
_CONTAINER = torch_prune.PruningContainer


def find_hook(module: nn.Module, tensor_name: str) -> tuple[int, Any] | None:
    """The ``(key, hook)`` of the pruning pre-hook acting on ``tensor_name``, or None.

    The core's reader: a tensor with several pruning hooks is an error, not "the first one".
    """
    return _core_find_hook(module, tensor_name, "Session")


def hook_methods(hook: Any) -> tuple[Any, ...]:
    """The pruning methods of a hook in the order applied (a container's children, or itself)."""
    if isinstance(hook, _CONTAINER):
        return tuple(hook)
    return (hook,)


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
    if kept_attribute(module, tensor_name):  # sharded: computed on demand, nothing to refresh
        setattr(module, tensor_name, found[1].apply_mask(module))
    return True
