"""Noticing pruning changed behind the session's back.

The session records, for each tensor, the objects it last left on the module: the parameter (or
``_orig`` parameter), the ``_mask`` buffer, the pruning hook and the methods in it, and the mask's
version counter. Pruning calls made on the model directly (``prune.remove``, another
``prune.l1_unstructured``...) replace at least one of them; ``load_state_dict`` and direct edits
write the mask in place, which bumps its version. Before acting on a tensor, the session
compares; a difference raises :class:`ModelChangedError` naming the tensor -- except a mask
replaced or rewritten with the very mask the history holds (``model.to``, ``model.half``,
reloading the same checkpoint), which is no change.

The session refuses rather than adopting the change into its history: an external ``remove`` has
already destroyed the original values, so undo could no longer restore them, and an external
prune has no recorded settings or seed, so the plan could no longer reproduce the model. Refusing
keeps the rule that the session never reports a state that is not the model's; start a new
``Session(model)`` to continue from the model as it is (it recognises the pruning found on it).

Pruning found on the model when a session starts is not a change behind its back but its
starting point, and it is said so rather than hidden: ``Session.found`` lists it, entry 0 of each
history holds its mask, ``reset()`` returns to it, and the explorer's Export tab warns that the
plan starts from it. It is not turned into steps: its settings and seeds are unknown, so a plan
could only fake them.

Examples
--------
>>> import torch
>>> from prune_explorer import Session, prune
>>> model = torch.nn.Sequential(torch.nn.Linear(4, 2))
>>> s = Session(model)
>>> _ = s.apply("0.weight", "l1_unstructured", amount=0.5)
>>> _ = prune.remove(model[0], "weight")
>>> try:
...     s.undo()
... except RuntimeError as err:
...     print(str(err)[:63])
Session.undo: tensor '0.weight' was changed outside the session
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch import nn

from ..errors import ModelChangedError
from .hooks import find_hook, hook_methods

__all__ = ["MASK_REPLACED", "MASK_WRITTEN", "MODULE_GONE", "ModelChangedError", "Seen",
           "changed_error", "describe_change", "missing_module", "seen", "structure_changed"]


def changed_error(where: str, name: str, change: str) -> ModelChangedError:
    """The one wording of "``name`` was changed behind the session's back" (``change``: how)."""
    return ModelChangedError(
        f"{where}: tensor {name!r} was changed outside the session ({change}); the session's "
        "history no longer describes it, so it refuses to act on it. Start a new "
        "Session(model) to continue from the model as it is")


def missing_module(model: nn.Module, names: dict[str, str]) -> tuple[str, str] | None:
    """The first ``(address, module name)`` of ``names`` (address -> module name) whose module
    is no longer in ``model`` -- an adapter merged or unloaded (peft's ``merge_and_unload``
    replaces each LoRA layer by its ``base_layer``), a module deleted -- or None."""
    for address, module_name in names.items():
        try:
            model.get_submodule(module_name)
        except AttributeError:
            return address, module_name
    return None


#: Why a tensor's module is gone, as :func:`changed_error` words it.
MODULE_GONE = ("its module {!r} is no longer in the model: an adapter merged or unloaded "
               "(peft's merge_and_unload), or a module removed or replaced")


def structure_changed(model: nn.Module, known: Mapping[str, Any], where: str
                      ) -> ModelChangedError | None:
    """The session's "model changed" error if the module of a tensor of ``known`` (address ->
    its ``TensorInfo``) is no longer in ``model``, else None. Asked after an
    ``AttributeError``, so the look-up per tensor is paid only then."""
    gone = missing_module(model, {name: info.module_name for name, info in known.items()})
    return None if gone is None else changed_error(where, gone[0], MODULE_GONE.format(gone[1]))


#: What :func:`describe_change` says when only the mask buffer object differs (the caller then
#: compares the mask's values: ``model.to`` and ``model.half`` replace buffers too).
MASK_REPLACED = "its mask buffer was replaced"
#: What :func:`describe_change` says when only the mask's version counter differs (written in
#: place: ``load_state_dict``, a direct edit); the caller compares values as for
#: :data:`MASK_REPLACED`.
MASK_WRITTEN = "its mask was written in place (load_state_dict or a direct edit)"

Seen = tuple[Any, Any, Any, tuple[Any, ...], int | None]


def seen(module: nn.Module, tensor_name: str) -> Seen:
    """The objects that make up ``module.<tensor_name>``'s pruning state now."""
    found = find_hook(module, tensor_name)
    if found is None:
        return (module._parameters.get(tensor_name), None, None, (), None)
    hook = found[1]
    mask = module._buffers.get(tensor_name + "_mask")
    return (module._parameters.get(tensor_name + "_orig"), mask, hook, hook_methods(hook),
            None if mask is None else mask._version)


def describe_change(before: Seen, now: Seen) -> str | None:
    """What differs between two :func:`seen` records, or None if nothing does."""
    (p0, m0, h0, c0, v0), (p1, m1, h1, c1, v1) = before, now
    if h0 is not None and h1 is None:
        return "it is no longer pruned: prune.remove or a direct edit made it a plain parameter"
    if h0 is None and h1 is not None:
        return "it was pruned by a call that did not go through the session"
    if p0 is not p1:
        return "its parameter was replaced"
    if h0 is not h1 or len(c0) != len(c1) or any(a is not b for a, b in zip(c0, c1, strict=True)):
        return "its pruning hook changed: it was pruned again by a call outside the session"
    if m0 is not m1:
        return MASK_REPLACED
    if v0 != v1:
        return MASK_WRITTEN
    return None
