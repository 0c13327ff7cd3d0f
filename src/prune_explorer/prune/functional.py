"""The function API: thin façades over the method classes, plus model-wide helpers."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch import nn

from . import _module, _sharded
from ._context import calling
from ._select import SMALL, exact_ties, select_smallest, supports_fast_select
from ._validation import check_amount_fits, check_same_shape, nparams_to_prune, problem
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

__all__ = [
    "custom_from_mask",
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
    with calling("identity"):
        Identity.apply(module, name)
    return module


def random_unstructured(
    module: nn.Module, name: str, amount: float | int, *, generator: torch.Generator | None = None
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

    Examples
    --------
    >>> import torch
    >>> from prune_explorer import prune
    >>> m = prune.random_unstructured(torch.nn.Linear(10, 10), "weight", amount=0.3)
    >>> int((m.weight_mask == 0).sum())
    30
    """
    with calling("random_unstructured"):
        RandomUnstructured.apply(module, name, amount, generator=generator)
    return module


def l1_unstructured(
    module: nn.Module, name: str, amount: float | int,
    importance_scores: torch.Tensor | None = None,
) -> nn.Module:
    """Prune the ``amount`` entries of ``module.name`` with the smallest ``|importance|``.

    ``importance_scores`` defaults to the parameter itself.

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
    with calling("l1_unstructured"):
        L1Unstructured.apply(module, name, amount=amount, importance_scores=importance_scores)
    return module


def random_structured(
    module: nn.Module, name: str, amount: float | int, dim: int, *,
    generator: torch.Generator | None = None,
) -> nn.Module:
    """Prune ``amount`` random slices of ``module.name`` along ``dim``.

    Examples
    --------
    >>> import torch
    >>> from prune_explorer import prune
    >>> m = prune.random_structured(torch.nn.Linear(4, 6), "weight", amount=2, dim=0)
    >>> int((m.weight_mask.sum(dim=1) == 0).sum())
    2
    """
    with calling("random_structured"):
        RandomStructured.apply(module, name, amount, dim, generator=generator)
    return module


def ln_structured(
    module: nn.Module, name: str, amount: float | int, n: Any, dim: int,
    importance_scores: torch.Tensor | None = None,
) -> nn.Module:
    """Prune the ``amount`` slices of ``module.name`` along ``dim`` with the lowest ``n``-norm.

    Examples
    --------
    >>> import torch
    >>> from prune_explorer import prune
    >>> m = prune.ln_structured(torch.nn.Conv2d(3, 8, 3), "weight", amount=0.5, n=2, dim=0)
    >>> int((m.weight_mask.sum(dim=(1, 2, 3)) == 0).sum())
    4
    """
    with calling("ln_structured"):
        LnStructured.apply(module, name, amount, n, dim, importance_scores=importance_scores)
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
    with calling("custom_from_mask"):
        CustomFromMask.apply(module, name, mask=mask)
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
    with calling(where):
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


class _Entry:
    """One (module, name) of a global pruning call, with what it is pruned against."""

    def __init__(self, module: nn.Module, name: str, scores: torch.Tensor | None) -> None:
        where = "global_unstructured"
        self.module = module
        self.name = name
        self.current = _module.current_tensor(module, name, where)
        self.old = _module.find_hook(module, name, where)
        self.old_mask: torch.Tensor | None = (
            module._buffers[name + "_mask"] if self.old is not None else None
        )
        if scores is not None:
            check_same_shape(scores, self.current, where, "importance_scores",
                             f"parameter {name!r}")
        self.scores = self.current if scores is None else scores

    @property
    def mask_dtype(self) -> torch.dtype:
        return self.old_mask.dtype if self.old_mask is not None else self.current.dtype


def _parse_global_args(
    parameters: Any, importance_scores: Any
) -> list[_Entry]:
    where = "global_unstructured"
    if not isinstance(parameters, Iterable):
        raise TypeError(problem(where, "parameters", "an iterable of (module, name) pairs",
                                type(parameters).__name__))
    pairs = list(parameters)
    if not pairs:
        raise ValueError(problem(where, "parameters", "a non-empty iterable of (module, name)",
                                 pairs))
    if importance_scores is None:
        importance_scores = {}
    if not isinstance(importance_scores, dict):
        raise TypeError(problem(where, "importance_scores",
                                "a dict {(module, name): tensor} or None",
                                type(importance_scores).__name__))
    seen: set[tuple[int, str]] = set()
    entries = []
    for i, pair in enumerate(pairs):
        if not (isinstance(pair, tuple) and len(pair) == 2):
            raise TypeError(problem(where, f"parameters[{i}]", "a (module, name) tuple", pair))
        module, name = pair
        key = (id(module), name)
        if key in seen:
            raise ValueError(problem(where, f"parameters[{i}]", "listed only once", pair[1]))
        seen.add(key)
        entries.append(_Entry(module, name, importance_scores.get(pair)))
    return entries


def _common_dtype(tensors: Iterable[torch.Tensor]) -> torch.dtype:
    dtypes = [t.dtype for t in tensors]
    out = dtypes[0]
    for d in dtypes[1:]:
        out = torch.promote_types(out, d)
    return out


def _global_masks_torch_rule(
    entries: list[_Entry], method: BasePruningMethod
) -> list[torch.Tensor]:
    """torch's own algorithm: one concatenated vector, one container step, then slices."""
    device = entries[0].current.device
    scores = torch.cat([e.scores.reshape(-1).to(device) for e in entries])
    defaults = [
        e.old_mask if e.old_mask is not None else torch.ones_like(e.current) for e in entries
    ]
    default = torch.cat([d.reshape(-1).to(device) for d in defaults])
    chain = PruningContainer()
    chain._tensor_name = "temp"
    method._tensor_name = "temp"
    chain.add_pruning_method(method)
    final = chain.compute_mask(scores, default)
    masks, start = [], 0
    for e, d in zip(entries, defaults, strict=True):
        piece = final[start:start + e.current.numel()].view_as(e.current)
        masks.append(d * piece.to(dtype=d.dtype, device=d.device))
        start += e.current.numel()
    return masks


