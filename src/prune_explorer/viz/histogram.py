"""Why these weights: a histogram of the importances a magnitude step ranks, with its cut.

Two renderings of the same picture (bars over log-spaced bins of ``|w|`` or of channel norms,
the pruned part shaded, a line at the cut):

* :class:`HistogramSVG` -- a small SVG string for the live explorer. The bars are drawn once per
  tensor state; :meth:`HistogramSVG.svg` only adds the shading and the line, so a slider move
  costs a few string operations (no figure, no PNG).
* :func:`plot_magnitudes` -- the matplotlib version, for notebooks and reports.

The bins come from :meth:`prune_explorer.session.preview.magnitudes.Magnitudes.histogram` and the
cut from
:meth:`~prune_explorer.session.preview.magnitudes.Magnitudes.cut`.

Examples
--------
>>> import numpy as np
>>> pic = HistogramSVG(np.array([0.01, 0.1, 1.0]), np.array([3, 5]), zeros=2)
>>> svg = pic.svg(0.1, caption="cut at 0.1")
>>> svg.startswith("<svg") and "pe-mag-cut" in svg and "cut at 0.1" in svg
True
>>> round(pic.x(0.1) - pic.x(0.01), 1) == round(pic.x(1.0) - pic.x(0.1), 1)  # a log axis
True
"""

from __future__ import annotations

import math
from html import escape
from typing import Any

import numpy as np

from .style import BLUE, VERMILLION

__all__ = ["HistogramSVG", "plot_magnitudes"]

_LEFT, _RIGHT, _TOP, _BOTTOM = 44, 12, 8, 34


def _tick_text(value: float) -> str:
    exponent = math.floor(math.log10(value) + 1e-9)
    return f"1e{exponent}" if not -2 <= exponent <= 2 else f"{value:g}"


