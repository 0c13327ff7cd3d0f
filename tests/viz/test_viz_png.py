"""The PNG writer round-trips through an independent decoder (Pillow)."""

from __future__ import annotations

import io

import numpy as np
import PIL.Image
import pytest

from prune_explorer.viz import encode_png, make_figure, render_png


@pytest.mark.parametrize("channels", [3, 4])
@pytest.mark.parametrize("level", [0, 1, 9])
def test_encode_png_round_trips(channels, level):
    rng = np.random.default_rng(channels * 10 + level)
    pixels = rng.integers(0, 256, size=(17, 23, channels), dtype=np.uint8)
    image = PIL.Image.open(io.BytesIO(encode_png(pixels, compress_level=level)))
    assert image.mode == ("RGB" if channels == 3 else "RGBA")
    np.testing.assert_array_equal(np.asarray(image), pixels)


def test_encode_png_accepts_a_strided_view():
    rgba = np.arange(6 * 5 * 4, dtype=np.uint8).reshape(6, 5, 4)
    image = PIL.Image.open(io.BytesIO(encode_png(rgba[..., :3])))
    np.testing.assert_array_equal(np.asarray(image), rgba[..., :3])


def test_render_png_is_the_canvas_pixels():
    fig, ax = make_figure(figsize=(2, 1.5), dpi=40)
    ax.plot([0, 1], [0, 1])
    image = np.asarray(PIL.Image.open(io.BytesIO(render_png(fig))))
    np.testing.assert_array_equal(image, np.asarray(fig.canvas.buffer_rgba()))


@pytest.mark.parametrize(
    ("pixels", "message"),
    [
        (np.zeros((2, 2, 3), dtype=np.float32), "got dtype float32 and shape (2, 2, 3)"),
        (np.zeros((2, 2), dtype=np.uint8), "got dtype uint8 and shape (2, 2)"),
        (np.zeros((2, 2, 2), dtype=np.uint8), "got dtype uint8 and shape (2, 2, 2)"),
    ],
)
def test_encode_png_rejects_other_arrays(pixels, message):
    with pytest.raises(ValueError, match="encode_png: pixels must be a uint8 array") as info:
        encode_png(pixels)
    assert message in str(info.value)


def test_encode_png_rejects_a_bad_level():
    with pytest.raises(ValueError, match=r"encode_png: compress_level must be an int in \[0, 9\]"):
        encode_png(np.zeros((1, 1, 3), dtype=np.uint8), compress_level=10)
