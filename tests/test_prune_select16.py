"""The 2-byte order statistic (one 15-bit histogram of |w|'s bit patterns) picks the same entries
as a stable sort -- ties lowest flat index first -- and torch's count, NaN and -0.0 included."""

from __future__ import annotations

import pytest
import torch
import torch.nn.utils.prune as torch_prune

from prune_explorer import prune
from prune_explorer.prune._select import SMALL, select


def _stable_first(x: torch.Tensor, k: int) -> torch.Tensor:
    out = torch.zeros(x.numel(), dtype=torch.bool)
    out[torch.sort(x.abs(), stable=True).indices[:k]] = True
    return out


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_select_16_is_the_stable_sort(dtype):
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(SMALL + 40_000, generator=g) * 0.02).to(dtype)
    x[7], x[9], x[11] = float("nan"), -0.0, float("inf")
    n = x.numel()
    for k in (1, 999, n // 2, n - 2, n - 1, n):
        assert torch.equal(select([x], k, magnitude=True).selected(x), _stable_first(x, k)), k


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_l1_and_global_16_keep_torchs_count_and_cut(dtype):
    g = torch.Generator().manual_seed(1)
    a = torch.nn.Linear(500, 400).to(dtype)
    b = torch.nn.Linear(400, 300).to(dtype)
    with torch.no_grad():
        a.weight.copy_(torch.randn(400, 500, generator=g) * 0.02)
        b.weight.copy_(torch.randn(300, 400, generator=g) * 0.02)
    ours = prune.l1_unstructured(a, "weight", amount=0.37, importance_scores=None)
    flat = a.weight_orig.detach().reshape(-1)
    expected = _stable_first(flat, round(0.37 * 200_000))
    assert torch.equal(ours.weight_mask.reshape(-1) == 0, expected)
    prune.remove(a, "weight")
    masks = prune.global_masks([(a, "weight"), (b, "weight")], prune.L1Unstructured, amount=0.6)
    both = torch.cat([a.weight.detach().reshape(-1), b.weight.detach().reshape(-1)])
    assert torch.equal(torch.cat([m.reshape(-1) == 0 for m in masks]),
                       _stable_first(both, round(0.6 * both.numel())))
    torch_prune.global_unstructured([(a, "weight"), (b, "weight")], torch_prune.L1Unstructured,
                                    amount=0.6)
    theirs = torch.cat([a.weight_mask.reshape(-1), b.weight_mask.reshape(-1)])
    assert int((theirs == 0).sum()) == int(sum((m == 0).sum() for m in masks))
