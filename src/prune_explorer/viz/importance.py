"""Why a criterion keeps a weight: ``|W|``, the input norms ``||X_j||`` and the score side by side.

:func:`plot_why` draws what :meth:`Session.why <prune_explorer.session.Session.why>` returns
(any object with its attributes, see :class:`WhyLike`): three pictures of the tensor through
the same 2-D view and the same display cells as the mask pictures (:func:`.masks.plot_mask` in
magnitude mode, on a log scale; pruned cells lemon yellow), and, given a fourth axes, the
histogram of the input norms per feature (:func:`.histogram.plot_magnitudes`). Where two
criteria disagree is :func:`.diffs.plot_diff` with ``labels=`` :func:`comparison_labels`.

Examples
--------
>>> import torch
>>> from prune_explorer import Session, viz
>>> from prune_explorer.viz.importance import plot_why
>>> _ = torch.manual_seed(0)
>>> s = Session(torch.nn.Sequential(torch.nn.Linear(6, 4)))
>>> _ = s.calibrate([torch.randn(8, 6) * torch.arange(6.0)])  # feature 0 is dead
>>> fig, axes = viz.make_figure(1, 4, figsize=(14, 3))
>>> drawn = plot_why(axes, s.why("0.weight", "wanda"))
>>> drawn
WhyPlot('0.weight', wanda: 3 pictures, cells (4, 6), histogram of 5 input norms, 1 dead)
>>> drawn.norms.pooled.values[:, 0].tolist()  # the dead feature's column: exactly 0
[0.0, 0.0, 0.0, 0.0]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from matplotlib import rcParams
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from prune_explorer.viz.diffs import DiffPlot, plot_diff
from prune_explorer.viz.figures import auto_cells
from prune_explorer.viz.histogram import plot_magnitudes
from prune_explorer.viz.masks import MaskPlot, plot_mask
from prune_explorer.viz.pooling import MaxCells, _parse_max_cells

__all__ = ["ComparisonLike", "WhyFigure", "WhyLike", "WhyPlot", "comparison_labels",
           "plot_comparison", "plot_why", "why_figure"]

#: CSS pixels of the smallest text in a why figure ("small" matplotlib text): the explorer's
#: own text size, so that the picture's words are never smaller than the page's.
TEXT_PX = 13.0
#: Matplotlib's "small" relative to its base font size.
_SMALL = 0.833
#: The least width (CSS px) of one picture of a why figure: fewer columns below it.
PANEL_PX = 340
#: The figure's layout engine (constrained: colour bars and legends inside the figure).
LAYOUT: Any = "constrained"


class WhyLike(Protocol):
    """What :func:`plot_why` reads (``Session.why``'s record has it)."""

    @property
    def name(self) -> str: ...

    @property
    def importance(self) -> str: ...

    @property
    def formula(self) -> str: ...

    @property
    def weight(self) -> Any: ...

    @property
    def kept(self) -> Any: ...

    @property
    def norms(self) -> Any: ...

    @property
    def score(self) -> Any: ...

    @property
    def module_type(self) -> str: ...

    @property
    def dead_inputs(self) -> int: ...

    def norm_histogram(self, bins: int = 40) -> tuple[np.ndarray, np.ndarray]: ...


class ComparisonLike(Protocol):
    """What :func:`plot_comparison` reads (``Session.compare_criteria``'s record has it)."""

    @property
    def name(self) -> str: ...

    @property
    def first(self) -> str: ...

    @property
    def second(self) -> str: ...

    @property
    def first_mask(self) -> Any: ...

    @property
    def second_mask(self) -> Any: ...



@dataclass(frozen=True, repr=False)
class WhyPlot:
    """What :func:`plot_why` drew: the three pictures (``norms`` None for a tensor without
    input features) and the histogram's artists (None without a fourth axes)."""

    name: str
    importance: str
    weight: MaskPlot
    norms: MaskPlot | None
    score: MaskPlot
    histogram: dict[str, Any] | None
    features: int
    dead: int

    def __repr__(self) -> str:
        pictures = 2 if self.norms is None else 3
        hist = ("" if self.histogram is None else
                f", histogram of {self.features} input norms, {self.dead} dead")
        return (f"WhyPlot({self.name!r}, {self.importance}: {pictures} pictures, cells "
                f"{self.score.pooled.shape}{hist})")


def comparison_labels(first: str, second: str) -> tuple[str, str, str]:
    """``plot_diff(before=A's mask, after=B's mask, labels=...)`` for two criteria.

    >>> comparison_labels("magnitude", "wanda")[1]  # kept by magnitude, pruned by wanda
    'only magnitude keeps'
    """
    return (f"pruned by {second}", f"only {first} keeps", f"only {second} keeps")


def plot_why(axes: Sequence[Axes], why: WhyLike, *, max_cells: MaxCells | None = None,
             bins: int = 40) -> WhyPlot:
    """Draw ``|W|``, ``||X_j||`` along the weight's input axis and the criterion's score.

    Parameters
    ----------
    axes : sequence of Axes
        Three (the pictures, left to right) or four (then the histogram of the input norms
        per feature in the last).
    why : WhyLike
        ``Session.why(name, importance)``.
    max_cells : int or (int, int), optional
        Cells per side; by default the fewest any of the three axes has pixels for, so all
        three pool the same blocks.
    bins : int
        Bins of the histogram.

    Returns
    -------
    WhyPlot
    """
    if len(axes) not in (3, 4):
        raise ValueError(f"plot_why: axes must hold 3 or 4 Axes; got {len(axes)}")
    if max_cells is None:
        sizes = [auto_cells(ax) for ax in axes[:3]]
        cells: MaxCells = (min(r for r, _ in sizes), min(c for _, c in sizes))
    else:
        cells = _parse_max_cells(max_cells, "plot_why")
    common = {"mode": "magnitude", "log": True, "module_type": why.module_type,
              "max_cells": cells}
    weight = plot_mask(axes[0], why.kept, weight=why.weight, title=f"|W| of {why.name}",
                       **common)  # type: ignore[arg-type]
    norms = None
    if why.norms is None:
        axes[1].set_axis_off()
        axes[1].text(0.5, 0.5, f"{why.name} has no input features:\nno input norms",
                     ha="center", va="center", transform=axes[1].transAxes, wrap=True)
    else:
        norms = plot_mask(axes[1], why.kept, weight=why.norms, value_label="||X_j||",
                          title="input norms ||X_j|| (calibration)",
                          **common)  # type: ignore[arg-type]
    formula = why.formula.split(" (")[0]  # the words in brackets are the colour bar's
    score = plot_mask(axes[2], why.kept, weight=why.score, value_label="score",
                      title=f"{why.importance} score = {formula}",
                      **common)  # type: ignore[arg-type]
    histogram = None
    edges, counts = why.norm_histogram(bins)
    if len(axes) == 4:
        histogram = plot_magnitudes(axes[3], edges, counts, xlabel="||X_j|| per input feature")
        dead = why.dead_inputs
        axes[3].set_title(f"input norms of {int(counts.sum()) + dead:,} features"
                          + (f"\n{dead:,} dead (norm 0, not shown)" if dead else ""),
                          fontsize="medium")
    return WhyPlot(why.name, why.importance, weight, norms, score, histogram,
                   int(counts.sum()), why.dead_inputs)


def plot_comparison(ax: Axes, comparison: ComparisonLike, *, module_type: str | None = None,
                    max_cells: MaxCells | None = None) -> DiffPlot:
    """Where two criteria's masks of one step disagree: :func:`.diffs.plot_diff` of A's mask
    (before) and B's (after), vermillion where A keeps and B prunes, sky blue the other way.

    Examples
    --------
    >>> import torch
    >>> from types import SimpleNamespace
    >>> from prune_explorer.viz import make_figure
    >>> c = SimpleNamespace(name="w", first="magnitude", second="wanda",
    ...                     first_mask=torch.tensor([[1, 1, 0, 0]]),
    ...                     second_mask=torch.tensor([[1, 0, 1, 0]]))
    >>> fig, ax = make_figure()
    >>> d = plot_comparison(ax, c)
    >>> d.newly_pruned_total, d.revived_total
    (1, 1)
    """
    return plot_diff(ax, comparison.first_mask, comparison.second_mask, name=comparison.name,
                     title=f"{comparison.first} vs {comparison.second} on {comparison.name}",
                     module_type=module_type, max_cells=max_cells,
                     labels=comparison_labels(comparison.first, comparison.second))


@dataclass(frozen=True, repr=False)
class WhyFigure:
    """A why figure (:func:`why_figure`): the figure, what each part drew, its columns and its
    size in CSS pixels."""

    figure: Figure
    why: WhyPlot
    comparison: DiffPlot | None
    columns: int
    css_size: tuple[int, int]

    def __repr__(self) -> str:
        extra = "" if self.comparison is None else " and a comparison"
        return (f"WhyFigure({self.css_size[0]}x{self.css_size[1]} CSS px, {self.columns} "
                f"columns: {self.why!r}{extra})")


def why_figure(why: WhyLike, comparison: ComparisonLike | None = None, *, width: int = 720,
               pixel_ratio: float = 1.0, text_px: float = TEXT_PX) -> WhyFigure:
    """A figure of :func:`plot_why` (and :func:`plot_comparison`) sized for a column of
    ``width`` CSS pixels: as many pictures per row as leave each :data:`PANEL_PX` (one to
    three), rows as tall as a picture needs, the smallest text ``text_px`` CSS pixels tall,
    ``pixel_ratio`` pixels per CSS pixel (sharp on HiDPI screens).

    Examples
    --------
    >>> import torch
    >>> from prune_explorer import Session
    >>> s = Session(torch.nn.Sequential(torch.nn.Linear(6, 4)))
    >>> _ = s.calibrate([torch.randn(8, 6)])
    >>> why_figure(s.why("0.weight"), width=1100).columns, why_figure(s.why("0.weight"),
    ...                                                                width=500).css_size
    (3, (500, 1708))
    """
    if not (isinstance(width, int) and width >= 160):
        raise ValueError(f"why_figure: width must be an int >= 160 (CSS pixels); got {width!r}")
    if not (isinstance(pixel_ratio, (int, float)) and 1.0 <= pixel_ratio <= 4.0):
        raise ValueError(f"why_figure: pixel_ratio must be a number from 1 to 4; got "
                         f"{pixel_ratio!r}")
    parts = 4 + (comparison is not None)
    columns = max(1, min(3, width // PANEL_PX))
    rows = -(-parts // columns)
    shape = tuple(why.weight.shape)
    matrix_rows = shape[0] if shape else 1
    matrix_cols = int(np.prod(shape[1:])) if len(shape) > 1 else 1
    if len(shape) == 1:  # a strip
        matrix_rows, matrix_cols = 1, shape[0]
    aspect = min(max(matrix_rows / max(matrix_cols, 1), 0.3), 1.0)
    cells_w = width / columns - 6 * text_px  # less the colour bar and the row labels
    panel_h = max(240, round(cells_w * aspect + 8 * 1.4 * text_px))  # titles, labels, legend
    height = rows * panel_h
    # the base font so that matplotlib's "small" text is text_px CSS pixels tall
    dpi = text_px / _SMALL / (rcParams["font.size"] / 72.0) * pixel_ratio
    figure = Figure(figsize=(width * pixel_ratio / dpi, height * pixel_ratio / dpi), dpi=dpi,
                    layout=LAYOUT)
    FigureCanvasAgg(figure)
    grid = figure.add_gridspec(rows, columns)
    axes = [figure.add_subplot(grid[i // columns, i % columns]) for i in range(parts)]
    drawn = plot_why(axes[:4], why)
    diff = None
    if comparison is not None:
        diff = plot_comparison(axes[4], comparison, module_type=why.module_type,
                               max_cells=drawn.score.pooled.shape)
    for ax in (axes[0], axes[1], axes[2], axes[4] if diff is not None else None):
        if ax is not None and ax.axison:
            ax.set_aspect("auto")  # the cells fill their panel (sized for them above)
    return WhyFigure(figure, drawn, diff, columns, (width, height))
