"""Our own implementation of the documented ``torch.nn.utils.prune`` API.

A drop-in: ``from prune_explorer import prune`` can replace ``import torch.nn.utils.prune as
prune``. Same names, same semantics, same masks, same ``name_orig``/``name_mask`` state_dict layout.
Differences (all deliberate, listed in docs/pruning-api.md): fast exact selection instead of a full
``topk`` (entries tied at the cut: same count, lowest flat index first -- ``ln_structured`` keeps
tied slices lowest index first -- or exactly torch's choice with ``ties="torch"`` or inside
``prune.tie_break("torch")``), no concatenated copy of the model in
``global_unstructured``, masks computed before the module is touched (nothing to roll back), full
validation with messages naming the call, argument, rule and value, optional ``generator=`` for the
random methods, and model-wide helpers.

This package imports only torch.

Examples
--------
>>> import torch
>>> from prune_explorer import prune
>>> conv = torch.nn.Conv2d(3, 8, 3)
>>> _ = prune.ln_structured(conv, "weight", amount=0.25, n=2, dim=0)
>>> _ = prune.l1_unstructured(conv, "weight", amount=0.5)
>>> sorted(prune.pruned_parameters(conv))
['weight']
>>> _ = prune.remove(conv, "weight")
>>> prune.is_pruned(conv)
False
"""

from ._module import PruningStateError
from ._on_demand import on_demand
from ._select import get_tie_break, tie_break
from .functional import (
    custom_from_mask,
    global_masks,
    global_unstructured,
    identity,
    is_pruned,
    l1_unstructured,
    ln_structured,
    preview_mask,
    pruned_parameters,
    random_structured,
    random_unstructured,
    remove,
    remove_all,
)
from .methods import (
    BasePruningMethod,
    CustomFromMask,
    Identity,
    L1Unstructured,
    LnStructured,
    PruningContainer,
    RandomStructured,
    RandomUnstructured,
)
from .patterns import (
    BlockStructured,
    SemiStructured,
    block_structured,
    satisfies_pattern,
    semi_structured,
)
from .validation import (
    DeviceMismatchError,
    ShapeMismatchError,
    _compute_nparams_toprune,
    _validate_pruning_amount,
    _validate_pruning_amount_init,
)

__all__ = [
    "BasePruningMethod",
    "BlockStructured",
    "CustomFromMask",
    "DeviceMismatchError",
    "Identity",
    "L1Unstructured",
    "LnStructured",
    "PruningContainer",
    "PruningStateError",
    "RandomStructured",
    "RandomUnstructured",
    "SemiStructured",
    "ShapeMismatchError",
    "_compute_nparams_toprune",
    "_validate_pruning_amount",
    "_validate_pruning_amount_init",
    "block_structured",
    "custom_from_mask",
    "get_tie_break",
    "global_masks",
    "global_unstructured",
    "identity",
    "is_pruned",
    "l1_unstructured",
    "ln_structured",
    "on_demand",
    "preview_mask",
    "pruned_parameters",
    "random_structured",
    "random_unstructured",
    "remove",
    "remove_all",
    "satisfies_pattern",
    "semi_structured",
    "tie_break",
]
