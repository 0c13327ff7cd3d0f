"""Figures without pyplot, PNG rendering and the drawing helpers shared by all pictures.

Examples
--------
>>> fig, ax = make_figure(figsize=(3, 2), dpi=100)
>>> ax.plot([0, 1], [1, 0])[0].get_ydata().tolist()
[1, 0]
>>> render_png(fig)[:4] == b"\\x89PNG"
True
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.image import AxesImage
from matplotlib.legend import Legend
from matplotlib.ticker import FixedLocator, MaxNLocator, ScalarFormatter
from matplotlib.transforms import ScaledTranslation

from prune_explorer.viz.png import encode_png
from prune_explorer.viz.pooling import DEFAULT_MAX_CELLS, PooledView
from prune_explorer.viz.views import TensorView

_MIN_AUTO_CELLS = 16


def make_figure(
    nrows: int = 1,
    ncols: int = 1,
    *,
    figsize: tuple[float, float] | None = None,
    dpi: float = 100,
    layout: Literal["constrained", "compressed", "tight"] | None = "constrained",
    **subplot_kw: Any,
) -> tuple[Figure, Any]:
    """Create a :class:`~matplotlib.figure.Figure` with an Agg canvas and its axes, no pyplot.

    Parameters
    ----------
    nrows, ncols : int
        Grid of axes, as in :meth:`Figure.subplots`.
    figsize : (float, float), optional
        Size in inches; defaults to 5 x 4 per axes column/row, capped at 16 x 12.
    dpi : float
        Dots per inch.
    layout : str or None
        Layout engine (``"constrained"`` keeps colour bars and legends inside the figure).
    **subplot_kw
        Passed to :meth:`Figure.subplots` (e.g. ``sharey=True``).

    Returns
    -------
    (Figure, Axes or numpy.ndarray of Axes)

    Examples
    --------
    >>> fig, axes = make_figure(1, 3, figsize=(9, 3))
    >>> len(axes), type(fig.canvas).__name__
    (3, 'FigureCanvasAgg')
    """
    if figsize is None:
        figsize = (min(16.0, 5.0 * ncols), min(12.0, 4.0 * nrows))
    fig = Figure(figsize=figsize, dpi=dpi, layout=layout)
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, ncols, **subplot_kw)
    return fig, axes


def render_png(fig: Figure, *, dpi: float | None = None, compress_level: int = 6) -> bytes:
    """Render ``fig`` to RGBA PNG bytes with the Agg renderer.

    Parameters
    ----------
    fig : Figure
        Any matplotlib figure (it gets an Agg canvas if it has none).
    dpi : float, optional
        Resolution; defaults to the figure's own.
    compress_level : int
        zlib level 0-9; 1 is fastest, 6 a good size/speed trade-off.

    Examples
    --------
    >>> fig, ax = make_figure(figsize=(2, 2), dpi=50)
    >>> png = render_png(fig)
    >>> png[1:4], int.from_bytes(png[16:20], "big")  # PNG signature, width in pixels
    (b'PNG', 100)
    """
    if dpi is not None and dpi != fig.dpi:
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=dpi, pil_kwargs={"compress_level": compress_level})
        return buffer.getvalue()
    canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    canvas.draw()
    return encode_png(np.asarray(canvas.buffer_rgba()), compress_level=compress_level)


#: Dots per inch of a picture at font scale 1 (:func:`room_scale`).
BASE_DPI = 80.0
#: The place a picture's fonts have their base size in (CSS px): fonts grow with a larger one.
BASE_ROOM = (384.0, 320.0)
#: Fonts grow with the place, from :data:`BASE_ROOM` up to this factor.
MAX_FONT_SCALE = 1.6


def room_scale(width: float, height: float, text_scale: float = 1.0) -> float:
    """How much larger than at :data:`BASE_DPI` a picture drawn for a place of ``width`` x
    ``height`` CSS pixels sets its text: the place over :data:`BASE_ROOM` (the smaller of the
    two ratios), from 1 to :data:`MAX_FONT_SCALE`, times ``text_scale`` (Presentation).

    The one rule every sized picture of the explorer follows (the Explore and History
    matrices, the Global vs local chart, the zoom, the magnitudes view), so their text is
    the same size in the same place.

    Examples
    --------
    >>> room_scale(300, 200), room_scale(576, 480), room_scale(2000, 2000, text_scale=1.25)
    (1.0, 1.5, 2.0)
    """
    grow = min(width / BASE_ROOM[0], height / BASE_ROOM[1])
    return min(max(grow, 1.0), MAX_FONT_SCALE) * text_scale


def room_figure(width: int, height: int, *, pixel_ratio: float = 1.0,
                text_scale: float = 1.0) -> tuple[Figure, Any]:
    """A figure with one axes (constrained layout) drawn for a place of ``width`` x ``height``
    CSS pixels: ``pixel_ratio`` pixels per CSS pixel (sharp on HiDPI screens and zoomed
    browsers) and text as :func:`room_scale` sets it.

    Examples
    --------
    >>> fig, ax = room_figure(600, 400, pixel_ratio=1.5)
    >>> [round(float(v)) for v in fig.get_size_inches() * fig.dpi], round(fig.dpi)
    ([900, 600], 150)
    """
    dpi = BASE_DPI * room_scale(width, height, text_scale) * pixel_ratio
    return make_figure(figsize=(width * pixel_ratio / dpi, height * pixel_ratio / dpi), dpi=dpi)


# --------------------------------------------------------------------------------------------
# shared helpers


def auto_cells(ax: Axes, cap: int = DEFAULT_MAX_CELLS) -> tuple[int, int]:
    """Display cells (rows, cols) that fit the axes' size in pixels, between 16 and ``cap``.

    Pooling to at most one cell per pixel keeps the renderer from silently dropping rows.

    Examples
    --------
    >>> fig, ax = make_figure(figsize=(4, 4), dpi=100, layout=None)
    >>> auto_cells(ax)
    (308, 310)
    """
    bbox = ax.get_position()
    fig = root_figure(ax)
    width_px, height_px = fig.get_size_inches() * fig.dpi
    rows = int(bbox.height * height_px)
    cols = int(bbox.width * width_px)
    return (
        max(_MIN_AUTO_CELLS, min(cap, rows)),
        max(_MIN_AUTO_CELLS, min(cap, cols)),
    )


def check_choice(value: Any, choices: Sequence[str], where: str) -> None:
    """Raise ``ValueError("<where> must be one of (...); got <value>")`` for a bad choice."""
    if value not in choices:
        raise ValueError(f"{where} must be one of {tuple(choices)}; got {value!r}")


def _tile_ticks(count: int, tile: int, max_ticks: int = 8,
                pitch: int | None = None) -> tuple[list[float], list[str]]:
    # One tick at the centre of every k-th tile, labelled with the tile's channel index;
    # tiles start every ``pitch`` cells (default: a 1-cell gap after each).
    pitch = tile + 1 if pitch is None else pitch
    step = max(1, -(-count // max_ticks))
    index = list(range(0, count, step))
    positions = [i * pitch + (tile - 1) / 2 for i in index]
    return positions, [str(i) for i in index]


def set_cell_ticks(ax: Axes, view: TensorView, max_ticks: tuple[int, int] = (8, 8)) -> None:
    """Ticks in source-element coordinates; kernel grids get one tick per (k-th) tile.

    ``max_ticks`` bounds the (rows, columns) ticks, so labels fit the axes' size in pixels.

    Examples
    --------
    >>> import torch
    >>> from prune_explorer.viz.views import kernel_grid_view
    >>> fig, ax = make_figure()
    >>> set_cell_ticks(ax, kernel_grid_view(torch.ones(3, 2, 3, 3)))
    >>> ax.get_yticks().tolist(), [t.get_text() for t in ax.get_yticklabels()]
    ([1.0, 5.0, 9.0], ['0', '1', '2'])
    """
    if view.kind == "kernels" and view.tile is not None:
        n_out, n_in = view.source_shape[0], view.source_shape[1]
        kh, kw = view.tile
        packed = view.shape == (n_out * kh, n_in * kw)  # no gap cells (gaps=False)
        positions, labels = _tile_ticks(n_out, kh, max_ticks[0], kh if packed else None)
        ax.yaxis.set_major_locator(FixedLocator(positions))
        ax.set_yticks(positions, labels)
        positions, labels = _tile_ticks(n_in, kw, max_ticks[1], kw if packed else None)
        ax.xaxis.set_major_locator(FixedLocator(positions))
        ax.set_xticks(positions, labels)
        return
    # An axes reused after a kernel grid still holds its fixed tick labels: put back numeric
    # formatters as well as locators, or the old labels land on the new ticks.
    rows_bins, cols_bins = (max(1, min(6, n - 1)) for n in max_ticks)
    ax.xaxis.set_major_locator(MaxNLocator(nbins=cols_bins, integer=True))
    ax.xaxis.set_major_formatter(ScalarFormatter())
    if view.shape[0] == 1:
        ax.set_yticks([])
    else:
        ax.yaxis.set_major_locator(MaxNLocator(nbins=rows_bins, integer=True))
        ax.yaxis.set_major_formatter(ScalarFormatter())


def draw_cells(
    ax: Axes, values: np.ndarray, pooled: PooledView, view: TensorView, **kwargs: Any
) -> AxesImage:
    """``imshow`` the pooled cells over the source coordinates of ``view`` (nearest, no smoothing).

    The extent spans the source rows and columns, so ticks read as element indices whatever the
    pooling; nearly square pictures keep square cells, elongated ones fill the axes.
    """
    rows, cols = pooled.source_shape
    extent = (-0.5, cols - 0.5, rows - 0.5, -0.5)
    ratio = max(rows, cols) / max(1, min(rows, cols))
    image = ax.imshow(
        values,
        extent=extent,
        interpolation="nearest",
        aspect="equal" if ratio <= 4 else "auto",
        **kwargs,
    )
    set_cell_ticks(ax, view)
    return image


def legend_below(
    ax: Axes, handles: Sequence[Artist], *, points: float = 34, **kwargs: Any
) -> Legend:
    """A frameless legend centred under the axes, ``points`` below its bottom edge.

    The offset is in points (not axes fractions), so it clears the tick labels and the x label
    whatever the size of the axes.
    """
    offset = ScaledTranslation(0.0, -points / 72.0, root_figure(ax).dpi_scale_trans)
    options: dict[str, Any] = {"fontsize": "small", "frameon": False}
    options.update(kwargs)
    return ax.legend(
        handles=handles,
        loc="upper center",
        bbox_to_anchor=(0.5, 0.0),
        bbox_transform=ax.transAxes + offset,
        **options,
    )


def label_axes(ax: Axes, view: TensorView) -> None:
    """Name the axes after the view's rows and columns (e.g. "output unit", "input unit")."""
    ax.set_xlabel(view.col_label)
    ax.set_ylabel(view.row_label)


def root_figure(ax: Axes) -> Any:
    """The top-level figure of ``ax`` (through any subfigures)."""
    fig = ax.figure
    while fig.figure is not fig:
        fig = fig.figure
    return fig
