"""A reusable mask picture for live sliders: new mask in, PNG bytes out, no new figure.

:class:`MaskPreview` builds its figure, axes, image and colour bar once. Each
:meth:`MaskPreview.update` pools the new mask to one cell per pixel of the axes (exact kept
fraction per cell), swaps the image data in place and updates labels and title; :meth:`png`
renders with the Agg canvas. A 4096 x 4096 mask goes from tensor to PNG in a few tens of
milliseconds on two cores.

Examples
--------
>>> import torch
>>> preview = MaskPreview()
>>> pooled = preview.update(torch.rand(4096, 4096) > 0.5, name="fc.weight")
>>> pooled.source_shape, pooled.shape[0] <= 512
((4096, 4096), True)
>>> preview.png()[:4] == b"\\x89PNG"
True
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from matplotlib.artist import Artist
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.lines import Line2D

from prune_explorer.viz import style
from prune_explorer.viz.diffs import diff_legend_handles
from prune_explorer.viz.figures import _MIN_AUTO_CELLS as _MIN_CELLS
from prune_explorer.viz.figures import (
    BASE_DPI,
    auto_cells,
    room_scale,
    set_cell_ticks,
)
from prune_explorer.viz.patterns import draw_pattern_lines
from prune_explorer.viz.png import encode_png
from prune_explorer.viz.pooling import (
    DEFAULT_MAX_CELLS,
    MaxCells,
    PooledView,
    _parse_max_cells,
    block_edges,
    pool_counts,
    pool_view,
)
from prune_explorer.viz.views import LAYOUTS, Layout, TensorView, shape_only, tensor_view

# Axes and colour-bar rectangles in figure fractions (fixed: no layout engine per frame); the
# legend of the three classes sits under the axes.
_AXES_RECT = (0.15, 0.22, 0.63, 0.59)
_CBAR_RECT = (0.81, 0.22, 0.03, 0.59)
_TITLE_LEFT = 0.03  # the title's left edge, in figure fractions
# Sized pictures (MaskPreview.resize): the room around the axes in points, which grow with the
# fonts -- left (tick labels, y label), bottom (tick labels, x label, legend), right (colour bar
# and its label), top (three title lines) -- and the colour bar's gap and width.
_MARGIN_PT = (50.0, 60.0, 62.0, 46.0)
# A compact picture (a small place, or Presentation: fewer lines, larger text) has two title
# lines -- the tensor and what the picture is, the sparsity -- not the method's (the controls
# and the count line say it), and margins that hold just its text.
_COMPACT_MARGIN_PT = (40.0, 53.0, 62.0, 32.0)
#: Places narrower or lower than this (CSS px) get the compact picture.
COMPACT_BELOW = (420, 300)
_CBAR_GAP_PT, _CBAR_WIDTH_PT = 8.0, 9.0
# The axes are at least this tall (points, as the fonts): the rotated y label (up to about 22
# characters, "out features (dim 0)") stays beside them instead of reaching into the title. A
# flatter tensor is stretched to it (where the room allows).
_MIN_AXES_PT = 90.0
#: Cells per side of a sized picture (:meth:`MaskPreview.resize`): a slider step costs what is
#: on screen, so a large picture of a large tensor draws cells of a few pixels rather than
#: more cells (a tensor with fewer rows or columns keeps one cell per entry).
SIZED_MAX_CELLS = 256

# Square cells wherever the picture is at most this many times taller than wide (or wider than
# tall); more elongated tensors are stretched to that ratio instead of becoming slivers.
MAX_STRETCH = 8.0

#: A sized matrix picture fills its place: where square cells would leave the place's width (or
#: height) white, the cells widen (or grow taller) up to this many times their other side.
MAX_CELL_ASPECT = 4.0

# Right margin (points) of a sized picture without a colour bar (every entry has its own cell:
# the legend says it all), instead of the colour bar's _MARGIN_PT[2].
_BARE_RIGHT_PT = 12.0

CURRENT = "current state"
NEXT_STEP = "preview of the next step"



_Rect = tuple[float, float, float, float]  # left, bottom, width, height (figure fractions)


def _nothing(shape: tuple[int, ...]) -> np.ma.MaskedArray:
    # An all-masked array: an overlay that draws nothing (numpy's masked_all is unannotated).
    return np.ma.MaskedArray(np.zeros(shape), mask=True)

def newly_pruned_fraction(before: PooledView | None, after: PooledView) -> np.ma.MaskedArray:
    """Fraction of each cell that a step prunes (kept before, pruned after), masked where none.

    The vermillion overlay of the preview and of the zoom (:mod:`prune_explorer.viz.zoom`);
    all masked when there is no ``before`` or it was pooled into other cells.

    Examples
    --------
    >>> import numpy as np
    >>> from prune_explorer.viz.pooling import pool_fraction
    >>> before = pool_fraction(np.array([[1, 1, 0, 1]], dtype=bool), max_cells=(1, 2))
    >>> after = pool_fraction(np.array([[1, 0, 0, 0]], dtype=bool), max_cells=(1, 2))
    >>> newly_pruned_fraction(before, after).tolist()
    [[0.5, 0.5]]
    """
    if before is None or before.kept.shape != after.kept.shape:
        return _nothing(after.values.shape)
    newly = np.clip(before.kept - after.kept, 0, None)
    with np.errstate(invalid="ignore", divide="ignore"):
        values = newly / np.maximum(after.area, 1)
    return np.ma.masked_where(newly == 0, values)


class MaskPreview:
    """One figure that redraws a mask quickly, for a slider callback.

    Parameters
    ----------
    figsize : (float, float)
        Figure size in inches.
    dpi : float
        Dots per inch (80 gives a 384 x 320 px picture at the default size).
    max_cells : int or (int, int), optional
        Cells per side; by default one per pixel of the axes.
    compress_level : int
        zlib level for :meth:`png` (1 = fastest).

    Attributes
    ----------
    figure : Figure
    ax : Axes
    image : AxesImage
        Updated in place; ``image.get_array()`` is the pooled kept fraction.
    new_image : AxesImage
        Overlay of the entries the step prunes (vermillion; masked where none), over the pale
        yellow of those pruned before.
    colorbar : Colorbar
    pooled : PooledView or None
        What the image shows now.
    pooled_before : PooledView or None
        The state before the step on the same cells (None: no step shown).
    label : str
        What the picture is: :data:`CURRENT` or :data:`NEXT_STEP`.
    view : TensorView or None

    Examples
    --------
    >>> import torch
    >>> p = MaskPreview(figsize=(4, 3), dpi=80)
    >>> _ = p.update(torch.ones(300, 200), name="fc.weight", method="l1_unstructured",
    ...              settings={"amount": 0.0})
    >>> p.max_cells, p.pooled.shape
    ((141, 94), (141, 94))
    >>> repr(p)[:42]
    'MaskPreview(320x240 px, cells (141, 94), s'
    """

    def __init__(
        self,
        *,
        figsize: tuple[float, float] = (4.8, 4.0),
        dpi: float = 80,
        max_cells: MaxCells | None = None,
        compress_level: int = 1,
    ) -> None:
        self.figure = Figure(figsize=figsize, dpi=dpi)
        self.canvas = FigureCanvasAgg(self.figure)
        self.ax = self.figure.add_axes(_AXES_RECT)
        cax = self.figure.add_axes(_CBAR_RECT)
        self._auto_cells = max_cells is None
        self._cap = DEFAULT_MAX_CELLS
        if max_cells is None:  # one cell per pixel of the axes, as the static plots do
            max_cells = auto_cells(self.ax)
        self.max_cells: tuple[int, int] = _parse_max_cells(max_cells, "MaskPreview")
        self.compress_level = int(compress_level)
        self.image = self.ax.imshow(
            np.full((1, 1), np.nan),
            cmap=style.mask_cmap(),
            vmin=0.0,
            vmax=1.0,
            interpolation="nearest",
            aspect="auto",
        )
        self.new_image = self.ax.imshow(
            _nothing((1, 1)),
            cmap=style.overlay_cmap(style.NEW_PRUNED_COLOR, "newly_pruned"),
            vmin=0.0,
            vmax=1.0,
            interpolation="nearest",
            aspect="auto",
        )
        self.legend = self._legend(step=True)
        self._legend_key: tuple[Any, ...] | None = None  # what the legend was fitted for
        self._legend_extra_pt = 0.0  # its rows beyond the first, in points
        self._legend_ncol = 3  # its columns
        self.colorbar = self.figure.colorbar(self.image, cax=cax)
        self.colorbar.set_ticks([0.0, 0.5, 1.0])
        self.colorbar.ax.tick_params(labelsize="small")
        self.colorbar.set_label("kept fraction per cell", fontsize="small")
        self.pooled: PooledView | None = None
        self.pooled_before: PooledView | None = None
        self._pattern_lines: list[Line2D] = []
        self._tile_lines: LineCollection | None = None
        self.label = CURRENT
        self.view: TensorView | None = None
        self._before: tuple[Any, tuple[Any, ...], PooledView] | None = None
        # Everything except the image, the title and the spines, rendered once per layout.
        self._background: Any = None
        self._background_key: tuple[Any, ...] | None = None
        self._layout_key: tuple[Any, ...] = ()
        # (width, height, pixel ratio) in CSS pixels when sized by resize(), else None
        self._frame: tuple[int, int, float] | None = None
        self.compact = False  # see resize()
        self.titled = True
        self._title = ""  # the title's text, drawn or not
        # what the title is made of: (name, method, settings, pooled, label given)
        self._title_of: tuple[str, Any, Any, PooledView, bool] | None = None
        self._row_digits = 1  # of the largest row tick label (compact margins)

    def resize(self, width: int, height: int, *, pixel_ratio: float = 1.0,
               text_scale: float = 1.0, compact: bool | None = None,
               titled: bool = True) -> None:
        """Draw the picture for a place of ``width`` CSS pixels, at most ``height`` tall.

        Fonts, ticks and margins grow with the place (up to :data:`MAX_FONT_SCALE` times the
        base size); the axes take the rest, with square cells: a picture wider than tall gets
        less than ``height`` (see :attr:`css_size`). ``pixel_ratio`` pixels are rendered per
        CSS pixel (sharp on HiDPI screens and zoomed browsers). ``text_scale`` (1 to 2)
        enlarges the text further, for a projector. ``compact`` (default: a place under
        :data:`COMPACT_BELOW`, or ``text_scale`` above 1) leaves the method's line out of the
        title and narrows the margins to what the text needs, so the cells get the room.
        ``titled=False`` draws no title (the page says in larger text what the picture is;
        :meth:`describe` still gives it). The next :meth:`update` lays it out.

        Examples
        --------
        >>> import torch
        >>> p = MaskPreview()
        >>> p.resize(600, 700)
        >>> _ = p.update(torch.ones(64, 128, dtype=torch.bool), name="fc.weight")
        >>> p.css_size  # a wide tensor: the full width, only the height it needs
        (600, 387)
        """
        if not (isinstance(width, int) and isinstance(height, int) and width >= 160
                and height >= 160):
            raise ValueError("MaskPreview.resize: width and height must be ints >= 160 (CSS "
                             f"pixels); got {width!r} x {height!r}")
        if not (isinstance(pixel_ratio, (int, float)) and 1.0 <= pixel_ratio <= 4.0):
            raise ValueError("MaskPreview.resize: pixel_ratio must be a number from 1 to 4; "
                             f"got {pixel_ratio!r}")
        if not (isinstance(text_scale, (int, float)) and 1.0 <= text_scale <= 2.0):
            raise ValueError("MaskPreview.resize: text_scale must be a number from 1 to 2; "
                             f"got {text_scale!r}")
        self._frame = (width, height, float(pixel_ratio))
        if compact is None:
            compact = (text_scale > 1.0 or width < COMPACT_BELOW[0]
                       or height < COMPACT_BELOW[1])
        self.compact = bool(compact)
        self.titled = bool(titled)
        self._cap = SIZED_MAX_CELLS
        dpi = BASE_DPI * room_scale(width, height, text_scale) * pixel_ratio
        self.figure.set_dpi(dpi)
        self.figure.set_size_inches(width * pixel_ratio / dpi, height * pixel_ratio / dpi)
        self._layout_key = ()  # ticks and the axes' box for the new size
        self._legend_key = None
        self._background = None  # fonts and legend for the new size, even at the same pixels

    @property
    def css_size(self) -> tuple[int, int]:
        """The picture's size in CSS pixels (its pixels over the pixel ratio of
        :meth:`resize`)."""
        ratio = 1.0 if self._frame is None else self._frame[2]
        width, height = self.figure.get_size_inches() * self.figure.dpi / ratio
        return round(float(width)), round(float(height))

    def update(
        self,
        mask: Any,
        *,
        layout: Layout = "auto",
        dim: int = 0,
        name: str | None = None,
        method: str | None = None,
        settings: Mapping[str, Any] | str | None = None,
        title: str | None = None,
        module_type: str | None = None,
        kept_cells: Any = None,
        before: Any = None,
        before_cells: Any = None,
        label: str | None = None,
    ) -> PooledView:
        """Show a new mask; returns the pooled data now behind the image.

        Parameters are as in :func:`prune_explorer.viz.plot_mask` (mask mode). ``kept_cells``,
        the mask's exact kept count per cell of :meth:`cell_edges` (e.g. from
        ``Session.preview_cells``), skips pooling the mask; it is used for the matrix layout
        of a tensor of rank >= 2 only, and then only ``mask.shape`` is read (``mask`` may be
        :func:`~prune_explorer.viz.views.shape_only`).

        ``before``: the kept mask before a step, when ``mask`` is a preview of it. The picture
        then shows three classes -- kept, pruned before (lemon yellow), pruned by this step
        (vermillion) -- is labelled :data:`NEXT_STEP` and states the sparsity now and after.
        Without it, ``mask`` is the current state (:data:`CURRENT`). The same ``before``
        object is pooled once and reused (pass the same tensor while only the step changes).
        ``before_cells``: in place of ``before``, its kept counts per cell, as ``kept_cells``
        (matrix layout only).

        ``label``: what the picture is, in place of :data:`CURRENT` / :data:`NEXT_STEP` -- a
        step already taken (the History tab: "state after step 2: ..."); with ``before``, the
        sparsity line then reads "before -> after" and the vermillion cells are those the step
        pruned. ``mask`` must then keep no entry ``before`` pruned (the cells count the
        difference).
        """
        if layout not in LAYOUTS:
            raise ValueError(f"MaskPreview.update: layout must be one of {LAYOUTS}; got {layout!r}")
        counted = kept_cells is not None and layout == "auto" and len(mask.shape) >= 2
        # counts given: only the mask's shape is read (its values are not even converted)
        # Kernel tiles edge to edge, their borders drawn as lines (_tile_borders)
        view = tensor_view(shape_only(mask.shape) if counted else mask, layout=layout, dim=dim,
                           module_type=module_type, gaps=False)
        if counted and view.kind not in ("matrix", "flat"):
            counted = False  # pooled from the mask itself after all
            view = tensor_view(mask, layout=layout, dim=dim, module_type=module_type,
                               gaps=False)
        shows_step = before is not None or before_cells is not None
        self._fit(*view.shape, kind=view.kind, step=shows_step)
        if counted:
            pooled = pool_counts(kept_cells, *self.cell_edges(tuple(mask.shape)))
        else:
            pooled = pool_view(view, self.max_cells)
        rows, cols = pooled.source_shape
        self.image.set_data(pooled.values)
        layout_key = (view.kind, view.source_shape, view.tile, view.row_label, view.col_label,
                      tuple(self.ax.get_position().bounds), shows_step)
        if layout_key != self._layout_key:
            # Extent, ticks and labels only change with the tensor's shape, view or size.
            self.image.set_extent((-0.5, cols - 0.5, rows - 0.5, -0.5))
            self.ax.set_xlim(-0.5, cols - 0.5)
            self.ax.set_ylim(rows - 0.5, -0.5)
            set_cell_ticks(self.ax, view, self._max_ticks(view))
            self._tile_borders(view)
            self.ax.set_xlabel(view.col_label, fontsize="small")
            self.ax.set_ylabel(view.row_label, fontsize="small")
            # Single entries per cell are kept or pruned: the legend says it all. The colour bar
            # is for fractions (pooled cells, channel summaries).
            self.colorbar.ax.set_visible(not pooled.full_resolution or view.kind == "channels")
            self.colorbar.set_label("kept fraction per " + ("slice" if view.kind == "channels"
                                                            else "cell"), fontsize="small")
            self._layout_key = layout_key
        self.pooled_before = None
        if before_cells is not None and view.kind in ("matrix", "flat"):
            self.pooled_before = pool_counts(before_cells, *self.cell_edges(tuple(mask.shape)))
        elif before is not None:
            key = (layout, dim, self.max_cells, tuple(pooled.row_edges), tuple(pooled.col_edges))
            if self._before is None or self._before[0] is not before or self._before[1] != key:
                before_view = tensor_view(before, layout=layout, dim=dim, gaps=False)
                self._before = (before, key, pool_view(before_view, self.max_cells))
            self.pooled_before = self._before[2]
        for line in self._pattern_lines:
            line.remove()
        self._pattern_lines = []
        if view.kind in ("matrix", "flat") and isinstance(settings, Mapping):
            # N:M groups and blocks, visible only where every entry has its own cell
            self._pattern_lines = draw_pattern_lines(
                self.ax, view.source_shape, method, settings,
                full_resolution=pooled.full_resolution)
        self.new_image.set_data(self._newly(pooled))
        self.new_image.set_extent(self.image.get_extent())
        self.label = label if label is not None else NEXT_STEP if shows_step else CURRENT
        self._title_of = (title if title is not None else (name or ""), method, settings,
                          pooled, label is not None)
        self._put_title()
        self.pooled = pooled
        self.view = view
        return pooled

    def relabel(self, label: str) -> None:
        """Say in the title that the picture is ``label`` now (e.g. the step just applied,
        when it was the preview of it), its sparsity line as "before -> after"; the cells are
        unchanged. The next :meth:`png` shows it.

        Examples
        --------
        >>> import torch
        >>> p = MaskPreview()
        >>> _ = p.update(torch.tensor([[1, 0]]).bool(), before=torch.ones(1, 2).bool(),
        ...              name="w")
        >>> p.relabel("applied as step 1")
        >>> p.describe().splitlines()[0]
        'w · applied as step 1'
        """
        if self._title_of is None:
            return
        first, method, settings, pooled, _ = self._title_of
        self.label = label
        self._title_of = (first, method, settings, pooled, True)
        self._put_title()

    def _put_title(self) -> None:
        # The title: the tensor and what the picture is, the method (not in a compact
        # picture), the sparsity (now or before -> after); drawn unless titled is off.
        assert self._title_of is not None
        first, method, settings, pooled, given = self._title_of
        compact = self.compact and self._frame is not None
        text = style.format_title(title=f"{first} · {self.label}" if first else self.label,
                                  method=None if compact else method,
                                  settings=None if compact else settings)
        sparsity = f"sparsity {100.0 * pooled.sparsity:.1f}%"
        if self.pooled_before is not None:
            then = "before" if given else "now"
            sparsity = (f"sparsity {100.0 * self.pooled_before.sparsity:.1f}% {then} → "
                        f"{100.0 * pooled.sparsity:.1f}% after")
        if not pooled.full_resolution:
            sparsity += f" · cell = {pooled.block_text()}"
        text += "\n" + sparsity  # a line of its own: titles stay within a narrow figure
        # Left-aligned at the figure's left margin, wherever the (square-celled) axes sits.
        left, _, width, _ = self.ax.get_position().bounds
        # Clear of the top row's tick label, which reaches half its height above the axes
        ticks = self.ax.yaxis.get_ticklabels()
        tick_pt = float(ticks[0].get_fontsize()) if ticks else \
            FontProperties().get_size_in_points()
        self._title = text
        self.ax.set_title(text if self.titled else "", fontsize="small",
                          horizontalalignment="left", x=(_TITLE_LEFT - left) / width,
                          pad=6.0 + 0.6 * tick_pt)

    def _newly(self, after: PooledView) -> np.ma.MaskedArray:
        return newly_pruned_fraction(self.pooled_before, after)

    def cell_edges(self, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        """Row and column block edges of the cells a tensor of ``shape`` is pooled into (matrix
        layout: ``shape[0]`` rows, the other dims flattened into columns; rank >= 2)."""
        rows = shape[0]
        cols = int(np.prod(shape[1:]))
        self._row_digits = len(str(max(rows - 1, 0)))
        self._fit_legend(self._legend_key is not None and self._legend_key[0])
        if self._frame is not None:
            self._fit_height(rows, cols)  # the height update() gives this shape
        cells = self._box(rows, cols, kind="matrix")[1]
        return block_edges(rows, cells[0]), block_edges(cols, cells[1])

    def _room(self, *, bare: bool = False) -> _Rect:
        # Where the axes may go (figure fractions): _AXES_RECT, or the margins in points of a
        # sized picture (``bare``: no colour bar on the right; the bottom holds the legend's
        # rows).
        if self._frame is None:
            return _AXES_RECT
        fig_w, fig_h = self.figure.get_size_inches() * 72.0  # points
        left, bottom, right, top = self._margins()
        if bare:
            right = _BARE_RIGHT_PT
        bottom += self._legend_extra_pt
        return (left / fig_w, bottom / fig_h, 1.0 - (left + right) / fig_w,
                1.0 - (bottom + top) / fig_h)

    def _margins(self) -> tuple[float, float, float, float]:
        # Left, bottom, right, top margins (points) of a sized picture; a compact one's left
        # margin holds the rows' tick labels of as many digits as the row count has.
        if not self.compact:
            return _MARGIN_PT
        left, bottom, right, top = _COMPACT_MARGIN_PT
        if not self.titled:
            top = 10.0  # the top row's tick label reaches half its height above the axes
        ticks = self.ax.yaxis.get_ticklabels()
        tick_pt = float(ticks[0].get_fontsize()) if ticks else \
            FontProperties().get_size_in_points()
        return max(left, 24.0 + 0.62 * tick_pt * self._row_digits), bottom, right, top

    def _box(self, rows: int, cols: int, kind: str = "matrix",
             bare: bool | None = None) -> tuple[_Rect, tuple[int, int]]:
        # Axes rectangle (figure fractions) for a rows x cols picture -- top-left in the room
        # of _room() -- and the display cells (one per pixel) that fit it. Square cells, but a
        # sized matrix fills its room (cells up to MAX_CELL_ASPECT times wider than tall, or
        # taller than wide). Without a colour bar (every entry its own cell, not a channels
        # view) the right margin is the bare one.
        if bare is None:
            if self._frame is None or kind == "channels":
                bare = False
            else:
                _, cells = self._box(rows, cols, kind, bare=True)
                bare = cells[0] >= rows and cells[1] >= cols
        left, bottom, width, height = self._room(bare=bare)
        fig_w, fig_h = self.figure.get_size_inches() * self.figure.dpi
        room_w, room_h = width * fig_w, height * fig_h
        ratio = min(max(rows / max(cols, 1), 1 / MAX_STRETCH), MAX_STRETCH)
        if ratio > room_h / room_w:
            box_w, box_h = room_h / ratio, room_h
        else:
            box_w, box_h = room_w, room_w * ratio
        if self._frame is not None and kind in ("matrix", "flat"):
            box_w = min(room_w, box_w * MAX_CELL_ASPECT)
            box_h = min(room_h, box_h * MAX_CELL_ASPECT)
        box_h = max(box_h, min(room_h, _MIN_AXES_PT * self.figure.dpi / 72.0))
        rect = (left, bottom + height - box_h / fig_h, box_w / fig_w, box_h / fig_h)
        if not self._auto_cells:
            return rect, self.max_cells
        cap = _parse_max_cells(self._cap, "MaskPreview")
        return rect, (max(_MIN_CELLS, min(cap[0], int(box_h))),
                      max(_MIN_CELLS, min(cap[1], int(box_w))))

    def _fit(self, rows: int, cols: int, *, kind: str = "matrix", step: bool = False) -> None:
        self._row_digits = len(str(max(rows - 1, 0)))
        self._fit_legend(step)
        if self._frame is not None:
            self._fit_height(rows, cols)
        rect, self.max_cells = self._box(rows, cols, kind)
        if tuple(self.ax.get_position().bounds) != rect:
            self.ax.set_position(rect)
            if self._frame is not None:  # the colour bar beside the axes, as tall
                fig_w = float(self.figure.get_size_inches()[0]) * 72.0
                self.colorbar.ax.set_position((rect[0] + rect[2] + _CBAR_GAP_PT / fig_w,
                                               rect[1], _CBAR_WIDTH_PT / fig_w, rect[3]))

    def _fit_legend(self, step: bool) -> None:
        # The legend whole within the figure's width: as many columns as the three entries of
        # a step fit, the rest on more rows (a sized picture's bottom margin grows by a row
        # each). It depends on the size only, so cell_edges() and update() agree.
        fig_w = float(self.figure.get_size_inches()[0] * self.figure.dpi)
        size_key = (round(fig_w), float(self.figure.dpi))
        if self._legend_key is None or self._legend_key[1:] != size_key:
            renderer = self.canvas.get_renderer()
            ncol = 3
            while ncol > 1:
                trial = self._legend(step=True, ncol=ncol)
                wide = trial.get_window_extent(renderer).width > fig_w - 4
                trial.remove()
                if not wide:
                    break
                ncol -= 1
            self._legend_ncol = ncol
            size = float(self.legend.get_texts()[0].get_fontsize())
            self._legend_extra_pt = 0.0 if self._frame is None else \
                (-(-3 // ncol) - 1) * 1.4 * size
            self._legend_key = None
        key = (step, *size_key)
        if key != self._legend_key:
            self.legend.remove()
            self.legend = self._legend(step=step, ncol=min(self._legend_ncol, 3 if step else 2))
            self._legend_key = key
            self._layout_key = ()
            self._background = None  # the new legend is drawn (and laid out) by the next png()

    def _fit_height(self, rows: int, cols: int) -> None:
        # A sized picture is as tall as its square cells need at the full width, at most the
        # height it was given (then the cells shrink to fit, and the width is left over).
        assert self._frame is not None
        _, max_height, ratio = self._frame
        dpi = self.figure.dpi
        fig_w = float(self.figure.get_size_inches()[0]) * 72.0  # points
        left, bottom, right, top = self._margins()
        bottom += self._legend_extra_pt
        aspect = min(max(rows / max(cols, 1), 1 / MAX_STRETCH), MAX_STRETCH)
        need_pt = max((fig_w - left - right) * aspect, _MIN_AXES_PT) + bottom + top
        height_in = min(max_height * ratio / dpi, need_pt / 72.0)
        height_in = max(height_in, 160 * ratio / dpi)
        size = self.figure.get_size_inches()
        if abs(float(size[1]) - height_in) * dpi >= 0.5:
            self.figure.set_size_inches(float(size[0]), height_in)

    def _legend(self, *, step: bool, ncol: int | None = None) -> Any:
        # The key of the colours (style's one meaning per colour): a step shows three classes,
        # the current state two (nothing is "pruned by this step" there).
        handles = diff_legend_handles()
        if step:
            handles[-1].set_label("pruned by this step")
        else:
            handles = handles[:2]
            handles[1].set_label("pruned")
        return self.figure.legend(handles=handles, loc="lower center",
                                  ncol=ncol or len(handles),
                                  fontsize="small", frameon=False, bbox_to_anchor=(0.5, 0.0),
                                  handlelength=1.2, columnspacing=1.0)

    def _tile_borders(self, view: TensorView) -> None:
        # White lines between the kernel tiles of a kernels view, where a tile spans at
        # least 4 pixels (smaller tiles are pooled together: no border to draw).
        if self._tile_lines is not None:
            self._tile_lines.remove()
            self._tile_lines = None
        if view.kind != "kernels" or view.tile is None:
            return
        (kh, kw), (rows, cols) = view.tile, view.shape
        _, _, width, height = self.ax.get_position().bounds
        fig_w, fig_h = self.figure.get_size_inches() * self.figure.dpi
        if min(kh * height * fig_h / rows, kw * width * fig_w / cols) < 4:
            return
        segments = [[(-0.5, y - 0.5), (cols - 0.5, y - 0.5)] for y in range(kh, rows, kh)]
        segments += [[(x - 0.5, -0.5), (x - 0.5, rows - 0.5)] for x in range(kw, cols, kw)]
        ratio = 1.0 if self._frame is None else self._frame[2]
        self._tile_lines = LineCollection(segments, colors=style.GAP_COLOR,
                                          linewidths=72.0 * ratio / self.figure.dpi)
        self.ax.add_collection(self._tile_lines, autolim=False)

    def _max_ticks(self, view: TensorView) -> tuple[int, int]:
        # Ticks that fit the axes: a row label needs about two font heights, a column label
        # its digits and a gap.
        if self._frame is None:
            return (8, 8)
        dpi = self.figure.dpi
        font_px = float(self.ax.xaxis.get_ticklabels()[0].get_fontsize()
                        if self.ax.xaxis.get_ticklabels() else 8.0) * dpi / 72.0
        _, _, width, height = self.ax.get_position().bounds
        fig_w, fig_h = self.figure.get_size_inches() * dpi
        digits = len(str(max(view.source_shape[1] if view.kind == "kernels" else view.shape[1],
                             1)))
        cols = int(width * fig_w / ((digits * 0.65 + 1.6) * font_px))
        rows = int(height * fig_h / (2.2 * font_px))
        return (max(2, min(12, rows)), max(2, min(12, cols)))

    def _dynamic_artists(self) -> list[Artist]:
        tiles = [] if self._tile_lines is None else [self._tile_lines]
        return [self.image, self.new_image, *self._pattern_lines, *tiles,
                *self.ax.spines.values(), self.ax.title]

    def png(self) -> bytes:
        """Render the current picture to PNG bytes.

        The static part of the figure (axes, ticks, labels, colour bar) is rendered once per
        tensor shape and reused; each call redraws only the image, the spines and the title on
        top of it (blitting) and encodes the RGB pixels with :func:`encode_png`. The result is
        the picture ``render_png(self.figure)`` gives, up to the anti-aliasing of tick marks
        that touch the image edge.
        """
        size = tuple(self.figure.get_size_inches() * self.figure.dpi)
        key = (size, self._layout_key)
        if self._background is None or key != self._background_key:
            dynamic = self._dynamic_artists()
            for artist in dynamic:
                artist.set_animated(True)  # skipped by canvas.draw()
            try:
                self.canvas.draw()
            finally:
                for artist in dynamic:
                    artist.set_animated(False)
            self._background = self.canvas.copy_from_bbox(self.figure.bbox)
            self._background_key = key
        self.canvas.restore_region(self._background)
        renderer = self.canvas.get_renderer()
        for artist in self._dynamic_artists():
            artist.draw(renderer)
        rgba = np.asarray(self.canvas.buffer_rgba())
        return encode_png(rgba[..., :3], compress_level=self.compress_level)

    def describe(self) -> str:
        """The picture in words, as it is drawn: its title, then each axis with its label and
        tick labels (what the explorer puts in the picture's tooltip, for screen readers and
        for checks that cannot read pixels).

        Examples
        --------
        >>> import torch
        >>> preview = MaskPreview()
        >>> _ = preview.update(torch.ones(4, 6, dtype=torch.bool), name="fc.weight")
        >>> print(preview.describe().splitlines()[-1])
        columns: in (dim 1); ticks 0, 1, 2, 3, 4, 5
        """
        lines = [self._title]
        if self.view is not None and min(self.view.shape) > 0:  # an entry's size, CSS pixels
            ratio = 1.0 if self._frame is None else self._frame[2]
            box = self.ax.get_window_extent()
            rows, cols = self.view.shape
            lines.append(f"cell size: {box.width / cols / ratio:.1f} x "
                         f"{box.height / rows / ratio:.1f} px")
            lines.append(f"matrix: {box.width / ratio:.0f} x {box.height / ratio:.0f} px")
        if self._frame is not None:  # what resize() was given: the same picture again
            lines.append(f"room: {self._frame[0]} x {self._frame[1]} px, pixel ratio "
                         f"{self._frame[2]:g}")
        for what, axis in (("rows", self.ax.yaxis), ("columns", self.ax.xaxis)):
            low, high = sorted(axis.get_view_interval())
            locs = [t for t in axis.get_majorticklocs() if low <= t <= high]
            labels = [t for t in axis.get_major_formatter().format_ticks(locs) if t]
            lines.append(f"{what}: {axis.get_label_text() or 'unlabelled'}; "
                         f"ticks {', '.join(labels) or 'none'}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        width, height = (self.figure.get_size_inches() * self.figure.dpi).round().astype(int)
        shown = "nothing yet"
        if self.pooled is not None and self.view is not None:
            shown = (
                f"{self.view.kind} {self.view.shape} pooled to {self.pooled.shape}, "
                f"sparsity {100.0 * self.pooled.sparsity:.1f}%"
            )
        return f"MaskPreview({width}x{height} px, cells {self.max_cells}, showing {shown})"
