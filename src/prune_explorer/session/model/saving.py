"""Saving a pruned model the way its library saves it, and a warning where that loses the pruning.

A tensor pruned through ``torch.nn.utils.prune`` is no parameter any more: the model holds
``weight_orig`` (a parameter) and ``weight_mask`` (a buffer), and a forward pre-hook computes
``weight``. ``state_dict()`` has those two names, not ``weight``, so a library's loader
(``transformers``' ``from_pretrained``, ``timm.create_model(..., checkpoint_path=...)``, a plain
``load_state_dict`` into a fresh model) finds ``weight`` missing and initialises it anew: the
pruning is lost, silently. Two ways keep it:

* :meth:`Session.commit` makes the pruning permanent in the session's model (``prune.remove``;
  not undoable); then ``model.save_pretrained(path)`` or ``torch.save(model.state_dict(), ...)``
  saves plain tensors that the library loads exactly;
* :meth:`Session.plain_model` returns a plain copy with the pruning made permanent and leaves
  the session (and its undo) as it is; save that.

A ``Session`` guards a model that has ``save_pretrained`` (Hugging Face models): on this one
object (not its class), ``save_pretrained`` warns with :class:`PruningNotSavedWarning` while any
tensor is still pruned through a hook, and ``tie_weights`` -- which fails on a pruned tied
embedding with an ``AttributeError`` naming no cause -- says why and what to do.

Examples
--------
>>> import torch
>>> from prune_explorer import Session
>>> from prune_explorer.session.model.saving import hooked_tensors
>>> model = torch.nn.Sequential(torch.nn.Linear(4, 2))
>>> s = Session(model)
>>> _ = s.apply("0.weight", "l1_unstructured", amount=0.5)
>>> hooked_tensors(model), sorted(s.plain_model().state_dict())
(['0.weight'], ['0.bias', '0.weight'])
"""

from __future__ import annotations

import types
import warnings
from typing import Any

from torch import nn

from prune_explorer import prune

from ..errors import PruningNotMergedError, PruningNotSavedWarning

__all__ = ["PruningNotMergedError", "PruningNotSavedWarning", "guard_merging", "guard_saving",
           "hooked_tensors"]


def hooked_tensors(model: nn.Module) -> list[str]:
    """Addresses of the tensors of ``model`` still pruned through a forward pre-hook."""
    return [f"{module_name}.{name}" if module_name else name
            for module_name, module in model.named_modules()
            for name in prune.pruned_parameters(module, recurse=False)]


def _names(hooked: list[str]) -> str:
    shown = ", ".join(repr(n) for n in hooked[:3])
    return shown + (f" and {len(hooked) - 3} more" if len(hooked) > 3 else "")


_FIX = ("call Session.commit() first (pruning made permanent, not undoable), or save "
        "Session.plain_model(), a plain pruned copy")


def save_pretrained(self: Any, *args: Any, **kwargs: Any) -> Any:
    """The library's ``save_pretrained``, with a warning while tensors are pruned by hooks."""
    hooked = hooked_tensors(self)
    if hooked:
        warnings.warn(
            f"save_pretrained: {len(hooked)} tensor{'s' * (len(hooked) != 1)} of "
            f"{type(self).__name__} {'are' if len(hooked) != 1 else 'is'} pruned through "
            f"forward pre-hooks ({_names(hooked)}); the checkpoint stores their '_orig' values "
            "and '_mask' buffers, which from_pretrained does not load, so the pruning would be "
            f"lost; {_FIX}", PruningNotSavedWarning, stacklevel=2)
    return type(self).save_pretrained(self, *args, **kwargs)


def tie_weights(self: Any, *args: Any, **kwargs: Any) -> Any:
    """The library's ``tie_weights``, saying why it fails on a pruned tied tensor."""
    try:
        return type(self).tie_weights(self, *args, **kwargs)
    except AttributeError as err:
        hooked = hooked_tensors(self)
        if not hooked:
            raise
        raise AttributeError(
            f"tie_weights: {_names(hooked)} {'are' if len(hooked) != 1 else 'is'} pruned "
            "through forward pre-hooks, so the tied parameter is now '<name>_orig' and the "
            f"library cannot tie to it ({err}); {_FIX}") from err


def guard_saving(model: nn.Module) -> None:
    """Give ``model`` itself (not its class) the checked ``save_pretrained`` and
    ``tie_weights`` above, where its class has them. Copies (``copy.deepcopy``) keep them;
    pickles are loaded without them (the class's methods)."""
    for checked in (save_pretrained, tie_weights):
        name = checked.__name__
        if callable(getattr(type(model), name, None)) and name not in vars(model):
            object.__setattr__(model, name, types.MethodType(checked, model))


#: The methods of peft models and tuners that write an adapter's delta into its base layer.
MERGING = ("merge_and_unload", "merge_adapter")


def _merging(name: str) -> Any:
    def checked(self: Any, *args: Any, **kwargs: Any) -> Any:
        hooked = [n for n in hooked_tensors(self) if ".base_layer." in f".{n}"]
        if hooked:
            raise PruningNotMergedError(
                f"{name}: {_names(hooked)} {'are' if len(hooked) != 1 else 'is'} pruned through "
                "forward pre-hooks (not committed): merging adds the adapter's delta to the "
                "pruned copy, which the hook computes again from '<name>_orig' at the next "
                "forward, so the delta would be lost. Call Session.commit() first, then merge "
                "(the delta is dense: prune the merged model again to keep the sparsity)")
        return getattr(type(self), name)(self, *args, **kwargs)

    checked.__name__ = name
    checked.__doc__ = f"The library's ``{name}``, refused while a base layer is pruned by a hook."
    return checked


def guard_merging(model: nn.Module) -> None:
    """Give each module of ``model`` whose class merges adapters (peft's ``PeftModel`` and its
    tuner, e.g. ``LoraModel``: :data:`MERGING`) a checked method on the object itself, which
    refuses with :class:`PruningNotMergedError` while a LoRA base layer is pruned through a
    hook. ``PeftModel.merge_and_unload`` reaches its tuner's, so both are guarded."""
    for module in model.modules():
        for name in MERGING:
            if callable(getattr(type(module), name, None)) and name not in vars(module):
                object.__setattr__(module, name, types.MethodType(_merging(name), module))
