"""The explorer handles parameters with no entries (``nn.Linear(0, 3)`` and the like)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from prune_explorer.widgets import explore
from prune_explorer.widgets.tabs.explore.preview import MaskSummary, kept_slices

METHODS = ("l1_unstructured", "random_unstructured", "ln_structured", "random_structured",
           "identity")

# a tensor with no entries must draw without numeric warnings (no division by its size)
pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")


@pytest.mark.parametrize("shape", [(3, 0), (0, 3), (0, 0), (2, 0, 3)])
def test_kept_slices_of_an_empty_mask(shape):
    for mask in (torch.ones(shape), torch.ones(shape, dtype=torch.bool)):
        for dim in range(len(shape)):
            assert kept_slices(mask, dim) == (shape[dim] if mask.numel() else 0)
    assert MaskSummary.of(torch.ones(shape, dtype=torch.bool)).kept_count == 0


@pytest.mark.filterwarnings("ignore:Attempting to set identical")  # matplotlib, empty picture
@pytest.mark.filterwarnings("ignore:Initializing zero-element tensors")  # torch's init
@pytest.mark.parametrize("make", [lambda: nn.Linear(0, 3), lambda: nn.Linear(3, 0),
                                  lambda: nn.Sequential(nn.Conv2d(0, 4, 3), nn.Linear(0, 0))],
                         ids=["linear-0-in", "linear-0-out", "conv-and-linear"])
def test_explore_a_model_with_zero_element_parameters(make):
    ex = explore(make(), debounce=None)
    try:
        assert ex.preview_error is None
        for method in METHODS:
            ex.ui.method.value = method
            assert ex.preview_error is None, (method, ex.preview_error)
            ex.ui.apply.click()
            assert ex.status.kind == "ok", (method, ex.status.text)
        for tab in range(5):
            ex.ui.tabs.selected_index = tab
        ex.flush()
        assert ex.status.kind == "ok", ex.status.text
        ex.ui.commit_review.click()
        ex.ui.commit_confirm.click()
        assert ex.status.text.startswith("Committed")
    finally:
        ex.close()
