"""Tied parameters: one tensor under several names, pruned once, seen the same by every name.

In GPT-2, ``lm_head.weight`` *is* ``transformer.wte.weight`` (one ``Parameter`` held by two
modules); T5 holds one matrix under four names. ``torch.nn.utils.prune`` re-parametrises only the
module it is given: pruning ``wte`` moves the parameter to ``wte.weight_orig`` and gives ``wte``
a mask and a hook, while ``lm_head`` keeps using the unpruned values -- the tie is broken -- until
``prune.remove`` writes the pruned values into the shared parameter and ``lm_head`` silently
changes. The session lists such a tensor once
(:func:`~prune_explorer.session.model.targets.discover`: the first address in module order; the
others are its aliases), prunes it through that address, and after every change calls
:func:`share_pruning`: each alias module then holds the very same ``_orig`` parameter, ``_mask``
buffer, pruned copy and hook (or, once committed, the very same parameter). Forward passes,
``state_dict`` (``lm_head.weight_orig`` and ``lm_head.weight_mask`` are the same tensors as
``wte``'s) and commits all keep the tie, and undo returns to it.

A pruning hook reads ``<name>_orig`` and ``<name>_mask`` from the module it is called on, so an
alias under the same tensor name (``weight``) shares the very hook object. An alias under another
name (module ``a``'s ``weight`` is module ``b``'s ``embedding``) gets a shallow copy of the hook
acting on its own name (``b.embedding_orig`` and ``b.embedding_mask``, the same tensors as
``a.weight_orig`` and ``a.weight_mask``), renewed whenever the listed hook changes: the forward
and the ``state_dict`` keep the tie all the same. Only a sharded (DTensor) parameter, whose
pruned copy is computed on demand per module and name, is refused such a tie
(:func:`check_alias_names`).

Examples
--------
>>> import torch
>>> from prune_explorer import prune
>>> model = torch.nn.Sequential(torch.nn.Embedding(5, 3), torch.nn.Linear(3, 5, bias=False))
>>> model[1].weight = model[0].weight  # tied
>>> _ = prune.l1_unstructured(model[0], "weight", amount=0.4)
>>> share_pruning(model[0], "weight", [model[1]])
>>> model[1].weight_orig is model[0].weight_orig, model[1].weight_mask is model[0].weight_mask
(True, True)
>>> _ = prune.remove(model[0], "weight")
>>> share_pruning(model[0], "weight", [model[1]])
>>> model[1].weight is model[0].weight, sorted(model[1].state_dict())
(True, ['weight'])
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

from torch import nn

from prune_explorer.prune.engine import HOOK_TYPE

from ..errors import InvalidStepError
from ..tensors.sharded import is_dtensor
from .hooks import find_hook
from .targets import TensorInfo, split_address

__all__ = ["check_alias_names", "share_aliases", "share_pruning", "unshared"]


def _rename(mapping: dict[str, Any], old: str, new: str, value: Any) -> None:
    # Put ``value`` under ``new`` where ``old`` was (so pruning then undoing an alias gives
    # back its key order exactly); where ``old`` is absent, set ``new`` in place.
    if old not in mapping:
        mapping[new] = value
        return
    items = [(new if key == old else key, value if key == old else item)
             for key, item in mapping.items() if key != new]
    mapping.clear()
    mapping.update(items)


#: A copied hook's attribute naming the hook it copies (see :func:`share_pruning`).
_COPY_OF = "_tie_copy_of"

#: One alias of a tied tensor: its module, or its module and its tensor name when that is not
#: the listed tensor's.
Alias = nn.Module | tuple[nn.Module, str]


def _hook_for(source: Any, name: str, current: Any) -> Any:
    """The hook that prunes a tied tensor's alias named ``name``: ``source`` itself (same
    tensor name), else a shallow copy acting on ``name`` (``current`` if it is one already)."""
    if source._tensor_name == name:
        return source
    if getattr(current, _COPY_OF, None) is source:
        return current
    hook = copy.copy(source)
    hook._tensor_name = name
    setattr(hook, _COPY_OF, source)
    return hook


def share_pruning(module: nn.Module, name: str, others: Iterable[Alias]) -> None:
    """Make every alias of ``others`` hold the pruning state of ``module.<name>``.

    An alias is a module holding the parameter under the same name, or a pair ``(module,
    its name)``. Pruned: each gets the same ``_orig`` parameter, ``_mask`` buffer and pruned
    copy as ``module``, and its pruning hook (the very object under the same name; a copy
    acting on its own name under another). Not pruned (never, undone or committed): each holds
    the very parameter ``module.<name>`` again, without mask or hook. Only entries for the
    alias's name change; the others keep their order, and a hook is replaced where it was.
    Idempotent.

    Examples
    --------
    >>> import torch
    >>> from prune_explorer import prune
    >>> table = torch.nn.Embedding(5, 3)
    >>> head = torch.nn.Module()
    >>> head.embedding = table.weight  # tied under another name
    >>> _ = prune.l1_unstructured(table, "weight", amount=0.4)
    >>> share_pruning(table, "weight", [(head, "embedding")])
    >>> head.embedding_orig is table.weight_orig, head.embedding_mask is table.weight_mask
    (True, True)
    >>> sorted(head.state_dict())
    ['embedding_mask', 'embedding_orig']
    """
    found = find_hook(module, name)
    for alias in others:
        other, other_name = alias if isinstance(alias, tuple) else (alias, name)
        place = None  # the key of the alias's hook for its name, where it has one
        for key, hook in list(other._forward_pre_hooks.items()):
            if isinstance(hook, HOOK_TYPE) and getattr(hook, "_tensor_name", None) == other_name:
                if place is None:
                    place = key
                else:
                    del other._forward_pre_hooks[key]
        if found is None:
            if place is not None:
                del other._forward_pre_hooks[place]
            other._buffers.pop(other_name + "_mask", None)
            other.__dict__.pop(other_name, None)
            _rename(other._parameters, other_name + "_orig", other_name, module._parameters[name])
            continue
        current = None if place is None else other._forward_pre_hooks[place]
        hook = _hook_for(found[1], other_name, current)
        _rename(other._parameters, other_name, other_name + "_orig",
                module._parameters[name + "_orig"])
        other._buffers[other_name + "_mask"] = module._buffers[name + "_mask"]
        if name in module.__dict__:
            other.__dict__[other_name] = module.__dict__[name]
        else:  # sharded tensors compute it on demand
            other.__dict__.pop(other_name, None)
        if place is None:
            other.register_forward_pre_hook(hook)
        elif current is not hook:
            other._forward_pre_hooks[place] = hook


def check_alias_names(model: nn.Module, info: TensorInfo, where: str) -> None:
    """Refuse to prune a sharded (DTensor) tied tensor whose aliases use another tensor name
    (``a.weight`` tied to ``b.embedding``): its pruned copy is computed on demand by the module
    and name it was pruned under, which a copied hook under another name does not set up.

    Raises
    ------
    InvalidStepError
        Naming the tensor and the alias.
    """
    other = next((a for a in info.aliases if split_address(a)[1] != info.tensor_name), None)
    module = model.get_submodule(info.module_name)
    param = module._parameters.get(info.tensor_name + "_orig",
                                   module._parameters.get(info.tensor_name))
    if other is not None and is_dtensor(param):
        raise InvalidStepError(
            f"{where}: target {info.name!r} is a sharded (DTensor) parameter tied to {other!r}, "
            f"which holds it under another name; a sharded tied tensor can be pruned only "
            f"where every alias uses the same tensor name ({info.tensor_name!r})",
            "target",
        )


def share_aliases(model: nn.Module, info: TensorInfo) -> None:
    """:func:`share_pruning` from the tensor ``info`` describes to the modules of its aliases."""
    if info.aliases:
        share_pruning(model.get_submodule(info.module_name), info.tensor_name,
                      [_alias(model, a) for a in info.aliases])


def _alias(model: nn.Module, address: str) -> tuple[nn.Module, str]:
    module_name, name = split_address(address)
    return model.get_submodule(module_name), name


def unshared(model: nn.Module, info: TensorInfo) -> tuple[str, ...]:
    """Aliases of the tensor ``info`` describes that do not hold its pruning state (stock
    ``torch.nn.utils.prune`` pruned it under one name only, which unties the names).

    Examples
    --------
    >>> import torch
    >>> from prune_explorer import prune
    >>> from prune_explorer.session.model.targets import discover
    >>> model = torch.nn.Sequential(torch.nn.Embedding(5, 3), torch.nn.Linear(3, 5, bias=False))
    >>> model[1].weight = model[0].weight
    >>> _ = prune.l1_unstructured(model[0], "weight", amount=0.4)  # as torch does: untied
    >>> unshared(model, discover(model)["0.weight"])
    ('1.weight',)
    """
    module, name = model.get_submodule(info.module_name), info.tensor_name
    pruned = find_hook(module, name) is not None
    out = []
    for alias in info.aliases:
        other, other_name = model.get_submodule(split_address(alias)[0]), split_address(alias)[1]
        if pruned:
            orig, mask = module._parameters[name + "_orig"], module._buffers[name + "_mask"]
            same = (other._parameters.get(other_name + "_orig") is orig
                    and other._buffers.get(other_name + "_mask") is mask)
        else:
            same = other._parameters.get(other_name) is module._parameters[name]
        if not same:
            out.append(alias)
    return tuple(out)
