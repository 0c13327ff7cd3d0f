"""The function API: thin façades over the method classes, plus model-wide helpers."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
import torch.nn.utils.prune as _torch_prune
from torch import nn

from . import _module
from ._base import PruningContainer
from ._global import global_compute, global_setup
from ._hooks import HOOK_TYPE
from .methods import (
    BasePruningMethod,
    CustomFromMask,
    Identity,
    L1Unstructured,
    LnStructured,
    RandomStructured,
    RandomUnstructured,
)
from .validation import check_same_shape, problem

__all__ = [
    "custom_from_mask",
    "global_masks",
    "global_unstructured",
    "identity",
    "is_pruned",
    "l1_unstructured",
    "ln_structured",
    "preview_mask",
    "pruned_parameters",
    "random_structured",
    "random_unstructured",
    "remove",
    "remove_all",
]


def identity(module: nn.Module, name: str) -> nn.Module:
    """Attach pruning with an all-ones mask to ``module.name`` (nothing pruned).

    Returns the module, now with ``name_orig``, ``name_mask`` and a forward pre-hook.

    Examples
    --------
    >>> import torch
    >>> from prune_explorer import prune
    >>> m = prune.identity(torch.nn.Linear(2, 2), "bias")
    >>> sorted(k for k in m.state_dict())
    ['bias_mask', 'bias_orig', 'weight']
    """
    Identity._attach("identity", module, name, None)
    return module


def random_unstructured(
    module: nn.Module, name: str, amount: float | int, *,
    generator: torch.Generator | None = None, ties: str | None = None,
) -> nn.Module:
    """Prune ``amount`` entries of ``module.name`` chosen at random.

    Parameters
    ----------
    module, name
        The module and the name of the parameter to prune.
    amount
        Fraction in [0, 1] or count >= 0 of entries to prune.
    generator
        Optional ``torch.Generator``; by default the global RNG is used exactly as torch does.
    ties
        ``"index"`` or ``"torch"``: how draws tied at the cut are split (see
        :func:`prune_explorer.prune.tie_break`); default: the enclosing block's rule, "index".

    Examples
    --------
    >>> import torch
    >>> from prune_explorer import prune
    >>> m = prune.random_unstructured(torch.nn.Linear(10, 10), "weight", amount=0.3)
    >>> int((m.weight_mask == 0).sum())
    30
    """
    RandomUnstructured._attach("random_unstructured", module, name, None,
                               amount=amount, generator=generator, ties=ties)
    return module


def l1_unstructured(
    module: nn.Module, name: str, amount: float | int,
    importance_scores: torch.Tensor | None = None, *, ties: str | None = None,
) -> nn.Module:
    """Prune the ``amount`` entries of ``module.name`` with the smallest ``|importance|``.

    ``importance_scores`` defaults to the parameter itself. ``ties`` (``"index"`` or
    ``"torch"``) says how entries tied at the cut are split (see
    :func:`prune_explorer.prune.tie_break`); default: the enclosing block's rule, "index".

    Examples
    --------
    >>> import torch
    >>> from prune_explorer import prune
    >>> m = torch.nn.Linear(2, 1)
    >>> with torch.no_grad():
    ...     _ = m.weight.copy_(torch.tensor([[0.5, -3.0]]))
    >>> prune.l1_unstructured(m, "weight", amount=1).weight.tolist()
    [[0.0, -3.0]]
    """
    L1Unstructured._attach("l1_unstructured", module, name, importance_scores,
                           amount=amount, ties=ties)
    return module


def random_structured(
    module: nn.Module, name: str, amount: float | int, dim: int, *,
    generator: torch.Generator | None = None,
) -> nn.Module:
    """Prune ``amount`` random slices of ``module.name`` along ``dim``.

    ``dim`` is a dim of the tensor as stored, whatever the layer: output units are dim 0 of a
    ``Linear`` or convolution weight but dim 1 of a ``transformers`` ``Conv1D`` (stored
    (in, out)) or a transposed convolution (:func:`prune_explorer.prune.layers.out_dim`).

    Examples
    --------
    >>> import torch
    >>> from prune_explorer import prune
    >>> m = prune.random_structured(torch.nn.Linear(4, 6), "weight", amount=2, dim=0)
    >>> int((m.weight_mask.sum(dim=1) == 0).sum())
    2
    """
    RandomStructured._attach("random_structured", module, name, None,
                             amount=amount, dim=dim, generator=generator)
    return module


def ln_structured(
    module: nn.Module, name: str, amount: float | int, n: Any, dim: int,
    importance_scores: torch.Tensor | None = None,
) -> nn.Module:
    """Prune the ``amount`` slices of ``module.name`` along ``dim`` with the lowest ``n``-norm.

    ``dim`` is a dim of the tensor as stored, whatever the layer: output units are dim 0 of a
    ``Linear`` or convolution weight but dim 1 of a ``transformers`` ``Conv1D`` (stored
    (in, out)) or a transposed convolution (:func:`prune_explorer.prune.layers.out_dim`).
    Slices whose norms tie across the cut are kept lowest index first, on every device (see
    :class:`~prune_explorer.prune.LnStructured`).

    Examples
    --------
    >>> import torch
    >>> from prune_explorer import prune
    >>> m = prune.ln_structured(torch.nn.Conv2d(3, 8, 3), "weight", amount=0.5, n=2, dim=0)
    >>> int((m.weight_mask.sum(dim=(1, 2, 3)) == 0).sum())
    4
    """
    LnStructured._attach("ln_structured", module, name, importance_scores,
                         amount=amount, n=n, dim=dim)
    return module


def custom_from_mask(module: nn.Module, name: str, mask: torch.Tensor) -> nn.Module:
    """Prune ``module.name`` where ``mask`` is 0.

    Examples
    --------
    >>> import torch
    >>> from prune_explorer import prune
    >>> m = prune.custom_from_mask(torch.nn.Linear(2, 1), "bias", torch.tensor([0.0]))
    >>> m.bias_mask.tolist(), bool(m.bias == 0)
    ([0.0], True)
    """
    CustomFromMask._attach("custom_from_mask", module, name, None, mask=mask)
    return module


def preview_mask(
    module: nn.Module,
    name: str,
    method: BasePruningMethod,
    importance_scores: torch.Tensor | None = None,
) -> torch.Tensor:
    """The mask ``method`` would leave on ``module.name`` if applied now; nothing is changed.

    Exactly what ``type(method).apply(module, name, ...)`` would install (same fast paths, same
    ``PruningContainer`` combination on an already-pruned tensor), but the module, its hooks and
    the method's containers are left alone. Random methods draw from the RNG as ``apply`` would.

    Parameters
    ----------
    module, name
        The module and the name of the (possibly already pruned) parameter.
    method
        A method instance holding the settings, e.g. ``prune.L1Unstructured(amount=0.3)``.
    importance_scores
        As for ``apply``; defaults to the tensor's current values.

    Examples
    --------
    >>> import torch
    >>> from prune_explorer import prune
    >>> layer = torch.nn.Linear(4, 4)
    >>> mask = prune.preview_mask(layer, "weight", prune.L1Unstructured(amount=6))
    >>> int((mask == 0).sum()), prune.is_pruned(layer)
    (6, False)
    """
    where = "preview_mask"
    if not isinstance(method, BasePruningMethod):
        raise TypeError(problem(where, "method", "a prune_explorer.prune method instance",
                                type(method).__name__))
    current = _module.current_tensor(module, name, where)
    old = _module.find_hook(module, name, where)
    if importance_scores is not None:
        check_same_shape(importance_scores, current, where, "importance_scores",
                         f"parameter {name!r}")
    scores = current if importance_scores is None else importance_scores
    previous_name = method._tensor_name
    method._tensor_name = name
    try:
        return method._mask_for(module, name, scores, current, old)
    finally:
        method._tensor_name = previous_name


# ----------------------------------------------------------------------------------------------
# global_unstructured


def global_masks(
    parameters: Iterable[tuple[nn.Module, str]],
    pruning_method: type[BasePruningMethod],
    importance_scores: dict[tuple[nn.Module, str], torch.Tensor] | None = None,
    **kwargs: Any,
) -> list[torch.Tensor]:
    """The masks :func:`global_unstructured` would install, in order, without changing anything.

    Useful for previews; same arguments as :func:`global_unstructured`.

    Examples
    --------
    >>> import torch
    >>> from prune_explorer import prune
    >>> a, b = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)
    >>> masks = prune.global_masks([(a, "weight"), (b, "weight")], prune.L1Unstructured, amount=8)
    >>> int(sum((m == 0).sum() for m in masks))
    8
    >>> prune.is_pruned(a)
    False
    """
    entries, method = global_setup(parameters, pruning_method, importance_scores, kwargs)
    return global_compute(entries, method)


def global_unstructured(
    parameters: Iterable[tuple[nn.Module, str]],
    pruning_method: type[BasePruningMethod],
    importance_scores: dict[tuple[nn.Module, str], torch.Tensor] | None = None,
    **kwargs: Any,
) -> None:
    """Prune the ``amount`` entries of lowest importance across several tensors at once.

    Each tensor gets a :class:`CustomFromMask` step holding its share of the global choice, as in
    torch. Unlike torch, large L1 selections build no concatenated copy of the model: the only
    model-sized memory is the masks and pruned weights that pruning has to create anyway.

    Parameters
    ----------
    parameters
        Iterable of ``(module, name)`` pairs.
    pruning_method
        An unstructured method class, e.g. :class:`L1Unstructured`.
    importance_scores
        Optional ``{(module, name): tensor}``; defaults to each tensor's current values.
    **kwargs
        Passed to ``pruning_method`` (``amount=...``).

    Examples
    --------
    >>> import torch
    >>> from prune_explorer import prune
    >>> net = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 2))
    >>> pairs = [(net[0], "weight"), (net[1], "weight")]
    >>> prune.global_unstructured(pairs, prune.L1Unstructured, amount=0.5)
    >>> int((net[0].weight_mask == 0).sum() + (net[1].weight_mask == 0).sum())
    40
    """
    entries, method = global_setup(parameters, pruning_method, importance_scores, kwargs)
    masks = global_compute(entries, method)
    with _module.transaction([(e.module, e.name) for e in entries]):
        for e, mask in zip(entries, masks, strict=True):
            step = CustomFromMask(mask)
            step._tensor_name = e.name
            _module.install(e.module, e.name, step, mask, e.old, PruningContainer)


# ----------------------------------------------------------------------------------------------
# Removal and inspection


def remove(module: nn.Module, name: str) -> nn.Module:
    """Make the pruning of ``module.name`` permanent: ``name`` becomes a plain parameter again
    (the original ``Parameter`` object, now holding the pruned values) and ``name_orig``,
    ``name_mask`` and the hook are gone.

    Examples
    --------
    >>> import torch
    >>> from prune_explorer import prune
    >>> m = prune.l1_unstructured(torch.nn.Linear(3, 3), "weight", amount=0.5)
    >>> sorted(prune.remove(m, "weight").state_dict())
    ['bias', 'weight']
    """
    where = "remove"
    if not isinstance(module, nn.Module):
        raise TypeError(problem(where, "module", "a torch.nn.Module", type(module).__name__))
    found = _module.find_hook(module, name, where)
    if found is None:
        pruned = sorted(pruned_parameters(module, recurse=False))
        raise _module.PruningStateError(problem(
            where, "name", f"a pruned tensor of {type(module).__name__} (pruned: {pruned})",
            name))
    key, hook = found
    hook.remove(module)
    del module._forward_pre_hooks[key]
    return module


def is_pruned(module: nn.Module) -> bool:
    """Whether ``module`` or any submodule carries a pruning hook (ours or torch's).

    Examples
    --------
    >>> import torch
    >>> from prune_explorer import prune
    >>> net = torch.nn.Sequential(torch.nn.Linear(2, 2))
    >>> prune.is_pruned(net), prune.is_pruned(prune.identity(net[0], "weight"))
    (False, True)
    """
    return any(
        isinstance(hook, HOOK_TYPE)
        for sub in module.modules()
        for hook in sub._forward_pre_hooks.values()
    )


def pruned_parameters(
    model: nn.Module, *, recurse: bool = True
) -> dict[str, tuple[_torch_prune.BasePruningMethod, ...]]:
    """Every pruned tensor of ``model`` by qualified name, with the chain of methods applied
    (ours, or torch's where torch pruned it).

    Examples
    --------
    >>> import torch
    >>> from prune_explorer import prune
    >>> net = torch.nn.Sequential(torch.nn.Linear(4, 4))
    >>> _ = prune.l1_unstructured(net[0], "weight", 0.5)
    >>> _ = prune.random_unstructured(net[0], "weight", 0.5)
    >>> {k: [type(m).__name__ for m in v] for k, v in prune.pruned_parameters(net).items()}
    {'0.weight': ['L1Unstructured', 'RandomUnstructured']}
    """
    out: dict[str, tuple[_torch_prune.BasePruningMethod, ...]] = {}
    modules = model.named_modules() if recurse else [("", model)]
    for prefix, sub in modules:
        for hook in sub._forward_pre_hooks.values():
            if isinstance(hook, HOOK_TYPE):
                chain = (tuple(hook) if isinstance(hook, _torch_prune.PruningContainer)
                         else (hook,))
                out[f"{prefix}.{hook._tensor_name}" if prefix else hook._tensor_name] = chain
    return out


def remove_all(model: nn.Module) -> nn.Module:
    """:func:`remove` every pruned tensor of ``model`` and its submodules; returns ``model``.

    Examples
    --------
    >>> import torch
    >>> from prune_explorer import prune
    >>> net = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 2))
    >>> _ = prune.l1_unstructured(net[0], "weight", 0.5)
    >>> _ = prune.l1_unstructured(net[1], "bias", 1)
    >>> prune.is_pruned(prune.remove_all(net))
    False
    """
    for sub in model.modules():
        hooks = sub._forward_pre_hooks.values()
        names = [h._tensor_name for h in hooks if isinstance(h, HOOK_TYPE)]
        for name in names:
            remove(sub, name)
    return model
