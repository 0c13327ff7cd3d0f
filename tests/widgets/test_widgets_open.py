"""``explore(model, tensor=..., view=...)``: open the explorer on a given tensor and view."""

from __future__ import annotations

import pytest
from torch import nn

from helpers.widgets import cnn, mlp
from prune_explorer.widgets import Explorer, WidgetInputError, explore


def two_convs() -> nn.Module:
    return nn.Sequential(nn.Conv2d(2, 6, 3), nn.ReLU(), nn.Conv2d(6, 4, 3), nn.Flatten(),
                         nn.Linear(4, 3))


@pytest.mark.parametrize(("view", "layout", "shape"), [
    ("kernels", "kernels", (4 * 3, 6 * 3)),  # 4x6 tiles of 3x3 edge to edge (borders drawn)
    ("matrix", "auto", (4, 54)),                      # out x (in·kh·kw)
])
def test_opens_on_the_tensor_and_view(view, layout, shape):
    ex = explore(two_convs(), tensor="2.weight", view=view, debounce=None)
    try:
        assert ex.tensor == "2.weight"
        assert ex.ui.layout.value == layout
        assert ex.preview_array.shape == shape  # the picture drawn is that view of that tensor
    finally:
        ex.close()


def test_without_keywords_the_defaults_stay():
    ex = explore(cnn(), debounce=None)
    try:
        assert ex.tensor == "0.weight"
        assert ex.ui.layout.value == "auto"
    finally:
        ex.close()


def test_a_view_the_tensor_does_not_offer_is_refused_and_the_explorer_closed(monkeypatch):
    closed = []
    real_close = Explorer.close
    monkeypatch.setattr(Explorer, "close", lambda self: closed.append(self) or real_close(self))
    with pytest.raises(WidgetInputError,
                       match=r"view must be one of \['matrix', 'channels'\] for this rank-2 "
                             r"tensor; got 'kernels'"):
        explore(mlp(), tensor="0.weight", view="kernels", debounce=None)
    assert len(closed) == 1  # its widgets and background renderers do not outlive the error


def test_unknown_tensor_is_refused_by_name():
    with pytest.raises(WidgetInputError, match="name 'nope' is not a prunable tensor"):
        explore(mlp(), tensor="nope", debounce=None)


def test_view_alone_applies_to_the_default_tensor():
    ex = explore(cnn(), view="channels", debounce=None)
    try:
        assert (ex.tensor, ex.ui.layout.value) == ("0.weight", "channels")
    finally:
        ex.close()


def test_pixel_ratio_draws_sharper_at_the_same_size():
    import io

    import PIL.Image
    import torch

    from prune_explorer.widgets import Explorer

    model = torch.nn.Sequential(torch.nn.Linear(64, 32))
    sizes = {}
    for ratio in (1.0, 2.0):
        ex = Explorer(model, debounce=None, pixel_ratio=ratio)
        ex.ui.amount.value = 0.5
        sizes[ratio] = PIL.Image.open(io.BytesIO(ex.ui.preview.value)).size
        shown = ex.ui.preview.width
        ex.close()
        assert shown == ("" if ratio == 1.0 else str(sizes[1.0][0]))  # CSS width: the 1x size
    assert sizes[2.0] == (2 * sizes[1.0][0], 2 * sizes[1.0][1])


def test_pixel_ratio_outside_one_to_four_is_refused():
    import pytest
    import torch

    from prune_explorer.widgets import Explorer

    with pytest.raises(ValueError, match=r"pixel_ratio must be a number from 1 to 4; got 0\.5"):
        Explorer(torch.nn.Linear(2, 2), pixel_ratio=0.5)
