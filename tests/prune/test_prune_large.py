"""Large tensors (>= 300k entries: the implementation may switch selection algorithm above
~130k), ties, NaN and inf, compared with ``torch.nn.utils.prune``.

Without ties the masks must be identical. With ties at the cut, the pruned set may differ
from torch's but must prune exactly the same number of entries, and be a valid choice of the
k smallest (no kept entry smaller than a pruned one). Random methods draw exactly what torch
draws; where draws tie at the cut, ``ties="torch"`` must give torch's masks exactly.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.utils.prune as theirs

from helpers.prune import (
    assert_pruned_alike,
    global_both,
    hooks_desc,
    mask_of,
    prune_both,
    seed_all,
    valid_k_smallest,
    with_param,
)
from prune_explorer import prune as ours

BIG = (600, 1000)  # 600k entries
MID = (500, 640)  # 320k entries


def _pair(data: torch.Tensor, shape=None):
    shape = tuple(data.shape) if shape is None else shape
    return with_param(shape, data), with_param(shape, data)


def _randn64(shape, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g, dtype=torch.float64)


def _signed_permutation(shape, seed):
    """Distinct magnitudes 0..numel-1 (exact in float32) with random signs."""
    g = torch.Generator().manual_seed(seed)
    numel = shape[0] * shape[1]
    perm = torch.randperm(numel, generator=g).to(torch.float32)
    signs = torch.randint(0, 2, (numel,), generator=g).to(torch.float32) * 2 - 1
    return (perm * signs).view(shape)


def _ties(shape, seed, levels=4):
    """Integers 0..levels-1 (with random signs): huge ties at every cut."""
    g = torch.Generator().manual_seed(seed)
    vals = torch.randint(0, levels, shape, generator=g).to(torch.float32)
    signs = torch.randint(0, 2, shape, generator=g).to(torch.float32) * 2 - 1
    return vals * signs


def _count(amount, available):
    return amount if isinstance(amount, int) else round(amount * available)


# --------------------------------------------------------------------------- tie-free: identical
@pytest.mark.parametrize("amount", [0.1, 0.5, 123_457])
def test_l1_large_randn_float64_identical(amount):
    m_o, m_t = _pair(_randn64(BIG, seed=50))
    prune_both("l1_unstructured", m_o, m_t, "weight", amount=amount)
    assert_pruned_alike(m_o, m_t)


@pytest.mark.parametrize("amount", [0.05, 0.5, 200_001])
def test_l1_large_permutation_identical(amount):
    m_o, m_t = _pair(_signed_permutation(MID, seed=51))
    prune_both("l1_unstructured", m_o, m_t, "weight", amount=amount)
    assert_pruned_alike(m_o, m_t)


def test_l1_large_iterative_identical():
    m_o, m_t = _pair(_randn64(MID, seed=52))
    for amount in (0.3, 50_000, 0.5):
        prune_both("l1_unstructured", m_o, m_t, "weight", amount=amount)
        assert_pruned_alike(m_o, m_t)
    assert [d[0] for d in hooks_desc(m_o)] == ["PruningContainer"]


def test_l1_large_importance_scores_identical():
    m_o, m_t = _pair(_randn64(MID, seed=53).float())
    scores = _randn64(MID, seed=54).float()
    prune_both("l1_unstructured", m_o, m_t, "weight", amount=0.42, importance_scores=scores)
    assert_pruned_alike(m_o, m_t)


# ---------------------------------------------------------------------- ties: valid, same count
@pytest.mark.parametrize("amount", [0.1, 0.77, 150_001, 1.0])
def test_l1_large_ties_same_count_valid_set(amount):
    data = _ties(MID, seed=55)
    m_o, m_t = _pair(data)
    prune_both("l1_unstructured", m_o, m_t, "weight", amount=amount)
    k = _count(amount, data.numel())
    ones = torch.ones(MID)
    valid_k_smallest(data, ones, mask_of(m_o), k)
    valid_k_smallest(data, ones, mask_of(m_t), k)  # the oracle passes the same check
    pruned_o = data[mask_of(m_o) == 0].abs()
    pruned_t = data[mask_of(m_t) == 0].abs()
    if k:
        assert pruned_o.max() == pruned_t.max()
    assert mask_of(m_o).dtype == mask_of(m_t).dtype
    # the pruned tensor is consistent with our own mask
    assert torch.equal(m_o.weight, m_o.weight_orig * mask_of(m_o))


@pytest.mark.parametrize("amount", [0.4, 123_456])
def test_l1_large_all_zeros(amount):
    data = torch.zeros(MID)
    m_o, m_t = _pair(data)
    prune_both("l1_unstructured", m_o, m_t, "weight", amount=amount)
    k = _count(amount, data.numel())
    assert int((mask_of(m_o) == 0).sum()) == int((mask_of(m_t) == 0).sum()) == k


def test_l1_large_ties_iterative():
    data = _ties(MID, seed=56, levels=3)
    m_o, m_t = _pair(data)
    prune_both("l1_unstructured", m_o, m_t, "weight", amount=0.2)
    first = mask_of(m_o).clone()
    prune_both("l1_unstructured", m_o, m_t, "weight", amount=0.5)
    remaining = int(first.sum())
    valid_k_smallest(data, first, mask_of(m_o), round(0.5 * remaining))
    assert int(mask_of(m_o).sum()) == int(mask_of(m_t).sum())
    assert hooks_desc(m_o) == hooks_desc(m_t)


def test_l1_small_ties_same_count_valid_set():
    data = torch.tensor([[1.0, -1.0, 1.0, 0.0], [0.0, 2.0, -2.0, 1.0], [1.0, 1.0, 0.0, -1.0]])
    for amount in range(data.numel() + 1):
        m_o, m_t = _pair(data)
        prune_both("l1_unstructured", m_o, m_t, "weight", amount=amount)
        valid_k_smallest(data, torch.ones(3, 4), mask_of(m_o), amount)
        assert mask_of(m_o).dtype == mask_of(m_t).dtype


def test_ln_structured_tied_channels_same_count():
    data = torch.ones(6, 4, 3)  # every channel has the same norm along every dim
    for dim in (0, 1, -1):
        for amount in (1, 0.5, 2):
            m_o, m_t = _pair(data)
            prune_both("ln_structured", m_o, m_t, "weight", amount=amount, n=2, dim=dim)
            d = dim % 3
            other = [i for i in range(3) if i != d]
            kept_o = mask_of(m_o).sum(other) != 0
            kept_t = mask_of(m_t).sum(other) != 0
            assert int(kept_o.sum()) == int(kept_t.sum())
            # whole channels only: each channel is all-kept or all-pruned
            per = mask_of(m_o).sum(other)
            assert bool(((per == 0) | (per == data.numel() // data.shape[d])).all())


# --------------------------------------------------------------------------- random: identical
@pytest.mark.parametrize("seed", [0, 1])
def test_random_unstructured_large_identical(seed):
    """rand_like over 320k float32 values has ties; the masks must still be identical."""
    m_o, m_t = _pair(_ties(MID, seed=57))
    prune_both("random_unstructured", m_o, m_t, "weight", seed=seed, amount=0.5)
    assert_pruned_alike(m_o, m_t)
    prune_both("random_unstructured", m_o, m_t, "weight", seed=seed + 10, amount=100_000)
    assert_pruned_alike(m_o, m_t)


def test_random_unstructured_large_half_identical():
    m_o, m_t = _pair(_randn64(MID, seed=58).half())
    with ours.tie_break("torch"):
        prune_both("random_unstructured", m_o, m_t, "weight", seed=3, amount=0.3)
    assert_pruned_alike(m_o, m_t)


def test_random_structured_large_identical():
    m_o, m_t = _pair(_randn64((700, 450), seed=59).float())
    for dim, seed in ((0, 4), (1, 5)):
        prune_both("random_structured", m_o, m_t, "weight", seed=seed, amount=0.3, dim=dim)
        assert_pruned_alike(m_o, m_t)


# --------------------------------------------------------------------------- global, > 300k total
def _global_mods(make_data, seeds=(60, 61, 62)):
    shapes = [(300, 400), (200, 500), (50, 1000)]  # 120k + 100k + 50k ... plus bias below
    out_o, out_t = [], []
    for shape, seed in zip(shapes, seeds, strict=True):
        a, b = _pair(make_data(shape, seed))
        out_o.append(a)
        out_t.append(b)
    extra_o, extra_t = _pair(make_data((100, 600), seeds[0] + 100))  # +60k = 330k total
    return [*out_o, extra_o], [*out_t, extra_t]


@pytest.mark.parametrize("amount", [0.3, 0.75, 111_111])
def test_global_l1_large_identical(amount):
    mods_o, mods_t = _global_mods(_randn64)
    names = ["weight"] * len(mods_o)
    assert global_both(mods_o, mods_t, names, "L1Unstructured", amount=amount) is None
    for m_o, m_t in zip(mods_o, mods_t, strict=True):
        assert_pruned_alike(m_o, m_t)


def test_global_l1_large_with_masks_and_scores_identical():
    mods_o, mods_t = _global_mods(_randn64)
    prune_both("l1_unstructured", mods_o[0], mods_t[0], "weight", amount=0.5)
    prune_both("ln_structured", mods_o[1], mods_t[1], "weight", amount=0.2, n=1, dim=0)
    scores = [None, _randn64((200, 500), seed=63), None, _randn64((100, 600), seed=64)]
    names = ["weight"] * len(mods_o)
    global_both(mods_o, mods_t, names, "L1Unstructured", scores=scores, amount=0.4)
    for m_o, m_t in zip(mods_o, mods_t, strict=True):
        assert_pruned_alike(m_o, m_t)


def test_global_l1_large_ties_same_count_valid_set():
    mods_o, mods_t = _global_mods(_ties)
    names = ["weight"] * len(mods_o)
    global_both(mods_o, mods_t, names, "L1Unstructured", amount=0.45)
    data = torch.cat([m.weight_orig.detach().flatten() for m in mods_o])
    mask_o = torch.cat([mask_of(m).flatten() for m in mods_o])
    mask_t = torch.cat([mask_of(m).flatten() for m in mods_t])
    k = round(0.45 * data.numel())
    valid_k_smallest(data, torch.ones_like(data), mask_o, k)
    valid_k_smallest(data, torch.ones_like(data), mask_t, k)
    for m_o, m_t in zip(mods_o, mods_t, strict=True):
        assert hooks_desc(m_o) == hooks_desc(m_t)
        assert mask_of(m_o).dtype == mask_of(m_t).dtype


@pytest.mark.parametrize("seed", [0, 7])
def test_global_random_large_identical(seed):
    mods_o, mods_t = _global_mods(_ties)
    names = ["weight"] * len(mods_o)
    prune_both("random_unstructured", mods_o[2], mods_t[2], "weight", seed=seed, amount=0.2)
    global_both(mods_o, mods_t, names, "RandomUnstructured", seed=seed, amount=0.6)
    for m_o, m_t in zip(mods_o, mods_t, strict=True):
        assert_pruned_alike(m_o, m_t)


# --------------------------------------------------------------------------- NaN / inf
def _with_specials(shape, seed, n_nan, n_inf):
    data = _randn64(shape, seed).float().flatten()
    g = torch.Generator().manual_seed(seed + 1)
    idx = torch.randperm(data.numel(), generator=g)
    data[idx[:n_nan]] = float("nan")
    data[idx[n_nan : n_nan + n_inf]] = float("inf")
    data[idx[n_nan + n_inf : n_nan + 2 * n_inf]] = float("-inf")
    return data.view(shape)


@pytest.mark.parametrize(
    ("shape", "n_nan", "n_inf"), [((6, 7), 3, 2), ((500, 640), 1000, 500)], ids=["small", "large"]
)
def test_l1_nan_and_inf_like_torch(shape, n_nan, n_inf):
    data = _with_specials(shape, seed=65, n_nan=n_nan, n_inf=n_inf)
    numel = data.numel()
    n_finite = numel - n_nan - 2 * n_inf
    # cuts strictly among the finite values, and "everything but the NaNs" (all infs pruned):
    # no tie at any of these cuts, so the masks must be identical
    amounts = [n_finite // 2, n_finite, numel - n_nan]
    if numel < 1000:
        amounts = [0.2, *amounts]
    for amount in amounts:
        m_o, m_t = _pair(data)
        prune_both("l1_unstructured", m_o, m_t, "weight", amount=amount)
        assert_pruned_alike(m_o, m_t)
    # torch ranks NaN as the largest magnitude: never pruned before everything else
    assert not bool((mask_of(m_o)[data.isnan()] == 0).any())


def test_global_nan_like_torch():
    data = _with_specials((500, 640), seed=66, n_nan=50, n_inf=20)
    mods_o, mods_t = zip(*[_pair(data), _pair(_randn64((10, 10), 67).float())], strict=True)
    global_both(list(mods_o), list(mods_t), ["weight", "weight"], "L1Unstructured", amount=0.5)
    for m_o, m_t in zip(mods_o, mods_t, strict=True):
        assert_pruned_alike(m_o, m_t)


def test_seed_helper_matches_manual_seed():
    """Guard for the helpers: seed_all is equivalent to torch.manual_seed on CPU."""
    m_a, m_b = _pair(_randn64((30, 40), 68).float())
    seed_all(9)
    theirs.random_unstructured(m_a, "weight", amount=0.5)
    torch.manual_seed(9)
    theirs.random_unstructured(m_b, "weight", amount=0.5)
    assert torch.equal(mask_of(m_a), mask_of(m_b))
