"""Pattern conformance: does each tensor of a session satisfy an N:M pattern (e.g. 2:4)?

A tensor satisfies ``"N:M"`` along ``dim`` when every group of ``M`` consecutive entries along
``dim`` holds at most ``N`` nonzero values of the tensor the forward pass sees (``orig * mask``
when pruned, so committed pruning and weights that are zero anyway count). Sparse kernels for
2:4 need exactly that. A tensor whose size along ``dim`` is not a multiple of ``M`` (or that has
no such dim) cannot satisfy the pattern: ``applicable`` is False there and ``satisfies`` too.

Columns of :func:`pattern_report` (:data:`CONFORMANCE_COLUMNS`): ``name``; ``shape``;
``pattern``; ``dim``; ``applicable``; ``satisfies``; ``nonzero_per_group_max`` (the largest
count of nonzeros in a group, or None where not applicable).

Examples
--------
>>> import torch
>>> from prune_explorer.session import Session
>>> from prune_explorer.session.analysis.conformance import pattern_report
>>> s = Session(torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.Linear(4, 3)))
>>> _ = s.apply("0.weight", "semi_structured", pattern="2:4", dim=-1)
>>> pattern_report(s)[["name", "applicable", "satisfies"]]
       name  applicable  satisfies
0  0.weight        True       True
1    0.bias        True      False
2  1.weight        True      False
3    1.bias       False      False
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import torch

from prune_explorer.prune.validation import pattern_counts

from ..steps.methods import check_pattern

__all__ = ["CONFORMANCE_COLUMNS", "pattern_report"]

CONFORMANCE_COLUMNS = [
    "name", "shape", "pattern", "dim", "applicable", "satisfies", "nonzero_per_group_max",
]


def _group_max(tensor: torch.Tensor, m: int, dim: int) -> int | None:
    if tensor.dim() == 0 or not -tensor.dim() <= dim < tensor.dim():
        return None
    moved = (tensor != 0).movedim(dim, -1)
    if moved.shape[-1] % m:
        return None
    groups = moved.reshape(*moved.shape[:-1], moved.shape[-1] // m, m)
    return int(groups.sum(dim=-1).max()) if groups.numel() else 0


def pattern_report(session: Any, pattern: str = "2:4", dim: int = -1) -> pd.DataFrame:
    """One row per tensor of ``session``: does it satisfy ``pattern`` along ``dim``?"""
    check_pattern(pattern, "pattern_report")
    keep_n, m = pattern_counts(pattern)
    rows = []
    for name in session.names:
        tensor = session.tensor(name)
        worst = _group_max(tensor, m, dim)
        rows.append({
            "name": name, "shape": tuple(tensor.shape), "pattern": pattern, "dim": dim,
            "applicable": worst is not None,
            "satisfies": worst is not None and worst <= keep_n,
            "nonzero_per_group_max": worst,
        })
    return pd.DataFrame(rows, columns=CONFORMANCE_COLUMNS)
