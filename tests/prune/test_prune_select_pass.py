"""The CPU selection's bracketing pass (float32/float64 keys): exact, and on the calling thread.

It counts and gathers a piece at a time under torch's parallel grain, so no operation waits at
a barrier for a second core (on a busy machine one descheduled thread stalls every parallel
operation). Here: its answers against the sorting reference on the cases its mechanics split
(blocks, the last word of a block, ties across blocks, NaN, several key tensors, the mask
buffer that holds |keys|), and that every operation it issues is small and on this thread.
Timings live in benchmarks/.
"""

from __future__ import annotations

import threading

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from prune_explorer.prune import _select, _select_cpu

GRAIN = 32768  # at::internal::GRAIN_SIZE
ODD = 3 * _select_cpu._BLOCK + 2 * _select_cpu.PIECE + 13  # not a multiple of 8


def _reference(keys, k, largest, magnitude):
    return _select._by_sorting(keys, k, largest, "index", magnitude)


def _selected(sel, keys):
    return [sel.selected(x, i) for i, x in enumerate(keys)]


def _kept(sel, keys, scratch=None):
    outs = scratch or [torch.empty(x.shape, dtype=x.dtype) for x in keys]
    return [sel.write_kept(x, o, i) for i, (x, o) in enumerate(zip(keys, outs, strict=True))]


