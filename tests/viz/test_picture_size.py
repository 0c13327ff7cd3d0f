"""The mask picture fills the room it is given: fonts grow with it, ticks never overlap, every
text stays inside the image, and 3x3 kernel tiles are big enough to read on a projector.

Checked with the renderer's own text extents (no browser needed): what the browser shows is
this PNG, scaled by nothing (the explorer shows it at its CSS size).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from helpers.pictures import picture_misfits
from prune_explorer.viz import MaskPreview

SIZES = [(560, 590), (860, 640), (1180, 760), (300, 380), (683 - 60, 360)]
TENSORS = {
    "mlp fc1 128x64": (torch.rand(128, 64) > 0.4, "auto", "Linear"),
    "fc3 10x64": (torch.rand(10, 64) > 0.4, "auto", "Linear"),
    "cnn 32x16x3x3 matrix": (torch.rand(32, 16, 3, 3) > 0.4, "auto", "Conv2d"),
    "cnn 32x16x3x3 kernels": (torch.rand(32, 16, 3, 3) > 0.4, "kernels", "Conv2d"),
    "cnn 32x16x3x3 channels": (torch.rand(32, 16, 3, 3) > 0.4, "channels", "Conv2d"),
    "llm 4096x11008": (torch.rand(4096, 11008) > 0.4, "auto", "Linear"),
}


def _drawn(shape_key: str, size: tuple[int, int], ratio: float = 1.0) -> MaskPreview:
    torch.manual_seed(0)
    mask, layout, module = TENSORS[shape_key]
    p = MaskPreview()
    p.resize(*size, pixel_ratio=ratio)
    p.update(mask, layout=layout, name="features.3.weight", method="ln_structured",
             settings={"amount": 0.3, "n": 2, "dim": 0}, before=torch.ones_like(mask),
             module_type=module)
    p.png()  # lays out and renders, as the explorer does
    return p


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("key", list(TENSORS))
def test_ticks_do_not_overlap_and_text_stays_inside(key, size):
    assert picture_misfits(_drawn(key, size)) == [], (key, size)


def test_the_picture_takes_its_column_and_fonts_grow_with_it():
    small, large = _drawn("mlp fc1 128x64", (384, 320)), _drawn("mlp fc1 128x64", (800, 700))
    assert small.css_size == (384, 320)
    assert large.css_size[0] == 800
    assert large.css_size[1] <= 700
    font = [p.ax.title.get_fontsize() * p.figure.dpi / 72 for p in (small, large)]
    assert font[1] >= 1.4 * font[0]  # px, as drawn
    width = [p.ax.get_window_extent().width for p in (small, large)]
    assert width[1] >= 1.5 * width[0]


def test_a_wide_tensor_gets_the_width_and_only_the_height_it_needs():
    p = _drawn("fc3 10x64", (700, 700))
    width, height = p.css_size
    assert width == 700
    assert height < 450


def test_a_kernel_tile_is_at_least_12_px_at_projector_size():
    # 1024x768 with the file browser open: a column of about 560 CSS px, and about 590 px of
    # height left under the slider and the count line (measured in JupyterLab 4.6).
    p = _drawn("cnn 32x16x3x3 kernels", (560, 590))
    box = p.ax.get_window_extent()
    rows, cols = p.view.shape
    assert (rows, cols) == (32 * 3, 16 * 3)  # tiles edge to edge, their borders drawn as lines
    tile = 3 * min(box.height / rows, box.width / cols)
    assert tile >= 12.0, tile
    assert p._tile_lines is not None
    assert len(p._tile_lines.get_segments()) == 31 + 15


def test_a_hidpi_render_has_the_same_css_layout():
    one, two = _drawn("mlp fc1 128x64", (560, 590)), _drawn("mlp fc1 128x64", (560, 590), 2.0)
    assert one.css_size == two.css_size
    assert np.allclose(one.ax.get_position().bounds, two.ax.get_position().bounds)
    assert two.figure.get_size_inches()[0] * two.figure.dpi == pytest.approx(1120)


def test_resize_refuses_nonsense():
    with pytest.raises(ValueError, match=r"MaskPreview.resize: width and height must be ints "
                                         r">= 160 \(CSS pixels\); got 10 x 500"):
        MaskPreview().resize(10, 500)
    with pytest.raises(ValueError, match="pixel_ratio must be a number from 1 to 4; got 9"):
        MaskPreview().resize(400, 500, pixel_ratio=9)


def test_a_new_room_of_the_same_pixels_draws_the_legend_again():
    # The browser's room often changes in height only (a line over the picture comes or
    # goes) while the picture keeps its size: the legend is rebuilt for the new room and must
    # be drawn (laid out) again, not left behind a cached background (issue 35: its texts
    # measured at the figure's corner, on the 4096x11008 weight in the page).
    mask = torch.rand(128, 640) > 0.4
    p = MaskPreview()
    for room in [(552, 579), (552, 561)]:
        p.resize(*room)
        p.update(mask, name="proj.weight", before=torch.ones_like(mask))
        png = p.png()
        assert picture_misfits(p) == [], room
    assert p.css_size == (552, 313)  # the same pixels for both rooms: the case above
    fresh = MaskPreview()
    fresh.resize(552, 561)
    fresh.update(mask, name="proj.weight", before=torch.ones_like(mask))
    assert png == fresh.png()
