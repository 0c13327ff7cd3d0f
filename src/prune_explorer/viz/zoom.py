"""Zoom into a mask: the visible window of a large tensor, down to single entries.

A 4096 x 4096 mask pooled to a few hundred display cells is one flat colour at 50% unstructured
sparsity. :class:`ZoomPlot` draws only the *window* the axes show, from the tensor itself: a
window of at most :data:`MAX_ZOOM_CELLS` entries per side is drawn one cell per entry, a larger
one is pooled with :func:`~prune_explorer.viz.pooling.pool_fraction` (exact kept fraction per
cell). Whenever the axes limits change (a toolbar zoom or pan, :meth:`ZoomPlot.show_window`)
the window is read again, so the cost of a redraw is the size of the window, never of the
tensor. The masks are given whole or as a :data:`WindowReader` that reads any window of them
(the explorer's slider previews: a window's ranks from the session's order), so a new mask
costs a redraw of the window too.

The colours and their rule are the preview's (:class:`~prune_explorer.viz.MaskPreview`): kept
dark blue, pruned before lemon yellow, pruned by this step vermillion
(:func:`~prune_explorer.viz.preview.newly_pruned_fraction`). Tensors are shown in the matrix
layout: rows are ``shape[0]``, the other dims are flattened into columns.

:meth:`ZoomPlot.describe` is the axes' ``format_coord``: an interactive canvas (ipympl) shows,
under the pointer, the entry's index in the tensor, its value and whether it is kept.

Examples
--------
>>> import torch
>>> from matplotlib.figure import Figure
>>> after = torch.rand(4096, 4096) > 0.5
>>> plot = ZoomPlot(Figure(figsize=(4, 4)))
>>> plot.set_state(after, name="fc.weight")
>>> plot.window, plot.pooled.full_resolution
(Window(rows 0:64, cols 0:64), True)
>>> bool((plot.pooled.values == after[:64, :64].numpy()).all())
True
>>> plot.show_window(Window(0, 4096, 0, 4096))  # the whole tensor: pooled to 256 x 256 cells
>>> plot.pooled.shape
(256, 256)
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import numpy as np
import torch
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from prune_explorer.viz import style
from prune_explorer.viz.diffs import diff_legend_handles
from prune_explorer.viz.figures import BASE_DPI, room_scale
from prune_explorer.viz.pooling import PooledView, pool_fraction
from prune_explorer.viz.preview import CURRENT, NEXT_STEP, newly_pruned_fraction

__all__ = ["DEFAULT_WINDOW", "MAX_ZOOM_CELLS", "Window", "WindowReader", "ZoomPlot", "as_matrix",
           "matrix_reader"]

#: Display cells per side at most; a larger window is pooled.
MAX_ZOOM_CELLS = 256
#: Entries per side shown when a tensor too large to show whole is first opened.
DEFAULT_WINDOW = 64

#: Reads one window of a mask in the matrix layout: ``read(rows, cols)`` gives the entries
#: ``[rows, cols]`` (slices) as a tensor, nonzero = kept, or None when the mask it reads from
#: is gone (the plot then keeps the picture it has). What :meth:`ZoomPlot.set_state` takes in
#: place of a whole mask, so that a redraw reads only what is on screen.
WindowReader = Callable[[slice, slice], "torch.Tensor | None"]

KEPT, PRUNED_BEFORE, PRUNED_NOW = "kept", "pruned before", "pruned by this step"
#: What the hover says while the mask shown is being replaced (its reader gave None).
UPDATING = "being updated"

_AXES_RECT = (0.14, 0.17, 0.82, 0.68)  # left, bottom, width, height (figure fractions)


def as_matrix(t: torch.Tensor) -> torch.Tensor:
    """The matrix layout of ``t`` as a view: ``shape[0]`` rows, the other dims as columns
    (a 1-D or 0-D tensor is one row).

    Examples
    --------
    >>> as_matrix(torch.zeros(6, 2, 3, 3)).shape, as_matrix(torch.zeros(5)).shape
    (torch.Size([6, 18]), torch.Size([1, 5]))
    """
    if t.dim() >= 2:
        return t.reshape(t.shape[0], -1)
    return t.reshape(1, -1)


@dataclass(frozen=True)
class Window:
    """Rows ``r0:r1`` and columns ``c0:c1`` of a tensor's matrix layout (half-open)."""

    r0: int
    r1: int
    c0: int
    c1: int

    @property
    def shape(self) -> tuple[int, int]:
        """Entries (rows, cols) in the window."""
        return (self.r1 - self.r0, self.c1 - self.c0)

    def clip(self, shape: tuple[int, int]) -> Window:
        """The part of the window inside a ``shape`` matrix, at least one entry each way.

        Examples
        --------
        >>> Window(-3, 10, 5, 500).clip((8, 100))
        Window(rows 0:8, cols 5:100)
        """
        rows, cols = shape
        r0 = min(max(self.r0, 0), max(rows - 1, 0))
        c0 = min(max(self.c0, 0), max(cols - 1, 0))
        return Window(r0, min(max(self.r1, r0 + 1), rows), c0, min(max(self.c1, c0 + 1), cols))

    @classmethod
    def of_limits(cls, xlim: tuple[float, float], ylim: tuple[float, float],
                  shape: tuple[int, int]) -> Window:
        """The entries visible between axes limits (entry ``(r, c)`` is the unit square centred
        on ``(x, y) = (c, r)``), clipped to ``shape``.

        Examples
        --------
        >>> Window.of_limits((-0.5, 99.5), (7.5, -0.5), (8, 100))
        Window(rows 0:8, cols 0:100)
        >>> Window.of_limits((10.2, 20.7), (3.0, 1.4), (8, 100))
        Window(rows 1:4, cols 10:22)
        """
        (x0, x1), (y0, y1) = sorted(xlim), sorted(ylim)
        window = cls(math.floor(y0 - 0.5) + 1, math.ceil(y1 + 0.5),
                     math.floor(x0 - 0.5) + 1, math.ceil(x1 + 0.5))
        return window.clip(shape)

    def __repr__(self) -> str:
        return f"Window(rows {self.r0}:{self.r1}, cols {self.c0}:{self.c1})"