class HistogramSVG:
    """Bars of ``counts`` over log-spaced ``edges`` as an SVG, with a cut added per call.

    Parameters
    ----------
    edges : array of float
        ``len(counts) + 1`` increasing, positive bin edges (log-spaced); may be empty.
    counts : array of int
        Units per bin.
    zeros : int
        Units exactly 0 (off a log axis; named in the caption line by the caller).
    xlabel : str
        What the axis measures, e.g. ``"|w|"`` or ``"L2 norm of each channel"``.
    width, height : int
        Size of the drawing, in its own units (its text is 10 of them).
    scale : float
        CSS pixels per unit: the picture is shown ``scale`` times as large, text too (the
        explorer's :func:`~prune_explorer.viz.figures.room_scale`).

    Examples
    --------
    >>> pic = HistogramSVG(np.array([0.1, 1.0]), np.array([4]), width=400, scale=1.5)
    >>> pic.svg(None).split(" font-")[0].split('svg" ')[1]
    'width="600" height="225" viewBox="0 0 400 150"'
    """

    def __init__(self, edges: np.ndarray, counts: np.ndarray, *, zeros: int = 0,
                 xlabel: str = "|w|", width: int = 380, height: int = 150,
                 scale: float = 1.0) -> None:
        if not (isinstance(scale, (int, float)) and 0.5 <= scale <= 4.0):
            raise ValueError(f"HistogramSVG: scale must be a number from 0.5 to 4; got {scale!r}")
        self.edges = np.asarray(edges, dtype=np.float64)
        self.counts = np.asarray(counts, dtype=np.int64)
        self.zeros = zeros
        self.width, self.height = width, height
        self.scale = float(scale)
        self._bars = self._draw_bars(xlabel)

    @property
    def empty(self) -> bool:
        """True when there is no positive value to draw."""
        return self.counts.size == 0

    def x(self, value: float) -> float:
        """Horizontal pixel of ``value`` on the log axis (clamped to the plot)."""
        if self.empty:
            return float(_LEFT)
        low, high = math.log(self.edges[0]), math.log(self.edges[-1])
        span = self.width - _LEFT - _RIGHT
        if value <= self.edges[0]:
            return float(_LEFT)
        if value >= self.edges[-1] or high <= low:
            return float(self.width - _RIGHT)
        return _LEFT + span * (math.log(value) - low) / (high - low)

    def _draw_bars(self, xlabel: str) -> str:
        bottom = self.height - _BOTTOM
        parts = [f'<line x1="{_LEFT}" y1="{bottom}" x2="{self.width - _RIGHT}" y2="{bottom}" '
                 'stroke="#444"/>']
        if not self.empty:
            tall = max(int(self.counts.max()), 1)
            span = bottom - _TOP
            for count, lo, hi in zip(self.counts, self.edges[:-1], self.edges[1:], strict=True):
                if count == 0:
                    continue
                x0, x1 = self.x(lo), self.x(hi)
                h = max(span * int(count) / tall, 1.0)
                parts.append(f'<rect x="{x0:.1f}" y="{bottom - h:.1f}" '
                             f'width="{max(x1 - x0, 1):.1f}" height="{h:.1f}" fill="{BLUE}"/>')
            first = math.ceil(math.log10(self.edges[0]) - 1e-9)
            last = math.floor(math.log10(self.edges[-1]) + 1e-9)
            ticks = [10.0 ** e for e in range(first, last + 1)]
            if len(ticks) < 2:
                ticks = [float(self.edges[0]), float(self.edges[-1])]
            step = max(1, math.ceil(len(ticks) / 6))
            for value in ticks[::step]:
                x = self.x(value)
                parts.append(f'<line x1="{x:.1f}" y1="{bottom}" x2="{x:.1f}" y2="{bottom + 4}" '
                             f'stroke="#444"/><text x="{x:.1f}" y="{bottom + 15}" '
                             f'text-anchor="middle">{escape(_tick_text(value))}</text>')
            parts.append(f'<text x="4" y="{_TOP + 10}">{int(self.counts.max()):,}</text>')
        parts.append(f'<text x="{(_LEFT + self.width - _RIGHT) / 2:.0f}" y="{self.height - 4}" '
                     f'text-anchor="middle">{escape(xlabel)} (log scale)</text>')
        return "".join(parts)

    def svg(self, cut: float | None, *, caption: str = "", prune_all: bool = False) -> str:
        """The picture with everything below ``cut`` shaded as pruned and a line at ``cut``
        (``cut=None``: no line; ``prune_all``: every bar shaded). ``caption`` is the tooltip."""
        bottom = self.height - _BOTTOM
        over = ""
        if prune_all or cut is not None:
            x = self.width - _RIGHT if prune_all or cut is None else self.x(cut)
            over = (f'<rect class="pe-mag-pruned" x="{_LEFT}" y="{_TOP}" '
                    f'width="{max(x - _LEFT, 0):.1f}" height="{bottom - _TOP}" '
                    f'fill="{VERMILLION}" '
                    'fill-opacity="0.3"/>')
            if not prune_all:
                over += (f'<line class="pe-mag-cut" x1="{x:.1f}" y1="{_TOP - 4}" x2="{x:.1f}" '
                         f'y2="{bottom}" stroke="{VERMILLION}" stroke-width="2"/>')
        title = f"<title>{escape(caption)}</title>" if caption else ""
        return (f'<svg xmlns="http://www.w3.org/2000/svg" '
                f'width="{round(self.width * self.scale)}" '
                f'height="{round(self.height * self.scale)}" '
                f'viewBox="0 0 {self.width} {self.height}" '
                f'font-size="10" font-family="sans-serif">{title}{self._bars}{over}</svg>')

    def __repr__(self) -> str:
        return (f"HistogramSVG({self.counts.size} bins, {int(self.counts.sum()):,} positive, "
                f"{self.zeros:,} zeros)")


def plot_magnitudes(ax: Any, edges: np.ndarray, counts: np.ndarray, cut: float | None = None,
                    *, xlabel: str = "|w|") -> dict[str, Any]:
    """Draw the histogram on ``ax`` (log x axis), the part below ``cut`` shaded as pruned and
    a line at ``cut``; returns the artists (``"bars"``, and ``"cut"``/``"pruned"`` with a cut).

    Examples
    --------
    >>> import numpy as np
    >>> from prune_explorer.viz import make_figure
    >>> fig, ax = make_figure(figsize=(4, 2.5))
    >>> drawn = plot_magnitudes(ax, np.array([0.01, 0.1, 1.0]), np.array([3, 5]), cut=0.1)
    >>> sorted(drawn), ax.get_xscale()
    (['bars', 'cut', 'pruned'], 'log')
    """
    edges = np.asarray(edges, dtype=np.float64)
    drawn: dict[str, Any] = {}
    if len(counts):
        drawn["bars"] = ax.stairs(counts, edges, fill=True, color=BLUE)
        ax.set_xscale("log")
    else:
        drawn["bars"] = None
    if cut is not None and len(counts):
        drawn["pruned"] = ax.axvspan(edges[0], max(cut, edges[0]), color=VERMILLION,
                                     alpha=0.35, label="pruned")
        drawn["cut"] = ax.axvline(max(cut, edges[0]), color=VERMILLION, linewidth=2,
                                  label=f"cut {cut:.3g}")
        ax.legend(loc="upper right", fontsize="small")
    ax.set_xlabel(f"{xlabel} (log scale)")
    ax.set_ylabel("count")
    return drawn
