"""Structured methods (``ln_structured``, ``random_structured``) on sharded parameters.

One value per slice along ``dim``, the same vector on every rank (:func:`structured_mask`). Norms
of slices held whole by one rank are computed there exactly as one process does (bit-identical);
slices split across ranks get their norm from partial sums (``sum |x|**n``, max or min)
all-reduced, equal up to float rounding.

Memory: the values are read in slabs of whole rows (dim 0) of at most about
:data:`._radix.CHUNK` entries, and an already-pruned tensor's values (``orig * mask``, its
:func:`._sharded.stand_in` times the mask) are formed one slab at a time. The one exception: a
rank holding whole slices along a dim other than 0 (one process, or a tensor sharded along
``dim`` itself) takes ``torch.norm`` over its whole shard at once, as one process does.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
import torch.distributed as dist

from . import _radix
from ._dtensor import Layout, count, structured_dim
from ._select import get_tie_break

__all__ = ["structured_mask"]


def structured_mask(layout: Layout, method: Any, kind: str, scores: torch.Tensor,
                    default: torch.Tensor | None, dtype: torch.dtype, where: str,
                    masked: bool) -> torch.Tensor:
    """Local mask of a structured method on this rank's ``scores`` (the local part);
    ``default``: the local mask so far (None: fresh); ``masked``: ``scores`` are the stand-in
    of a pruned tensor, to be multiplied by ``default`` to give its values."""
    dim = structured_dim(method, layout.shape, where)
    size, lo, n = layout.shape[dim], layout.offset[dim], layout.local_shape[dim]
    others = [d for d in range(len(layout.shape)) if d != dim]
    device = scores.device
    alive = torch.ones(size, dtype=torch.bool, device=device)
    if default is not None:
        sums = torch.zeros(size, dtype=default.dtype, device=device)
        sums[lo:lo + n] = default.sum(dim=others)
        alive = _radix.all_reduce(sums, layout.group) != 0
    n_alive = int(torch.count_nonzero(alive))
    k = count(method, n_alive, where, f"prunable slices along dim {method.dim}")
    keep_alive: torch.Tensor | None = None
    if kind == "ln" and k > 0:
        norms = _slice_norms(layout, scores, default if masked else None, method.n, dim,
                             others)[alive]
        # the method's own rule (ties lowest slice index first), on the norms every rank holds
        keep_alive = method.keep_slices(norms, k, get_tie_break())
    elif kind == "random_structured" and k > 0:
        gen = method.generator
        prob = torch.rand(n_alive) if gen is None else torch.rand(
            n_alive, generator=gen, device=gen.device)
        prob = prob.cpu()
        keep_alive = (prob > torch.kthvalue(prob, k=k).values).to(device)
    keep = alive.clone()
    if keep_alive is not None:
        keep[alive] = keep_alive
    shape = [1] * len(layout.shape)
    shape[dim] = n
    kept = keep[lo:lo + n].to(dtype).view(shape)
    out = torch.ones(layout.local_shape, dtype=dtype, device=device) if default is None \
        else default.to(dtype, copy=True)
    return out.mul_(kept)  # in place: the mask is the only shard-sized tensor made


def _slabs(x: torch.Tensor, mask: torch.Tensor | None) -> Iterator[tuple[int, torch.Tensor]]:
    """(first row, values) of ``x`` in slabs of whole rows (:func:`._radix.row_slabs`);
    multiplied by the same rows of ``mask`` where given (the pruned values)."""
    for i, slab in _radix.row_slabs(x):
        yield i, slab if mask is None else mask[i:i + slab.shape[0]].to(slab.dtype) * slab


def _slice_norms(layout: Layout, scores: torch.Tensor, mask: torch.Tensor | None, n: Any,
                 dim: int, others: list[int]) -> torch.Tensor:
    """The ``n``-norm of every slice along ``dim`` (global vector, every rank) of ``scores``
    (times ``mask`` where given)."""
    size, lo, count = layout.shape[dim], layout.offset[dim], layout.local_shape[dim]
    whole = all(layout.local_shape[d] == layout.shape[d] for d in others)
    out = torch.zeros(size, dtype=scores.dtype, device=scores.device)
    local = out[lo:lo + count]
    if whole and dim != 0:  # whole slices across rows: torch.norm at once, exact
        values = scores if mask is None else mask.to(scores.dtype) * scores
        local.copy_(torch.norm(values, p=n, dim=others))
        return _radix.all_reduce(out, layout.group)
    if whole:  # whole rows: torch.norm of each slab's rows, exact
        for i, slab in _slabs(scores, mask):
            local[i:i + slab.shape[0]] = torch.norm(slab, p=n, dim=others)
        return _radix.all_reduce(out, layout.group)
    p = 2.0 if n in (None, "fro") else float(n)
    if p == float("-inf"):
        out.fill_(float("inf"))
    for i, slab in _slabs(scores, mask):  # partial sums over this rank's part of each slice
        part = local[i:i + slab.shape[0]] if dim == 0 else local
        if not slab.numel():
            continue
        a = slab.abs_() if mask is not None else slab.abs()  # a product is ours to change
        if p == float("inf"):
            torch.maximum(part, a.amax(dim=others), out=part)
        elif p == float("-inf"):
            torch.minimum(part, a.amin(dim=others), out=part)
        elif p == 0:
            part += (a != 0).sum(dim=others).to(out.dtype)
        else:
            part += a.pow_(p).sum(dim=others)
    if p == float("inf"):
        return _radix.all_reduce(out, layout.group, dist.ReduceOp.MAX)
    if p == float("-inf"):
        return _radix.all_reduce(out, layout.group, dist.ReduceOp.MIN)
    if p == 0:
        return _radix.all_reduce(out, layout.group)
    return _radix.all_reduce(out, layout.group).pow(1.0 / p)
