"""Importance: calibration statistics and the criteria that turn them into scores.

A torch-only package (it imports nothing above the core). :mod:`.calibration` runs a few batches
through a model and keeps running sums per tensor (bounded memory); :mod:`.criteria` holds the one
registry of criteria (magnitude, Wanda, Taylor, Fisher), each turning a weight and its statistics
into ``importance_scores``; :mod:`.rows` is Wanda's own per-row grouping; :mod:`.sparsegpt` prunes
a layer and updates its surviving weights from its inputs' Hessian.
"""

from .calibration import Calibration, TensorStats, collect
from .criteria import CRITERIA, Criterion, CriterionError, check_criterion, tensor_scores
from .rows import row_mask
from .sparsegpt import SparseGPTResult, layer_hessian, sparsegpt

__all__ = [
    "CRITERIA",
    "Calibration",
    "Criterion",
    "CriterionError",
    "SparseGPTResult",
    "TensorStats",
    "check_criterion",
    "collect",
    "layer_hessian",
    "row_mask",
    "sparsegpt",
    "tensor_scores",
]
