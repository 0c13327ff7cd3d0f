"""Masks computed without touching the model: the engine behind ``Session.preview``.

For one tensor, this does what ``torch.nn.utils.prune`` does inside ``apply`` -- build the method,
take the current mask (or ones) and the current tensor as importance, and, if the tensor is already
pruned, let a ``PruningContainer`` of the existing methods plus the new one combine the masks --
but never registers anything on the module (``prune.preview_mask`` and ``prune.global_masks`` do the
work, on the same fast paths as applying).

Nothing here copies the model: the cost is the mask computation itself.

Examples
--------
>>> import torch
>>> from prune_explorer.session.compute import local_mask
>>> from prune_explorer.session import Step
>>> layer = torch.nn.Linear(4, 2)
>>> mask = local_mask(layer, "weight", Step("l1_unstructured", "weight", amount=0.5))
>>> int(mask.sum()), hasattr(layer, "weight_mask")
(4, False)
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from prune_explorer import prune

from .methods import METHODS
from .seeding import generator_for, ties_for
from .step import Step, split_address

__all__ = ["global_masks", "local_mask", "make_method"]


def make_method(method: str, settings: dict[str, Any], tensor_name: str, device: torch.device,
                seed: int | None = None) -> Any:
    """Instantiate the ``prune`` class for ``method`` with ``settings`` (and a generator seeded
    with ``seed`` for random methods)."""
    spec = METHODS[method]
    cls = getattr(prune, spec.cls)
    kwargs = dict(settings)
    kwargs.update(generator_for(method, seed, device))
    kwargs.update(ties_for(method))
    if "mask" in kwargs:
        kwargs["mask"] = kwargs["mask"].unpack(device=device)
    obj = cls(**kwargs)
    obj._tensor_name = tensor_name
    return obj


def local_mask(module: nn.Module, tensor_name: str, step: Step) -> torch.Tensor:
    """The mask ``step`` (a single-tensor step) would leave on ``module.<tensor_name>``."""
    current = getattr(module, tensor_name)  # the Parameter, or orig * mask if pruned
    method = make_method(step.method, dict(step.settings), tensor_name, current.device, step.seed)
    with torch.no_grad():
        return prune.preview_mask(module, tensor_name, method)


def global_masks(model: nn.Module, step: Step) -> dict[str, torch.Tensor]:
    """The masks a ``global_unstructured`` step would leave on each of its targets."""
    pairs = []
    for address in step.targets:
        module_name, tensor_name = split_address(address)
        pairs.append((model.get_submodule(module_name), tensor_name))
    method = step.settings["pruning_method"]
    cls = getattr(prune, METHODS[method].cls)
    rng = generator_for(method, step.seed, getattr(*pairs[0]).device)
    with torch.no_grad():
        masks = prune.global_masks(pairs, cls, amount=step.settings["amount"], **rng,
                                   **ties_for(method))
    return dict(zip(step.targets, masks, strict=True))