def _global_l1(entries: list[_Entry], method: L1Unstructured) -> list[torch.Tensor] | None:
    """Exact global L1 selection with one mask-sized buffer per tensor and no concatenation.

    Each tensor's new mask buffer first holds its keys (|score|, NaN where already pruned), the
    threshold is found across all buffers, and the comparison is then written over them.
    """
    dtype = _common_dtype(e.scores for e in entries)
    if not supports_fast_select(dtype):
        return None
    masks, keys, candidates = [], [], 0
    for e in entries:
        mask = torch.empty(e.current.shape, dtype=e.mask_dtype, device=e.current.device)
        if e.scores.dtype == dtype == mask.dtype:
            torch.abs(e.scores, out=mask)
            key = mask.view(-1)
        else:
            key = torch.abs(e.scores.to(dtype)).reshape(-1)
        if e.old_mask is not None:
            alive = e.old_mask.reshape(-1) == 1
            candidates += int(torch.count_nonzero(alive))
            key.masked_fill_(~alive.to(key.device), float("nan"))
        else:
            candidates += key.numel()
        masks.append(mask)
        keys.append(key)
    k = _global_count(method, candidates)
    if k == 0:
        return [torch.ones_like(m) if e.old_mask is None else e.old_mask.clone()
                for m, e in zip(masks, entries, strict=True)]
    thr = select_smallest(keys, k, exact_ties=exact_ties())
    if thr is None:  # ties (in "torch" mode) or NaN among the pruned: torch's rule decides
        return None
    for i, (mask, key, e) in enumerate(zip(masks, keys, entries, strict=True)):
        thr.write_unselected(key, mask.view(-1), i)
        if e.old_mask is not None:  # already pruned entries (NaN keys above) stay pruned
            mask.mul_(e.old_mask.to(mask.device))
    return masks


