"""Issue 11, item 4: slider previews come from a per-tensor order computed once, never stale.

The order's masks must be the core's, bit for bit (tie-heavy data: every cut is a tie), and the
order must be rebuilt after anything that changes the tensor's state: apply, undo, commit, a
device move, a write to the weights.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from torch import nn

from prune_explorer import prune
from prune_explorer.session import Session
from prune_explorer.session.preview.order_cache import OrderCache, TensorOrder
from prune_explorer.viz.pooling import block_edges, pool_fraction

AMOUNTS = [0.0, 0.01, 0.25, 0.5, 0.77, 0.999, 1.0, 3, 100_000]


def _model(dtype: torch.dtype = torch.float32, seed: int = 0) -> nn.Module:
    g = torch.Generator().manual_seed(seed)
    model = nn.Sequential(nn.Linear(500, 400), nn.Linear(400, 350), nn.Linear(350, 400))
    with torch.no_grad():
        for layer in model:
            w = torch.randn(layer.weight.shape, generator=g) * 0.05
            layer.weight.copy_(torch.round(w * 64) / 64 if dtype == torch.float32 else w)
    return model.to(dtype)


def _core_local(layer: nn.Module, amount) -> torch.Tensor:
    with prune.tie_break("index"):
        return prune.preview_mask(layer, "weight", prune.L1Unstructured(amount=amount))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_order_masks_are_the_cores_fresh_and_iterative(dtype):
    layer = _model(dtype)[0]
    cache = OrderCache()
    for pruned_first in (False, True):
        if pruned_first:
            prune.l1_unstructured(layer, "weight", amount=0.3)
        order = cache.get(layer, "weight")
        assert isinstance(order, TensorOrder)
        for amount in AMOUNTS:
            k = prune._compute_nparams_toprune(amount, order.alive)
            expected = _core_local(layer, amount)
            got = order.mask(k)
            assert got.dtype == expected.dtype
            assert torch.equal(got, expected), amount


def test_pruned_per_cell_counts_what_pooling_the_mask_counts():
    layer = _model(torch.bfloat16)[0]
    prune.l1_unstructured(layer, "weight", amount=0.2)
    order = OrderCache().get(layer, "weight")
    for cells in [(400, 500), (37, 61), (1, 1)]:
        rows, cols = block_edges(400, cells[0]), block_edges(500, cells[1])
        for k in (0, 1, 12_345, order.alive // 2, order.alive):
            pooled = pool_fraction(order.mask(k), max_cells=cells)
            pruned = order.pruned_per_cell(k, rows, cols)
            np.testing.assert_array_equal(pooled.area - pooled.kept, pruned)


def _fresh_order_after(s: Session, change) -> None:
    """``change`` alters 0.weight's state: the next preview must see it (no stale order)."""
    s.preview("0.weight", "l1_unstructured", amount=0.5)
    before = s._orders.get(*s._locate("0.weight"))
    change()
    preview = s.preview("0.weight", "l1_unstructured", amount=0.5)
    layer = s.model[0]
    assert torch.equal(preview, _core_local(layer, 0.5))
    assert s._orders.get(*s._locate("0.weight")) is not before


def test_order_is_rebuilt_after_a_write_to_the_weights():
    s = Session(_model())

    def write():
        with torch.no_grad():
            s.model[0].weight.mul_(-2.0).add_(torch.linspace(0, 1, 500))

    _fresh_order_after(s, write)


def test_order_is_rebuilt_after_a_write_through_data():
    s = Session(_model())

    def write():
        s.model[0].weight.data.mul_(torch.linspace(-1, 1, 500))  # no version bump

    _fresh_order_after(s, write)


def test_order_is_rebuilt_after_apply_undo_commit_and_a_write_to_orig():
    s = Session(_model())
    _fresh_order_after(s, lambda: s.apply("0.weight", "l1_unstructured", amount=0.2))
    _fresh_order_after(s, lambda: s.apply("0.weight", "random_unstructured", amount=0.2))
    _fresh_order_after(s, s.undo)

    def write_orig():
        with torch.no_grad():
            s.model[0].weight_orig.mul_(torch.linspace(-1, 1, 500))
        s.model(torch.zeros(1, 500))  # the forward pass refreshes `weight` = orig * mask

    _fresh_order_after(s, write_orig)
    _fresh_order_after(s, lambda: s.commit(["0.weight"]))


def test_order_is_rebuilt_after_a_device_move():
    s = Session(_model())
    s.preview("0.weight", "l1_unstructured", amount=0.5)
    order = s._orders.get(*s._locate("0.weight"))
    s.to("cpu")  # same device: the tensors stay, and so may the order
    assert torch.equal(s.preview("0.weight", "l1_unstructured", amount=0.5),
                       _core_local(s.model[0], 0.5))
    if torch.cuda.is_available():
        s.to("cuda")
        moved = s.preview("0.weight", "l1_unstructured", amount=0.5)
        assert moved.device.type == "cuda"
        assert s._orders.get(*s._locate("0.weight")) is not order


