"""Which tensors hold plain data: the one rule for tensors read from files or given as masks.

Pruning works on dense (strided) tensors with data. A sparse (COO, CSR...), nested, quantized
or meta tensor (shape only, no data) loaded from a checkpoint or given as a mask would fail deep
inside torch with a message about backends; :func:`unplain_kind` names the kind instead, so that
callers can refuse it in one line.

Examples
--------
>>> import torch
>>> unplain_kind(torch.ones(2)), unplain_kind(torch.ones(2).to_sparse())
(None, 'sparse (torch.sparse_coo)')
>>> unplain_kind(torch.empty(2, device="meta"))
'meta (a shape without data)'
"""

from __future__ import annotations

import torch

from prune_explorer.prune.validation import PRUNABLE_DTYPES

__all__ = ["PRUNABLE_DTYPES", "unplain_kind"]


def unplain_kind(t: torch.Tensor) -> str | None:
    """What makes ``t`` unusable as plain data ("sparse (...)", "nested", "quantized", "meta
    (...)", "complex"), or None for a dense tensor with real values."""
    if t.is_nested:
        return "nested"
    if t.layout != torch.strided:
        return f"sparse ({t.layout})"
    if t.is_quantized:
        return "quantized"
    if t.is_meta:
        return "meta (a shape without data)"
    if t.is_complex():
        return "complex"
    return None
