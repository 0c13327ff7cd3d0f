"""How much room the browser gives a picture: a zero-height `anywidget`_ that measures.

Python cannot see the page, so :class:`SizeProbe` sits in the picture's column (CSS class
``pe-size-probe``; the column is its nearest ancestor of class :attr:`SizeProbe.column`, the
picture the element of class :attr:`SizeProbe.picture` inside it) and a few lines of
JavaScript report, whenever the page or the column is resized (a ``ResizeObserver``,
throttled; a tab coming into view is such a resize):

* ``width``: the width the picture has in its column, in CSS pixels (the column's content
  width less the picture's margins);
* ``height``: the height of the scrolling area that holds the notebook (JupyterLab's notebook
  panel, else the window), less what sits above the picture inside its column (the slider and
  the counts), so slider, counts and picture fit on one screen;
* ``pixel_ratio``: ``window.devicePixelRatio`` (2 on HiDPI screens, 1.5 at 150 % zoom).

It also caps the picture's CSS height at once (scaled evenly), so a picture that waits to be
redrawn -- or stays stale while the input is invalid -- never reaches below the screen.

Until a browser reports (tests, scripts, a static render), all three stay 0 and the
explorer draws at its default size.

Every sized picture of the explorer has one (the Explore picture, History, Global vs local,
the magnitudes view; the zoom shares the Explore picture's column and its probe), and draws
for its room by the one rule of :func:`prune_explorer.viz.figures.room_scale`.

.. _anywidget: https://anywidget.dev

Examples
--------
>>> probe = SizeProbe()
>>> probe.room()  # nothing measured yet
>>> probe.width, probe.height, probe.pixel_ratio = 560, 600, 1.5
>>> probe.room()
(560, 600, 1.5)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anywidget
import traitlets

__all__ = ["SizeProbe", "drawn_room", "room_changed"]

#: The least height (CSS px) the picture gets, whatever the room: small enough that the slider,
#: counts, an input error and the picture share a 1024x768 screen at 150% zoom (512 CSS px).
MIN_HEIGHT = 160

#: The least CSS height the probe scales a waiting or stale picture to (an input error over it
#: takes room): slider, error, counts and the picture stay on one screen at 150 % zoom.
MIN_SHOWN = 80

#: The least and the most width (CSS px) a picture is drawn for, whatever its room.
MIN_WIDTH, MAX_SIDE = 240, 1400


def drawn_room(room: tuple[int, int, float]) -> tuple[int, int, float]:
    """The place a picture is drawn for, from the room measured (``SizeProbe.room()``): its
    width and height within :data:`MIN_WIDTH` (:data:`MIN_HEIGHT`) and :data:`MAX_SIDE`.

    >>> drawn_room((100, 2000, 1.5))
    (240, 1400, 1.5)
    """
    width, height, ratio = room
    return (max(MIN_WIDTH, min(int(width), MAX_SIDE)),
            max(MIN_HEIGHT, min(int(height), MAX_SIDE)), float(ratio))


def room_changed(old: tuple[int, int, float] | None, new: tuple[int, int, float]) -> bool:
    """Whether a picture drawn for room ``old`` must be redrawn for ``new``: changes under
    8 px are ignored, so a scroll bar coming and going cannot make it flicker.

    >>> room_changed((500, 400, 1.0), (505, 396, 1.0)), room_changed(None, (500, 400, 1.0))
    (False, True)
    """
    return old is None or abs(old[0] - new[0]) >= 8 or abs(old[1] - new[1]) >= 8 \
        or old[2] != new[2]


_ESM = r"""
function scroller(node) {
  // the nearest ancestor that really scrolls vertically (JupyterLab's notebook panel; not a
  // box that merely could), else null
  for (let p = node.parentElement; p && p !== document.body; p = p.parentElement) {
    const style = getComputedStyle(p);
    if ((style.overflowY === "auto" || style.overflowY === "scroll") && p.clientHeight > 0
        && p.scrollHeight > p.clientHeight + 1) {
      return p;
    }
  }
  return null;
}

