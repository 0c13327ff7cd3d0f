"""Issue 11, items 2 and 4: a global L1 cut from per-tensor key histograms, no order kept.

The masks must be the core's ``global_masks`` (tie rule "index") bit for bit on tie-heavy data
(bfloat16/float16: every cut is a tie; float32 quantised to a coarse grid), fresh and on
already-pruned targets, at every amount; what the session previews is what it applies.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from prune_explorer import prune
from prune_explorer.prune import _radix, engine
from prune_explorer.session import Session
from prune_explorer.session.preview import global_cut as global_cut_module
from prune_explorer.session.preview import key_pass as key_pass_module
from prune_explorer.session.preview.global_cut import KeyHistogram, _Source, global_cut
from prune_explorer.session.preview.key_pass import key_pass
from prune_explorer.session.preview.masks import GlobalPreview
from prune_explorer.session.preview.order_cache import OrderCache

AMOUNTS = [0.0, 0.01, 0.25, 0.5, 0.77, 0.999, 1.0, 3, 100_000]


def _model(dtype: torch.dtype, seed: int = 0, shapes=((400, 500), (350, 400), (400, 350))):
    g = torch.Generator().manual_seed(seed)
    model = nn.Sequential(*(nn.Linear(i, o) for o, i in shapes))
    with torch.no_grad():
        for layer in model:
            w = torch.randn(layer.weight.shape, generator=g) * 0.05
            # float32 and float64 on a 1/64 grid: a few hundred values, ties at every cut
            layer.weight.copy_(torch.round(w * 64) / 64 if dtype in (
                torch.float32, torch.float64) else w)
    return model.to(dtype)


def _core(pairs, amount):
    with prune.tie_break("index"):
        return prune.global_masks(pairs, prune.L1Unstructured, amount=amount)


def _cut(pairs, amount):
    hists = [KeyHistogram(m, n) for m, n in pairs]
    alive = sum(h.alive for h in hists)
    return global_cut(pairs, hists, prune._compute_nparams_toprune(amount, alive)), alive


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
@pytest.mark.parametrize("pruned_first", [False, True])
def test_histogram_cut_masks_are_the_cores(dtype, pruned_first):
    model = _model(dtype)
    if pruned_first:  # one target pruned before, one of them with a tie at its own cut
        prune.l1_unstructured(model[1], "weight", amount=0.4)
    pairs = [(model[2], "weight"), (model[0], "weight"), (model[1], "weight")]
    straddled = 0
    for amount in [*AMOUNTS, 0.4321]:
        cut, _ = _cut(pairs, amount)
        assert cut is not None
        straddled += cut.straddles
        for i, expected in enumerate(_core(pairs, amount)):
            got = cut.mask(i)
            assert got.dtype == expected.dtype
            assert torch.equal(got, expected), (amount, i)
            assert cut.kept(i) == int(expected.count_nonzero()), (amount, i)
    assert straddled >= 3  # the data does put ties across the cut


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_ties_straddling_chunk_boundaries(dtype, monkeypatch):
    """Ties taken lowest flat index first across the pieces a pass reads."""
    monkeypatch.setattr(_radix, "CHUNK", 1000)  # the core's pieces
    monkeypatch.setattr(engine, "CHUNK", 1000)  # the session's, through the core's interface
    monkeypatch.setattr(key_pass_module, "BLOCK", 1000)  # the session's NumPy passes
    model = _model(dtype, seed=3, shapes=((64, 90), (70, 80)))
    with torch.no_grad():  # few distinct values: thousands of ties at every cut
        for layer in model:
            layer.weight.copy_(torch.round(layer.weight * 40) / 40)
    pairs = [(model[0], "weight"), (model[1], "weight")]
    for amount in (0.1, 0.33, 0.5, 0.9):
        cut, _ = _cut(pairs, amount)
        assert cut.straddles
        for i, expected in enumerate(_core(pairs, amount)):
            assert torch.equal(cut.mask(i), expected), (amount, i)


def test_nan_at_the_cut_leaves_it_to_the_core():
    model = _model(torch.float32)
    with torch.no_grad():
        model[0].weight[:300] = float("nan")
    pairs = [(model[0], "weight"), (model[1], "weight")]
    cut, _ = _cut(pairs, 0.3)  # NaN ranks last: kept, the cut is below them
    for i, expected in enumerate(_core(pairs, 0.3)):
        assert torch.equal(cut.mask(i), expected)
    assert _cut(pairs, 1.0)[0] is None


def test_the_cut_refuses_a_target_written_after_it():
    model = _model(torch.bfloat16)
    pairs = [(model[0], "weight"), (model[1], "weight")]
    cut, _ = _cut(pairs, 0.5)
    with torch.no_grad():
        model[1].weight.mul_(2)
    cut.mask(0)
    with pytest.raises(RuntimeError, match="written to after the cut"):
        cut.mask(1)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_session_global_preview_keeps_no_order_and_equals_apply(dtype):
    s = Session(_model(dtype))
    s.apply("1.weight", "l1_unstructured", amount=0.3)
    targets = ["0.weight", "1.weight", "2.weight"]
    for amount in (0.2, 0.55, 0.8):
        preview = s.preview_global(targets, amount=amount)
        assert isinstance(preview, GlobalPreview)
        assert not s._orders._orders  # histograms only: nothing per entry is kept
        assert len(s._orders._hists) == 3
        masks = {n: preview[n].clone() for n in targets}
        s.apply_global(targets, amount=amount)
        for n in targets:
            assert torch.equal(masks[n], s.mask(n).to(masks[n].dtype)), (amount, n)
        s.undo()


def test_histograms_follow_the_tensor_state():
    model = _model(torch.bfloat16)
    cache = OrderCache()
    first = cache.histogram(model[0], "weight")
    assert cache.histogram(model[0], "weight") is first
    prune.l1_unstructured(model[0], "weight", amount=0.5)
    again = cache.histogram(model[0], "weight")
    assert again is not first
    assert again.alive == first.alive - 100_000
    assert cache.histogram(model[0], "weight", build=False) is again
    with torch.no_grad():
        model[0].weight_orig.add_(1)
    assert cache.histogram(model[0], "weight", build=False) is None


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_apply_global_without_preview_takes_the_cores_cut(dtype):
    """Session.apply_global with no preview before builds no key histogram (a pass and a
    bincount per target): the core's one selection gives the masks and says how it split the
    tie (no model-sized copy, no look at the masks afterwards): the core's masks, and the same
    tie note as the full look."""
    fast, slow = Session(_model(dtype)), Session(_model(dtype))
    slow._orders.budget = 0  # cache off: the core computes, the note comes from the full look
    targets = ["2.weight", "0.weight", "1.weight"]
    pairs = [(fast.model[int(t[0])], "weight") for t in targets]
    for amount in (0.3, 0.6):
        expected = [m.clone() for m in _core(pairs, amount)]
        a = fast.apply_global(targets, amount=amount)
        b = slow.apply_global(targets, amount=amount)
        assert not fast._orders._hists
        assert not fast._orders._orders
        assert a.ties == b.ties == "lowest"  # bf16 and the 1/64 grid: the cut is a tie
        for t, mask in zip(targets, expected, strict=True):
            assert torch.equal(fast.mask(t).to(mask.dtype), mask), (amount, t)
            assert torch.equal(fast.mask(t), slow.mask(t)), (amount, t)


def test_slider_moves_near_the_first_cut_read_its_window_without_a_pass():
    # float32: the first cut gathers a window of bins around its own (one pass, no sort);
    # nearby cuts read their bin there (counted passes, not timings), exactly
    torch.manual_seed(0)
    layer = nn.Linear(1024, 2048)  # more than one CHUNK of entries
    with torch.no_grad():
        layer.weight.normal_(0, 0.02)
    hist = KeyHistogram(layer, "weight")
    pairs = [(layer, "weight")]
    original = _Source.chunks
    passes = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_Source, "chunks", lambda self: (passes.append(1), original(self))[1])
        patch.setattr(global_cut_module, "key_pass",  # the CPU's pass
                      lambda *a, **k: (passes.append(1), key_pass(*a, **k))[1])
        global_cut(pairs, [hist], hist.alive // 2)
        assert len(passes) == 1
        assert hist._sorted is None
        near = {k: global_cut(pairs, [hist], k) for k in (
            hist.alive // 2 - hist.alive // 40, hist.alive // 2 + 1, hist.alive // 2 + 999)}
    assert len(passes) == 1
    keys = torch.cat([k.clone() for k in original(_Source(layer, "weight"))])
    for k, cut in near.items():
        value = int(torch.kthvalue(keys, k).values)
        assert (cut.value, cut.less) == (value, [int((keys < value).sum())])


def test_once_the_cut_has_left_its_windows_no_slider_move_passes_over_the_tensor():
    # float32: after REGATHER windows left behind, the tensor's keys are sorted once; every
    # later cut, near or far, reads its bin's run of them and never the tensor
    torch.manual_seed(0)
    layer = nn.Linear(1024, 2048)  # more than one CHUNK of entries
    with torch.no_grad():
        layer.weight.normal_(0, 0.02)
    hist = KeyHistogram(layer, "weight")
    pairs = [(layer, "weight")]
    for share in (0.5, 0.01, 0.99, 0.25):  # each far from the last window
        global_cut(pairs, [hist], int(share * hist.alive))
    assert hist._sorted is not None
    passes = []
    original = _Source.chunks
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_Source, "chunks", lambda self: (passes.append(1), original(self))[1])
        patch.setattr(global_cut_module, "key_pass",  # the CPU's pass
                      lambda *a, **k: (passes.append(1), key_pass(*a, **k))[1])
        cuts = {k: global_cut(pairs, [hist], k) for k in (1, hist.alive // 3, hist.alive - 7,
                                                           hist.alive // 2 + 1)}
    assert not passes
    keys = torch.cat([k.clone() for k in original(_Source(layer, "weight"))])  # one buffer
    for k, cut in cuts.items():  # the k-th smallest key, and the counts below and at it
        value = int(torch.kthvalue(keys, k).values)
        assert cut.value == value
        assert cut.less == [int((keys < value).sum())]
        assert cut.equal == [int((keys == value).sum())]
    j = int(torch.searchsorted(hist.counts.cumsum(0), torch.tensor([hist.alive // 2])))
    assert torch.equal(hist.bin_keys(_Source(layer, "weight"), j),
                       torch.sort(keys[(keys >> hist.shift) == j]).values)


def test_sorted_keys_of_an_already_pruned_tensor_skip_its_pruned_entries():
    torch.manual_seed(1)
    layer = nn.Linear(1024, 2048)
    with torch.no_grad():
        layer.weight.copy_(torch.round(torch.randn(2048, 1024) * 0.05 * 64) / 64)  # ties
    prune.l1_unstructured(layer, "weight", amount=0.3)
    hist = KeyHistogram(layer, "weight")
    pairs = [(layer, "weight")]
    for amount in (0.1, 0.5, 0.9):
        cut = global_cut(pairs, [hist], round(amount * hist.alive))
        with prune.tie_break("index"):
            expected = prune.global_masks(pairs, prune.L1Unstructured, amount=amount)[0]
        assert torch.equal(cut.mask(0), expected)


def test_sorted_keys_decode_every_run_exactly():
    from prune_explorer.session.preview.compact_keys import STRIDE, SortedKeys

    g = torch.Generator().manual_seed(3)
    w = torch.randn(3 * STRIDE + 17, generator=g) * 0.02
    w[::5] = 0.25  # ties
    w[::97] = 3e-30  # far below the rest: differences too large for a byte
    keys = w.view(torch.int32) & 0x7FFFFFFF
    keys[::13] = -1  # pruned markers are skipped
    alive = keys[keys >= 0]
    counts = torch.bincount(alive >> 15, minlength=1 << 16)
    code = SortedKeys(lambda: iter(keys.split(1000)), counts, 15, torch.int32)
    expected = torch.sort(alive).values
    assert code.size == alive.numel()
    assert code.bytes.size > code.large.size > 0  # all three tiers used
    assert torch.equal(code.run(0, code.size), expected)
    for start in (0, 1, STRIDE - 1, STRIDE, STRIDE + 1, 2 * STRIDE + 5):
        for stop in (start, start + 1, start + STRIDE + 3, code.size):
            assert torch.equal(code.run(start, stop), expected[start:stop]), (start, stop)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_the_bits_packed_on_the_way_are_the_masks(dtype, monkeypatch):
    """A first pruning's CPU pass packs the history's bits as it writes the mask: the same
    bits and count as packing the mask after, across blocks (sizes not multiples of 8), ties
    taken across block boundaries, everything or nothing kept."""
    from prune_explorer.session.tensors.packed import PackedMask

    monkeypatch.setattr(key_pass_module, "BLOCK", 1000)  # several blocks per target
    model = _model(dtype, seed=5, shapes=((37, 91), (50, 71)))
    with torch.no_grad():
        for layer in model:
            layer.weight.copy_(torch.round(layer.weight * 40) / 40)
    pairs = [(model[0], "weight"), (model[1], "weight")]
    for amount in (0.0, 0.1, 0.5, 0.77, 1.0):
        cut, _ = _cut(pairs, amount)
        for i in range(2):
            mask, bits = cut.mask_and_bits(i)
            assert bits is not None
            assert PackedMask.from_bits(mask.shape, *bits) == PackedMask.from_tensor(mask)
            assert bits[1] == int(mask.count_nonzero()), (amount, i)
    prune.l1_unstructured(model[1], "weight", amount=0.4)  # pruned before: packed after
    cut, _ = _cut(pairs, 0.5)
    assert cut.mask_and_bits(1)[1] is None


def test_apply_after_a_global_preview_packs_no_mask_again(monkeypatch):
    """After a global preview, the apply's history takes the bits the cut packed: none of
    the targets' masks is read again to pack it, and the history equals the installed masks."""
    from prune_explorer.session.tensors import packed as packed_module

    s = Session(_model(torch.bfloat16, shapes=((400, 500), (400, 400))))
    targets = ["0.weight", "1.weight"]
    s.preview_global(targets, amount=0.6)
    calls = []
    original = packed_module._pack_on_host
    monkeypatch.setattr(packed_module, "_pack_on_host",
                        lambda flat: calls.append(flat.numel()) or original(flat))
    s.apply_global(targets, amount=0.6)
    assert calls == []
    for name in targets:
        buffer = s.model.get_submodule(name.split(".")[0]).weight_mask
        assert s._histories[name][-1].mask == packed_module.PackedMask.from_tensor(buffer)
