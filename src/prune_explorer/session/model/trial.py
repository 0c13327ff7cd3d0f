"""A trial copy of a session's model: what the model would compute after a previewed step.

Used to measure a step before taking it (an accuracy readout next to the preview): the copy is
made under the session's lock, the previewed masks are written into the copy only, and the
caller evaluates it on any thread. The session's model is never touched.

Examples
--------
>>> import torch
>>> from prune_explorer.session import Session
>>> s = Session(torch.nn.Sequential(torch.nn.Linear(4, 2)))
>>> masks = {"0.weight": s.preview("0.weight", "l1_unstructured", amount=0.5)}
>>> copy = trial_copy(s, masks)
>>> int((copy[0].weight == 0).sum()), int((s.model[0].weight == 0).sum())
(4, 0)
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from .hooks import find_hook

__all__ = ["trial_copy"]


def trial_copy(session: Any, masks: Mapping[str, torch.Tensor] | None = None) -> nn.Module:
    """A deep copy of ``session.model`` with ``masks`` (by address, 1 = kept, as
    ``Session.preview`` returns them) in force; without ``masks``, the current state.

    A pruned tensor of the copy gets the mask in its ``<name>_mask`` buffer (its forward hook
    recomputes the weight); an unpruned one is multiplied by the mask in place.
    """
    with session.lock:
        for name in masks or {}:
            session.info(name)  # refuses unknown addresses with the session's message
        # A pruned tensor is an attribute computed by the hook (not a graph leaf), which
        # deepcopy refuses: hand it a detached copy instead.
        memo: dict[int, Any] = {}
        for name in session.names:
            info = session.info(name)
            module = session.model.get_submodule(info.module_name)
            if find_hook(module, info.tensor_name) is not None:
                tensor = getattr(module, info.tensor_name)
                memo[id(tensor)] = tensor.detach().clone()
        model = copy.deepcopy(session.model, memo)
    with torch.no_grad():
        for name, mask in (masks or {}).items():
            info = session.info(name)
            module = model.get_submodule(info.module_name)
            if find_hook(module, info.tensor_name) is not None:
                buffer = getattr(module, info.tensor_name + "_mask")
                buffer.copy_(mask.to(buffer.device, buffer.dtype))
                orig = getattr(module, info.tensor_name + "_orig")
                setattr(module, info.tensor_name, orig * buffer)
            else:
                tensor = getattr(module, info.tensor_name)
                tensor.mul_((mask != 0).to(tensor.device, tensor.dtype))
    return model
