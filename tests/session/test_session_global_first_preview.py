"""Issue 33, must-hold 1: a first global L1 preview costs one pass per target, like the core.

On the CPU the key histogram of each target and the keys of a window of bins around the cut (where
a strided sample places it) come from one NumPy pass on the calling thread (``key_pass``); the
slider's nearby moves read that window with no pass, and an apply at the previewed amount reuses
the preview's cut (no histogram, no selection again): it installs the preview's masks bit for bit,
and the history keeps exactly their bits. Passes are counted, not timed.
"""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from prune_explorer import prune
from prune_explorer.prune import engine
from prune_explorer.session import Session
from prune_explorer.session.preview import global_cut as global_cut_module
from prune_explorer.session.preview import masks as masks_module
from prune_explorer.session.preview.global_cut import GlobalCut, _Source
from prune_explorer.session.preview.key_pass import key_pass
from prune_explorer.session.tensors.packed import PackedMask

TARGETS = ["0.weight", "1.weight", "2.weight"]


def _model(dtype: torch.dtype = torch.float32, seed: int = 0) -> nn.Module:
    g = torch.Generator().manual_seed(seed)
    model = nn.Sequential(nn.Linear(300, 512), nn.Linear(400, 400), nn.Linear(600, 300))
    with torch.no_grad():
        for layer in model:  # each above SMALL entries: cached, as a large model's
            layer.weight.copy_(torch.randn(layer.weight.shape, generator=g) * 0.02)
    return model.to(dtype)


@pytest.fixture
def passes(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Every pass over a target's entries: (what, its entry count)."""
    seen: list[tuple[str, int]] = []
    chunks, mask = _Source.chunks, GlobalCut.mask_and_bits
    monkeypatch.setattr(_Source, "chunks", lambda self: (
        seen.append(("torch pass", self.values.numel())), chunks(self))[1])
    monkeypatch.setattr(global_cut_module, "key_pass", lambda values, *a, **k: (
        seen.append(("key pass", values.numel())), key_pass(values, *a, **k))[1])
    monkeypatch.setattr(GlobalCut, "mask_and_bits", lambda self, i: (
        seen.append(("mask", self._sources[i].values.numel())), mask(self, i))[1])
    return seen


def _core(model: nn.Module, amount: float | int) -> list[torch.Tensor]:
    pairs = [(model[int(t[0])], "weight") for t in TARGETS]
    with prune.tie_break("index"):
        return prune.global_masks(pairs, prune.L1Unstructured, amount=amount)


@pytest.mark.parametrize("amount", [0.03, 0.4, 0.97, 123_456])
def test_first_preview_reads_each_target_once_and_apply_installs_it(amount, passes):
    model = _model()
    expected = _core(copy.deepcopy(model), amount)
    s = Session(model)
    sizes = sorted(s.info(t).numel for t in TARGETS)
    preview = s.preview_global(TARGETS, amount=amount)
    kept = [preview.kept(t) for t in TARGETS]
    # one pass per target: the histogram and the window together, no second gather
    assert sorted(passes) == [("key pass", n) for n in sizes]
    assert all(h._window is not None for h in s._orders._hists.values())
    passes.clear()
    masks = {t: preview[t].clone() for t in TARGETS}  # built on demand: a pass each
    assert sorted(passes) == [("mask", n) for n in sizes]
    passes.clear()
    s.apply_global(TARGETS, amount=amount)
    # the preview's cut, reused: no histogram, no gather; the masks written once each
    assert sorted(passes) == [("mask", n) for n in sizes]
    for t, core, k in zip(TARGETS, expected, kept, strict=True):
        installed = s.mask(t)
        assert torch.equal(masks[t], installed), t  # the preview, bit for bit
        assert torch.equal(installed, core), t  # the core's
        assert k == int(installed.count_nonzero())
        bits = s._histories[t][-1].mask
        assert bits == PackedMask.from_tensor(installed)  # the history: exact, packed
        assert torch.equal(bits.unpack(installed.dtype), installed)


def test_nearby_slider_moves_read_the_first_window_without_a_pass(passes):
    s = Session(_model())
    s.preview_global(TARGETS, amount=0.5)
    passes.clear()
    for amount in (0.48, 0.51, 0.53):
        preview = s.preview_global(TARGETS, amount=amount)
        for t, core in zip(TARGETS, _core(copy.deepcopy(s.model), amount), strict=True):
            assert preview.kept(t) == int(core.count_nonzero()), (amount, t)
    assert not [p for p in passes if p[0] != "mask"]


def test_a_first_window_the_sample_misplaced_costs_a_gather_and_stays_exact(
        passes, monkeypatch):
    model = _model(seed=1)
    expected = _core(copy.deepcopy(model), 0.6)
    s = Session(model)
    monkeypatch.setattr(masks_module, "predicted_window", lambda pairs, amount: (0, 1))
    preview = s.preview_global(TARGETS, amount=0.6)
    assert len([p for p in passes if p[0] == "key pass"]) == 6  # histogram, then the window
    for t, core in zip(TARGETS, expected, strict=True):
        assert torch.equal(preview[t], core), t


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
@pytest.mark.parametrize("pruned", [False, True])
def test_the_numpy_pass_counts_and_gathers_as_the_streamed_one(dtype, pruned):
    g = torch.Generator().manual_seed(5)
    layer = nn.Linear(97, 61)
    with torch.no_grad():
        w = torch.randn(61, 97, generator=g) * 0.05
        w[0, :5] = torch.tensor([0.0, -0.0, float("inf"), float("nan"), -float("nan")])
        layer.weight.copy_(w)
    layer = layer.to(dtype)
    if pruned:
        prune.random_unstructured(layer, "weight", amount=0.3)
    source = _Source(layer, "weight")
    bits = 8 * source.values.element_size() - 1
    width = min(16, bits)
    shift = bits - width
    top = engine.NAN_BITS[dtype] >> shift
    streamed = engine.histogram(source.chunks(), shift, width, 0, source.values.device,
                                ceiling=engine.NAN_BITS[dtype], markers=pruned)
    keys = torch.cat([k.clone() for k in source.chunks()])
    low, high = sorted(int(k) for k in keys[keys >= 0][[7, 300]])
    counts, window = key_pass(source.values, source.kept, shift=shift, width=width,
                              window=(low, high))
    assert counts is not None
    assert window is not None
    assert torch.equal(torch.from_numpy(counts)[:top], streamed[:top])
    assert int(counts.sum()) == int(streamed.sum()) == int((keys >= 0).sum())
    assert torch.equal(window.to(keys.dtype), keys[(keys >= low) & (keys <= high)])
