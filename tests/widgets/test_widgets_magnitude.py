"""The Explore tab's magnitude view: the cut is where Apply cuts; bins once per tensor state."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from helpers.widgets import _tie_free, mlp
from prune_explorer.session.preview.order_cache import SMALL
from prune_explorer.widgets import Explorer


def big(dtype: torch.dtype = torch.float32) -> nn.Module:
    model = _tie_free(nn.Sequential(nn.Linear(400, 400), nn.ReLU(), nn.Linear(400, 360)))
    assert model[0].weight.numel() > SMALL
    return model.to(dtype)


@pytest.fixture
def opened():
    made = []

    def make(model: nn.Module) -> Explorer:
        ex = Explorer(model, debounce=None)
        ex.explore_pane.panels.magnitudes.open()
        made.append(ex)
        return ex

    yield make
    for ex in made:
        ex.close()


def newly_pruned_and_kept(ex: Explorer, name: str, before: torch.Tensor
                          ) -> tuple[torch.Tensor, torch.Tensor]:
    """|w| of the entries the last step pruned, and of those it kept (among ``before``)."""
    after = ex.session.mask(name).bool()
    values = ex.session.model.get_submodule(name.rsplit(".", 1)[0]).weight_orig.detach().abs()
    return values[before & ~after].float(), values[after].float()


@pytest.mark.parametrize("model", [mlp, big, lambda: big(torch.bfloat16)],
                         ids=["small", "large", "large-bf16-ties"])
def test_local_l1_cut_is_the_smallest_magnitude_apply_keeps(opened, model):
    ex = opened(model())
    ex.select("0.weight")
    ex.session.apply("0.weight", "l1_unstructured", amount=0.2)  # some already pruned
    panel = ex.explore_pane.panels.magnitudes
    ex.ui.amount.value = 0.45
    before = ex.session.mask("0.weight").bool()
    cut, pruned = panel.cut, panel.pruned
    assert pruned == ex.preview_stats.units_pruned > 0
    ex.ui.apply.click()
    gone, kept = newly_pruned_and_kept(ex, "0.weight", before)
    assert gone.numel() == pruned
    assert float(kept.min()) == cut  # the k-th magnitude: the line is where Apply cut
    assert float(gone.max()) <= cut


def test_global_l1_cut_of_the_shown_target(opened):
    ex = opened(big())
    ex.select("2.weight")
    ex.ui.method.value = "global_unstructured"
    ex.ui.amount.value = 0.35
    panel = ex.explore_pane.panels.magnitudes
    before = ex.session.mask("2.weight").bool()
    cut, pruned = panel.cut, panel.pruned
    ex.ui.apply.click()
    gone, kept = newly_pruned_and_kept(ex, "2.weight", before)
    assert gone.numel() == pruned > 0
    assert float(kept.min()) == cut
    assert float(gone.max()) <= cut


def test_structured_cut_is_the_smallest_kept_channel_norm(opened):
    ex = opened(mlp())
    ex.select("0.weight")
    ex.ui.method.value = "ln_structured"
    ex.ui.n.value = "2"
    ex.ui.dim.value = 0
    ex.ui.amount.value = 0.5
    panel = ex.explore_pane.panels.magnitudes
    assert panel.magnitudes.unit == "output rows (dim 0)"
    weight = ex.session.tensor("0.weight").clone()
    cut, pruned = panel.cut, panel.pruned
    ex.ui.apply.click()
    rows = ex.session.mask("0.weight").bool().any(dim=1)
    norms = torch.linalg.vector_norm(weight, ord=2, dim=1)
    assert int((~rows).sum()) == pruned == 4
    assert float(norms[rows].min()) == pytest.approx(cut, rel=1e-6)
    assert float(norms[~rows].max()) <= cut


def test_random_methods_have_no_magnitude_cut(opened):
    ex = opened(mlp())
    ex.ui.method.value = "random_unstructured"
    panel = ex.explore_pane.panels.magnitudes
    assert panel.cut is None
    assert panel.pruned is None
    assert "no magnitude cut" in panel.caption.value
    assert "pe-mag-cut" not in panel.picture.value  # no line
    assert "<rect" in panel.picture.value  # still the histogram


def test_bins_are_computed_once_per_state_and_rebuilt_after_apply(opened, monkeypatch):
    ex = opened(big())
    ex.select("0.weight")
    panel = ex.explore_pane.panels.magnitudes
    from prune_explorer.session.preview import magnitudes as module

    built = []
    real = module._build
    monkeypatch.setattr(module, "_build", lambda *a, **k: built.append(a[1]) or real(*a, **k))
    ex.ui.amount.value = 0.1
    first, svg = panel.magnitudes, panel._svg
    cuts = set()
    for amount in (0.2, 0.3, 0.4, 0.5):
        ex.ui.amount.value = amount
        cuts.add(panel.cut)
        assert panel.magnitudes is first
        assert panel._svg is svg
    assert len(cuts) == 4
    assert built == []
    ex.ui.apply.click()
    ex.ui.next_preview.click()  # the tensor's state changed: new magnitudes
    assert panel.magnitudes is not first
    assert built == ["weight"]
    assert panel.magnitudes.pruned == round(0.5 * 160_000)
    again = panel.magnitudes
    ex.ui.undo.click()
    assert panel.magnitudes is not again
    assert panel.magnitudes.pruned == 0


def test_a_write_to_the_weights_rebuilds_the_histogram(opened):
    ex = opened(mlp())
    panel = ex.explore_pane.panels.magnitudes
    first = panel.magnitudes
    with torch.no_grad():
        ex.model[0].weight.mul_(10.0)
    ex.request_preview()
    assert panel.magnitudes is not first
    assert panel.magnitudes.value(panel.magnitudes.count - 1) == pytest.approx(
        10 * first.value(first.count - 1), rel=1e-6)


def test_large_tensor_magnitudes_share_the_session_order(opened):
    ex = opened(big())
    ex.select("0.weight")
    ex.ui.amount.value = 0.3
    order = ex.session._orders.peek(ex.model[0], "weight")
    assert ex.explore_pane.panels.magnitudes.magnitudes.keys is order.sorted_keys  # no copy


def test_histogram_counts_every_unpruned_entry(opened):
    ex = opened(mlp())
    with torch.no_grad():
        ex.model[0].weight[0, :3] = 0.0
    ex.session.apply("0.weight", "l1_unstructured", amount=10)
    mags = ex.session.magnitudes("0.weight")
    edges, counts = mags.histogram(bins=16)
    assert len(edges) == 17
    assert np.all(np.diff(edges) > 0)
    assert mags.zeros == 0
    assert mags.pruned == 10
    assert int(counts.sum()) == mags.count == 96 - 10
    ex.ui.amount.value = 0.5
    panel = ex.explore_pane.panels.magnitudes
    assert "10 entries already pruned" in panel.caption.value


def test_weight_heatmap_is_reachable_and_drawn_only_when_asked(opened):
    ex = opened(mlp())
    heatmap = ex.explore_pane.panels.magnitudes.heatmap
    ex.ui.amount.value = 0.4
    assert heatmap.renders == 0
    assert heatmap.image.layout.display == "none"
    heatmap.toggle.value = True  # draws the preview on show
    assert heatmap.renders == 1
    assert heatmap.image.value[1:4] == b"PNG"
    ex.ui.amount.value = 0.6
    assert heatmap.renders == 2
    heatmap.toggle.value = False
    ex.ui.amount.value = 0.7
    assert heatmap.renders == 2
    assert heatmap.image.layout.display == "none"


def test_a_failing_panel_never_fails_the_preview(opened, monkeypatch):
    ex = opened(mlp())
    panel = ex.explore_pane.panels.magnitudes

    def broken(*args, **kwargs):
        raise RuntimeError("no magnitudes today")

    monkeypatch.setattr(ex.session, "magnitudes", broken)
    ex.ui.amount.value = 0.5
    assert ex.preview_error is None
    assert ex.preview_stats.newly_pruned == 48  # the preview itself was drawn
    assert "Magnitudes failed: " in ex.status.text
    assert "pe-stale" in panel.picture._dom_classes
    monkeypatch.undo()
    ex.ui.amount.value = 0.25
    assert "failed" not in ex.status.text
    assert "pe-stale" not in panel.picture._dom_classes