def test_the_session_previews_through_its_order_cache():
    s = Session(_model(torch.bfloat16))
    s.preview("0.weight", "l1_unstructured", amount=0.5)
    s.preview_global(["1.weight", "2.weight"], amount=0.5)
    assert len(s._orders) == 3
    small = Session(nn.Sequential(nn.Linear(20, 10)))  # small tensors: the core's own path
    small.preview("0.weight", "l1_unstructured", amount=0.5)
    assert len(small._orders) == 0


@pytest.mark.parametrize("cells", [(400, 500), (64, 80), (7, 3)])
def test_preview_cells_are_the_counts_of_the_previewed_mask(cells):
    s = Session(_model(torch.bfloat16))
    s.apply("1.weight", "l1_unstructured", amount=0.3)
    for target, shape in (("0.weight", (400, 500)), ("1.weight", (350, 400))):
        rows, cols = block_edges(shape[0], cells[0]), block_edges(shape[1], cells[1])
        for amount in (0.0, 0.3, 0.61, 1.0, 5):
            kept = s.preview_cells(target, "l1_unstructured", row_edges=rows, col_edges=cols,
                                   amount=amount)
            mask = s.preview(target, "l1_unstructured", amount=amount)
            np.testing.assert_array_equal(kept, pool_fraction(mask, max_cells=cells).kept)
            glob = s.preview_cells(target, "global_unstructured", row_edges=rows,
                                   col_edges=cols, targets=["1.weight", "0.weight", "2.weight"],
                                   pruning_method="l1_unstructured", amount=amount)
            masks = s.preview_global(["1.weight", "0.weight", "2.weight"], amount=amount)
            np.testing.assert_array_equal(glob, pool_fraction(masks[target], cells).kept)
    # only the mask can tell for other methods
    rows, cols = block_edges(400, 10), block_edges(500, 10)
    assert s.preview_cells("0.weight", "ln_structured", row_edges=rows, col_edges=cols,
                           amount=0.5, n="fro", dim=0) is None


def test_explorer_draws_the_sessions_cell_counts(monkeypatch):
    import prune_explorer.viz.preview as viz_preview
    from prune_explorer.viz import pool_view, tensor_view
    from prune_explorer.widgets import Explorer

    model = _model(torch.float32)
    with torch.no_grad():  # no weight exactly 0: what the mask keeps is what is alive
        model[0].weight.add_(1 / 128)  # the 1/64 grid moved by half a step keeps its ties
    ex = Explorer(model, debounce=None)
    ex.ui.amount.value = 0.5  # the first picture of a tensor state pools that state once

    def no_pooling(*args, **kwargs):
        raise AssertionError("the L1 preview must not pool the mask")

    monkeypatch.setattr(viz_preview, "pool_view", no_pooling)
    ex.ui.amount.value = 0.6  # a slider move: counts from the order, nothing pooled
    assert ex.preview_error is None
    cells = ex.preview_pane.picture.max_cells
    np.testing.assert_array_equal(ex.preview_array,
                                  pool_view(tensor_view(ex.preview_mask), cells).values)
    assert len(ex.session._orders) == 1  # the picture came from the tensor's order
    ex.close()


def test_global_preview_builds_only_the_masks_asked_for():
    from prune_explorer.session.preview.masks import GlobalPreview, kept_count

    s = Session(_model(torch.bfloat16))
    s.apply("1.weight", "l1_unstructured", amount=0.3)
    targets = ["0.weight", "1.weight", "2.weight"]
    preview = s.preview_global(targets, amount=0.55)
    assert isinstance(preview, GlobalPreview)
    counts = {n: kept_count(preview, n) for n in targets}
    assert repr(preview) == "GlobalPreview(3 targets, 0 masks built)"  # counts built none
    shown = preview["1.weight"]
    assert repr(preview) == "GlobalPreview(3 targets, 1 masks built)"
    assert preview["1.weight"] is shown
    s.apply_global(targets, amount=0.55)
    for n in targets:  # built after the apply: still the preview's masks, the apply's
        assert torch.equal(preview[n], s.mask(n).to(preview[n].dtype))
        assert counts[n] == int(s.mask(n).count_nonzero())


def test_explorer_global_step_counts_without_building_other_masks(monkeypatch):
    from prune_explorer.session.preview.masks import GlobalPreview
    from prune_explorer.widgets import Explorer

    built = []
    getitem = GlobalPreview.__getitem__

    def spy(self, address):
        built.append(address)
        return getitem(self, address)

    monkeypatch.setattr(GlobalPreview, "__getitem__", spy)
    ex = Explorer(_model(torch.float32), debounce=None)
    targets = ("0.weight", "1.weight", "2.weight")
    ex.ui.method.value = "global_unstructured"
    ex.ui.global_targets.value = targets
    built.clear()
    ex.ui.amount.value = 0.45
    assert ex.preview_error is None
    assert set(built) == {ex.tensor}  # only the shown target's mask
    masks = ex.session.preview_global(list(targets), amount=0.45)
    alive = sum(int(ex.session.mask(n).count_nonzero()) for n in targets)
    pruned = sum(alive_n - int(masks[n].count_nonzero()) for n, alive_n in
                 ((n, int(ex.session.mask(n).count_nonzero())) for n in targets))
    assert ex.preview_stats.left == alive
    assert ex.preview_stats.units_pruned == pruned == round(0.45 * alive)
    ex.close()


