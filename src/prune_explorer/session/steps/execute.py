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
>>> _ = run_step(model, Step("random_unstructured", "0.weight", amount=0.5, seed=0))
>>> int(model[0].weight_mask.sum())
6
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import torch
from torch import nn

from prune_explorer import prune
from prune_explorer.prune import engine

from ..tensors.sharded import tensor_of
from .calibrated import Calibrated, importance_scores
from .methods import prune_class
from .seeding import core_kwargs
from .step import Step, split_address

__all__ = ["Ran", "replay_tensors", "run_step"]


def _locate(model: nn.Module, address: str) -> tuple[nn.Module, str]:
    module_name, tensor_name = split_address(address)
    return model.get_submodule(module_name), tensor_name


def run_step(model: nn.Module, step: Step,
             masks: Mapping[str, torch.Tensor] | None = None,
             calibrated: Calibrated | None = None) -> Ran:
    """Apply ``step`` to ``model`` in place (no validation: callers check the step first).

    ``masks``: the masks the step leaves, by target, when already known (from the previews'
    cached orders, which are the core's masks bit for bit): they are installed as the prune
    function would install them -- the same method objects, containers and hooks -- without
    computing them again. ``calibrated``: what the session's calibration recorded, for steps
    with an ``importance`` other than magnitude (its scores go to the core as
    ``importance_scores=``) and for methods computed from calibration (their mask is installed
    as ``custom_from_mask`` installs one; SparseGPT first writes the new weight values).
    Returns what the step computed that a replay needs (:class:`Ran`).
    """
    if masks is not None:
        _install(model, step, masks)
        return Ran()
    where = f"Step {step.method}"
    if step.spec.compute is not None:
        module, tensor_name = _locate(model, step.targets[0])
        done = step.spec.compute(model, module, tensor_name, step.settings, calibrated,
                                 step.targets[0])
        if done.values is not None:
            held = module._parameters.get(tensor_name + "_orig",
                                          module._parameters.get(tensor_name))
            assert held is not None
            with torch.no_grad():
                held.copy_(done.values)
        device = tensor_of(module, tensor_name).device
        prune.custom_from_mask(module, tensor_name, done.kept.to(device))
        kept = {} if done.values is None else {step.targets[0]: done.values.detach().cpu()}
        return Ran(done.detail, values=kept)
    scores: dict[tuple[nn.Module, str], torch.Tensor] = {}
    if step.importance != "magnitude":
        for address in step.targets:
            module, tensor_name = _locate(model, address)
            scores[(module, tensor_name)] = importance_scores(
                model, module, tensor_name, step.importance, calibrated, address, where)
    if step.is_global:
        pairs = [_locate(model, address) for address in step.targets]
        method = step.settings["pruning_method"]
        kwargs = core_kwargs(method, {"amount": step.settings["amount"]}, step.seed,
                             tensor_of(*pairs[0]).device)
        if scores:
            kwargs["importance_scores"] = scores
        prune.global_unstructured(pairs, pruning_method=prune_class(method), **kwargs)
        return Ran(scores=_by_address(step, scores))
    module, tensor_name = _locate(model, step.targets[0])  # a single-tensor step
    function = getattr(prune, step.spec.name)
    device = tensor_of(module, tensor_name).device
    kwargs = core_kwargs(step.method, step.settings, step.seed, device)
    if scores:
        kwargs["importance_scores"] = scores[(module, tensor_name)]
    function(module, tensor_name, **kwargs)
    return Ran(scores=_by_address(step, scores))


@dataclass(frozen=True)
class Ran:
    """What a step computed that its replay needs: a calibrated method's note
    (:attr:`Step.detail`), a criterion's scores and SparseGPT's new values, by address (CPU)."""

    detail: str | None = None
    scores: dict[str, torch.Tensor] = field(default_factory=dict)
    values: dict[str, torch.Tensor] = field(default_factory=dict)


def _by_address(step: Step, scores: Mapping[tuple[nn.Module, str], torch.Tensor]
                ) -> dict[str, torch.Tensor]:
    return {address: score.detach().cpu()
            for address, score in zip(step.targets, scores.values(), strict=False)}


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


def replay_tensors(model: nn.Module, step: Step, ran: Ran,
                   before: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """What a snippet needs to replay a calibrated ``step`` on stock torch, by
    ``"<kind>/<address>"``: the ``mask`` each target has after the step (bool), the criterion's
    ``scores`` where stock torch given them as ``importance_scores=`` makes that mask (an
    unstructured L1 step, local or global, whose cut splits no tie of scores; ``before``: the
    targets' kept masks before the step, bool) -- else the snippet installs the mask with
    ``custom_from_mask`` -- and SparseGPT's new ``values``."""
    out: dict[str, torch.Tensor] = {}
    cut_scores, kept_scores = [], []
    for address in step.targets:
        module, tensor_name = _locate(model, address)
        after = getattr(module, tensor_name + "_mask").detach().cpu() != 0
        out[f"mask/{address}"] = after
        if address in ran.values:
            out[f"values/{address}"] = ran.values[address]
        if address in ran.scores:
            was = before[address].cpu()
            cut_scores.append(ran.scores[address][was & ~after])
            kept_scores.append(ran.scores[address][after])
    torch_route = (step.method == "l1_unstructured" or step.is_global) and bool(cut_scores)
    if torch_route:
        cut, kept = torch.cat(cut_scores), torch.cat(kept_scores)
        torch_route = not (cut.numel() and kept.numel() and bool(cut.max() >= kept.min()))
    if torch_route:
        for address in step.targets:
            out[f"scores/{address}"] = ran.scores[address]
    return out
