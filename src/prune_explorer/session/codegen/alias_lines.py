"""Snippet lines that keep tied parameters tied on stock torch (see :mod:`..model.aliases`).

``torch.nn.utils.prune`` re-parametrises only the module it is given: pruning GPT-2's
``transformer.wte`` leaves ``lm_head`` on the unpruned values, and ``prune.remove`` later writes
the pruned values into the shared parameter under ``lm_head``'s feet. A session prunes a tied
tensor once and gives every alias the same state; the exported snippet does the same: it defines
a small ``share_pruning`` function once and calls it after every step on a tied tensor, with the
aliases the session knew.

Examples
--------
>>> print("\\n".join(call_lines("transformer.wte.weight", ("lm_head.weight",))))
# transformer.wte.weight is tied (one Parameter, also named lm_head.weight): keep it tied
share_pruning(model, "transformer.wte.weight", ["lm_head.weight"])
"""

from __future__ import annotations

from collections.abc import Sequence

from .pysource import py_comment, py_str

__all__ = ["FIND_CALL", "FIND_HELPER", "HELPER", "call_lines", "found_call_lines"]

#: The function the snippet defines once, when a step acts on a tied tensor (stock torch only).
HELPER: list[str] = '''

def share_pruning(model, address, aliases):
    # Tied weights are one Parameter under several names (GPT-2's lm_head.weight is
    # transformer.wte.weight). torch.nn.utils.prune re-parametrises only the module it is
    # given, which unties them: the other modules would keep the unpruned values, and
    # prune.remove would later change them. So every alias gets the same <name>_orig
    # Parameter, <name>_mask buffer and pruning hook (after prune.remove: the same Parameter).
    # A hook reads <its name>_orig and <its name>_mask, so an alias under another name
    # (a.weight is b.embedding) gets a copy of the hook acting on that name.
    module_name, _, name = address.rpartition(".")
    module = model.get_submodule(module_name)
    hooks = [hook for hook in module._forward_pre_hooks.values()
             if isinstance(hook, prune.BasePruningMethod) and hook._tensor_name == name]
    for alias in aliases:
        alias_module, _, alias_name = alias.rpartition(".")
        other = model.get_submodule(alias_module)
        for key, hook in list(other._forward_pre_hooks.items()):
            if isinstance(hook, prune.BasePruningMethod) and hook._tensor_name == alias_name:
                del other._forward_pre_hooks[key]
        for key in (alias_name, alias_name + "_orig"):
            other._parameters.pop(key, None)
        other._buffers.pop(alias_name + "_mask", None)
        other.__dict__.pop(alias_name, None)
        if not hooks:  # not pruned (any more): the very same Parameter again
            other._parameters[alias_name] = module._parameters[name]
            continue
        other._parameters[alias_name + "_orig"] = module._parameters[name + "_orig"]
        other._buffers[alias_name + "_mask"] = module._buffers[name + "_mask"]
        setattr(other, alias_name, getattr(module, name))
        hook = hooks[0]
        if alias_name != name:
            import copy
            hook = copy.copy(hook)
            hook._tensor_name = alias_name
        other.register_forward_pre_hook(hook)'''.splitlines()


def call_lines(address: str, aliases: Sequence[str]) -> list[str]:
    """The comment and the ``share_pruning`` call after a step on the tied tensor ``address``."""
    names = ", ".join(py_comment(a) for a in aliases)
    listed = ", ".join(py_str(a) for a in aliases)
    return [
        f"# {py_comment(address)} is tied (one Parameter, also named {names}): keep it tied",
        f"share_pruning(model, {py_str(address)}, [{listed}])",
    ]


#: Defined when the plan does not list the model's ties (a plan file written before plans
#: carried them): the snippet finds them on ``model`` itself, before its first step.
FIND_HELPER: list[str] = '''

def tied_names(model):
    # The plan file does not list the model's tied weights, so find them: one Parameter under
    # several names (a pruned one as <name>_orig, with its <name>_mask buffer beside it).
    names = {}
    for module_name, module in model.named_modules():
        for name, param in module.named_parameters(recurse=False, remove_duplicate=False):
            if name.endswith("_orig") and name[:-5] + "_mask" in module._buffers:
                name = name[:-5]
            address = f"{module_name}.{name}" if module_name else name
            names.setdefault(id(param), []).append(address)
    return {address: [other for other in group if other != address]
            for group in names.values() if len(group) > 1 for address in group}'''.splitlines()

#: The call that finds the ties, once, before the first step (see :data:`FIND_HELPER`).
FIND_CALL: list[str] = [
    "# This plan was saved without the model's tied weights: find them on `model` (see above)",
    "TIED = tied_names(model)",
]


def found_call_lines(addresses: Sequence[str]) -> list[str]:
    """The lines after a step on ``addresses`` when the ties were found on the model
    (:data:`FIND_HELPER`): each address tied there gives its other names its pruning."""
    listed = ", ".join(py_str(a) for a in addresses)
    return [
        f"for address in [{listed}]:  # those tied on this model stay tied",
        "    if address in TIED:",
        "        share_pruning(model, address, TIED[address])",
    ]
