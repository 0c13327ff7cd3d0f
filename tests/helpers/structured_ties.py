"""Slices whose norms tie exactly, the structured tie rule from its definition, and a stand-in
for another device's ``topk`` (issue 21, must-hold 1: one tie rule on every device).

Every slice :func:`tied_slices` builds is a permutation of one short row of quarters in [-1, 1]
(sums of their powers are exact in every dtype, in any order), times 1, 2 or 4 (exact too), so
the norms take three values (one for ``n=0``) and nearly every cut splits a tie.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
import torch

from prune_explorer.prune import _select_device


def tied_slices(count: int, width: int, dim: int, dtype: torch.dtype, seed: int = 0
                ) -> torch.Tensor:
    """A 2-D tensor of ``count`` slices along ``dim`` (0 or 1) of ``width`` entries each, every
    slice a permutation of one row of quarters in [-1, 1], scaled by 1, 2 or 4."""
    g = torch.Generator().manual_seed(seed)
    base = torch.randint(-4, 5, (width,), generator=g).float() / 4
    base[0] = 1.0  # no all-zero slice
    order = torch.argsort(torch.rand(count, width, generator=g), dim=1)
    level = 2.0 ** torch.randint(0, 3, (count, 1), generator=g).float()
    rows = base[order] * level
    return (rows if dim == 0 else rows.T.contiguous()).to(dtype)


def norms_of(t: torch.Tensor, n: Any, dim: int) -> list[float]:
    """Each slice's norm as torch ranks them (``torch.norm`` over the other dims)."""
    return torch.norm(t, p=n, dim=[d for d in range(t.dim()) if d != dim]).double().tolist()


def lowest_index_kept(norms: list[float], k: int) -> torch.Tensor:
    """The rule from its definition: keep the ``len - k`` largest norms, equal norms lowest
    index first (NaN above every number)."""
    def rank(i: int) -> tuple[bool, float, int]:
        nan = math.isnan(norms[i])
        return (not nan, 0.0 if nan else -norms[i], i)

    order = sorted(range(len(norms)), key=rank)
    keep = torch.zeros(len(norms), dtype=torch.bool)
    keep[order[:len(norms) - k]] = True
    return keep


def straddles(norms: list[float], k: int) -> bool:
    """Whether a tie straddles the cut that prunes the ``k`` smallest of ``norms``."""
    ranked = sorted(norms)
    return 0 < k < len(norms) and ranked[k - 1] == ranked[k]


def kept_slices(mask: torch.Tensor, dim: int) -> torch.Tensor:
    """Bool per slice along ``dim``: whether ``mask`` keeps any of its entries."""
    return mask.sum(dim=[d for d in range(mask.dim()) if d != dim]) != 0


def other_device_topk(x: torch.Tensor, k: int, dim: int = -1, largest: bool = True,
                      **_: Any) -> Any:
    """A valid ``torch.topk`` (sorted) that takes tied entries highest index first: how
    another device's ``topk`` may split a tie."""
    size = x.shape[dim]
    order = torch.sort(x.flip(dim), dim=dim, descending=largest, stable=True).indices
    idx = (size - 1 - order).narrow(dim, 0, k)
    return torch.return_types.topk((x.gather(dim, idx), idx))


def on_both_paths(fn: Callable[[], Any], monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    """``fn()`` on the CPU path with torch's ``topk``, and on the device path (CPU tensors,
    ``_select_device.forced()``) with :func:`other_device_topk` standing in for the device's."""
    with _select_device.forced(False):
        cpu = fn()
    with monkeypatch.context() as patched, _select_device.forced():
        patched.setattr(torch, "topk", other_device_topk)
        device = fn()
    return cpu, device
