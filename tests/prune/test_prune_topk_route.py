"""The CPU's first-k route (``topk`` of k + 1, the stable sort only when a tie straddles the
cut) gives the index rule's masks and reports the straddle, as the stable sort did.

Each case is checked against the rule itself, written out here: rank the keys (NaN above every
number), ties by flat index, take the first k.
"""

from __future__ import annotations

import math

import pytest
import torch

from prune_explorer import prune
from prune_explorer.prune import _radix, _select


def _index_rule(keys: list[float], k: int, largest: bool) -> set[int]:
    """The first k flat indices under the index rule, by Python's stable sort."""
    def rank(i: int) -> tuple[int, float]:
        v = keys[i]
        if math.isnan(v):
            return (1, 0.0) if not largest else (0, 0.0)
        return (0, v) if not largest else (1, -v)
    return set(sorted(range(len(keys)), key=rank)[:k])


def _taken(cut: _select.FirstK | None) -> set[int]:
    assert cut is not None
    taken = set(cut.ranked[:cut.k].tolist())
    ones = torch.ones(300 if cut.ranked.numel() > 5 else 5)
    written = cut.zero_first(ones)  # the mask write: zero at exactly the first k
    assert set((written == 0).nonzero().view(-1).tolist()) == taken
    return taken


@pytest.mark.parametrize("largest", [False, True])
@pytest.mark.parametrize("case", ["distinct", "tie at the cut", "tie inside", "nan at the cut"])
def test_first_k_follows_the_index_rule(case: str, largest: bool) -> None:
    g = torch.Generator().manual_seed(3)
    keys = torch.rand(300, generator=g)
    k = 120
    order = keys.argsort(descending=largest).tolist()
    if case == "tie at the cut":  # five equal keys straddle the k-th place
        keys[order[k - 3:k + 2]] = float(keys[order[k - 1]])
    elif case == "tie inside":  # ties well inside the taken ones: no straddle
        keys[order[10:20]] = float(keys[order[10]])
    elif case == "nan at the cut":  # NaN ranks above every number: NaNs straddle the cut
        nans = order[:k + 3] if largest else order[k - 2:]
        keys[torch.tensor(nans)] = float("nan")
    with _radix.cuts_found() as found:
        cut = _select.sorted_for_cut(keys, k, largest=largest, magnitude=False)
    assert _taken(cut) == _index_rule(keys.tolist(), k, largest)
    straddles = [bool(f.flag) for f in found if isinstance(f, _radix.Straddle)]
    assert straddles == [case in ("tie at the cut", "nan at the cut")]


def test_a_straddling_tie_of_magnitudes_takes_the_lowest_indices() -> None:
    # |w| ties across signs: -0.5 and 0.5 straddle the cut of 3
    w = torch.tensor([[0.9, -0.5, 0.1], [0.5, 0.2, -0.5]])
    m = prune.l1_unstructured(torch.nn.Linear(3, 2), "weight", amount=3,
                              importance_scores=w)
    assert m.weight_mask.tolist() == [[1.0, 0.0, 0.0], [1.0, 0.0, 1.0]]


@pytest.mark.parametrize("shape", [(64, 576), (16, 16)])
def test_masks_equal_the_stable_sort_on_tie_free_weights(shape: tuple[int, int]) -> None:
    g = torch.Generator().manual_seed(0)
    w = torch.randn(shape, generator=g) * 0.02
    k = round(0.3 * w.numel())
    ours = prune.L1Unstructured(amount=0.3).compute_mask(w, torch.ones_like(w))
    reference = torch.ones(w.numel())
    reference[torch.sort(w.abs().reshape(-1), stable=True).indices[:k]] = 0
    assert torch.equal(ours, reference.view(shape))


def test_integer_scores_keep_the_sort() -> None:
    scores = torch.tensor([3, 1, 1, 1, 2])  # topk does not take them: the stable sort does
    with _radix.cuts_found() as found:
        cut = _select.sorted_for_cut(scores, 2, largest=False, magnitude=True)
    assert _taken(cut) == {1, 2}
    assert [bool(f.flag) for f in found] == [True]


def test_the_cached_write_sources_serve_each_count_dtype_and_mode() -> None:
    """The mask write's cached sources (k zeros, then a one) are kept by count and dtype:
    each call, in whatever mode, writes its own count of zeros."""
    _select._ZEROS_THEN_ONE.clear()
    g = torch.Generator().manual_seed(1)
    for amount, dtype, mode in [(0.3, torch.float32, torch.inference_mode),
                                (0.3, torch.bfloat16, torch.no_grad),
                                (0.5, torch.float32, torch.enable_grad),
                                (0.3, torch.float32, torch.enable_grad)]:
        w = (torch.randn(16, 16, generator=g) * 0.02).to(dtype)
        k = round(amount * w.numel())
        reference = torch.ones(w.numel(), dtype=dtype)
        reference[torch.sort(w.abs().reshape(-1), stable=True).indices[:k]] = 0
        with mode():
            mask = prune.L1Unstructured(amount=amount).compute_mask(w, torch.ones_like(w))
        assert mask.dtype == dtype
        assert torch.equal(mask, reference.view(16, 16)), (amount, dtype, mode)
    assert len(_select._ZEROS_THEN_ONE) == 3


@pytest.mark.parametrize("method", ["l1_unstructured", "random_unstructured"])
def test_pruning_under_fake_tensors_reads_no_value(method: str) -> None:
    """While a model is traced with fake tensors (no values), the cut is not read back: the
    sort route needs no value, as torch's own pruning needs none."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        layer = torch.nn.Linear(16, 16)
        getattr(prune, method)(layer, "weight", amount=0.3)
        assert layer.weight_mask.shape == (16, 16)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_the_cut_keys_are_read_as_tolist_reads_them(dtype: torch.dtype) -> None:
    # float32/float64 are read in place (no slice, no list); the rest by tolist
    values = torch.tensor([3.0, 2.5, -0.0, 0.0, float("nan"), float("nan"), 1e-30, -7.0],
                          dtype=dtype)
    for k in range(1, values.numel()):
        got = _select._kth_and_next(values, k)
        want = values[k - 1:k + 1].tolist()
        assert [type(x) for x in got] == [float, float]
        assert [math.isnan(x) for x in got] == [math.isnan(x) for x in want], k
        assert all(a == b for a, b in zip(got, want, strict=True) if not math.isnan(a)), k


@pytest.mark.parametrize("method", ["l1_unstructured", "random_unstructured"])
def test_a_tiny_first_pruning_makes_no_tensor_beyond_its_work(method: str) -> None:
    # On a tiny weight each aten op, views included, is several percent of the call
    # (bench_launches.py --host): keys, their flat view, topk, the ones, the flat view they
    # are written through, the scatter, the pruned copy -- and no slice to read the cut.
    from helpers.ops import OpCounter

    getattr(prune, method)(torch.nn.Linear(16, 16), "weight", amount=0.5)  # once a process
    layer = torch.nn.Linear(16, 16)
    with OpCounter() as counter:
        getattr(prune, method)(layer, "weight", amount=0.5)
    assert "slice" not in counter.ops, counter.ops
    assert counter.ops["view"] == 2, counter.ops
    assert counter.ops["topk"] == 1, counter.ops
    assert sum(counter.ops.values()) == 7, counter.ops
    assert int((layer.weight_mask == 0).sum()) == 128
