"""Issue 11 (Apply <= 500 ms on 4096^2): what the explorer reads after Apply.

The picker and the summary need each tensor's zeros, not its per-channel counts; the controls
of an unstructured method need the entries left, not the slices left along each dim; the
picture needs what is alive now, which is the mask itself when no unmasked entry is exactly 0.
Each is checked by counting calls of the expensive function (no timing), and the picture and
the numbers against the session's own answers.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import prune_explorer.session.analysis.frames as reports
import prune_explorer.session.preview.picture as slider_picture
from prune_explorer.session.analysis.wording import percent
from prune_explorer.viz.pooling import pool_view
from prune_explorer.viz.preview import NEXT_STEP
from prune_explorer.viz.views import tensor_view
from prune_explorer.widgets import Explorer


def _explorer(zeros: bool = False, method: str = "l1_unstructured") -> Explorer:
    g = torch.Generator().manual_seed(2)
    model = nn.Sequential(nn.Linear(600, 400), nn.Linear(400, 300))  # above SMALL: cached
    with torch.no_grad():
        for layer in model:
            layer.weight.copy_(torch.randn(layer.weight.shape, generator=g) * 0.02)
        if zeros:
            model[0].weight[::40, ::9] = 0  # a few entries exactly 0, not masked
    ex = Explorer(model, debounce=None)
    ex.ui.method.value = method
    ex.ui.amount.value = 0.3
    return ex


def _assert_agrees(ex: Explorer) -> None:
    # The picture after Apply is what the session holds; the numbers are the report's.
    s = ex.session
    name = ex.tensor
    assert torch.equal(ex.explore_pane.preview_before, s.alive(name))
    report = s.report().set_index("name")
    zeros = int(report.loc[name, "zeros"])
    assert ex.preview_stats.pruned_before == zeros
    label = dict((v, k) for k, v in ex.ui.tensor.options)[name]
    assert label.endswith(f"{percent(zeros / s.info(name).numel)} pruned")
    assert ex.controls.units_left == (s.kept_count(name), "entry")
    total = int(report["zeros"].sum())
    assert f"{total:,} of" in ex.ui.summary.value


# L1 prunes the zeros first: a random step leaves some of them unmasked.
@pytest.mark.parametrize(("zeros", "method"), [(False, "l1_unstructured"),
                                               (True, "random_unstructured")])
def test_apply_counts_no_slices_channels_or_second_mask(zeros, method, monkeypatch):
    ex = _explorer(zeros, method)
    slices, channels, alive = [], [], []
    real_slices, real_channels = slider_picture.kept_slices, reports._channels
    real_alive = type(ex.session).alive
    monkeypatch.setattr(slider_picture, "kept_slices",
                        lambda kept, d: slices.append(d) or real_slices(kept, d))
    monkeypatch.setattr(reports, "_channels",
                        lambda m, t: channels.append(t) or real_channels(m, t))
    monkeypatch.setattr(type(ex.session), "alive",
                        lambda self, n, mask=None: alive.append(n) or real_alive(self, n, mask))
    for _ in range(2):
        for seen in (slices, channels, alive):
            seen.clear()
        ex.ui.apply.click()
        assert ex.status.text.startswith("Applied")
        ex.ui.next_preview.click()  # the picture showed the step applied until now
        assert slices == []  # no structured method on show
        assert channels == []  # the picker and the summary read zeros only
        # alive now: the mask itself when no unmasked entry is 0; else read once
        assert alive == (["0.weight"] if zeros else [])
        _assert_agrees(ex)
    ex.close()


def test_a_structured_method_counts_the_slices_it_needs(monkeypatch):
    ex = _explorer()
    ex.ui.apply.click()
    slices = []
    real = slider_picture.kept_slices
    monkeypatch.setattr(slider_picture, "kept_slices",
                        lambda kept, d: slices.append(d) or real(kept, d))
    ex.ui.method.value = "ln_structured"
    ex.ui.dim.value = 1
    assert slices  # asked now, by the controls and the stats
    mask = ex.session.mask("0.weight")
    expected = int(mask.any(dim=0).sum())
    assert ex.controls.units_left == (expected, "input column (dim 1)")
    assert ex.preview_stats.left == expected
    ex.close()


def test_undo_and_a_write_to_the_weights_show_the_sessions_state():
    ex = _explorer(zeros=True)
    ex.ui.apply.click()
    ex.ui.apply.click()
    ex.ui.undo.click()
    _assert_agrees(ex)
    with torch.no_grad():
        ex.model[0].weight_orig[5, :] = 0  # new unmasked zeros, through the version counter
    ex.refresh()  # what the explorer does on any session event
    _assert_agrees(ex)
    ex.close()


STEPS = [
    ("l1_unstructured", {}),
    ("random_unstructured", {}),
    ("ln_structured", {"dim": 1}),
    ("random_structured", {"dim": 0}),
    ("global_unstructured", {}),
]


@pytest.mark.parametrize(("method", "controls"), STEPS)
def test_after_apply_the_picture_of_now_is_counted_not_read(method, controls, monkeypatch):
    # The picture's "now" (lemon yellow: pruned before) comes from the session's cell counts of
    # the same step pruning nothing; it is exactly the pooled Session.alive, and the mask of
    # now is read only when the zoom asks for it.
    ex = _explorer()
    ex.ui.method.value = method
    for name, value in controls.items():
        getattr(ex.ui, name).value = value
    reads = []
    real = type(ex.session).mask
    monkeypatch.setattr(type(ex.session), "mask", lambda self, n: reads.append(n) or real(self, n))
    ex.ui.apply.click()
    assert ex.status.text.startswith("Applied")
    # the picture after Apply (a structured method counts the slices left, from the mask)
    structured = "dim" in controls
    assert reads == (["0.weight"] if structured else [])
    ex.ui.amount.value = 0.4  # and the next preview, on the state Apply left
    assert reads == (["0.weight"] if structured else [])
    reads.clear()
    picture = ex.preview_pane.picture
    alive = ex.session.alive("0.weight")
    expected = pool_view(tensor_view(alive), picture.max_cells)
    np.testing.assert_array_equal(picture.pooled_before.kept, expected.kept)
    np.testing.assert_array_equal(picture.pooled_before.values, expected.values)
    assert picture.label == NEXT_STEP
    assert torch.equal(ex.explore_pane.preview_before, alive)  # read now, when asked
    assert reads == ([] if structured else ["0.weight"])
    ex.close()
