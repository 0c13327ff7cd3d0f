"""The Zoom panel under the Explore picture: any window of the shown tensor, down to entries.

Why ipympl: the zoom the issue asks for -- drag a rectangle, pan, go back, and read under the
pointer what an entry is -- is exactly what matplotlib's navigation toolbar does, and ipympl
(the Jupyter-maintained ``%matplotlib widget`` backend) puts that toolbar and a live canvas in
an ipywidgets layout, with its JupyterLab extension prebuilt in the wheel. The picture is drawn
by the same matplotlib code and colours as the rest of :mod:`prune_explorer.viz`; anywidget or
ipycanvas would have meant writing the zoom, pan, hover and drawing by hand in JavaScript.

The panel costs nothing until it is opened: the ipympl canvas is built on the first opening,
and while the panel is closed a new preview only marks it out of date. Open, it shows the
explorer's last preview (:attr:`ExplorePane.preview_window` after the step,
:attr:`ExplorePane.preview_before` now), so it always agrees with the Explore picture; each
redraw reads only the window on screen (:class:`~prune_explorer.viz.zoom.ZoomPlot`) -- and for
an unstructured local preview, a slider step with the zoom open reads only that window's ranks
from the session's order: no mask of the whole tensor is built.

Examples
--------
>>> import torch
>>> from prune_explorer.widgets import Explorer
>>> ex = Explorer(torch.nn.Sequential(torch.nn.Linear(300, 400)), debounce=None)
>>> ex.ui.amount.value = 0.5
>>> zoom = ex.explore_pane.zoom
>>> zoom.render_count  # closed: nothing drawn
0
>>> ex.ui.zoom_toggle.value = True
>>> zoom.plot.window
Window(rows 0:64, cols 0:64)
>>> zoom.plot.describe(3, 2).startswith("0.weight[2, 3] = ")
True
>>> ex.close()
"""

from __future__ import annotations

import functools
import sys
import warnings
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets
import matplotlib
from matplotlib.figure import Figure

from prune_explorer.viz.zoom import Window, ZoomPlot

from ...parts.html import esc
from ...parts.sizeprobe import MIN_HEIGHT

if TYPE_CHECKING:
    from ...context import ExploreContext
    from .pane import ExplorePane

__all__ = ["ZoomPane", "ipympl_canvas"]

#: What ipympl and the widget box put around the canvas (CSS px: the canvas' margins, the
#: widget's): the zoom is drawn this much narrower than its column, so it is never clipped.
FRAME_PX = 12

HELP = ("Drag a rectangle on the picture to zoom in (the toolbar's □ is on); ✥ pans, ← goes "
        "back, or type a region. Hover an entry for its index, value and whether it is kept.")


def ipympl_canvas(figure: Figure, lock: Any = None) -> Any:
    """An ipympl canvas widget (with its toolbar) for ``figure``, without pyplot.

    Importing ipympl switches matplotlib's default backend when matplotlib is already imported;
    the backend in use before is restored, so plots elsewhere in the notebook are unchanged.
    ``lock`` (a context manager), if given, is held while the canvas draws: the zoom updates
    its figure on the preview thread, and the browser asks for frames on the kernel's.
    """
    before = dict.__getitem__(matplotlib.rcParams, "backend")
    try:
        from ipympl.backend_nbagg import Canvas, FigureManager
    finally:
        if dict.__getitem__(matplotlib.rcParams, "backend") != before:
            if "matplotlib.pyplot" in sys.modules:
                matplotlib.use(before)  # switches pyplot back as well
            else:
                dict.__setitem__(matplotlib.rcParams, "backend", before)
    canvas = (Canvas if lock is None else _locked_canvas(Canvas))(figure)
    if lock is not None:
        canvas.draw_lock = lock
    with warnings.catch_warnings():  # ipympl's Toolbar passes traitlets an extra argument
        warnings.filterwarnings("ignore", "Passing unrecognized arguments", DeprecationWarning)
        FigureManager(canvas, 0)  # builds the toolbar; not registered with pyplot
    canvas.header_visible = False
    canvas.toolbar_visible = "visible"
    canvas.toolbar_position = "top"
    canvas.resizable = False
    return canvas


@functools.cache
def _locked_canvas(base: type) -> type:
    class LockedCanvas(base):  # type: ignore[misc]
        """ipympl's canvas, drawing under ``self.draw_lock`` (same widget model)."""

        def draw(self) -> None:
            with self.draw_lock:
                super().draw()

    return LockedCanvas