_F = TypeVar("_F", bound=Callable[..., Any])


def _locked(method: _F) -> _F:
    # Run the method under the plot's lock (see ZoomPlot.lock).
    @functools.wraps(method)
    def wrapper(self: ZoomPlot, *args: Any, **kwargs: Any) -> Any:
        with self.lock:
            return method(self, *args, **kwargs)

    return cast(_F, wrapper)


def matrix_reader(mask: torch.Tensor | Callable[[], torch.Tensor]) -> WindowReader:
    """A :data:`WindowReader` over a whole mask (any shape), or over a function that gives
    one (called on the first read, then kept).

    Examples
    --------
    >>> read = matrix_reader(torch.arange(12).reshape(2, 2, 3) < 4)  # as a 2 x 6 matrix
    >>> read(slice(0, 2), slice(3, 5)).tolist()
    [[True, False], [False, False]]
    """
    if isinstance(mask, torch.Tensor):
        matrix = as_matrix(mask)
        return lambda rows, cols: matrix[rows, cols]
    made: list[torch.Tensor] = []

    def read(rows: slice, cols: slice) -> torch.Tensor:
        if not made:
            made.append(as_matrix(mask()))
        return made[0][rows, cols]

    return read


def _bool_window(read: WindowReader, window: Window) -> np.ndarray | None:
    part = read(slice(window.r0, window.r1), slice(window.c0, window.c1))
    return None if part is None else part.detach().to("cpu", torch.bool).numpy()


