"""Figures for a notebook's output area: their size, and the rule that their text stays readable.

JupyterLab shows an inline matplotlib figure as a PNG at its natural size, one image pixel per CSS
pixel, cropped to what is drawn (``bbox_inches="tight"``, 0.1 inch of padding) -- and scaled down
to the output area's width when it is wider (CSS ``max-width: 100%``). A figure 13 inches wide
(three panels side by side) makes a PNG of up to 1,310 px; in the 592 px of a 1024x768 window
with the file browser open it is shown at 45 %, and its 10-point tick labels at 6.3 px.

The rule, for every figure of every teaching notebook: **each piece of text is at least**
:data:`MIN_TEXT_PX` **CSS px tall as shown at** :data:`NOTEBOOK_WIDTH_PX`, the output area of
JupyterLab 4 in a 1024x768 window with its file browser open (measured in Chromium; the browser
test of the quickstart checks the number). :func:`notebook_figsize` gives figures that fit that
width without scaling; :func:`shown_text_px` and :func:`check_readable` measure a figure against
the rule (the notebook tests apply it to every figure the notebooks show).

Examples
--------
>>> from prune_explorer.viz import make_figure
>>> from prune_explorer.viz.notebook import check_readable, notebook_figsize, shown_text_px
>>> fig, ax = make_figure(figsize=notebook_figsize(3.0))
>>> ax.set_title("fits the output area")  # doctest: +ELLIPSIS
Text(...)
>>> check_readable(fig)  # silent: nothing under 10 px
>>> wide, ax = make_figure(figsize=(13, 3))
>>> ax.set_title("shown at half its size")  # doctest: +ELLIPSIS
Text(...)
>>> [px for px, text in shown_text_px(wide) if text.startswith("shown")]  # 12 pt: 16.7 px
[7.53]
"""

from __future__ import annotations

import io
from typing import Any

from matplotlib.figure import Figure
from matplotlib.text import Text

#: Width in CSS px of a code cell's output area in JupyterLab 4 in a 1024x768 window with the
#: file browser open (its default): 1024 less the side bar, the file browser, the prompt column
#: and the paddings. Measured in Chromium with JupyterLab 4.6.
NOTEBOOK_WIDTH_PX = 592
#: The smallest text, in CSS px as shown, that a figure in a notebook may carry.
MIN_TEXT_PX = 10.0
#: The resolution notebook figures are drawn at (matplotlib's default): 1 inch = 100 px.
NOTEBOOK_DPI = 100.0
# The inline backend crops to what is drawn and pads it by this much on every side.
_PAD_INCHES = 0.1


def notebook_figsize(
    height: float, *, width_px: float = NOTEBOOK_WIDTH_PX, dpi: float = NOTEBOOK_DPI
) -> tuple[float, float]:
    """A figure size, in inches, whose inline PNG fits ``width_px`` CSS px without scaling.

    The width is the output area's less the inline backend's padding, so a figure laid out to
    its edges (``layout="constrained"``) is shown at its natural size: text of ``s`` points is
    ``s * dpi / 72`` px on screen (10 points: 13.9 px).

    Parameters
    ----------
    height : float
        Height in inches.
    width_px : float
        The output area's width in CSS px (default: :data:`NOTEBOOK_WIDTH_PX`).
    dpi : float
        The figure's resolution (default: matplotlib's 100).

    Returns
    -------
    (float, float)
        ``(width, height)`` in inches, for ``figsize=``.

    Examples
    --------
    >>> notebook_figsize(3.5)
    (5.72, 3.5)
    """
    if not height > 0:
        raise ValueError(f"notebook_figsize: height must be > 0 inches; got {height!r}")
    if not width_px > 2 * _PAD_INCHES * dpi:
        raise ValueError(f"notebook_figsize: width_px must leave room for the padding "
                         f"({2 * _PAD_INCHES * dpi:g} px); got {width_px!r}")
    return (round(width_px / dpi - 2 * _PAD_INCHES, 4), float(height))


