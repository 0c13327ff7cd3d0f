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
    # bf16 |w| at the median: ~60,000 entries tie at the cut, spread over the whole tensor.
    # The histogram's groups tell which piece holds the last taken one: only that piece is
    # read again (counted a PIECE at a time, one position lookup) -- not every piece before
    # it, and no position list of every taken tie.
    from prune_explorer.prune import _radix
    from prune_explorer.prune._select_cpu import PIECE

    g = torch.Generator().manual_seed(3)
    x = (torch.randn(8 * _radix.CHUNK, generator=g) * 0.02).to(torch.bfloat16)
    calls: dict[str, int] = {"nonzero": 0, "count_nonzero": 0}
    for name in calls:
        real = getattr(torch, name)

        def counted(t, *a, _real=real, _name=name, **kw):
            calls[_name] += 1
            return _real(t, *a, **kw)

        monkeypatch.setattr(torch, name, counted)
    chosen = select([x], x.numel() // 2, magnitude=True)
    assert chosen.through is not None
    assert chosen.through[0] >= 2 * _radix.CHUNK  # a late piece: pieces before it skipped
    assert calls["nonzero"] == 1
    assert 1 <= calls["count_nonzero"] <= -(-_radix.CHUNK // PIECE)  # one chunk's pieces
    monkeypatch.undo()
    assert torch.equal(chosen.selected(x), _stable_first(x, x.numel() // 2))


def test_ties_found_by_groups_of_pieces_across_many_tensors():
    # 20 key tensors: the histogram's groups hold several tensors each, so the last taken tie
    # is found by skipping whole groups that span tensor boundaries.
    g = torch.Generator().manual_seed(5)
    keys = [(torch.randn(10_000 + 37 * i, generator=g) * 0.02).to(torch.bfloat16)
            for i in range(20)]
    whole = torch.cat(keys)
    assert whole.numel() > SMALL
    order = torch.sort(whole.abs(), stable=True).indices
    straddled = []
    for k in (5, whole.numel() // 3, whole.numel() // 2, whole.numel() - 7):
        expected = torch.zeros(whole.numel(), dtype=torch.bool)
        expected[order[:k]] = True
        chosen = select(keys, k, magnitude=True)
        straddled.append(chosen.through is not None)
        got = torch.cat([chosen.selected(x, i) for i, x in enumerate(keys)])
        assert torch.equal(got, expected), k
    assert straddled[1:3] == [True, True]  # ties at the middle cuts: the groups were used
