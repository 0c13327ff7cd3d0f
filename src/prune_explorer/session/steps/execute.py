"""Running a step on a model with the ``torch.nn.utils.prune`` functions themselves.

Applying goes through the public functions (``prune.ln_structured(module, "weight", ...)``), so the
module ends up exactly as if the user had called them: same ``_orig``/``_mask`` tensors, same hook
and ``PruningContainer``. Random steps draw from a generator seeded with
``step.seed`` -- the stream stock torch draws after ``torch.manual_seed(step.seed)``.

Examples
--------
>>> import torch
>>> from prune_explorer.session import Step
>>> from prune_explorer.session.steps.execute import run_step
>>> model = torch.nn.Sequential(torch.nn.Linear(4, 3))
>>> run_step(model, Step("random_unstructured", "0.weight", amount=0.5, seed=0))
>>> int(model[0].weight_mask.sum())
6
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

from prune_explorer import prune
from prune_explorer.prune import engine

from ..tensors.sharded import tensor_of
from .methods import prune_class
from .seeding import core_kwargs
from .step import Step, split_address

__all__ = ["run_step"]


def _locate(model: nn.Module, address: str) -> tuple[nn.Module, str]:
    module_name, tensor_name = split_address(address)
    return model.get_submodule(module_name), tensor_name


def run_step(model: nn.Module, step: Step,
             masks: Mapping[str, torch.Tensor] | None = None) -> None:
    """Apply ``step`` to ``model`` in place (no validation: callers check the step first).

    ``masks``: the masks the step leaves, by target, when already known (from the previews'
    cached orders, which are the core's masks bit for bit): they are installed as the prune
    function would install them -- the same method objects, containers and hooks -- without
    computing them again.
    """
    if masks is not None:
        _install(model, step, masks)
        return
    if step.is_global:
        pairs = [_locate(model, address) for address in step.targets]
        method = step.settings["pruning_method"]
        kwargs = core_kwargs(method, {"amount": step.settings["amount"]}, step.seed,
                             tensor_of(*pairs[0]).device)
        prune.global_unstructured(pairs, pruning_method=prune_class(method), **kwargs)
        return
    module, tensor_name = _locate(model, step.targets[0])  # a single-tensor step
    function = getattr(prune, step.spec.name)
    device = tensor_of(module, tensor_name).device
    function(module, tensor_name, **core_kwargs(step.method, step.settings, step.seed, device))


def _install(model: nn.Module, step: Step, masks: Mapping[str, torch.Tensor]) -> None:
    # What the prune function does once its masks are computed: the step's method (or, for a
    # global step, one CustomFromMask per target) joins the tensor's hook; all or nothing.
    pairs = [_locate(model, address) for address in step.targets]
    with engine.transaction(pairs):
        for address, (module, tensor_name) in zip(step.targets, pairs, strict=True):
            where = f"prune.{step.method}"
            old = engine.find_hook(module, tensor_name, where)
            method: prune.BasePruningMethod
            if step.is_global:
                method = prune.CustomFromMask(masks[address])
            else:
                device = tensor_of(module, tensor_name).device
                kwargs = core_kwargs(step.method, step.settings, step.seed, device)
                method = prune_class(step.method)._create(where, **kwargs)
            method._tensor_name = tensor_name
            engine.install(module, tensor_name, method, masks[address], old)