def _render(fig: Figure) -> tuple[int, list[Text]]:
    """Draw ``fig`` as the inline backend does (PNG at the figure's dpi, cropped to what is
    drawn, padded by 0.1 inch): the PNG's width in px and the texts drawn into it."""
    drawn: dict[int, Text] = {}
    original = Text.draw

    def draw(self: Text, renderer: Any) -> None:
        if self.get_figure(root=True) is fig and self.get_visible() and self.get_text().strip():
            drawn[id(self)] = self
        original(self, renderer)

    buffer = io.BytesIO()
    Text.draw = draw  # type: ignore[method-assign,assignment]
    try:
        fig.savefig(buffer, format="png", dpi=fig.dpi, bbox_inches="tight",
                    pad_inches=_PAD_INCHES)
    finally:
        Text.draw = original  # type: ignore[method-assign]
    return int.from_bytes(buffer.getvalue()[16:20], "big"), list(drawn.values())


def _px(text: Text, fig: Figure, fit: float) -> float:
    """The CSS px of ``text`` shown with its PNG scaled by ``min(1, fit)``."""
    return round(float(text.get_fontsize()) * fig.dpi / 72.0 * min(1.0, fit), 2)


def shown_width_px(fig: Figure) -> int:
    """Width in px of the PNG the inline backend makes of ``fig``: drawn at the figure's dpi,
    cropped to what is drawn, padded by 0.1 inch.

    Examples
    --------
    >>> from prune_explorer.viz import make_figure
    >>> fig, ax = make_figure(figsize=(4, 3))
    >>> 380 <= shown_width_px(fig) <= 420
    True
    """
    return _render(fig)[0]


def shown_text_px(fig: Figure, *, width_px: float = NOTEBOOK_WIDTH_PX) -> list[tuple[float, str]]:
    """Every text drawn in ``fig`` with its size in CSS px as a notebook shows it.

    Size = font size in points x ``dpi / 72`` x the scale the output area applies (1, or
    ``width_px`` over the PNG's width when the PNG is wider). Only texts the PNG contains count
    (not hidden ones, nor the labels matplotlib keeps for ticks outside the view).

    Parameters
    ----------
    fig : Figure
        The figure, as the notebook shows it (drawn here once more to measure it).
    width_px : float
        The output area's width in CSS px (default: :data:`NOTEBOOK_WIDTH_PX`).

    Returns
    -------
    list of (float, str)
        ``(px, text)``, smallest first.

    Examples
    --------
    >>> from prune_explorer.viz import make_figure
    >>> fig, ax = make_figure(figsize=(4, 3))
    >>> ax.set_xlabel("x", fontsize=9)  # doctest: +ELLIPSIS
    Text(...)
    >>> min(shown_text_px(fig))  # 9 pt at 100 dpi, not scaled (the PNG is narrower than 592 px)
    (12.5, 'x')
    """
    width, texts = _render(fig)
    return sorted((_px(text, fig, width_px / width), text.get_text()) for text in texts)


def check_readable(
    fig: Figure, *, width_px: float = NOTEBOOK_WIDTH_PX, min_px: float = MIN_TEXT_PX
) -> None:
    """Raise ``ValueError`` if any text of ``fig`` is shown smaller than ``min_px`` CSS px in an
    output area ``width_px`` wide (see :func:`shown_text_px`); the message names the texts.

    Examples
    --------
    >>> from prune_explorer.viz import make_figure
    >>> fig, ax = make_figure(figsize=(13, 3))
    >>> ax.set_title("too wide")  # doctest: +ELLIPSIS
    Text(...)
    >>> check_readable(fig)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: check_readable: text must be >= 10 px as shown in a 592 px output area ...
    """
    width, texts = _render(fig)
    small = sorted({(px, text.get_text()) for text in texts
                    if (px := _px(text, fig, width_px / width)) < min_px})
    if small:
        listed = "; ".join(f"{px:.1f} px {text!r}" for px, text in small[:8])
        more = f" (and {len(small) - 8} more)" if len(small) > 8 else ""
        raise ValueError(
            f"check_readable: text must be >= {min_px:g} px as shown in a {width_px:g} px "
            f"output area (the figure's PNG is {width} px wide); got {listed}{more}")
