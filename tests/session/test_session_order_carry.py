"""Issue 11: after Apply, the tensor's L1 order is carried over, not sorted again.

An apply only masks entries; the survivors keep their values and their relative order. The
session therefore restricts the L1 order it had to the survivors (an O(n) pass) instead of
sorting the tensor again on the next preview. The carried order must be exactly the one built
afresh for the new state: ranks, sorted keys, exact zeros and the picture's per-cell ranks.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from prune_explorer.session import Session
from prune_explorer.session.preview.order_cache import TensorOrder, _state
from prune_explorer.viz.pooling import block_edges

ROWS, COLS = block_edges(400, 37), block_edges(500, 23)


def _model(dtype: torch.dtype) -> nn.Module:
    g = torch.Generator().manual_seed(3)
    model = nn.Sequential(nn.Linear(500, 400), nn.Linear(400, 350))
    with torch.no_grad():
        for layer in model:
            w = torch.randn(layer.weight.shape, generator=g) * 0.05
            layer.weight.copy_(torch.round(w * 64) / 64)  # quantised: ties everywhere
    return model.to(dtype)


def _fresh(layer: nn.Module) -> TensorOrder:
    return TensorOrder(layer.weight, layer.weight_mask, _state(layer, "weight"))


def _assert_same(carried: TensorOrder, fresh: TensorOrder) -> None:
    assert carried.alive == fresh.alive
    assert torch.equal(carried.rank, fresh.rank)
    assert torch.equal(carried.sorted_keys, fresh.sorted_keys)
    assert (carried.zeros is None) == (fresh.zeros is None)
    if fresh.zeros is not None:
        assert torch.equal(carried.zeros, fresh.zeros)
    rows, cols = block_edges(fresh.shape[0], 37), block_edges(fresh.shape[1], 23)
    for pruned in (0, 1, fresh.alive // 3, fresh.alive):
        np.testing.assert_array_equal(carried.pruned_per_cell(pruned, rows, cols),
                                      fresh.pruned_per_cell(pruned, rows, cols))


STEPS = [
    ("l1_unstructured", {"amount": 0.3}),
    ("random_unstructured", {"amount": 0.25, "seed": 4}),
    ("ln_structured", {"amount": 0.2, "n": 2, "dim": 1}),
    ("random_structured", {"amount": 0.1, "dim": 0, "seed": 2}),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(("method", "settings"), STEPS)
def test_apply_carries_the_l1_order_exactly(dtype, method, settings):
    s = Session(_model(dtype))
    layer = s.model[0]
    with torch.no_grad():
        layer.weight[::50, ::3] = 0  # a few exact zeros: their indices travel with the order
    for _ in range(2):  # fresh, then already pruned
        s.preview("0.weight", "l1_unstructured", amount=0.4)
        before = s._orders.peek(layer, "weight")
        before.pruned_per_cell(0, ROWS, COLS)  # the picture's cells, to be carried too
        s.apply("0.weight", method, **settings)
        carried = s._orders.peek(layer, "weight")
        assert carried is not None
        assert carried is not before
        _assert_same(carried, _fresh(layer))
        preview = s.preview("0.weight", "l1_unstructured", amount=0.4)
        assert s._orders.peek(layer, "weight") is carried  # used as it is: no new sort
        s.apply("0.weight", "l1_unstructured", amount=0.4)
        assert torch.equal(layer.weight_mask, preview)
        s.undo()


def test_global_apply_carries_every_targets_order_that_was_built():
    # A global preview cuts from key histograms and builds no order; the picture of a target
    # builds that one's (cell_counts). Each order built before the step is carried past it.
    s = Session(_model(torch.bfloat16))
    targets = ["0.weight", "1.weight"]
    s.preview_global(targets, amount=0.5)
    assert all(s._orders.peek(layer, "weight") is None for layer in s.model)
    for layer in s.model:
        assert s._orders.get(layer, "weight") is not None  # as the picture of each would
    s.apply_global(targets, amount=0.5)
    for layer in s.model:
        carried = s._orders.peek(layer, "weight")
        assert carried is not None
        _assert_same(carried, _fresh(layer))


def test_no_order_is_carried_past_a_commit():
    s = Session(_model(torch.float32))
    layer = s.model[0]
    s.preview("0.weight", "l1_unstructured", amount=0.4)
    s.apply("0.weight", "l1_unstructured", amount=0.4)
    s.commit(["0.weight"])
    assert s._orders.peek(layer, "weight") is None
    after = s.preview("0.weight", "l1_unstructured", amount=0.5)
    assert int((after == 0).sum()) == 100_000  # committed zeros rank first, as the core's


def test_an_order_is_not_restricted_to_entries_it_had_pruned():
    layer = _model(torch.float32)[0]
    s = Session(nn.Sequential(layer))
    s.apply("0.weight", "l1_unstructured", amount=0.4)
    order = _fresh(layer)
    assert order.restricted(layer.weight, torch.ones_like(layer.weight_mask),
                            _state(layer, "weight")) is None


def test_report_counts_are_memoised_per_tensor_state_and_follow_every_change(monkeypatch):
    import prune_explorer.session.analysis.frames as reports

    s = Session(_model(torch.float32))
    calls: dict[str, list[str]] = {"zeros": [], "channels": []}
    for what in calls:
        real = getattr(reports, f"_{what}")
        monkeypatch.setattr(reports, f"_{what}",
                            lambda m, t, real=real, seen=calls[what]: seen.append(t) or real(m, t))

    def fresh_report():
        expected = [(int((reports.effective_tensor(m, "weight") == 0).sum()),
                     reports.channels_pruned(reports.effective_tensor(m, "weight")))
                    for m in s.model]
        frame = s.report().set_index("name")
        assert [(int(frame.loc[f"{i}.weight", "zeros"]), frame.loc[f"{i}.weight",
                "channels_pruned"]) for i in range(2)] == expected
        assert s.zeros() == dict(zip(s.report()["name"], s.report()["zeros"], strict=True))

    def weights() -> dict[str, int]:  # counts of the weights (the small biases: every time)
        return {what: seen.count("weight") for what, seen in calls.items()}

    fresh_report()
    assert weights() == {"zeros": 2, "channels": 2}
    fresh_report()
    assert weights() == {"zeros": 2, "channels": 2}  # reused
    changes = [
        lambda: s.apply("0.weight", "ln_structured", amount=0.3, n=2, dim=0),
        s.undo,
        lambda: s.apply("0.weight", "l1_unstructured", amount=0.3),
        lambda: s.commit(["0.weight"]),
    ]

    def add_one():
        with torch.no_grad():
            s.model[1].weight.add_(1)

    for change in [*changes, add_one]:
        change()
        before = weights()
        fresh_report()
        assert all(weights()[what] > before[what] for what in calls)


def test_zeros_counts_no_channels_and_shares_the_reports_counts(monkeypatch):
    # The explorer's picker and summary read Session.zeros() after every change: it must not
    # pay for the report's per-slice counts, and a report after it counts no zeros again.
    import prune_explorer.session.analysis.frames as reports

    s = Session(_model(torch.float32))
    s.apply("0.weight", "l1_unstructured", amount=0.3)
    channels, zeros = [], []
    real_channels, real_zeros = reports._channels, reports._zeros
    monkeypatch.setattr(reports, "_channels",
                        lambda m, t: channels.append(t) or real_channels(m, t))
    monkeypatch.setattr(reports, "_zeros", lambda m, t: zeros.append(t) or real_zeros(m, t))
    got = s.zeros()
    assert channels == []
    assert got == {name: int((s.tensor(name) == 0).sum()) for name in s.names}
    counted = len(zeros)
    frame = s.report()
    assert dict(zip(frame["name"], frame["zeros"], strict=True)) == got
    assert len(zeros) == counted + 2  # the two biases only (small: never memoised)
    assert len(channels) == 4
