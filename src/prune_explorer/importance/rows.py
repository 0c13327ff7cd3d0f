"""Wanda's own grouping: every output row of a weight pruned to the same fraction.

A weight is viewed as rows = output units (dim 0 of a ``Linear`` or convolution, dim 1 of
``transformers``' ``Conv1D``) by everything else in the row (the input features, times the kernel
of a convolution). ``sparsity`` is either a fraction ``s``: each row prunes its ``int(row_length
* s)`` lowest scores (as Wanda does); or an ``"N:M"`` pattern: every ``M`` consecutive inputs of a
row keep their ``N`` highest scores (a convolution groups input channels at each kernel
position). Ties go to the lower index (a stable sort). This module imports only torch.

Examples
--------
>>> import torch
>>> from prune_explorer.importance.rows import row_mask
>>> scores = torch.tensor([[1.0, 4.0, 2.0, 3.0], [8.0, 5.0, 7.0, 6.0]])
>>> row_mask(scores, 0, 1, 0.5).tolist()
[[False, True, False, True], [True, False, True, False]]
>>> row_mask(scores, 0, 1, "1:2").tolist()
[[False, True, False, True], [True, False, True, False]]
"""

from __future__ import annotations

import torch

from prune_explorer.prune.validation import pattern_counts

__all__ = ["row_mask", "rows_view"]


def rows_view(t: torch.Tensor, out_dim: int, in_dim: int) -> torch.Tensor:
    """``t`` as ``(units, ..., inputs)``: output dim first, input dim last (a view when it can)."""
    rank = t.dim()
    return t.movedim((out_dim % rank, in_dim % rank), (0, -1))


def row_mask(scores: torch.Tensor, out_dim: int, in_dim: int,
             sparsity: float | str) -> torch.Tensor:
    """The bool mask (True = kept) that prunes each output row's lowest ``scores``.

    Parameters
    ----------
    scores : torch.Tensor
        Weight-shaped scores (rank >= 2).
    out_dim, in_dim : int
        The weight's output-unit dim and input-feature dim.
    sparsity : float or str
        A fraction in [0, 1] of each row, or an ``"N:M"`` pattern (keep N of every M
        consecutive inputs; M must divide the input dim).
    """
    moved = rows_view(scores, out_dim, in_dim)
    if isinstance(sparsity, str):
        keep_n, m = pattern_counts(sparsity)
        if moved.shape[-1] % m:
            raise ValueError(f"wanda_rows: sparsity pattern {sparsity!r} needs M = {m} to divide "
                             f"the {moved.shape[-1]} inputs of each row; got {moved.shape[-1]}")
        groups = moved.reshape(-1, m)
        order = torch.sort(groups, dim=1, stable=True).indices
        kept = torch.ones_like(groups, dtype=torch.bool)
        kept.scatter_(1, order[:, : m - keep_n], False)
        kept_moved = kept.reshape(moved.shape)
    else:
        units = moved.shape[0]
        # row = everything of one unit, in the weight's own order (input-major for convs)
        flat = scores.movedim(out_dim % scores.dim(), 0).reshape(units, -1)
        pruned = int(flat.shape[1] * sparsity)
        order = torch.sort(flat, dim=1, stable=True).indices
        kept_flat = torch.ones_like(flat, dtype=torch.bool)
        kept_flat.scatter_(1, order[:, :pruned], False)
        shape = scores.movedim(out_dim % scores.dim(), 0).shape
        return kept_flat.reshape(shape).movedim(0, out_dim % scores.dim())
    rank = scores.dim()
    return kept_moved.movedim((0, -1), (out_dim % rank, in_dim % rank))