@pytest.mark.parametrize("method", ["l1_unstructured", "random_unstructured"])
def test_explorer_with_a_few_exact_zeros_counts_from_the_order_exactly(method, monkeypatch):
    # A weight with a few entries exactly 0 (alive = kept by the mask and nonzero): the picture
    # and counts come from the session's cell counts less the zeros the mask keeps, and equal
    # what pooling the alive mask gives.
    from prune_explorer.session.preview import l1_order as tensor_order
    from prune_explorer.widgets import Explorer

    def run(fast: bool):
        model = nn.Sequential(nn.Linear(600, 400))
        g = torch.Generator().manual_seed(1)
        with torch.no_grad():
            model[0].weight.copy_(torch.randn(400, 600, generator=g))
            model[0].weight.view(-1)[torch.arange(7, 240000, 24001)] = 0.0  # ten exact zeros
        if not fast:  # the zeros count as "many": the explorer pools what is alive
            monkeypatch.setattr(tensor_order, "_FEW_ZEROS", 10**12)
        ex = Explorer(model, debounce=None)
        ex.ui.method.value = method
        ex.ui.amount.value = 0.25  # the first picture of a state pools that state once
        if fast:  # from here on a slider step pools nothing: counts only
            import prune_explorer.viz.preview as viz_preview

            def no_pooling(*args, **kwargs):
                raise AssertionError("a slider step must not pool the mask")

            monkeypatch.setattr(viz_preview, "pool_view", no_pooling)
        ex.ui.amount.value = 0.3
        out = (ex.preview_array.copy(), ex.preview_stats, ex.preview_error)
        ex.close()
        monkeypatch.undo()
        return out

    fast_array, fast_stats, fast_error = run(True)
    slow_array, slow_stats, _ = run(False)
    assert fast_error is None
    np.testing.assert_array_equal(fast_array, slow_array)
    assert fast_stats == slow_stats


@pytest.mark.parametrize("method", ["l1_unstructured", "random_unstructured"])
def test_alive_cell_counts_subtract_the_kept_exact_zeros(method):
    # preview_cells(alive=True) is Session.alive of the previewed mask summed per cell: kept by
    # the step and not exactly 0.
    model = nn.Sequential(nn.Linear(600, 400))
    g = torch.Generator().manual_seed(2)
    with torch.no_grad():
        model[0].weight.copy_(torch.randn(400, 600, generator=g))
        model[0].weight.view(-1)[torch.arange(3, 240000, 12007)] = 0.0  # twenty exact zeros
    s = Session(model)
    settings = {"amount": 0.3, **({"seed": 5} if method.startswith("random") else {})}
    rows, cols = np.array([0, 100, 250, 400]), np.array([0, 7, 300, 600])
    alive = s.preview_cells("0.weight", method, row_edges=rows, col_edges=cols, alive=True,
                            **settings)
    kept = s.preview_cells("0.weight", method, row_edges=rows, col_edges=cols, **settings)
    expected = s.alive("0.weight", s.preview("0.weight", method, **settings)).numpy()
    by_block = [[int(expected[r0:r1, c0:c1].sum()) for c0, c1 in itertools.pairwise(cols)]
                for r0, r1 in itertools.pairwise(rows)]
    np.testing.assert_array_equal(alive, np.array(by_block))
    # L1 cuts the zeros first (the smallest |w|); random keeps some of them
    assert (int(kept.sum()) > int(alive.sum())) == method.startswith("random")


def test_a_tensor_holding_nan_finds_what_was_computed_for_it():
    # the state's value sample is compared bit for bit: NaN == NaN there (torch.equal says
    # otherwise, and every lookup of such a tensor used to build its histogram again)
    model = _model()
    layer = model[0]
    with torch.no_grad():
        layer.weight[0, 0] = float("nan")  # entry 0: always in the sample
    cache = OrderCache()
    built = cache.histogram(layer, "weight")
    assert built is not None
    assert cache.histogram(layer, "weight", build=False) is built
    calls = []
    for _ in range(2):
        cache.memo(layer, "weight", "count", lambda: calls.append(1) or len(calls))
    assert calls == [1]
    with torch.no_grad():  # a write that keeps the NaN still invalidates
        layer.weight[0, 1] += 1
    assert cache.histogram(layer, "weight", build=False) is None
