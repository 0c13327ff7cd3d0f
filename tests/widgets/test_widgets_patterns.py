"""The explorer offers the two hardware patterns: their controls feed the session, the preview
is the core's mask and Apply leaves it."""

from __future__ import annotations

import copy

import torch

from helpers.widgets import cnn, mlp
from prune_explorer import prune
from prune_explorer.widgets import Explorer


def _core_mask(model, address, fn, **kwargs):
    copied = copy.deepcopy(model)
    module_name, _, tensor_name = address.rpartition(".")
    module = copied.get_submodule(module_name)
    fn(module, tensor_name, **kwargs)
    return getattr(module, tensor_name + "_mask")


def test_semi_structured_preview_and_apply():
    model = cnn()
    ex = Explorer(model, debounce=None)
    name = "0.weight"  # Conv2d(2, 6, 3): groups of 2 along the input channels (dim 1)
    ex.ui.tensor.value = name
    dim = 1
    ex.ui.method.value = "semi_structured"
    ex.ui.pattern.value = "1:2"
    ex.ui.dim.value = dim
    expected = _core_mask(model, name, prune.semi_structured, pattern="1:2", dim=dim)
    assert torch.equal(ex.preview_mask, expected)
    ex.ui.apply.click()
    assert torch.equal(ex.session.mask(name), expected)
    assert ex.session.steps[-1].settings == {"pattern": "1:2", "dim": dim}


def test_block_structured_preview_and_bad_block_text():
    model = mlp()
    ex = Explorer(model, debounce=None)
    ex.ui.tensor.value = "0.weight"
    weight = model[0].weight
    ex.ui.method.value = "block_structured"
    block = (1, weight.shape[1])
    ex.ui.block.value = f"{block[0]},{block[1]}"
    ex.ui.n.value = "1"
    ex.ui.amount.value = 0.5
    expected = _core_mask(model, "0.weight", prune.block_structured, amount=0.5, block=block, n=1)
    assert torch.equal(ex.preview_mask, expected)
    ex.ui.block.value = "4 by 4"
    assert ex.preview_mask is None
    assert "block" in ex.preview_error


def test_the_explore_picture_shows_the_pattern_groups():
    ex = Explorer(mlp(), debounce=None)
    ex.ui.tensor.value = "0.weight"  # small enough for one cell per entry
    ex.ui.method.value = "semi_structured"
    ex.ui.pattern.value = "2:4"
    ex.ui.dim.value = 1
    assert ex.preview_pane.picture.ax.get_lines()  # group boundaries drawn
    ex.ui.method.value = "l1_unstructured"
    assert ex.preview_pane.picture.ax.get_lines() == []
    ex.close()