class ZoomPlot:
    """The visible window of a mask at full resolution, re-read whenever the limits change.

    Parameters
    ----------
    figure : Figure
        The figure to draw in (an ipympl canvas's figure, for zoom, pan and hover).
    max_cells : int
        Display cells per side at most (:data:`MAX_ZOOM_CELLS`); a larger window is pooled.

    Attributes
    ----------
    ax : Axes
        Data coordinates are entry indices: x = column, y = row (row 0 on top).
    image, new_image : AxesImage
        Kept fraction per cell, and the vermillion overlay of what the step prunes.
    window : Window or None
        The entries drawn now.
    pooled, pooled_before : PooledView or None
        The window's cells after the step, and before it (None: current state shown).
    render_count : int
        Windows drawn so far.
    stale : bool
        The last render found a mask's reader giving None (its source gone): the picture on
        show was kept as it was, until the next :meth:`set_state`.
    on_render : callable or None
        Called with the new :class:`Window` after each render.
    lock : threading.RLock
        Held while the plot changes its artists or answers a hover; hold it to draw the figure
        from another thread.
    """

    def __init__(self, figure: Figure, *, max_cells: int = MAX_ZOOM_CELLS) -> None:
        self.figure = figure
        self.lock = threading.RLock()
        self.max_cells = int(max_cells)
        self.ax = figure.add_axes(_AXES_RECT)
        common: dict[str, Any] = {"vmin": 0.0, "vmax": 1.0, "interpolation": "nearest",
                                  "aspect": "equal"}
        self.image = self.ax.imshow(np.full((1, 1), np.nan), cmap=style.mask_cmap(), **common)
        self.new_image = self.ax.imshow(
            np.ma.MaskedArray(np.zeros((1, 1)), mask=True),
            cmap=style.overlay_cmap(style.NEW_PRUNED_COLOR, "newly_pruned"), **common)
        for image in (self.image, self.new_image):
            image.set_mouseover(False)  # the hover text is describe(), not a raw cell value
        for axis in (self.ax.xaxis, self.ax.yaxis):
            axis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))  # indices, never 17.5
        self.ax.set_autoscale_on(False)  # limits are the user's (zoom, pan, show_window)
        self.ax.format_coord = self.describe  # type: ignore[method-assign]
        handles = diff_legend_handles()
        handles[-1].set_label(PRUNED_NOW)
        figure.legend(handles=handles, loc="lower center", ncol=3, fontsize="small",
                      frameon=False, bbox_to_anchor=(0.5, 0.0), handlelength=1.2,
                      columnspacing=1.0)
        self.window: Window | None = None
        self.pooled: PooledView | None = None
        self.pooled_before: PooledView | None = None
        self.render_count = 0
        self.stale = False  # the last render found its mask gone (picture kept as it was)
        self.on_render: Callable[[Window], None] | None = None
        self.name = ""
        self._after: WindowReader | None = None
        self._before: WindowReader | None = None
        self._shape: tuple[int, ...] = ()
        self._values: Callable[[], torch.Tensor] | None = None
        self._values_cache: torch.Tensor | None = None
        self._setting_limits = False
        self.ax.callbacks.connect("xlim_changed", self._on_limits)
        self.ax.callbacks.connect("ylim_changed", self._on_limits)

    @_locked
    def resize(self, width: int, height: int, *,
               place: tuple[int, int] | None = None) -> None:
        """Draw ``width`` x ``height`` CSS pixels, the text as large as every sized picture
        of the explorer sets it in ``place`` (its column, default this size;
        :func:`~prune_explorer.viz.figures.room_scale`). The canvas's device pixel ratio
        (ipympl's, from the browser) is kept: the figure has that many pixels per CSS pixel.

        Examples
        --------
        >>> plot = ZoomPlot(Figure(figsize=(4, 4)))
        >>> plot.resize(600, 500)
        >>> [round(float(v)) for v in plot.figure.get_size_inches() * plot.figure.dpi]
        [600, 500]
        """
        if not (isinstance(width, int) and isinstance(height, int) and width >= 160
                and height >= 160):
            raise ValueError("ZoomPlot.resize: width and height must be ints >= 160 (CSS "
                             f"pixels); got {width!r} x {height!r}")
        dpi = BASE_DPI * room_scale(*(place or (width, height)))
        canvas = self.figure.canvas
        ratio = float(getattr(canvas, "device_pixel_ratio", 1.0) or 1.0)
        # a later device pixel ratio from the browser multiplies this dpi, not the first one
        # (matplotlib keeps it as the figure's _original_dpi)
        setattr(self.figure, "_original_dpi", dpi)  # noqa: B010
        self.figure.dpi = dpi * ratio
        self.figure.set_size_inches(width / dpi, height / dpi)

    # -- data -------------------------------------------------------------------------------------
    @property
    def matrix_shape(self) -> tuple[int, int]:
        """(rows, cols) of the shown tensor's matrix layout; (0, 0) before any state."""
        if self._after is None:
            return (0, 0)
        if len(self._shape) >= 2:
            return (self._shape[0], math.prod(self._shape[1:]))
        return (1, math.prod(self._shape))

    @_locked
    def set_state(self, after: torch.Tensor | WindowReader, *,
                  before: torch.Tensor | WindowReader | None = None,
                  values: Callable[[], torch.Tensor] | torch.Tensor | None = None,
                  name: str = "", shape: tuple[int, ...] | None = None) -> None:
        """Show a new mask, keeping the window when name and shape are unchanged.

        Parameters
        ----------
        after : torch.Tensor or WindowReader
            What is kept (nonzero) after the step, or now when ``before`` is None: the whole
            mask, or a :data:`WindowReader` that gives any window of it (then only the windows
            drawn are ever read).
        before : torch.Tensor or WindowReader, optional
            What is kept now, when ``after`` previews a step: entries kept in ``before`` and
            pruned in ``after`` are "pruned by this step".
        values : torch.Tensor or callable returning one, optional
            The tensor's values, for the hover text (a callable is called on the first hover).
        name : str
            Shown in the title.
        shape : tuple of int, optional
            The tensor's shape: required with a reader, checked against a tensor.
        """
        shapes = [tuple(t.shape) for t in (after, before) if isinstance(t, torch.Tensor)]
        if shape is None and not shapes:
            raise TypeError("ZoomPlot.set_state: give shape when after is a WindowReader")
        shape = tuple(shape) if shape is not None else shapes[0]
        if any(s != shape for s in shapes):
            raise ValueError(f"ZoomPlot.set_state: before and after must have the shape "
                             f"{shape}; got {shapes}")
        same = name == self.name and shape == self._shape
        self.name = name
        self._shape = shape
        self._after = after if callable(after) else matrix_reader(after)
        self._before = None if before is None else \
            before if callable(before) else matrix_reader(before)
        self._values = values if callable(values) or values is None else (lambda: values)
        self._values_cache = None
        if same and self.window is not None:
            self.render()
        else:
            self.show_window(self.default_window())

    def default_window(self) -> Window:
        """The whole tensor if it fits :attr:`max_cells` each way, else its top-left
        :data:`DEFAULT_WINDOW` x :data:`DEFAULT_WINDOW` entries."""
        rows, cols = self.matrix_shape
        if rows <= self.max_cells and cols <= self.max_cells:
            return Window(0, rows, 0, cols)
        return Window(0, min(rows, DEFAULT_WINDOW), 0, min(cols, DEFAULT_WINDOW))

    # -- window -----------------------------------------------------------------------------------
    @_locked
    def show_window(self, window: Window) -> None:
        """Set the axes limits to ``window`` (clipped to the tensor) and draw it."""
        window = window.clip(self.matrix_shape)
        self._setting_limits = True
        try:
            self.ax.set_xlim(window.c0 - 0.5, window.c1 - 0.5)
            self.ax.set_ylim(window.r1 - 0.5, window.r0 - 0.5)
        finally:
            self._setting_limits = False
        self.render()

    @_locked
    def _on_limits(self, _ax: Any) -> None:
        if self._setting_limits or self._after is None:
            return
        window = Window.of_limits(self.ax.get_xlim(), self.ax.get_ylim(), self.matrix_shape)
        if window != self.window:
            self.render()

    @_locked
    def render(self) -> None:
        """Read the window the axes show from the masks and draw it (cost ∝ window size)."""
        if self._after is None:
            return
        window = Window.of_limits(self.ax.get_xlim(), self.ax.get_ylim(), self.matrix_shape)
        cells = (self.max_cells, self.max_cells)
        read = [None if r is None else _bool_window(r, window) for r in (self._after,
                                                                         self._before)]
        self.stale = read[0] is None or (self._before is not None and read[1] is None)
        if self.stale:  # the mask read from is gone: keep the picture until the next state
            return
        after = pool_fraction(read[0], cells, gaps=False)
        before = None if read[1] is None else pool_fraction(read[1], cells, gaps=False)
        extent = (window.c0 - 0.5, window.c1 - 0.5, window.r1 - 0.5, window.r0 - 0.5)
        self.image.set_data(after.values)
        self.image.set_extent(extent)
        self.new_image.set_data(newly_pruned_fraction(before, after))
        self.new_image.set_extent(extent)
        self.window, self.pooled, self.pooled_before = window, after, before
        self.ax.set_title(self.title(), fontsize="small", horizontalalignment="left", x=0.0)
        self.render_count += 1
        if self.on_render is not None:
            self.on_render(window)

    def title(self) -> str:
        """What the picture shows: tensor, state or step, window and cell size."""
        w, pooled = self.window, self.pooled
        if w is None or pooled is None:
            return ""
        label = CURRENT if self.pooled_before is None else NEXT_STEP
        rows, cols = self.matrix_shape
        first = f"{self.name} · {label}" if self.name else label
        where = (f"rows {w.r0:,}–{w.r1 - 1:,} of {rows:,}, "
                 f"cols {w.c0:,}–{w.c1 - 1:,} of {cols:,}")
        cell = ("1 cell = 1 entry" if pooled.full_resolution
                else f"1 cell = {pooled.block_text()} entries (zoom in for single entries)")
        return f"{first}\n{where} · {cell}"

    # -- hover ------------------------------------------------------------------------------------
    def state_of(self, row: int, col: int) -> str:
        """``"kept"``, ``"pruned before"`` or ``"pruned by this step"`` for entry
        ``(row, col)`` of the matrix layout (the preview's rule)."""
        if self._after is None:
            raise ValueError("ZoomPlot.state_of: no mask is shown yet")
        at = (slice(row, row + 1), slice(col, col + 1))
        after = self._after(*at)
        before = None if self._before is None else self._before(*at)
        if after is None or (self._before is not None and before is None):
            return UPDATING
        if bool(after.reshape(-1)[0]):
            return KEPT
        if before is not None and bool(before.reshape(-1)[0]):
            return PRUNED_NOW
        return PRUNED_BEFORE

    def index_of(self, row: int, col: int) -> tuple[int, ...]:
        """The tensor index of entry ``(row, col)`` of the matrix layout.

        Examples
        --------
        >>> plot = ZoomPlot(Figure())
        >>> plot.set_state(torch.ones(6, 2, 3, 3, dtype=torch.bool))
        >>> plot.index_of(4, 13)
        (4, 1, 1, 1)
        """
        if len(self._shape) < 2:
            return (col,) if self._shape else ()
        inner = np.unravel_index(col, self._shape[1:])
        return (row, *(int(i) for i in inner))

    @_locked
    def describe(self, x: float, y: float) -> str:
        """Hover text for data point ``(x, y)``: index, value, kept or pruned ("" outside).

        Examples
        --------
        >>> plot = ZoomPlot(Figure())
        >>> plot.set_state(torch.tensor([[True, False]]), before=torch.tensor([[True, True]]),
        ...                values=torch.tensor([[0.5, -0.25]]), name="w")
        >>> plot.describe(1.2, 0.1)
        'w[0, 1] = -0.25 · pruned by this step'
        """
        rows, cols = self.matrix_shape
        row, col = math.floor(y + 0.5), math.floor(x + 0.5)
        if not (0 <= row < rows and 0 <= col < cols):
            return ""
        index = self.index_of(row, col)
        text = f"{self.name or 'entry'}[{', '.join(str(i) for i in index)}]"
        values = self._read_values()
        if values is not None:
            text += f" = {float(values[row, col]):.4g}"
        return f"{text} · {self.state_of(row, col)}"

    def _read_values(self) -> torch.Tensor | None:
        if self._values_cache is None and self._values is not None:
            self._values_cache = as_matrix(self._values())
        return self._values_cache

    def __repr__(self) -> str:
        if self.window is None or self.pooled is None:
            return "ZoomPlot(nothing shown)"
        return (f"ZoomPlot({self.name or 'tensor'} {self._shape}, {self.window!r} "
                f"in {self.pooled.shape} cells)")
