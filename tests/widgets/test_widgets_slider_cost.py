"""A slider step costs what is on screen: once a tensor state has been previewed, moving the
amount builds no mask and converts none -- the picture comes from the session's per-cell counts,
the numbers from those counts and the slice cut. Counted calls, never timings.

The mask the step leaves is still there for whoever reads it (``Explorer.preview_mask``): built
then, bit for bit the mask Apply installs, and pooling it gives the picture that was shown.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from prune_explorer.session.preview import global_cut as global_cut
from prune_explorer.session.preview import order_cache as order_cache
from prune_explorer.session.preview import slice_scores as slice_order
from prune_explorer.viz import pool_view, tensor_view
from prune_explorer.viz import views as views_module
from prune_explorer.widgets import Explorer
from prune_explorer.widgets.tabs.explore.preview import PreviewStats

# Large enough for the session's caches (more than 2**17 entries), tie-heavy in bfloat16.
SHAPES = [(400, 600), (600, 400), (400, 600)]

CASES = [
    ("l1_unstructured", {}),
    ("random_unstructured", {}),
    ("ln_structured", {"dim": 0}),
    ("ln_structured", {"dim": 1}),
    ("random_structured", {"dim": 1}),
    ("global_unstructured", {}),
]


def model(dtype: torch.dtype) -> nn.Module:
    torch.manual_seed(0)
    layers = [nn.Linear(cols, rows, bias=False) for rows, cols in SHAPES]
    with torch.no_grad():
        for layer in layers:
            layer.weight.normal_(0.0, 0.02)
    return nn.Sequential(*layers).to(dtype)


class Counter:
    """Counts calls of the routines that read every entry of a tensor on a slider step."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: dict[str, int] = {}
        for owner, name in ((order_cache.TensorOrder, "mask"),
                            (slice_order.SliceScores, "mask"),
                            (global_cut.GlobalCut, "mask")):
            self._count(monkeypatch, owner, name, f"{owner.__name__}.{name}")
        real = views_module.as_array

        def as_array(t):  # a tensor converted for the picture (bfloat16: a float copy)
            if isinstance(t, torch.Tensor):
                self.calls["as_array(tensor)"] = self.calls.get("as_array(tensor)", 0) + 1
            return real(t)

        monkeypatch.setattr(views_module, "as_array", as_array)

    def _count(self, monkeypatch, owner, name, key) -> None:
        real = getattr(owner, name)

        def counted(*args, **kwargs):
            self.calls[key] = self.calls.get(key, 0) + 1
            return real(*args, **kwargs)

        monkeypatch.setattr(owner, name, counted)


def explorer(method: str, settings: dict, dtype: torch.dtype) -> Explorer:
    ex = Explorer(model(dtype), debounce=None)
    ui = ex.ui
    if method == "global_unstructured":
        ui.global_targets.value = tuple(ex.session.names)
    ui.method.value = method
    if "dim" in settings:
        ui.dim.value = settings["dim"]
    ui.amount.value = 0.2  # the first preview of this state: orders and grids built here
    return ex


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize(("method", "settings"), CASES,
                         ids=[m + "".join(f"-{k}{v}" for k, v in s.items()) for m, s in CASES])
def test_an_amount_step_builds_no_mask_yet_shows_what_apply_installs(monkeypatch, method,
                                                                     settings, dtype):
    ex = explorer(method, settings, dtype)
    try:
        counter = Counter(monkeypatch)
        for amount in (0.35, 0.5):
            ex.ui.amount.value = amount
            assert ex.explore_pane.preview_error is None
        assert counter.calls == {}  # no mask built, no tensor converted
        # The mask is there when read, and it is what the picture and the numbers said.
        pane = ex.explore_pane
        request = pane.preview_request
        mask = ex.preview_mask
        assert sum(counter.calls.values()) == 1
        assert torch.equal(mask, request.preview(ex.session))
        picture = pool_view(tensor_view(pane.preview_shown), pane.preview_pane.picture.max_cells)
        np.testing.assert_array_equal(pane.preview_array, picture.values)
        others = {n: (pane.kept(n), int(m.count_nonzero()))
                  for n, m in request.preview_all(ex.session).items() if n != request.target}
        expected = PreviewStats.measure(pane.kept(request.target), mask, request, others=others)
        assert pane.preview_stats.units_pruned == expected.units_pruned
        assert pane.preview_stats.newly_pruned == expected.newly_pruned
        assert pane.preview_stats.left == expected.left
        # ... and what Apply installs, bit for bit (ties included in bfloat16).
        ex.apply()
        assert torch.equal(ex.session.mask(request.target), mask.to(torch.bool))
    finally:
        ex.close()


def test_a_step_after_apply_builds_no_mask_either(monkeypatch):
    ex = explorer("l1_unstructured", {}, torch.bfloat16)
    try:
        ex.apply()
        ex.ui.amount.value = 0.3  # the first preview of the new state (the order carries over)
        counter = Counter(monkeypatch)
        ex.ui.amount.value = 0.4
        assert counter.calls == {}
        assert ex.preview_stats.pruned_after == int((ex.preview_mask == 0).sum())
    finally:
        ex.close()
