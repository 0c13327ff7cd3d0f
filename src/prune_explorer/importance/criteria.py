"""What makes a weight important: one registry, one declaration per criterion.

Each :class:`Criterion` says what it is called, which calibration statistics it needs (see
:mod:`~prune_explorer.importance.calibration`), how it turns a weight and those statistics into
scores of the weight's shape, and whether torch's grouping (the tensor for ``l1_unstructured``,
all targets for ``global_unstructured``) is the criterion's own. A pruning step then passes the
scores as the documented ``importance_scores=``, so stock torch replays them.

=============  ===============================  ==========================  ===============
criterion      score of ``w``                   needs                       own grouping
=============  ===============================  ==========================  ===============
magnitude      ``|w|``                          nothing                     torch's
wanda          ``|w| * ||X_j||_2``              inputs                      each output row
taylor         ``|w * g|``, g = E[dL/dw]        gradients (a loss)          torch's
fisher         ``w**2 * E[g_s**2]``             fisher (per-sample grads)   torch's
=============  ===============================  ==========================  ===============

``X_j`` is input feature ``j`` over every calibration row of the layer's input; its norm spreads
along the weight's input axis (dim 1 of a ``Linear`` or convolution, dim 0 of ``transformers``'
``Conv1D``, which stores (in, out); over the kernel of a convolution). Scores are float32 (float64
for float64 weights). This module imports only torch.

Adding a criterion is one :class:`Criterion` in :data:`CRITERIA`.

Examples
--------
>>> import torch
>>> from prune_explorer.importance.calibration import collect
>>> from prune_explorer.importance.criteria import CRITERIA, tensor_scores
>>> model = torch.nn.Sequential(torch.nn.Linear(2, 2))
>>> with torch.no_grad():
...     _ = model[0].weight.copy_(torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
>>> calib = collect(model, [torch.tensor([[3.0, 0.0], [4.0, 1.0]])], ["0.weight"])
>>> tensor_scores("wanda", model[0], "weight", calib["0.weight"], "0.weight").tolist()
[[5.0, 2.0], [15.0, 4.0]]
>>> CRITERIA["wanda"].torch_grouping, CRITERIA["taylor"].needs
(False, ('gradients',))
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from prune_explorer.prune.layers import reduction_dim

from .calibration import TensorStats

__all__ = ["CRITERIA", "Criterion", "CriterionError", "check_criterion", "input_spread",
           "tensor_scores"]

#: ``score(weight, stats, module, tensor_name) -> scores`` (weight-shaped).
Score = Callable[[torch.Tensor, TensorStats, nn.Module, str], torch.Tensor]


class CriterionError(ValueError):
    """A criterion cannot score a tensor: an unknown name, or statistics it needs are missing."""


@dataclass(frozen=True)
class Criterion:
    """One importance criterion.

    Attributes
    ----------
    name : str
        What ``importance=`` calls it.
    needs : tuple of str
        Calibration statistics it reads (``"inputs"``, ``"gradients"``, ``"fisher"``).
    formula : str
        Its score in words, for reports and the explorer.
    torch_grouping : bool
        Whether torch's grouping (per tensor, or global) is the criterion's own; Wanda's own is
        each output row (the ``wanda_rows`` method).
    score : callable
        ``score(weight, stats, module, tensor_name) -> scores`` of the weight's shape.
    """

    name: str
    needs: tuple[str, ...]
    formula: str
    torch_grouping: bool
    score: Score

    def __repr__(self) -> str:
        return f"Criterion({self.name!r}: {self.formula}, needs {list(self.needs) or 'nothing'})"


def _dtype(weight: torch.Tensor) -> torch.dtype:
    return torch.promote_types(weight.dtype, torch.float32)


def input_spread(vector: torch.Tensor, module: nn.Module, tensor_name: str,
                 shape: torch.Size) -> torch.Tensor:
    """A per-input-feature ``vector`` (length C_in) laid along the weight's input axis, ready to
    broadcast against a weight of ``shape`` (a grouped convolution: each output channel sees its
    group's inputs).

    Examples
    --------
    >>> conv = torch.nn.Conv2d(4, 2, 3, groups=2)
    >>> input_spread(torch.arange(4.0), conv, "weight", conv.weight.shape)[:, :, 0, 0].tolist()
    [[0.0, 1.0], [2.0, 3.0]]
    """
    axis = reduction_dim(module, tensor_name) % len(shape)
    groups = int(getattr(module, "groups", 1) or 1)
    if groups > 1 and axis == 1:  # (out, in / groups, ...): output channel o sees group o // k
        per_group = vector.reshape(groups, -1)
        rows = per_group[torch.arange(shape[0], device=vector.device) // (shape[0] // groups)]
        return rows.reshape(shape[0], shape[1], *([1] * (len(shape) - 2)))
    if vector.numel() != shape[axis]:
        raise CriterionError(f"input_spread: the input statistics have {vector.numel()} "
                             f"features but dim {axis} of the weight has {shape[axis]}")
    view = [1] * len(shape)
    view[axis] = shape[axis]
    return vector.reshape(view)


def _magnitude(weight: torch.Tensor, stats: TensorStats, module: nn.Module,
               tensor_name: str) -> torch.Tensor:
    return weight.detach().to(_dtype(weight)).abs()


def _wanda(weight: torch.Tensor, stats: TensorStats, module: nn.Module,
           tensor_name: str) -> torch.Tensor:
    norms = stats.input_norms()
    assert norms is not None  # checked by tensor_scores
    spread = input_spread(norms.to(weight.device), module, tensor_name, weight.shape)
    return (weight.detach().to(torch.float64).abs() * spread).to(_dtype(weight))


def _taylor(weight: torch.Tensor, stats: TensorStats, module: nn.Module,
            tensor_name: str) -> torch.Tensor:
    grad = stats.mean_gradient()
    assert grad is not None
    return (weight.detach().to(_dtype(weight)) * grad.to(weight.device)).abs()


def _fisher(weight: torch.Tensor, stats: TensorStats, module: nn.Module,
            tensor_name: str) -> torch.Tensor:
    mean_square = stats.mean_square_gradient()
    assert mean_square is not None
    return weight.detach().to(_dtype(weight)).square() * mean_square.to(weight.device)


CRITERIA: dict[str, Criterion] = {
    c.name: c for c in (
        Criterion("magnitude", (), "|w|", True, _magnitude),
        Criterion("wanda", ("inputs",), "|w| * ||X_j||_2 (input feature norm)", False, _wanda),
        Criterion("taylor", ("gradients",), "|w * g| (g: mean loss gradient)", True, _taylor),
        Criterion("fisher", ("fisher",), "w^2 * E[g^2] (per-sample gradients)", True, _fisher),
    )
}

#: What ``Session.calibrate`` must be given for each statistic (for error messages).
_HOW = {
    "inputs": "Session.calibrate(batches)",
    "gradients": "Session.calibrate(batches, loss=...)",
    "fisher": "Session.calibrate(batches, loss=..., per_sample=True)",
}


def check_criterion(value: object, where: str) -> Criterion:
    """The criterion called ``value``; raises :class:`CriterionError` naming the known ones.

    Examples
    --------
    >>> check_criterion("taylor", "Step").needs
    ('gradients',)
    """
    if not isinstance(value, str) or value not in CRITERIA:
        known = ", ".join(repr(name) for name in CRITERIA)
        raise CriterionError(f"{where}: importance must be one of {known}; got {value!r}")
    return CRITERIA[value]


def tensor_scores(name: str, module: nn.Module, tensor_name: str, stats: TensorStats | None,
                  address: str, where: str = "importance") -> torch.Tensor:
    """The scores of criterion ``name`` for ``module.<tensor_name>`` (listed as ``address``).

    Raises :class:`CriterionError` (naming the argument, the rule and the value) if a statistic
    the criterion needs was not collected for that tensor.
    """
    criterion = check_criterion(name, where)
    weight = getattr(module, tensor_name)  # as the model sees it: pruned entries are 0
    for need in criterion.needs:
        held = None if stats is None else {"inputs": stats.inputs, "gradients": stats.gradients,
                                           "fisher": stats.fisher}[need]
        if held is None:
            extra = ("" if need != "inputs" else
                     " (only layers with input features have them: Linear, Conv1D, Conv1d/2d/3d)")
            raise CriterionError(
                f"{where}: importance={name!r} needs the calibration statistic {need!r} of "
                f"tensor {address!r}{extra}, which was not collected; call {_HOW[need]} with "
                f"{address!r} among its targets first")
    return criterion.score(weight, stats if stats is not None else TensorStats(), module,
                           tensor_name)
