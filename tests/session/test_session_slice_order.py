"""Issue 11, item 4: structured slider steps come from slice scores computed once per tensor.

``ln_structured`` norms (per ``n`` and ``dim``) and ``random_structured`` draws (per seed and
``dim``) do not change with ``amount``: the session computes them once per tensor state, and a
slider step applies the core's own keep rule to that short vector. The masks must be what apply
installs, bit for bit, on data whose slice scores tie at the cut (repeated rows and columns,
bf16/fp16 norms); the per-cell counts must be those of the previewed mask; and the scores must
be recomputed after anything that changes the tensor's state.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from prune_explorer import prune
from prune_explorer.session import Session
from prune_explorer.session.preview.masks import make_method
from prune_explorer.session.preview.slice_scores import SliceScores
from prune_explorer.viz.pooling import block_edges, pool_fraction

AMOUNTS = [0.0, 0.01, 0.37, 1.0, 3]
STEPS = [
    ("ln_structured", {"n": 1, "dim": 0}),
    ("ln_structured", {"n": 2, "dim": 0}),
    ("ln_structured", {"n": math.inf, "dim": 0}),
    ("ln_structured", {"n": 1, "dim": 1}),
    ("ln_structured", {"n": 2, "dim": -1}),
    ("ln_structured", {"n": math.inf, "dim": 1}),
    ("random_structured", {"dim": 0}),
    ("random_structured", {"dim": 1}),
]
DTYPES = [torch.float32, torch.bfloat16, torch.float16]


def _model(dtype: torch.dtype, seed: int = 0) -> nn.Module:
    """Two layers whose rows and columns repeat a few quantised patterns (with sign flips):
    their slice norms take a handful of values, so every cut splits a tie."""
    g = torch.Generator().manual_seed(seed)
    model = nn.Sequential(nn.Linear(500, 400), nn.Linear(400, 350))
    with torch.no_grad():
        for layer in model:
            rows, cols = layer.weight.shape
            base = torch.round(torch.randn(6, 25, generator=g) * 8) / 64
            w = base[torch.randint(0, 6, (rows,), generator=g)][
                :, torch.randint(0, 25, (cols,), generator=g)]
            signs = torch.randint(0, 2, w.shape, generator=g) * 2 - 1
            layer.weight.copy_(w * signs)
    return model.to(dtype)


def _seed(method: str) -> int | None:
    return 7 if method == "random_structured" else None


def _core(layer: nn.Module, method: str, settings: dict, amount, seed: int | None):
    core = make_method(method, {**settings, "amount": amount}, "weight", layer.weight.device,
                       seed)
    with torch.no_grad():
        return prune.preview_mask(layer, "weight", core)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("method", "settings"), STEPS)
def test_structured_preview_is_what_apply_installs_fresh_and_pruned(dtype, method, settings):
    s = Session(_model(dtype))
    layer = s.model[0]
    seed = _seed(method)
    for pruned_first in (False, True):
        if pruned_first:  # the container path: dead slices along both dims, some zeros
            s.apply("0.weight", "ln_structured", amount=40, n=2, dim=0)
            s.apply("0.weight", "ln_structured", amount=0.1, n=1, dim=1)
            s.apply("0.weight", "l1_unstructured", amount=0.2)
        for amount in AMOUNTS:
            preview = s.preview("0.weight", method, amount=amount, seed=seed, **settings)
            assert torch.equal(preview, _core(layer, method, settings, amount, seed)), amount
            s.apply("0.weight", method, amount=amount, seed=seed, **settings)
            installed = layer.weight_mask
            assert preview.dtype == installed.dtype
            assert preview.is_contiguous()
            assert torch.equal(preview, installed), (pruned_first, amount)
            s.undo()
        scores = [v for v in s._orders._orders.values() if isinstance(v, SliceScores)]
        assert len(scores) == 1  # the previews above came from the scores, computed once
        assert scores[0].alive == (400 if settings["dim"] == 0 else 500) - (
            40 if pruned_first and settings["dim"] == 0 else 0) - (
            50 if pruned_first and settings["dim"] != 0 else 0)


def test_structured_scores_tie_at_the_cut():
    """The data above is what it claims: slice norms tie across the cut (so the keep rule's
    tie order matters), in fp32 as in bf16."""
    for dtype in (torch.float32, torch.bfloat16):
        w = _model(dtype)[0].weight.detach()
        for dim in (0, 1):
            norms = torch.norm(w, p=2, dim=1 - dim)
            cut = torch.sort(norms).values[norms.numel() // 2]
            assert int((norms == cut).sum()) > 10


def test_an_int_amount_above_the_alive_slices_is_refused_as_by_the_core():
    s = Session(_model(torch.float32))
    s.apply("0.weight", "ln_structured", amount=40, n=2, dim=0)
    with pytest.raises(ValueError, match="amount"):
        s.preview("0.weight", "ln_structured", amount=361, n=2, dim=0)
    assert int(s.preview("0.weight", "ln_structured", amount=360, n=2, dim=0).sum()) == 0


@pytest.mark.parametrize("alive", [False, True])
@pytest.mark.parametrize("cells", [(400, 500), (7, 3)])
@pytest.mark.parametrize(("method", "settings"), STEPS)
def test_structured_preview_cells_are_the_counts_of_the_previewed_mask(method, settings, cells,
                                                                        alive):
    s = Session(_model(torch.bfloat16))
    s.apply("0.weight", "ln_structured", amount=0.1, n=2, dim=1)
    s.apply("0.weight", "l1_unstructured", amount=0.3)
    with torch.no_grad():  # exact zeros that no mask holds (alive=True leaves them out)
        s.model[0].weight_orig[::9, ::4] = 0
    s.model(torch.zeros(1, 500, dtype=torch.bfloat16))  # refreshes `weight` = orig * mask
    s = Session(s.model)  # a session that starts from this state
    seed = _seed(method)
    rows, cols = block_edges(400, cells[0]), block_edges(500, cells[1])
    for amount in (0.0, 0.3, 1.0, 5):
        kept = s.preview_cells("0.weight", method, row_edges=rows, col_edges=cols, seed=seed,
                               alive=alive, amount=amount, **settings)
        mask = s.preview("0.weight", method, seed=seed, amount=amount, **settings)
        shown = s.alive("0.weight", mask) if alive else mask
        np.testing.assert_array_equal(kept, pool_fraction(shown, max_cells=cells).kept)


def test_conv_cells_along_every_dim():
    conv = nn.Conv2d(64, 96, 5)  # 96 x 64 x 5 x 5 = 153,600 entries: cached
    with torch.no_grad():
        conv.weight.copy_(torch.round(conv.weight * 16) / 16)
    s = Session(nn.Sequential(conv))
    rows, cols = block_edges(96, 10), block_edges(1600, 13)
    for dim in (0, 1, 2, 3):
        for method, settings in (("ln_structured", {"n": 2, "dim": dim}),
                                 ("random_structured", {"dim": dim})):
            seed = _seed(method)
            kept = s.preview_cells("0.weight", method, row_edges=rows, col_edges=cols,
                                   seed=seed, amount=0.4, **settings)
            mask = s.preview("0.weight", method, seed=seed, amount=0.4, **settings)
            matrix = mask.reshape(96, -1)
            expected = [[int(matrix[rows[i]:rows[i + 1], cols[j]:cols[j + 1]].sum())
                         for j in range(13)] for i in range(10)]
            np.testing.assert_array_equal(kept, expected)


def _scores(s: Session, method: str, settings: dict) -> SliceScores | None:
    layer = s.model[0]
    core = make_method(method, {**settings, "amount": 0.5}, "weight", layer.weight.device,
                       _seed(method))
    return s._orders.slices(layer, "weight", core, _seed(method), build=False)


@pytest.mark.parametrize(("method", "settings"), [STEPS[1], STEPS[3], STEPS[7]])
def test_scores_are_recomputed_after_every_change_of_state(method, settings):
    s = Session(_model(torch.float32))
    seed = _seed(method)

    def fresh_after(change) -> None:
        s.preview("0.weight", method, amount=0.5, seed=seed, **settings)
        before = _scores(s, method, settings)
        assert before is not None
        change()
        assert _scores(s, method, settings) is None  # stale: not served any more
        preview = s.preview("0.weight", method, amount=0.5, seed=seed, **settings)
        assert torch.equal(preview, _core(s.model[0], method, settings, 0.5, seed))
        assert _scores(s, method, settings) not in (None, before)

    def add_one():
        with torch.no_grad():
            s.model[0].weight.add_(1)

    def write_data():
        s.model[0].weight.data.mul_(torch.linspace(-1, 1, 500))  # no version bump

    fresh_after(add_one)
    fresh_after(write_data)
    fresh_after(lambda: s.apply("0.weight", "ln_structured", amount=0.2, n=2, dim=0))
    fresh_after(lambda: s.apply("0.weight", "l1_unstructured", amount=0.2))
    fresh_after(s.undo)

    def write_orig():
        with torch.no_grad():
            s.model[0].weight_orig.mul_(torch.linspace(-1, 1, 500))
        s.model(torch.zeros(1, 500))

    fresh_after(write_orig)
    fresh_after(lambda: s.commit(["0.weight"]))


def test_scores_follow_a_device_move():
    s = Session(_model(torch.float32))
    s.preview("0.weight", "ln_structured", amount=0.5, n=2, dim=0)
    scores = _scores(s, "ln_structured", {"n": 2, "dim": 0})
    s.to("cpu")  # same device: the tensors stay, and so may the scores
    assert torch.equal(s.preview("0.weight", "ln_structured", amount=0.5, n=2, dim=0),
                       _core(s.model[0], "ln_structured", {"n": 2, "dim": 0}, 0.5, None))
    if torch.cuda.is_available():
        s.to("cuda")
        moved = s.preview("0.weight", "ln_structured", amount=0.5, n=2, dim=0)
        assert moved.device.type == "cuda"
        assert _scores(s, "ln_structured", {"n": 2, "dim": 0}) is not scores


def test_each_setting_has_its_own_scores():
    s = Session(_model(torch.float32))
    for method, settings in STEPS:
        s.preview("0.weight", method, amount=0.5, seed=_seed(method), **settings)
    assert len(s._orders) == len(STEPS)
    s.preview("0.weight", "ln_structured", amount=0.5, n=2, dim=1)  # the scores of dim=-1
    assert len(s._orders) == len(STEPS)
    s.preview("0.weight", "random_structured", amount=0.5, seed=8, dim=0)
    assert len(s._orders) == len(STEPS) + 1
    a = s.preview("0.weight", "random_structured", amount=0.5, seed=7, dim=0)
    b = s.preview("0.weight", "random_structured", amount=0.5, seed=8, dim=0)
    assert not torch.equal(a, b)


def test_the_core_decides_where_no_scores_are_kept():
    s = Session(_model(torch.float32))
    rows, cols = block_edges(400, 10), block_edges(500, 10)
    # 'fro' is not a plain number: the core computes it, and only its mask can tell the cells
    assert s.preview_cells("0.weight", "ln_structured", row_edges=rows, col_edges=cols,
                           amount=0.5, n="fro", dim=0) is None
    mask = s.preview("0.weight", "ln_structured", amount=0.5, n="fro", dim=0)
    assert torch.equal(mask, _core(s.model[0], "ln_structured", {"n": "fro", "dim": 0}, 0.5,
                                   None))
    small = Session(nn.Sequential(nn.Linear(20, 10)))  # small tensors: the core's own path
    small.preview("0.weight", "ln_structured", amount=0.5, n=2, dim=0)
    assert len(small._orders) == 0
    assert len(s._orders) == 0


def test_explorer_structured_slider_step_computes_no_norm_and_pools_no_mask(monkeypatch):
    import prune_explorer.session.preview.slice_scores as slice_order
    import prune_explorer.viz.preview as viz_preview
    from prune_explorer.viz import pool_view, tensor_view
    from prune_explorer.widgets import Explorer

    model = _model(torch.float32)
    with torch.no_grad():  # no weight exactly 0: what the mask keeps is what is alive
        model[0].weight.add_(1 / 128)
    ex = Explorer(model, debounce=None)
    ex.ui.method.value = "ln_structured"
    ex.ui.dim.value = 1
    ex.ui.amount.value = 0.5  # the first picture of a tensor state pools that state once

    def refused(*args, **kwargs):
        raise AssertionError("a slider step must reuse the scores and the cell counts")

    monkeypatch.setattr(viz_preview, "pool_view", refused)
    monkeypatch.setattr(slice_order, "slice_norms", refused)
    ex.ui.amount.value = 0.6
    assert ex.preview_error is None
    cells = ex.preview_pane.picture.max_cells
    np.testing.assert_array_equal(ex.preview_array,
                                  pool_view(tensor_view(ex.preview_mask), cells).values)
    assert int((ex.preview_mask.sum(dim=0) == 0).sum()) == 300
    ex.close()


def test_the_magnitude_view_reads_the_slider_s_slice_norms_not_its_own():
    # One computation of the channel norms per tensor state serves the slider and the histogram.
    model = torch.nn.Sequential(torch.nn.Linear(600, 400))
    s = Session(model)
    s.apply("0.weight", "ln_structured", amount=0.25, n=2, dim=0)
    mags = s.magnitudes("0.weight", n=2, dim=0)
    held = s._orders.slices(model[0], "weight", prune.LnStructured(0.0, 2, 0), build=False)
    assert held is not None
    assert mags.count == held.alive == 300
    assert mags.pruned == 100
    ranked = torch.sort(held.scores).values
    assert torch.equal(mags.keys, ranked.view(mags.keys.dtype))


def test_line_counts_are_kept_for_both_kept_and_alive_pictures():
    # The explorer asks for kept and alive cell counts on every step; one cached grid used to
    # thrash between the two, recounting the whole tensor twice per slider move.
    from prune_explorer.session.preview.order_cache import OrderCache

    layer = torch.nn.Linear(600, 400)
    scores = OrderCache().slices(layer, "weight", prune.LnStructured(0.5, n=2, dim=1))
    rows, cols = np.array([0, 200, 400]), np.array([0, 300, 600])
    kept = scores._line_counts(rows, cols, layer.weight, None, False)
    alive = scores._line_counts(rows, cols, layer.weight, None, True)
    assert scores._line_counts(rows, cols, layer.weight, None, False) is kept
    assert scores._line_counts(rows, cols, layer.weight, None, True) is alive
    assert kept.sum() == alive.sum() == layer.weight.numel()  # no exact zeros here