function render({ model, el }) {
  el.style.width = "100%";
  el.style.height = "0px";
  let timer = null;
  const measure = () => {
    timer = null;
    const column = el.closest("." + model.get("column")) || el.parentElement;
    if (!column || !column.isConnected || column.clientWidth === 0) { return; }  // hidden tab
    const box = scroller(column);
    // the visible part of it (it may itself reach below the window)
    const view = box ? Math.min(box.clientHeight, window.innerHeight
                                - Math.max(0, box.getBoundingClientRect().top))
                     : window.innerHeight;
    // what the column shows above the picture (slider, counts) stays on screen with it
    const image = column.querySelector("." + model.get("picture"));
    if (image && !image.dataset.peProbe) {  // each new picture: measure again
      image.dataset.peProbe = "1";
      image.addEventListener("load", later);
    }
    let above = 0;
    if (image) {
      above = Math.max(0, image.getBoundingClientRect().top
                          - column.getBoundingClientRect().top);
    }
    // the column's content box, less the picture's own margins: the picture fits inside it
    const inset = (style, a, b) => parseFloat(style[a]) + parseFloat(style[b]) || 0;
    const columnStyle = getComputedStyle(column);
    const margins = image ? inset(getComputedStyle(image), "marginLeft", "marginRight") : 0;
    const width = Math.floor(column.clientWidth
                             - inset(columnStyle, "paddingLeft", "paddingRight") - margins);
    const height = Math.floor(view - above - 12);
    if (image) {
      // at once, before Python redraws (or while the picture is stale and is not redrawn):
      // the picture never reaches below the screen; it is scaled, not stretched
      // (width and height auto within both maxima: the browser keeps the aspect ratio)
      image.style.maxHeight = Math.max(__MIN_SHOWN__, height) + "px";
      image.style.maxWidth = width + "px";
      image.style.width = "auto";
      image.style.height = "auto";
    }
    const ratio = Math.round((window.devicePixelRatio || 1) * 100) / 100;
    if (width !== model.get("width") || height !== model.get("height")
        || ratio !== model.get("pixel_ratio")) {
      model.set("width", width);
      model.set("height", height);
      model.set("pixel_ratio", ratio);
      model.save_changes();
    }
  };
  const later = () => { if (timer === null) { timer = setTimeout(measure, 150); } };
  const observer = new ResizeObserver(later);
  const start = () => {
    const column = el.closest("." + model.get("column")) || el.parentElement;
    if (column) { observer.observe(column); }
    const head = column && column.querySelector(".pe-picture-head");
    if (head) { observer.observe(head); }  // an error or a readout line comes or goes
    const box = column && scroller(column);
    if (box) { observer.observe(box); }
    later();
  };
  setTimeout(start, 0);  // once the widget is in the page
  window.addEventListener("resize", later);
  return () => {
    observer.disconnect();
    window.removeEventListener("resize", later);
    if (timer !== null) { clearTimeout(timer); }
  };
}
export default { render };
""".replace("__MIN_SHOWN__", str(MIN_SHOWN))


class SizeProbe(anywidget.AnyWidget):
    """Reports the picture column's room from the browser (see the module docstring).

    Parameters
    ----------
    column : str
        CSS class of the picture's column (an ancestor of the probe).
    picture : str
        CSS class of the picture inside the column (capped at once to the room).

    Attributes
    ----------
    width, height : int
        CSS pixels (0 until a browser reports).
    pixel_ratio : float
        Device pixels per CSS pixel (0 until a browser reports).
    """

    _esm = _ESM
    width = traitlets.Int(0).tag(sync=True)
    height = traitlets.Int(0).tag(sync=True)
    pixel_ratio = traitlets.Float(0.0).tag(sync=True)
    column = traitlets.Unicode("pe-explore-picture").tag(sync=True)
    picture = traitlets.Unicode("pe-preview").tag(sync=True)

    def __init__(self, column: str = "pe-explore-picture", picture: str = "pe-preview",
                 **kwargs: object) -> None:
        for name, value in (("column", column), ("picture", picture)):
            if not (isinstance(value, str) and value.replace("-", "").isalnum()):
                raise ValueError(f"SizeProbe: {name} must be a CSS class name (letters, digits, "
                                 f"'-'); got {value!r}")
        super().__init__(column=column, picture=picture, **kwargs)
        self.add_class("pe-size-probe")

    def follow(self, redraw: Callable[[tuple[int, int, float]], None]) -> None:
        """Call ``redraw(room)`` with the place to draw for (:func:`drawn_room`) whenever the
        browser reports a room that :func:`room_changed` from the last one it was called
        with (a resize, the tab coming into view; not a scroll bar)."""
        last: list[tuple[int, int, float] | None] = [None]

        def changed(_change: Any) -> None:
            measured = self.room()
            if measured is None:
                return
            room = drawn_room(measured)
            if room_changed(last[0], room):
                last[0] = room
                redraw(room)

        self.observe(changed, names=["width", "height", "pixel_ratio"])

    def room(self) -> tuple[int, int, float] | None:
        """``(width, height, pixel_ratio)`` as measured, or None before a browser reports."""
        if self.width <= 0 or self.height <= 0 or self.pixel_ratio <= 0:
            return None
        return self.width, self.height, self.pixel_ratio

    def __repr__(self) -> str:
        return (f"SizeProbe({self.width}x{self.height} CSS px, ratio {self.pixel_ratio:g}, "
                f"column .{self.column})")
