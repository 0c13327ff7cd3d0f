"""Issue 21, must-hold 1 for structured pruning: one tie rule on every device.

``ln_structured`` keeps the ``n - k`` slices of largest norm. Where norms tie across the cut,
torch's ``topk`` picks among the tied slices in an order of its own that differs between a CPU and
a GPU (an H200 gave another bf16 mask than the CPU). Ours keeps the tied slices of lowest index
first on every device, and is torch's wherever no tie straddles the cut.

The weights tie by construction (``helpers.structured_ties.tied_slices``: norms take three
values, one for ``n=0``). Without a GPU, the device path runs on CPU tensors inside
``_select_device.forced()``, with a valid ``topk`` that takes tied entries highest index first
standing in for a GPU's (``helpers.structured_ties.other_device_topk``).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import pytest
import torch
import torch.nn.utils.prune as theirs

from helpers.structured_ties import (
    kept_slices,
    lowest_index_kept,
    norms_of,
    on_both_paths,
    straddles,
    tied_slices,
)
from prune_explorer import prune
from prune_explorer.prune import _select, _select_device

DTYPES = [torch.float32, torch.bfloat16, torch.float16]
NORMS = [1, 2, math.inf, 0]


def cases() -> Iterator[Any]:
    for dtype in DTYPES:
        for n in NORMS:
            for dim in (0, 1):
                yield pytest.param(dtype, n, dim, id=f"{str(dtype)[6:]}-n{n}-dim{dim}")


@pytest.mark.parametrize(("dtype", "n", "dim"), list(cases()))
def test_tied_slices_lowest_index_kept_and_torchs_elsewhere(dtype, n, dim):
    t = tied_slices(24, 16, dim, dtype, seed=dim)
    ones = torch.ones_like(t)
    norms = norms_of(t, n, dim)
    assert len(set(norms)) <= 3  # the construction: norms tie in groups
    split = unsplit = 0
    for k in range(1, 24):
        ours = prune.LnStructured(k, n=n, dim=dim).compute_mask(t, ones)
        assert ours.dtype == t.dtype
        assert torch.equal(kept_slices(ours, dim), lowest_index_kept(norms, k)), k
        torchs = theirs.LnStructured(k, n=n, dim=dim).compute_mask(t, ones)
        if straddles(norms, k):
            split += not torch.equal(ours, torchs)
        else:
            unsplit += 1
            assert torch.equal(ours, torchs), k  # no tie at the cut: torch's mask exactly
        with prune.tie_break("torch"):  # torch's own choice, asked for
            assert torch.equal(prune.LnStructured(k, n=n, dim=dim).compute_mask(t, ones),
                               torchs), k
    assert split > 0  # torch's topk split some tie otherwise: the rule decided something
    assert unsplit > 0 or n == 0  # n=0: every slice has the same norm


@pytest.mark.parametrize(("dtype", "n", "dim"), list(cases()))
def test_device_path_masks_equal_the_cpu_path_whatever_topk_does(dtype, n, dim, monkeypatch):
    t = tied_slices(40, 12, dim, dtype, seed=3 + dim)
    ones = torch.ones_like(t)
    norms = norms_of(t, n, dim)
    for k in (1, 7, 13, 20, 33, 39):
        method = prune.LnStructured(k, n=n, dim=dim)
        cpu, device = on_both_paths(lambda m=method: m.compute_mask(t, ones), monkeypatch)
        assert torch.equal(cpu, device), k
        assert torch.equal(kept_slices(device, dim), lowest_index_kept(norms, k)), k


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "fp32"])
def test_more_slices_than_the_sorting_threshold(dtype, monkeypatch):
    """Past ``SMALL`` slices the cut is bracketed, not sorted: same rule on both paths."""
    count = _select.SMALL + 9_000
    t = tied_slices(count, 4, 0, dtype, seed=5)
    ones = torch.ones_like(t)
    norms = norms_of(t, 2, 0)
    for k in (count // 3, count // 2 + 17):
        assert straddles(norms, k)
        method = prune.LnStructured(k, n=2, dim=0)
        cpu, device = on_both_paths(lambda m=method: m.compute_mask(t, ones), monkeypatch)
        assert torch.equal(cpu, device)
        assert torch.equal(kept_slices(cpu, 0), lowest_index_kept(norms, k))


@pytest.mark.parametrize("forced", [False, True])
def test_nan_norms_are_kept_first_past_the_sorting_threshold(forced):
    """A slice holding NaN has a NaN norm, which torch's ``topk`` keeps before any number."""
    count = _select.SMALL + 9_000
    t = tied_slices(count, 4, 0, torch.float32, seed=6)
    t[::97, 1] = math.nan
    norms = norms_of(t, 2, 0)
    k = count // 2
    with _select_device.forced(forced):
        mask = prune.LnStructured(k, n=2, dim=0).compute_mask(t, torch.ones_like(t))
    kept = kept_slices(mask != 0, 0)
    assert bool(kept[::97].all())
    assert torch.equal(kept, lowest_index_kept(norms, k))


def test_chained_structured_step_ranks_the_alive_slices_lowest_index_first(monkeypatch):
    """In a ``PruningContainer`` the step sees only the slices still alive: the tied ones among
    them are kept lowest (original) index first, on both paths."""
    t = tied_slices(30, 16, 0, torch.bfloat16, seed=8)
    first = kept_slices(prune.LnStructured(5, n=1, dim=0).compute_mask(t, torch.ones_like(t)), 0)
    norms = norms_of(t[first], 2, 0)
    k = next(k for k in range(2, 25) if straddles(norms, k))  # a tie at the second cut

    def run() -> torch.Tensor:
        m = torch.nn.Linear(16, 30).to(torch.bfloat16)
        with torch.no_grad():
            m.weight.copy_(t)
        prune.ln_structured(m, "weight", amount=5, n=1, dim=0)
        prune.ln_structured(m, "weight", amount=k, n=2, dim=0)
        return m.weight_mask.clone()

    cpu, device = on_both_paths(run, monkeypatch)
    assert torch.equal(cpu, device)
    expected = torch.zeros(30, dtype=torch.bool)
    expected[torch.nonzero(first).view(-1)] = lowest_index_kept(norms, k)
    assert torch.equal(kept_slices(cpu, 0), expected)
