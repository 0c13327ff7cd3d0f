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


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("largest", [False, True])
def test_a_tie_straddling_the_cut_across_tensors_is_a_prefix_in_flat_order(dtype, largest):
    # Three key tensors whose concatenation has a tie at the cut spread over all three: the
    # selection (selected and write_kept alike) is the stable sort's first k, wherever the
    # last taken tie falls -- first tensor, middle, last, or exactly at an edge.
    g = torch.Generator().manual_seed(2)
    sizes = (SMALL // 2 + 11, SMALL // 3, SMALL // 2 + 5)
    keys = [torch.randint(0, 40, (n,), generator=g).to(dtype) / 64 for n in sizes]
    whole = torch.cat([k.float() for k in keys])
    order = torch.sort(whole, descending=largest, stable=True).indices
    for k in (1, sizes[0], sizes[0] + 1, whole.numel() // 2, whole.numel() - 3):
        expected = torch.zeros(whole.numel(), dtype=torch.bool)
        expected[order[:k]] = True
        chosen = select(keys, k, largest=largest, magnitude=not largest)
        assert chosen.value is not None  # the threshold path, not the sorting reference
        got = torch.cat([chosen.selected(x, i) for i, x in enumerate(keys)])
        assert torch.equal(got, expected), k
        kept = torch.cat([chosen.write_kept(x, torch.empty(x.shape), i) for i, x in
                          enumerate(keys)])
        assert torch.equal(kept, (~expected).float()), k


def test_the_last_taken_tie_is_looked_up_in_one_piece(monkeypatch):
    # bf16 |w| at the median: ~30,000 entries tie at the cut, spread over the whole tensor.
    # Where the taken ones end is found by counting a piece at a time; positions are listed
    # (torch.nonzero) only in the piece that holds the last one -- not for every taken tie.
    g = torch.Generator().manual_seed(3)
    x = (torch.randn(4 * SMALL * 8, generator=g) * 0.02).to(torch.bfloat16)
    calls = []
    real = torch.nonzero
    monkeypatch.setattr(torch, "nonzero", lambda t, *a, **kw: calls.append(t.numel())
                        or real(t, *a, **kw))
    chosen = select([x], x.numel() // 2, magnitude=True)
    assert chosen.through is not None
    assert chosen.through[0] > x.numel() // 8  # a late tie: many pieces counted first
    assert len(calls) == 1
    monkeypatch.undo()
    assert torch.equal(chosen.selected(x), _stable_first(x, x.numel() // 2))