def _data(kind, n, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, generator=g, dtype=torch.float64) * 0.02
    if kind == "ties":  # few distinct values: the bracket is one value, a tie over all blocks
        x = (x * 300).round() / 300
    elif kind == "fine ties":  # ~1000 entries a value: the bracket holds a few tied values
        x = (x * 20000).round() / 20000
    elif kind == "nan":
        x[torch.randperm(n, generator=g)[:n // 50]] = float("nan")
    return x.to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("kind", ["normal", "ties", "fine ties", "nan"])
@pytest.mark.parametrize("fraction", [1e-5, 0.3, 0.5, 0.97])
def test_magnitude_selection_equals_the_sorting_reference(dtype, kind, fraction):
    x = _data(kind, ODD, dtype, seed=int(fraction * 1000) + len(kind))
    k = max(1, int(fraction * (ODD - int(x.isnan().sum()))))
    sel = _select.select([x], k, magnitude=True)
    assert sel.value is not None  # the bracketing pass decided, not the fallback sort
    ref = _reference([x], k, False, True)
    assert torch.equal(_selected(sel, [x])[0], _selected(ref, [x])[0])
    assert int(_selected(sel, [x])[0].sum()) == k


@pytest.mark.parametrize("kind", ["normal", "ties", "fine ties"])
def test_several_key_tensors_equal_the_reference(kind):
    sizes = [7, 1000, _select_cpu.PIECE + 1, _select_cpu._BLOCK + 5, 3 * _select_cpu.PIECE]
    keys = [_data(kind, n, torch.float32, seed=i) for i, n in enumerate(sizes)]
    total = sum(sizes)
    for k in (1, total // 3, total - 2):
        sel = _select.select(keys, k, magnitude=True)
        ref = _reference(keys, k, False, True)
        for a, b in zip(_selected(sel, keys), _selected(ref, keys), strict=True):
            assert torch.equal(a, b)


@pytest.mark.parametrize("kind", ["normal", "ties"])
def test_plain_keys_smallest_and_largest_equal_the_reference(kind):
    x = _data(kind, ODD, torch.float32, seed=7)  # negative keys too: no magnitude
    for largest in (False, True):
        for k in (5, ODD // 2):
            sel = _select.select([x], k, largest=largest)
            ref = _reference([x], k, largest, False)
            assert torch.equal(_selected(sel, [x])[0], _selected(ref, [x])[0])


@pytest.mark.parametrize("kind", ["normal", "fine ties", "nan"])
def test_the_mask_buffer_that_holds_the_magnitudes_gets_the_same_mask(kind):
    keys = [_data(kind, n, torch.float32, seed=n) for n in (ODD, 5000)]
    k = sum(x.numel() for x in keys) // 2
    scratch = [torch.full_like(x, 7.0) for x in keys]
    held = _select.select(keys, k, magnitude=True, scratch=scratch)
    assert all(h is not None for h in held.held)  # write_kept compares them in place
    fresh = _select.select(keys, k, magnitude=True)
    for a, b in zip(_kept(held, keys, scratch), _kept(fresh, keys), strict=True):
        assert torch.equal(a, b)
    for x, mask in zip(keys, scratch, strict=True):  # NaN is never pruned
        assert bool((mask[x.isnan()] == 1).all())


def test_a_scratch_of_another_dtype_is_not_used_to_hold_the_magnitudes():
    x = _data("normal", ODD, torch.float64, seed=3)
    scratch = [torch.zeros(ODD, dtype=torch.float32)]
    sel = _select.select([x], ODD // 2, magnitude=True, scratch=scratch)
    assert sel.held == (None,)
    assert bool((scratch[0] == 0).all())


class _Ops(TorchDispatchMode):
    """Records (thread, op, sizes of its tensor arguments and results)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[int, object, list[int], list[int]]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        inputs = [a.numel() for a in [*args, *kwargs.values()] if isinstance(a, torch.Tensor)]
        results = [o.numel() for o in (out if isinstance(out, (tuple, list)) else [out])
                   if isinstance(o, torch.Tensor)]
        self.seen.append((threading.get_ident(), func, inputs, results))
        return out


# views and allocations do no work per entry; index_select works per index (its result)
_NO_WORK = ("view", "slice", "unbind", "split", "empty", "alias", "detach", "lift_fresh",
            "_unsafe_view", "as_strided")


@pytest.mark.parametrize("kind", ["normal", "ties", "fine ties"])
def test_every_operation_runs_on_the_calling_thread_under_the_grain(kind):
    keys = [_data(kind, n, torch.float32, seed=1) for n in (ODD, 2 * _select_cpu._BLOCK)]
    scratch = [torch.empty_like(x) for x in keys]
    k = sum(x.numel() for x in keys) // 2
    with _Ops() as ops:
        sel = _select.select(keys, k, magnitude=True, scratch=scratch)
        _kept(sel, keys, scratch)
    assert sel.value is not None
    assert {ident for ident, _, _, _ in ops.seen} == {threading.get_ident()}
    big = []
    for _, func, inputs, results in ops.seen:
        name = func.__name__.split(".")[0]
        if name in _NO_WORK:
            continue
        sizes = results if name == "index_select" else inputs + results
        if sizes and max(sizes) >= GRAIN:
            big.append((str(func), sizes))
    assert big == []  # torch would run those on all its threads, behind a barrier


@pytest.mark.parametrize("kind", ["normal", "fine ties"])
def test_many_gathered_candidates_are_bracketed_again(kind, monkeypatch):
    # 4M keys: the bracket gathers more than a piece of candidates, which are bracketed again
    # (torch.kthvalue would copy them in one parallel operation); with fine ties the second
    # bracket is a single value
    x = _data(kind, 1 << 22, torch.float32, seed=11)
    passes = []
    real = _select_cpu._order_statistic

    def spy(keys, rank, magnitude, held=None):
        passes.append(sum(k.numel() for k in keys))
        return real(keys, rank, magnitude, held)

    monkeypatch.setattr(_select_cpu, "_order_statistic", spy)
    for k in (x.numel() // 2, x.numel() // 5):
        passes.clear()
        sel = _select.select([x], k, magnitude=True)
        assert len(passes) == 2
        assert passes[1] > _select_cpu.PIECE  # the candidates, again
        ref = _reference([x], k, False, True)
        assert torch.equal(_selected(sel, [x])[0], _selected(ref, [x])[0])
