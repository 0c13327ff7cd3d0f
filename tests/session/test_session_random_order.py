"""Issue 11: random_unstructured slider steps come from a cached order of the seeded draws.

For a fixed seed the draws are fixed, so the session sorts them once per tensor state and seed;
each amount is then one comparison. The masks must be what apply installs, bit for bit, on
tie-heavy draws (bf16/fp16 draws tie all the time) and tie-heavy weights.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from prune_explorer import prune
from prune_explorer.session import Session
from prune_explorer.session.preview.masks import make_method
from prune_explorer.session.preview.order_cache import OrderCache, TensorOrder
from prune_explorer.viz.pooling import block_edges, pool_fraction

AMOUNTS = [0.0, 0.013, 0.3, 0.5, 0.77, 1.0, 3, 140_000]
DTYPES = [torch.float32, torch.bfloat16, torch.float16]


def _model(dtype: torch.dtype) -> nn.Module:
    g = torch.Generator().manual_seed(1)
    model = nn.Sequential(nn.Linear(500, 400), nn.Linear(400, 350))
    with torch.no_grad():
        for layer in model:
            w = torch.randn(layer.weight.shape, generator=g) * 0.05
            layer.weight.copy_(torch.round(w * 64) / 64)  # quantised: ties everywhere
    return model.to(dtype)


def _core(layer: nn.Module, amount, seed: int) -> torch.Tensor:
    method = make_method("random_unstructured", {"amount": amount}, "weight",
                         layer.weight.device, seed)
    with torch.no_grad():
        return prune.preview_mask(layer, "weight", method)


@pytest.mark.parametrize("dtype", DTYPES)
def test_draw_order_masks_are_the_cores_fresh_and_pruned(dtype):
    layer = _model(dtype)[0]
    cache = OrderCache()
    for pruned_first in (False, True):
        if pruned_first:
            prune.l1_unstructured(layer, "weight", amount=0.3)
        for seed in (0, 11):
            order = cache.get(layer, "weight", seed)
            assert isinstance(order, TensorOrder)
            assert order.seed == seed
            for amount in AMOUNTS:
                k = prune._compute_nparams_toprune(amount, order.alive)
                expected = _core(layer, amount, seed)
                got = order.mask(k)
                assert got.dtype == expected.dtype
                assert torch.equal(got, expected), (seed, amount)


@pytest.mark.parametrize("dtype", DTYPES)
def test_random_preview_is_what_apply_installs(dtype):
    s = Session(_model(dtype))
    s.apply("0.weight", "l1_unstructured", amount=0.2)
    for amount in (0.01, 0.37, 0.5, 0.93):
        for target in ("0.weight", "1.weight"):
            preview = s.preview(target, "random_unstructured", amount=amount, seed=4)
            assert s._orders.peek(*s._locate(target), 4) is not None  # from the order
            s.apply(target, "random_unstructured", amount=amount, seed=4)
            module, name = s._locate(target)
            assert torch.equal(getattr(module, name + "_mask"), preview), (target, amount)
            s.undo()


def test_random_preview_without_seed_uses_the_next_applys_seed():
    s = Session(_model(torch.bfloat16))
    preview = s.preview("1.weight", "random_unstructured", amount=0.4)
    step = s.apply("1.weight", "random_unstructured", amount=0.4)
    assert torch.equal(s.model[1].weight_mask, preview)
    assert s._orders.peek(s.model[1], "weight", step.seed) is None  # the apply invalidated it


@pytest.mark.parametrize("cells", [(400, 500), (33, 70), (1, 1)])
def test_random_preview_cells_are_the_counts_of_the_previewed_mask(cells):
    s = Session(_model(torch.float16))
    s.apply("0.weight", "l1_unstructured", amount=0.25)
    rows, cols = block_edges(400, cells[0]), block_edges(500, cells[1])
    for amount in (0.0, 0.2, 0.66, 1.0):
        kept = s.preview_cells("0.weight", "random_unstructured", row_edges=rows,
                               col_edges=cols, amount=amount, seed=9)
        assert kept is not None
        mask = s.preview("0.weight", "random_unstructured", amount=amount, seed=9)
        np.testing.assert_array_equal(kept, pool_fraction(mask, max_cells=cells).kept)


def test_each_seed_has_its_own_order_and_writes_invalidate_them():
    s = Session(_model(torch.float32))
    a = s.preview("0.weight", "random_unstructured", amount=0.5, seed=1)
    b = s.preview("0.weight", "random_unstructured", amount=0.5, seed=2)
    assert not torch.equal(a, b)
    layer = s.model[0]
    first = s._orders.peek(layer, "weight", 1)
    assert first is not None
    assert s._orders.peek(layer, "weight", 2) is not first
    s.apply("0.weight", "l1_unstructured", amount=0.5)  # new state: new alive set, new draws
    assert s._orders.peek(layer, "weight", 1) is None
    after = s.preview("0.weight", "random_unstructured", amount=0.5, seed=1)
    assert torch.equal(after, _core(layer, 0.5, 1))
    assert int(after.count_nonzero()) == 50_000  # half of the 100,000 still alive