class ZoomPane:
    """A closed-by-default panel: a toggle, region inputs and the ipympl zoom canvas.

    Parameters
    ----------
    explorer : ExploreContext
    pane : ExplorePane
        Whose last preview is shown.
    figsize : (float, float)
    dpi : float

    Attributes
    ----------
    box : ipywidgets.VBox
        The panel (CSS class ``pe-zoom``).
    plot : ZoomPlot or None
        Built on the first opening.
    canvas : ipympl Canvas or None
        Built on the first opening.
    out_of_date : bool
        A preview arrived while the panel was closed (redrawn on opening).
    """

    def __init__(self, explorer: ExploreContext, pane: ExplorePane, *,
                 figsize: tuple[float, float] = (4.8, 4.8), dpi: float = 80) -> None:
        self.ex = explorer
        self.pane = pane
        self.figsize = figsize
        self.dpi = dpi
        self.plot: ZoomPlot | None = None
        self.canvas: Any = None
        self.out_of_date = True
        self.room: tuple[int, int, float] | None = None  # the Explore picture's column
        ui = explorer.ui
        self.toggle = ui.add("zoom_toggle", widgets.ToggleButton(
            value=False, description="Zoom", icon="search-plus",
            tooltip="zoom into the shown tensor, down to single entries"))
        box_layout = widgets.Layout(width="130px")
        self.inputs = {
            key: ui.add(f"zoom_{key}", widgets.BoundedIntText(
                value=value, min=minimum, max=2**62, description=label,
                layout=box_layout, style={"description_width": "50px"}))
            for key, label, value, minimum in (("row", "row", 0, 0), ("col", "col", 0, 0),
                                               ("rows", "rows", 64, 1), ("cols", "cols", 64, 1))
        }
        self.show_button = ui.add("zoom_show", widgets.Button(
            description="Show region", tooltip="show the rows and cols typed here"))
        self.whole_button = ui.add("zoom_whole", widgets.Button(
            description="Whole tensor", tooltip="zoom out to the whole tensor (pooled)"))
        self.note = ui.add("zoom_note", widgets.HTML(value=f"<small>{esc(HELP)}</small>"))
        region = widgets.HBox([widgets.VBox([self.inputs["row"], self.inputs["col"]]),
                               widgets.VBox([self.inputs["rows"], self.inputs["cols"]]),
                               widgets.VBox([self.show_button, self.whole_button])])
        self.body = widgets.VBox([region, self.note], layout=widgets.Layout(display="none"))
        self.box = ui.add("zoom", widgets.VBox([self.toggle, self.body]))
        self.toggle.observe(self._on_toggle, names="value")
        self.show_button.on_click(lambda _: self.show_region())
        self.whole_button.on_click(lambda _: self.show_whole())

    # -- state ------------------------------------------------------------------------------------
    @property
    def is_open(self) -> bool:
        """True while the panel is shown."""
        return bool(self.toggle.value)

    @property
    def render_count(self) -> int:
        """Windows drawn so far (0 until the panel is first opened)."""
        return 0 if self.plot is None else self.plot.render_count

    def preview_changed(self) -> None:
        """Called by the Explore pane after every preview (or failed one): redraw when open,
        else only remember that the picture is out of date (no cost on the slider path)."""
        self.out_of_date = True
        if self.is_open:
            self.refresh()

    def refresh(self) -> None:
        """Show the Explore pane's last preview in the zoom (keeps the window if the tensor is
        the same); dim the picture while the controls hold invalid input."""
        if self.plot is None:
            return
        pane, canvas = self.pane, self.canvas
        after = pane.preview_window  # windows only: the mask is not built where it need not be
        stale = pane.preview_error is not None or after is None
        (canvas.add_class if stale else canvas.remove_class)("pe-stale")
        request = pane.preview_request
        if after is None or request is None:
            return
        session, name = self.ex.session, request.target
        self.plot.set_state(after, before=pane.preview_before,
                            values=lambda: session.tensor(name), name=name,
                            shape=tuple(session.info(name).shape))
        self.out_of_date = False
        canvas.draw_idle()

    def set_room(self, room: tuple[int, int, float]) -> None:
        """The Explore picture's column as the browser measured it (``drawn_room``): the zoom
        sits in it and is drawn for its width, at most as tall as wide, by the rule of every
        sized picture (:meth:`ZoomPlot.resize`)."""
        self.room = room
        if self.plot is not None:
            self._fit()
            self.canvas.draw_idle()

    def _fit(self) -> None:
        if self.plot is None or self.room is None:
            return
        width, height, _ = self.room
        self.plot.resize(width - FRAME_PX, max(MIN_HEIGHT, min(width - FRAME_PX, height)),
                         place=(width, height))

    # -- controls ---------------------------------------------------------------------------------
    def _build(self) -> None:
        figure = Figure(figsize=self.figsize, dpi=self.dpi)
        self.plot = ZoomPlot(figure)
        self.canvas = self.ex.ui.add("zoom_canvas", ipympl_canvas(figure, self.plot.lock))
        self._fit()
        self.plot.on_render = self._sync_inputs
        toolbar = self.canvas.toolbar
        toolbar.zoom()  # a drag on the picture zooms at once
        toolbar._current_action = "zoom"  # ipympl's button state in the browser
        self.body.children = (*self.body.children, self.canvas)

    def _on_toggle(self, change: dict[str, Any]) -> None:
        self.body.layout.display = "" if change["new"] else "none"
        if change["new"]:
            if self.plot is None:
                self._build()
            if self.out_of_date:
                self.refresh()

    def _sync_inputs(self, window: Window) -> None:
        # The region boxes follow the toolbar's zoom and pan (they have no observers).
        for key, value in zip(("row", "col", "rows", "cols"),
                              (window.r0, window.c0, *window.shape), strict=True):
            self.inputs[key].value = value

    def show_region(self) -> None:
        """Show the rows and cols typed in the region boxes (clipped to the tensor)."""
        if self.plot is None:
            return
        v = {key: int(box.value) for key, box in self.inputs.items()}
        self._show(Window(v["row"], v["row"] + v["rows"], v["col"], v["col"] + v["cols"]))

    def show_whole(self) -> None:
        """Zoom out to the whole tensor (pooled when larger than the cell cap)."""
        if self.plot is None:
            return
        rows, cols = self.plot.matrix_shape
        self._show(Window(0, rows, 0, cols))

    def _show(self, window: Window) -> None:
        if self.plot is None:
            return
        self.plot.show_window(window)
        toolbar = getattr(self.canvas, "toolbar", None)
        if toolbar is not None:
            toolbar.push_current()  # Back (←) returns here
        self.canvas.draw_idle()

    def __repr__(self) -> str:
        state = "open" if self.is_open else "closed"
        return f"ZoomPane({state}, {self.plot!r})"
