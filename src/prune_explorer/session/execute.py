"""Running a step on a model with the ``torch.nn.utils.prune`` functions themselves.

Applying goes through the public functions (``prune.ln_structured(module, "weight", ...)``), so the
module ends up exactly as if the user had called them: same ``_orig``/``_mask`` tensors, same hook
and ``PruningContainer``. Random steps draw from a generator seeded with
``step.seed`` -- the stream stock torch draws after ``torch.manual_seed(step.seed)``.

Examples
--------
>>> import torch
>>> from prune_explorer.session import Step
>>> from prune_explorer.session.execute import run_step
>>> model = torch.nn.Sequential(torch.nn.Linear(4, 3))
>>> run_step(model, Step("random_unstructured", "0.weight", amount=0.5, seed=0))
>>> int(model[0].weight_mask.sum())
6
"""

from __future__ import annotations

from torch import nn

from prune_explorer import prune

from .methods import METHODS
from .seeding import generator_for, ties_for
from .step import Step, split_address

__all__ = ["run_step"]


def _locate(model: nn.Module, address: str) -> tuple[nn.Module, str]:
    module_name, tensor_name = split_address(address)
    return model.get_submodule(module_name), tensor_name


def run_step(model: nn.Module, step: Step) -> None:
    """Apply ``step`` to ``model`` in place (no validation: callers check the step first)."""
    if step.is_global:
        pairs = [_locate(model, address) for address in step.targets]
        method = step.settings["pruning_method"]
        cls = getattr(prune, METHODS[method].cls)
        rng = generator_for(method, step.seed, getattr(*pairs[0]).device)
        prune.global_unstructured(pairs, pruning_method=cls, amount=step.settings["amount"],
                                  **rng, **ties_for(method))
        return
    module, tensor_name = _locate(model, step.target)  # type: ignore[arg-type]
    function = getattr(prune, step.spec.name)
    kwargs = dict(step.settings)
    if "mask" in kwargs:
        kwargs["mask"] = kwargs["mask"].unpack(device=getattr(module, tensor_name).device)
    kwargs.update(generator_for(step.method, step.seed, getattr(module, tensor_name).device))
    kwargs.update(ties_for(step.method))
    function(module, tensor_name, **kwargs)
