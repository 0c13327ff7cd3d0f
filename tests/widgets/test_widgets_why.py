"""The Explore tab's why view, driven headless: it says what to call before calibration, shows the
session's own why data for the tensor and criterion on show, compares two criteria with the
session's previews (what Apply installs), follows the column's width, and costs nothing closed."""

from __future__ import annotations

import pytest
import torch

from helpers.widgets import cnn, mlp
from prune_explorer.widgets import Explorer

pytestmark = pytest.mark.slow  # each draws a few figures (a few seconds on a busy machine)


def _explorer(model=None):
    ex = Explorer(model if model is not None else mlp(), debounce=None)
    ex.ui.tensor.value = "0.weight"
    ex.ui.method.value = "l1_unstructured"
    ex.ui.amount.value = 0.5
    return ex


def _inputs(ex, name="0.weight"):
    generator = torch.Generator().manual_seed(1)
    features = ex.session.info(name).shape[1]
    scale = torch.linspace(0.1, 5.0, features)
    return [torch.randn(32, features, generator=generator) * scale]


def test_before_calibration_it_says_what_to_call_and_draws_nothing():
    ex = _explorer()
    panel = ex.explore_pane.panels.why
    panel.open()
    assert "calibrate(batches)" in panel.text.value
    assert panel.image.layout.display == "none"
    assert panel.why is None
    assert ex.preview_error is None  # the view never fails the preview
    ex.session.calibrate(_inputs(ex))  # the explorer hears of it: the view fills
    assert panel.image.layout.display == ""
    assert panel.image.value[:4] == b"\x89PNG"
    assert "calibrate(batches)" not in panel.text.value
    ex.close()


def test_it_shows_the_sessions_why_data_for_the_picked_criterion():
    ex = _explorer()
    ex.session.calibrate(_inputs(ex))
    panel = ex.explore_pane.panels.why
    panel.open()
    assert panel.why.importance == "magnitude"
    ex.ui.importance.value = "wanda"
    expected = ex.session.why("0.weight", "wanda")
    assert panel.why.importance == "wanda"
    assert panel.why.name == "0.weight"
    for field in ("weight", "input_norms", "score", "kept"):
        assert torch.equal(getattr(panel.why, field), getattr(expected, field))
    assert "wanda scores |w| * ||X_j||_2" in panel.text.value
    ex.ui.tensor.value = "0.bias"  # wanda needs input statistics: the preview says so
    assert "needs the calibration statistic" in ex.preview_error
    assert "pe-stale" in panel.image._dom_classes  # the view of 0.weight is dimmed
    ex.ui.importance.value = "magnitude"  # |W| and its score; no input features
    assert panel.why.name == "0.bias"
    assert panel.why.input_norms is None
    assert "no input features, so no input norms" in panel.text.value
    assert "pe-stale" not in panel.image._dom_classes
    ex.close()


def test_compare_with_shows_where_two_criteria_disagree_as_the_sessions_previews():
    ex = _explorer()
    ex.session.calibrate(_inputs(ex))
    panel = ex.explore_pane.panels.why
    panel.open()
    ex.ui.importance.value = "wanda"
    panel.against.value = "magnitude"
    c = panel.comparison
    a = ex.session.preview("0.weight", "l1_unstructured", amount=0.5, importance="wanda") != 0
    b = ex.session.preview("0.weight", "l1_unstructured", amount=0.5) != 0
    assert torch.equal(c.first_mask, a)
    assert torch.equal(c.second_mask, b)
    only_a, only_b = int((a & ~b).sum()), int((b & ~a).sum())
    assert only_a > 0
    assert only_b > 0
    assert f"{only_a:,} kept by wanda and pruned by magnitude" in panel.text.value
    ex.ui.apply.click()  # what Apply installs with the picked criterion is the compared mask
    assert torch.equal(ex.session.mask("0.weight"), c.first_mask)
    ex.ui.method.value = "random_unstructured"  # no criterion: said, the why view stays
    assert panel.comparison is None
    assert "Method must rank entries" in panel.text.value
    assert panel.image.layout.display == ""
    ex.close()


def test_the_figure_follows_the_columns_width_and_pixel_ratio():
    ex = _explorer()
    ex.session.calibrate(_inputs(ex))
    panel = ex.explore_pane.panels.why
    panel.open()
    assert panel.image.width == "720"  # no browser yet: the default width
    small = len(panel.image.value)
    panel.probe.width, panel.probe.height, panel.probe.pixel_ratio = 1100, 700, 2.0
    assert panel.image.width == "1100"  # shown at the column's CSS width
    assert len(panel.image.value) > small  # drawn at twice the pixels
    ex.close()


def test_closed_it_computes_nothing_and_a_conv_uses_the_pictures_view():
    ex = _explorer(cnn())
    name = next(n for n in ex.session.names if ex.session.info(n).module_type == "Conv2d"
                and len(ex.session.info(n).shape) == 4)
    ex.ui.tensor.value = name
    panel = ex.explore_pane.panels.why
    ex.session.calibrate([torch.randn(4, 2, 4, 4)])  # cnn(): Conv2d(2, 6, 3) -> 6 x 2 x 2
    ex.ui.amount.value = 0.3
    assert panel.renders == 0
    assert panel.why is None
    panel.open()
    assert panel.renders == 1
    shape = ex.session.info(name).shape
    assert tuple(panel.why.norms.shape) == tuple(shape)  # laid out as the weight is
    ex.close()