def _global_random(entries: list[_Entry], method: RandomUnstructured) -> list[torch.Tensor]:
    """Global random pruning with exactly torch's single draw over all unpruned entries."""
    dtype = _common_dtype(e.scores for e in entries)
    device = entries[0].current.device
    alive = [None if e.old_mask is None else (e.old_mask.reshape(-1) == 1) for e in entries]
    counts = [e.current.numel() if a is None else int(torch.count_nonzero(a))
              for e, a in zip(entries, alive, strict=True)]
    total = sum(counts)
    k = _global_count(method, total)
    prob = method._draw_like(torch.empty(total, dtype=dtype, device=device)) if k else None
    keep = torch.ones(total, dtype=torch.bool, device=device)
    if prob is not None:
        pruned = None
        if total > SMALL and supports_fast_select(dtype):
            if k == total:
                pruned = keep
            else:
                thr = select_smallest([prob], total - k, exact_ties=True)
                pruned = None if thr is None else ~thr.selected(prob)
        if pruned is None:
            keep[torch.topk(prob, k=k).indices] = False
        else:
            keep = ~pruned
    masks, start = [], 0
    for e, a, c in zip(entries, alive, counts, strict=True):
        piece = keep[start:start + c].to(device=e.current.device, dtype=e.mask_dtype)
        start += c
        if a is None:
            masks.append(piece.view(e.current.shape).clone())
        else:
            mask = torch.zeros(e.current.shape, dtype=e.mask_dtype, device=e.current.device)
            mask.view(-1)[a] = piece
            masks.append(mask)
    return masks


def _global_count(method: BasePruningMethod, candidates: int) -> int:
    amount = method.amount  # type: ignore[attr-defined]
    check_amount_fits(amount, candidates, "global_unstructured", "entries left across tensors")
    return nparams_to_prune(amount, candidates)


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
    entries, method = _global_setup(parameters, pruning_method, importance_scores, kwargs)
    return _global_compute(entries, method)


def _global_setup(
    parameters: Any, pruning_method: Any, importance_scores: Any, kwargs: dict[str, Any]
) -> tuple[list[_Entry], BasePruningMethod]:
    with calling("global_unstructured"):
        entries = _parse_global_args(parameters, importance_scores)
        if not (isinstance(pruning_method, type)
                and issubclass(pruning_method, _module.HOOK_TYPE)):
            raise TypeError(problem("global_unstructured", "pruning_method",
                                    "a BasePruningMethod subclass", pruning_method))
        method = pruning_method(**kwargs)
        if method.PRUNING_TYPE != "unstructured":
            raise TypeError(problem(
                "global_unstructured", "pruning_method",
                "a method of PRUNING_TYPE 'unstructured' (e.g. L1Unstructured)",
                f"{pruning_method.__name__} ({method.PRUNING_TYPE})"))
    return entries, method


def _global_compute(entries: list[_Entry], method: BasePruningMethod) -> list[torch.Tensor]:
    if _sharded.any_sharded(e.current for e in entries):  # DTensors: collective, see _sharded
        with calling("global_unstructured"):
            return _sharded.global_masks(entries, method, _global_compute)
    with calling("global_unstructured"), torch.no_grad():
        total = sum(e.current.numel() for e in entries)
        fast = total > SMALL and getattr(method, "_has_own_compute_mask", lambda: False)()
        masks = None
        if fast and type(method) is L1Unstructured:
            masks = _global_l1(entries, method)
        elif fast and type(method) is RandomUnstructured:
            masks = _global_random(entries, method)
        if masks is None:
            masks = _global_masks_torch_rule(entries, method)
    return masks


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
    entries, method = _global_setup(parameters, pruning_method, importance_scores, kwargs)
    masks = _global_compute(entries, method)
    with _module.transaction([(e.module, e.name) for e in entries]):
        for e, mask in zip(entries, masks, strict=True):
            step = CustomFromMask(mask)
            step._tensor_name = e.name
            _module.install(e.module, e.name, step, mask, e.old)


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
        isinstance(hook, _module.HOOK_TYPE)
        for sub in module.modules()
        for hook in sub._forward_pre_hooks.values()
    )


def pruned_parameters(
    model: nn.Module, *, recurse: bool = True
) -> dict[str, tuple[BasePruningMethod, ...]]:
    """Every pruned tensor of ``model`` by qualified name, with the chain of methods applied.

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
    out: dict[str, tuple[BasePruningMethod, ...]] = {}
    modules = model.named_modules() if recurse else [("", model)]
    for prefix, sub in modules:
        for hook in sub._forward_pre_hooks.values():
            if isinstance(hook, _module.HOOK_TYPE):
                chain = tuple(hook) if hasattr(hook, "_pruning_methods") else (hook,)
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
        names = [h._tensor_name for h in hooks if isinstance(h, _module.HOOK_TYPE)]
        for name in names:
            remove(sub, name)
    return model
