"""Layers keep their axes: ``transformers``' ``Conv1D`` stores (in, out), and the pictures, the
explorer's wording, ``semi_structured``'s default grouping and the session all follow the core's
one table (prune/layers.py)."""

from __future__ import annotations

import pytest
import torch
from transformers.pytorch_utils import Conv1D

from prune_explorer import Session, prune
from prune_explorer.prune.layers import layer_axes, out_dim, reduction_dim
from prune_explorer.session.analysis.wording import slice_unit
from prune_explorer.viz.views import channel_view, tensor_view
from prune_explorer.widgets.tabs.explore.controls import PruningControls


def _conv1d(n_in: int = 8, n_out: int = 12) -> Conv1D:
    torch.manual_seed(0)
    layer = Conv1D(n_out, n_in)  # transformers' argument order: (nf=out, nx=in)
    with torch.no_grad():
        layer.weight.normal_()
        layer.bias.normal_()
    return layer


def test_conv1d_weight_is_in_by_out_and_the_table_says_so():
    layer = _conv1d(8, 12)
    assert tuple(layer.weight.shape) == (8, 12)  # the library's own layout
    x = torch.randn(3, 8)
    assert torch.allclose(layer(x), x @ layer.weight + layer.bias)  # dim 0 is the input
    assert layer_axes(layer).dims == ("in features", "out features")
    assert (out_dim(layer), reduction_dim(layer, "weight")) == (1, 0)
    assert (out_dim(torch.nn.Linear(8, 12)), reduction_dim(torch.nn.Linear(8, 12), "weight")) == (
        0, 1)


def test_pictures_label_conv1d_rows_as_inputs():
    layer = _conv1d(8, 12)
    view = tensor_view(layer.weight.detach(), module_type="Conv1D")
    assert (view.row_label, view.col_label) == ("in features (dim 0)", "out features (dim 1)")
    assert channel_view(torch.ones(8, 12), dim=1, module_type="Conv1D").col_label == (
        "out features (dim 1)")
    assert tensor_view(layer.bias.detach(), module_type="Conv1D").col_label == (
        "out features (dim 0)")
    linear = tensor_view(torch.zeros(12, 8), module_type="Linear")
    assert linear.row_label == "out features (dim 0)"


def test_wording_names_the_axis_structured_pruning_removes():
    assert slice_unit(2, 1, "Conv1D") == "output column (dim 1)"
    assert slice_unit(2, 0, "Conv1D") == "input row (dim 0)"
    assert slice_unit(2, 0, "Linear") == "output row (dim 0)"
    assert slice_unit(1, 0, "Linear") == "entry"  # a bias: no weight dims
    controls = PruningControls()
    controls.method.value = "ln_structured"
    controls.set_tensor(2, {"entries": 96, "dim": [8, 12]}, "Conv1D")
    controls.dim.value = 1
    controls.update_visibility()  # what the explorer does when the dim changes
    assert controls.units_left == (12, "output column (dim 1)")
    assert "12 output columns (dim 1) left" in controls.left.value


def test_ln_structured_dim_1_of_conv1d_removes_output_units():
    layer = _conv1d(8, 12)
    prune.ln_structured(layer, "weight", amount=3, n=2, dim=out_dim(layer))
    dead = (layer.weight_mask == 0).all(dim=0)
    assert int(dead.sum()) == 3
    y = layer(torch.randn(5, 8)) - layer.bias
    assert bool((y[:, dead] == 0).all())  # those output units now compute nothing


LAYERS = [
    ("Linear", lambda: torch.nn.Linear(8, 4), 1),
    ("Conv1D", lambda: _conv1d(8, 4), 0),
    ("Conv2d", lambda: torch.nn.Conv2d(8, 4, 3), 1),
    ("ConvTranspose2d", lambda: torch.nn.ConvTranspose2d(8, 4, 3), 0),
]


@pytest.mark.parametrize(("kind", "make", "dim"), LAYERS, ids=[k for k, _, _ in LAYERS])
def test_semi_structured_defaults_to_the_reduction_dim_in_core_and_session(kind, make, dim):
    def fresh():  # the same weights every time
        torch.manual_seed(1)
        return make()

    layer = fresh()
    assert type(layer).__name__ == kind
    core = prune.semi_structured(fresh(), "weight", pattern="2:4").weight_mask
    assert prune.satisfies_pattern(core, "2:4", dim)
    assert torch.equal(core, prune.semi_structured(fresh(), "weight", "2:4", dim=dim).weight_mask)
    model = torch.nn.Sequential(fresh())
    s = Session(model)
    preview = s.preview("0.weight", "semi_structured", pattern="2:4")
    step = s.apply("0.weight", "semi_structured", pattern="2:4")  # no dim: must hold
    assert step.settings["dim"] == dim  # recorded, so plans and snippets say which
    assert torch.equal(model[0].weight_mask, core)
    assert torch.equal(preview, core)


def test_semi_structured_without_a_layer_groups_the_last_dim():
    holder = torch.nn.Module()
    holder.table = torch.nn.Parameter(torch.randn(4, 8))
    s = Session(holder)
    assert s.apply("table", "semi_structured", pattern="2:4").settings["dim"] == -1
    assert prune.satisfies_pattern(holder.table_mask, "2:4", -1)
