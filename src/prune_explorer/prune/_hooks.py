"""Which forward pre-hooks of a module are pruning hooks.

Ours subclass torch's ``BasePruningMethod``, so a model pruned by either implementation is read the
same way. Imports nothing else from the core: every module that walks hooks can use it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch.nn.utils.prune as _torch_prune
from torch import nn

__all__ = ["HOOK_TYPE", "pruning_hooks"]

#: The pruning hooks we recognise: torch's base class, which ours subclass, so models pruned by
#: either implementation interoperate.
HOOK_TYPE = _torch_prune.BasePruningMethod


def pruning_hooks(module: nn.Module) -> Iterator[tuple[int, Any, str | None]]:
    """(key, hook, tensor name) of every pruning hook on ``module``, in registration order.

    Examples
    --------
    >>> import torch
    >>> from prune_explorer import prune
    >>> layer = prune.l1_unstructured(torch.nn.Linear(2, 2), "weight", amount=1)
    >>> [name for _, _, name in pruning_hooks(layer)]
    ['weight']
    """
    for key, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, HOOK_TYPE):
            name = getattr(hook, "_tensor_name", None)
            yield key, hook, name if isinstance(name, str) else None
