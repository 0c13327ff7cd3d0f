"""Steps computed from calibration: criteria's scores, Wanda's rows and SparseGPT.

What :meth:`Session.calibrate` recorded is a :class:`Calibrated` (the statistics of
:mod:`prune_explorer.importance` and the batches, by reference). From it:

* :func:`importance_scores`: a criterion's scores for a step's target, passed to the core as the
  documented ``importance_scores=`` (``importance=`` of ``l1_unstructured``, ``ln_structured``
  and ``global_unstructured``);
* the methods of their own, declared in :data:`~.methods.METHODS` with ``compute=``: each returns
  the mask (and, for SparseGPT, the new weight values), which the step installs with
  ``custom_from_mask`` semantics (:func:`~.execute.run_step`).

A tied tensor is scored through the alias whose layer has input features (GPT-2's ``lm_head``
for ``transformer.wte.weight``), so its axes are that layer's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from prune_explorer.importance.calibration import (
    Calibration,
    Loss,
    batch_to,
    feature_layer,
    run_model,
)
from prune_explorer.importance.criteria import CriterionError, tensor_scores
from prune_explorer.importance.rows import row_mask, rows_view
from prune_explorer.importance.sparsegpt import BLOCK, layer_hessian
from prune_explorer.importance.sparsegpt import sparsegpt as _sparsegpt
from prune_explorer.prune.layers import out_dim, reduction_dim
from prune_explorer.prune.validation import pattern_counts

from ..errors import InvalidStepError

__all__ = ["Calibrated", "Compute", "Computed", "importance_scores", "sparsegpt", "wanda_rows"]


@dataclass(frozen=True)
class Calibrated:
    """What :meth:`Session.calibrate` recorded: the statistics, the batches (the caller's
    objects, by reference: SparseGPT runs them again, one layer at a time) and the loss."""

    statistics: Calibration
    batches: tuple[Any, ...]
    loss: Loss | None

    def to(self, device: torch.device | str) -> Calibrated:
        """The same record with the statistics on ``device`` (the batches stay the caller's)."""
        return Calibrated(self.statistics.to(device), self.batches, self.loss)

    def run(self, model: nn.Module, batch: Any) -> Any:
        """One batch through ``model`` as calibration ran it (the loss, if there is one), its
        tensors moved to the model's device first if the model moved since (``Session.to``):
        one batch at a time."""
        param = next(model.parameters(), None)
        if param is not None:
            batch = batch_to(batch, param.device)
        return run_model(model, batch) if self.loss is None else self.loss(model, batch)

    def __repr__(self) -> str:
        return f"Calibrated({self.statistics!r}, loss={'yes' if self.loss else 'no'})"


@dataclass(frozen=True)
class Computed:
    """What a calibrated method computed for one tensor: ``kept`` (bool, the tensor's shape),
    the new values of the tensor (SparseGPT) and a note for the step (what it chose)."""

    kept: torch.Tensor
    values: torch.Tensor | None = None
    detail: str | None = None


#: ``compute(model, module, tensor_name, settings, calibrated, address) -> Computed``
Compute = Callable[[nn.Module, nn.Module, str, Mapping[str, Any], "Calibrated | None", str],
                   Computed]


def _holder(param_module: nn.Module, tensor_name: str) -> Any:
    return param_module._parameters.get(tensor_name + "_orig",
                                        param_module._parameters.get(tensor_name))


def scoring_module(model: nn.Module, module: nn.Module, tensor_name: str) -> nn.Module:
    """``module``, or the alias module of the same tied parameter whose layer has input
    features (what axes and input statistics the tensor has)."""
    if feature_layer(module) is not None or tensor_name != "weight":
        return module
    param = _holder(module, tensor_name)
    for other in model.modules():
        if feature_layer(other) is not None and _holder(other, "weight") is param:
            return other
    return module


def _fail(where: str, field: str, message: str) -> InvalidStepError:
    return InvalidStepError(f"{where}: {message}", field)


def _stats(calibrated: Calibrated | None, address: str, method: str, where: str,
           field: str) -> Any:
    if calibrated is None:
        raise _fail(where, field, f"{field}={method!r} needs calibration statistics and none "
                    "were recorded; call Session.calibrate(batches) first (with loss=... for "
                    "'taylor' and 'fisher')")
    return calibrated.statistics.stats.get(address)


def importance_scores(model: nn.Module, module: nn.Module, tensor_name: str, importance: str,
                      calibrated: Calibrated | None, address: str,
                      where: str) -> torch.Tensor:
    """The scores of criterion ``importance`` for the tensor at ``address``."""
    stats = _stats(calibrated, address, importance, where, "importance")
    try:
        return tensor_scores(importance, scoring_module(model, module, tensor_name),
                             tensor_name, stats, address, where)
    except CriterionError as err:
        raise InvalidStepError(str(err), "importance") from None


def _axes(model: nn.Module, module: nn.Module, tensor_name: str, address: str, method: str,
          where: str) -> tuple[nn.Module, int, int]:
    layer = scoring_module(model, module, tensor_name)
    units = out_dim(layer, tensor_name)
    if units is None or feature_layer(layer) is None:
        raise _fail(where, "target", f"{method} prunes the weight of a layer with input "
                    f"features and output rows (Linear, Conv1D, Conv1d/2d/3d); got "
                    f"{address!r} of {type(layer).__name__}")
    return layer, units, reduction_dim(layer, tensor_name)


def wanda_rows(model: nn.Module, module: nn.Module, tensor_name: str,
               settings: Mapping[str, Any], calibrated: Calibrated | None,
               address: str) -> Computed:
    """Wanda with its own grouping: every output row keeps the same fraction (or N of every M
    consecutive inputs) of its highest ``|w| * ||X_j||``."""
    where = "wanda_rows"
    layer, units, inputs = _axes(model, module, tensor_name, address, where, where)
    stats = _stats(calibrated, address, "wanda", where, "importance")
    try:
        scores = tensor_scores("wanda", layer, tensor_name, stats, address, where)
    except CriterionError as err:
        raise InvalidStepError(str(err), "importance") from None
    try:
        kept = row_mask(scores, units, inputs, settings["sparsity"])
    except ValueError as err:
        raise InvalidStepError(str(err), "sparsity") from None
    return Computed(kept)


def sparsegpt(model: nn.Module, module: nn.Module, tensor_name: str,
              settings: Mapping[str, Any], calibrated: Calibrated | None,
              address: str) -> Computed:
    """SparseGPT on one layer: its Hessian from the calibration batches (run again up to the
    layer), then pruning with the update of the surviving weights."""
    where = "sparsegpt"
    layer, units, inputs = _axes(model, module, tensor_name, address, where, where)
    weight = getattr(module, tensor_name)  # as the model sees it
    if weight.dim() != 2:
        raise _fail(where, "target", f"sparsegpt prunes 2-D weights (Linear, Conv1D); got "
                    f"{address!r} of shape {tuple(weight.shape)}")
    sparsity = settings["sparsity"]
    if isinstance(sparsity, str):
        _, m = pattern_counts(sparsity)
        if weight.shape[inputs] % m or BLOCK % m:
            raise _fail(where, "sparsity", f"sparsity {sparsity!r} needs M = {m} to divide the "
                        f"{weight.shape[inputs]} inputs and the block of {BLOCK} columns")
    if calibrated is None:
        _stats(calibrated, address, "sparsegpt", where, "method")
    assert calibrated is not None
    hessian = layer_hessian(model, layer, calibrated.batches, calibrated.run)
    matrix = rows_view(weight.detach(), units, inputs)
    try:
        result = _sparsegpt(matrix, hessian, sparsity, settings["damping"])
    except ValueError as err:
        raise InvalidStepError(str(err), "damping") from None
    back = (units, inputs)
    values = result.weight.movedim((0, -1), back).contiguous()
    kept = result.kept.movedim((0, -1), back).contiguous()
    detail = (f"damping {result.damping:g} x mean diag(H)"
              + (f" (raised from {settings['damping']:g}: the Hessian was not positive "
                 "definite)" if result.raised else "")
              + f", {result.dead_inputs} dead inputs")
    return Computed(kept, values, detail)
