"""The explorer's importance picker: it binds the session's ``importance=``; the preview is the
session's mask, Apply records the criterion, and a criterion without calibration says so by the
picker."""

from __future__ import annotations

import torch

from helpers.widgets import mlp
from prune_explorer.widgets import Explorer


def test_the_importance_picker_previews_and_applies_the_sessions_criterion():
    ex = Explorer(mlp(), debounce=None)
    ex.ui.tensor.value = "0.weight"
    ex.ui.method.value = "l1_unstructured"
    ex.ui.amount.value = 0.5
    assert ex.ui.importance.layout.display == ""  # offered for a method that takes scores
    ex.ui.importance.value = "wanda"
    assert ex.preview_mask is None
    assert "Session.calibrate" in ex.preview_error  # not calibrated: said, nothing applied
    ex.session.calibrate([torch.randn(32, ex.session.info("0.weight").shape[1])])
    ex.ui.amount.value = 0.4  # any change previews again
    expected = ex.session.preview("0.weight", "l1_unstructured", amount=0.4, importance="wanda")
    assert torch.equal(ex.preview_mask, expected)
    ex.ui.apply.click()
    assert ex.session.steps[-1].importance == "wanda"
    assert torch.equal(ex.session.mask("0.weight"), expected)
    ex.ui.method.value = "random_unstructured"
    assert ex.ui.importance.layout.display == "none"
