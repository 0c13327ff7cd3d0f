"""Issue 11 (Apply <= 500 ms on 4096^2): what an apply and the questions right after it cost.

An L1 apply from a previewed order installs ``order.mask(n)``; carrying the order past it then
needs no read of the mask. The history's packed mask serves the next step's undo snapshot. The
kept counts the explorer asks after every change come from the cached order and a values-only
list of exact zeros. Each of these is checked by counting calls of the expensive function, and
the answers against a fresh computation (no timing).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import prune_explorer.session.analysis.frames as reports
import prune_explorer.session.parts.reporting as reporting
import prune_explorer.session.tensors.packed as packed
from prune_explorer.session import Session
from prune_explorer.session.preview.order_cache import TensorOrder, _state
from prune_explorer.viz.pooling import block_edges

ROWS, COLS = block_edges(400, 37), block_edges(600, 23)


def _model(dtype: torch.dtype = torch.float32, quantised: bool = False) -> nn.Module:
    g = torch.Generator().manual_seed(5)
    model = nn.Sequential(nn.Linear(600, 400), nn.Linear(400, 350))  # above SMALL: cached
    with torch.no_grad():
        for layer in model:
            w = torch.randn(layer.weight.shape, generator=g) * 0.05
            # quantised: ties everywhere, and a tenth of the entries exactly 0 (many zeros)
            layer.weight.copy_(torch.round(w * 64) / 64 if quantised else w)
    return model.to(dtype)


def _expected(s: Session, name: str) -> tuple[int, int]:
    return int(s.mask(name).sum()), int(s.alive(name).sum())


def _counts(s: Session, name: str) -> tuple[int, int]:
    return s.kept_count(name), s.kept_count(name, alive=True)


# -- the carry ---------------------------------------------------------------------------------
def test_an_l1_apply_from_its_order_carries_it_with_the_cut_it_installed(monkeypatch):
    s = Session(_model())
    layer = s.model[0]
    cuts = []
    real = TensorOrder.restricted

    def spy(self, current, kept, state, cut=None):
        cuts.append(cut)
        return real(self, current, kept, state, cut)

    monkeypatch.setattr(TensorOrder, "restricted", spy)
    s.preview("0.weight", "l1_unstructured", amount=0.3)
    s.apply("0.weight", "l1_unstructured", amount=0.3)
    assert cuts == [72_000]  # 30% of 240,000: the mask was not read back
    s.apply("0.weight", "ln_structured", amount=0.2, n=2, dim=0)
    assert cuts == [72_000, None]  # a structured step: the carry reads the mask to check
    fresh = TensorOrder(layer.weight, layer.weight_mask, _state(layer, "weight"))
    carried = s._orders.peek(layer, "weight")
    assert torch.equal(carried.rank, fresh.rank)


@pytest.mark.parametrize("quantised", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_restricting_by_a_known_cut_is_restricting_by_the_mask(dtype, quantised):
    layer = _model(dtype, quantised)[0]
    with torch.no_grad():
        layer.weight[::40, ::7] = 0  # a few exact zeros travel with the order
    state = _state(layer, "weight")
    for cut in (0, 1, 1000, 120_000, 240_000):
        order = TensorOrder(layer.weight, None, state)
        order.pruned_per_cell(0, ROWS, COLS)  # the picture's cells travel too
        kept = order.mask(cut)
        by_mask = order.restricted(layer.weight, kept, state)
        by_cut = order.restricted(layer.weight, kept, state, cut)  # consumes `order`
        assert by_cut.alive == by_mask.alive == 240_000 - cut
        np.testing.assert_array_equal(by_cut.pruned_per_cell(7, ROWS, COLS),
                                      by_mask.pruned_per_cell(7, ROWS, COLS))
        assert torch.equal(by_cut.rank, by_mask.rank)
        assert torch.equal(by_cut.sorted_keys, by_mask.sorted_keys)
        assert (by_cut.zeros is None) == (by_mask.zeros is None)
        if by_mask.zeros is not None:
            assert torch.equal(by_cut.zeros, by_mask.zeros)


# -- the undo snapshot --------------------------------------------------------------------------
def test_the_next_steps_snapshot_reuses_the_historys_bits(monkeypatch):
    s = Session(_model())
    packs = []
    real = packed.PackedMask.from_tensors.__func__  # every packing goes through it
    monkeypatch.setattr(packed.PackedMask, "from_tensors", classmethod(
        lambda cls, ms: packs.extend(m.shape for m in ms) or real(cls, ms)))
    s.apply("0.weight", "l1_unstructured", amount=0.3)
    assert len(packs) == 1  # the history's bits (no mask to snapshot yet)
    first = s.mask("0.weight").clone()
    s.apply("0.weight", "l1_unstructured", amount=0.3)
    assert len(packs) == 2  # the new mask only: the old one's bits were the history's
    s.undo()
    assert torch.equal(s.mask("0.weight"), first)


# -- kept counts --------------------------------------------------------------------------------
def test_kept_counts_are_the_masks_and_alives_sums_through_every_change():
    s = Session(_model(torch.bfloat16))
    layer = s.model[0]
    with torch.no_grad():
        layer.weight[::50, ::3] = 0  # a few exact zeros
    s2 = Session(_model(torch.bfloat16, quantised=True))  # many
    assert _counts(s2, "0.weight") == _expected(s2, "0.weight")
    s2.apply("0.weight", "l1_unstructured", amount=0.3)
    assert _counts(s2, "0.weight") == _expected(s2, "0.weight")
    name = "0.weight"
    assert _counts(s, name) == _expected(s, name)

    def zero_a_row():
        with torch.no_grad():
            layer.weight_orig[3] = 0

    changes = [
        lambda: s.preview(name, "l1_unstructured", amount=0.3),  # builds the order
        lambda: s.apply(name, "l1_unstructured", amount=0.3),  # carries it
        lambda: s.apply(name, "ln_structured", amount=0.2, n=2, dim=1),
        s.undo,
        lambda: s.apply(name, "random_unstructured", amount=0.2, seed=3),
        lambda: layer.weight_orig.data.abs_().add_(1),  # past the version counter: no zeros
        zero_a_row,  # a few new zeros, through the version counter
        lambda: s.commit([name]),  # committed zeros: many, counted with the values
        lambda: s.preview(name, "l1_unstructured", amount=0.5),
    ]
    for change in changes:
        change()
        assert _counts(s, name) == _expected(s, name), change


def test_after_an_apply_the_counts_read_neither_the_mask_nor_the_values(monkeypatch):
    s = Session(_model())
    layer = s.model[0]
    with torch.no_grad():
        layer.weight[::50, ::3] = 0
    name = "0.weight"
    s.preview(name, "l1_unstructured", amount=0.3)
    found = []
    real = reporting._few_zeros
    monkeypatch.setattr(reporting, "_few_zeros",
                        lambda current, dead: found.append(dead is None) or real(current, dead))
    assert _counts(s, name) == _expected(s, name)
    assert found == [True]  # the values' exact zeros, listed once
    s.apply(name, "l1_unstructured", amount=0.3)
    reads = []
    with monkeypatch.context() as m:
        m.setattr(type(s), "mask", lambda self, n: reads.append(n))
        m.setattr(type(s), "alive", lambda self, n, mask=None: reads.append(n))
        got = _counts(s, name)
    assert reads == []  # the order's count
    assert found == [True]  # the zeros' list kept
    assert got == _expected(s, name)
    with torch.no_grad():
        layer.weight_orig[0, 0] = 0.0  # a write to the values: listed again
    assert _counts(s, name) == _expected(s, name)
    assert len(found) == 2


def test_an_interrupted_carry_leaves_no_consumed_order_behind(monkeypatch):
    # Restricting by a cut shifts the old order's ranks in place: it must be out of the cache
    # before, or a rollback to the state it described would find it there, corrupted.
    s = Session(_model())
    expected = s.preview("0.weight", "l1_unstructured", amount=0.5).clone()
    real = TensorOrder.restricted

    def interrupted(self, *args):
        real(self, *args)
        raise KeyboardInterrupt

    monkeypatch.setattr(TensorOrder, "restricted", interrupted)
    with pytest.raises(KeyboardInterrupt):
        s.apply("0.weight", "l1_unstructured", amount=0.3)
    monkeypatch.undo()
    assert s.steps == ()
    assert torch.equal(s.preview("0.weight", "l1_unstructured", amount=0.5), expected)


# -- zeros --------------------------------------------------------------------------------------
def _report_zeros(s: Session) -> dict[str, int]:
    return {n: int((s.tensor(n) == 0).sum()) for n in s.names}  # orig * mask, counted


def test_zeros_after_an_apply_come_from_the_kept_counts(monkeypatch):
    s = Session(_model())
    with torch.no_grad():
        s.model[0].weight[::50, ::3] = 0
    s.preview("0.weight", "l1_unstructured", amount=0.3)  # its order
    s.kept_count("0.weight", alive=True)  # the facts of its values (the explorer asks)
    s.apply("0.weight", "ln_structured", amount=0.1, n=1, dim=0)  # leaves some zeros alive
    counted = []
    real = reports._zeros
    names = {id(m): n for n, m in s.model.named_modules()}
    monkeypatch.setattr(reports, "_zeros",
                        lambda m, t: counted.append(f"{names[id(m)]}.{t}") or real(m, t))
    assert s.zeros() == _report_zeros(s)
    assert sorted(counted) == ["0.bias", "1.bias", "1.weight"]  # not 0.weight: no pass


@pytest.mark.parametrize("special", ["inf", "nan", "mask written", "undo", "commit"])
def test_zeros_are_the_reports_count_in_every_case(special):
    s = Session(_model())
    layer = s.model[0]
    with torch.no_grad():
        layer.weight[::50, ::3] = 0
        if special in ("inf", "nan"):
            layer.weight[7, :5] = float(special)  # masked, inf * 0 and nan * 0 are not 0
    s.preview("0.weight", "l1_unstructured", amount=0.3)
    s.kept_count("0.weight", alive=True)  # the facts of the values, as the explorer asks
    s.apply("0.weight", "random_unstructured", amount=0.3, seed=1)
    if special in ("inf", "nan"):
        mask = torch.ones_like(layer.weight_mask)
        mask[7, :5] = 0  # the session's own mask prunes them
        s.apply("0.weight", "custom_from_mask", mask=mask)
    elif special == "mask written":
        with torch.no_grad():
            layer.weight_mask[0, :] = 0  # not the session's mask any more
    elif special == "undo":
        s.apply("0.weight", "l1_unstructured", amount=0.3)
        s.undo()
    else:
        s.commit(["0.weight"])
    s.kept_count("0.weight", alive=True)  # what the explorer asks first: facts of the values
    assert s.zeros() == _report_zeros(s)
    frame = s.report()
    assert dict(zip(frame["name"], frame["zeros"], strict=True)) == _report_zeros(s)


def test_the_history_packs_the_bool_mask_the_order_gave(monkeypatch):
    # An L1 step installed from its order: the history packs the order's bool mask, not the
    # installed float mask compared with 0 again; the bits are the same.
    s = Session(_model(torch.bfloat16))
    packed_from = []
    real = packed.PackedMask.from_tensors.__func__  # every packing goes through it
    monkeypatch.setattr(packed.PackedMask, "from_tensors", classmethod(
        lambda cls, ms: packed_from.extend(m.dtype for m in ms) or real(cls, ms)))
    s.apply("0.weight", "l1_unstructured", amount=0.3)  # nothing previewed: the core's mask
    s.preview("0.weight", "l1_unstructured", amount=0.3)
    s.apply("0.weight", "l1_unstructured", amount=0.3)  # from the order
    assert packed_from == [torch.bfloat16, torch.bool]
    history = s.history("0.weight")
    assert torch.equal(history.mask(2), s.mask("0.weight"))
    s.undo()
    assert torch.equal(history.mask(1), s.mask("0.weight"))


# -- a global apply without a preview ----------------------------------------------------------

def test_a_global_apply_without_a_preview_sorts_no_keys_and_a_preview_does(monkeypatch):
    # float32 targets above CHUNK: a slider's cuts read a window of bins gathered around the
    # first cut, then, once the cut has left REGATHER windows, runs of every key sorted (built
    # once); a single cut, an apply on its own, gathers its bin by one pass instead of a sort
    import prune_explorer.session.preview.global_cut as global_cut_module
    from prune_explorer import prune

    monkeypatch.setattr(global_cut_module, "WINDOW_SHARE", 0.01)  # windows of 1% of the keys
    monkeypatch.setattr(global_cut_module, "MIN_WINDOW", 1)

    built: list[int] = []
    real = global_cut_module.SortedKeys

    def spy(*args, **kwargs):
        built.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(global_cut_module, "SortedKeys", spy)
    g = torch.Generator().manual_seed(9)
    model = nn.Sequential(nn.Linear(1200, 1000, bias=False), nn.Linear(1000, 1100, bias=False))
    with torch.no_grad():
        for layer in model:
            layer.weight.copy_(torch.randn(layer.weight.shape, generator=g) * 0.02)
    names = ["0.weight", "1.weight"]
    pairs = [(model[0], "weight"), (model[1], "weight")]
    expected = prune.global_masks(pairs, prune.L1Unstructured, amount=0.37)
    s = Session(model)
    s.apply_global(names, amount=0.37)
    assert built == []
    assert all(torch.equal(m.weight_mask, e) for m, e in zip(model, expected, strict=True))
    s.undo()
    preview = s.preview_global(names, amount=0.37)
    assert built == []  # the first move: one pass for its window, no sort
    assert all(torch.equal(preview[n], e) for n, e in zip(names, expected, strict=True))
    for amount in (0.05, 0.9, 0.6):  # cuts far apart: each leaves its window
        assert len(built) == 0
        far = s.preview_global(names, amount=amount)
        expected = prune.global_masks(pairs, prune.L1Unstructured, amount=amount)
        assert all(torch.equal(far[n], e) for n, e in zip(names, expected, strict=True))
    assert len(built) == 2  # the third window left behind: every key sorted, once per target
