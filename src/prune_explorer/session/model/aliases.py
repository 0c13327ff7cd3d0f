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

Sharing the hook object works because a pruning hook reads ``<name>_orig`` and ``<name>_mask``
from the module it is called on; so the alias must use the same tensor name (``weight``), which
:func:`check_alias_names` checks.

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

from collections.abc import Iterable, Mapping
from typing import Any

from torch import nn

from prune_explorer.prune.engine import HOOK_TYPE

from ..errors import InvalidStepError
from ..steps.step import Step, split_address
from .hooks import find_hook
from .targets import TensorInfo

__all__ = ["check_alias_names", "share_aliases", "share_pruning", "tied_step", "unshared"]


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


def share_pruning(module: nn.Module, name: str, others: Iterable[nn.Module]) -> None:
    """Make every module of ``others`` hold the pruning state of ``module.<name>``.

    Pruned: each gets the same ``<name>_orig`` parameter, ``<name>_mask`` buffer, pruned copy
    ``<name>`` and pruning hook as ``module``. Not pruned (never, undone or committed): each
    holds the very parameter ``module.<name>`` again, without mask or hook. Only entries for
    ``name`` change; the others keep their order. Idempotent.
    """
    found = find_hook(module, name)
    for other in others:
        keep = None
        for key, hook in list(other._forward_pre_hooks.items()):
            if isinstance(hook, HOOK_TYPE) and getattr(hook, "_tensor_name", None) == name:
                if found is not None and hook is found[1] and keep is None:
                    keep = key  # already shared: leave it where it is
                else:
                    del other._forward_pre_hooks[key]
        if found is None:
            other._buffers.pop(name + "_mask", None)
            other.__dict__.pop(name, None)
            _rename(other._parameters, name + "_orig", name, module._parameters[name])
            continue
        _rename(other._parameters, name, name + "_orig", module._parameters[name + "_orig"])
        other._buffers[name + "_mask"] = module._buffers[name + "_mask"]
        if name in module.__dict__:
            other.__dict__[name] = module.__dict__[name]
        else:  # sharded tensors compute it on demand
            other.__dict__.pop(name, None)
        if keep is None:
            other.register_forward_pre_hook(found[1])


def check_alias_names(info: TensorInfo, where: str) -> None:
    """Refuse to prune a tied tensor whose aliases use another tensor name (``a.weight`` tied
    to ``b.embedding``): a shared hook could not serve them both.

    Raises
    ------
    InvalidStepError
        Naming the tensor and the alias.
    """
    for alias in info.aliases:
        if alias.rpartition(".")[2] != info.tensor_name:
            raise InvalidStepError(
                f"{where}: target {info.name!r} is tied to {alias!r}, which holds it under "
                f"another name; tied tensors can be pruned only where every alias uses the same "
                f"tensor name ({info.tensor_name!r})",
                "target",
            )


def share_aliases(model: nn.Module, info: TensorInfo) -> None:
    """:func:`share_pruning` from the tensor ``info`` describes to the modules of its aliases."""
    if info.aliases:
        share_pruning(model.get_submodule(info.module_name), info.tensor_name,
                      [model.get_submodule(split_address(a)[0]) for a in info.aliases])


def tied_step(step: Step, known: Mapping[str, TensorInfo], aliases: Mapping[str, str],
              where: str) -> Step:
    """``step`` acting on the listed address of each tied tensor it names through an alias
    (each tensor once), after :func:`check_alias_names`; ``step`` itself when it names none."""
    targets = list(dict.fromkeys(aliases.get(t, t) for t in step.targets))
    if targets != list(step.targets):
        step = Step._build(where, step.method, targets if step.is_global else targets[0],
                           step.settings, step.seed)
    for name in targets:
        if name in known:
            check_alias_names(known[name], where)
    return step


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
