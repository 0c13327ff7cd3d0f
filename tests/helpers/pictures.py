"""What "nothing truncated or overlapping" means for a mask picture, measured with the renderer's
own text extents: used on pictures drawn in the tests (``tests/viz/test_picture_size.py``) and,
inside the kernel, on the very picture a browser test shows (``tests/browser/``).

Examples
--------
>>> import torch
>>> from prune_explorer.viz import MaskPreview
>>> p = MaskPreview()
>>> p.resize(560, 590)
>>> _ = p.update(torch.ones(10, 64, dtype=torch.bool), name="fc3.weight", module_type="Linear")
>>> _ = p.png()
>>> picture_misfits(p)
[]
"""

from __future__ import annotations

import itertools
import re
from typing import Any

from matplotlib.transforms import Bbox


def shown_ticks(axis: Any) -> list[Any]:
    """Tick labels drawn: those whose tick lies inside the axis' view (matplotlib keeps others)."""
    low, high = sorted(axis.get_view_interval())
    return [t for t, loc in zip(axis.get_majorticklabels(), axis.get_majorticklocs(), strict=True)
            if low - 1e-9 <= loc <= high + 1e-9 and t.get_visible() and t.get_text()]


def picture_misfits(p: Any) -> list[str]:
    """What does not fit in the rendered :class:`~prune_explorer.viz.MaskPreview` ``p``
    (empty: nothing): neighbouring tick labels that overlap, a text not wholly inside the
    image, two texts that overlap (title, axis labels, legend, tick labels, colour bar), a
    title running into the axes, the x label running into the legend."""
    renderer = p.canvas.get_renderer()
    found = []
    for name, axis in (("x", p.ax.xaxis), ("y", p.ax.yaxis)):
        labels = shown_ticks(axis)
        for a, b in itertools.pairwise(labels):
            if a.get_window_extent(renderer).overlaps(b.get_window_extent(renderer)):
                found.append(f"{name} ticks {a.get_text()!r} and {b.get_text()!r} overlap")
    texts = [p.ax.title, p.ax.xaxis.label, p.ax.yaxis.label, *p.legend.get_texts(),
             *shown_ticks(p.ax.xaxis), *shown_ticks(p.ax.yaxis)]
    if p.colorbar.ax.get_visible():
        texts += [p.colorbar.ax.yaxis.label, *shown_ticks(p.colorbar.ax.yaxis)]
    figure = p.figure.bbox
    inside = Bbox.from_extents(figure.x0 - 0.5, figure.y0 - 0.5, figure.x1 + 0.5, figure.y1 + 0.5)
    for text in texts:
        if not text.get_visible() or not text.get_text():
            continue
        box = text.get_window_extent(renderer)
        if not (inside.contains(box.x0, box.y0) and inside.contains(box.x1, box.y1)):
            found.append(f"{text.get_text()!r} at {box.bounds} is not inside {figure.bounds}")
    shown = [t for t in texts if t.get_visible() and t.get_text()]
    boxes = [t.get_window_extent(renderer) for t in shown]
    for (a, box_a), (b, box_b) in itertools.combinations(zip(shown, boxes, strict=True), 2):
        if box_a.overlaps(box_b):
            found.append(f"{a.get_text()!r} and {b.get_text()!r} overlap")
    if p.ax.title.get_window_extent(renderer).y0 < p.ax.get_window_extent(renderer).y1 - 0.5:
        found.append("the title runs into the axes")
    if p.legend.get_window_extent(renderer).overlaps(
            p.ax.xaxis.label.get_window_extent(renderer)):
        found.append("the x label runs into the legend")
    return sorted(set(found), key=found.index)


def smallest_text_px(figure: Any, pixel_ratio: float = 1.0) -> float:
    """The smallest text drawn in ``figure`` (titles, labels, tick labels, legend), in CSS
    pixels: its size in points at the figure's dpi, over ``pixel_ratio`` device pixels per
    CSS pixel. What "text no smaller than the explorer's" compares, picture by picture.

    >>> from prune_explorer.viz.figures import room_figure
    >>> fig, ax = room_figure(600, 500, pixel_ratio=1.5)
    >>> _ = ax.set_title("t", fontsize="small")
    >>> round(smallest_text_px(fig, 1.5), 1)  # 10 pt x 0.833 at 80 dpi x 1.5625
    14.5
    """
    from matplotlib.text import Text

    sizes = [float(t.get_fontsize()) for t in figure.findobj(Text)
             if t.get_visible() and t.get_text().strip()
             and (t.axes is None or t.axes.get_visible())]
    return min(sizes) * float(figure.dpi) / 72.0 / pixel_ratio


def explorer_pictures(ex: Any) -> dict[str, Any]:
    """What the browser tests measure of an explorer's pictures, from the kernel: for each
    sized picture on show (Explore, History, Global vs local, Zoom, Magnitudes), the room it
    was drawn for, its CSS size, its smallest text in CSS pixels and (mask pictures) its
    description and misfits. A picture not drawn yet is left out; ``settled``: drawn for the
    room its size probe reports now."""
    from prune_explorer.widgets.parts.sizeprobe import drawn_room, room_changed

    def now(probe: Any) -> Any:
        measured = probe.room()
        return None if measured is None else drawn_room(measured)

    found: dict[str, Any] = {}
    explore = ex.preview_pane
    if explore.room is not None:
        words = explore.picture.describe()
        drawn = re.search(r"pixel ratio ([0-9.]+)", words)
        ratio = float(drawn.group(1)) if drawn else 1.0
        found["explore"] = {"text": smallest_text_px(explore.picture.figure, ratio),
                            "described": words,
                            "misfits": picture_misfits(explore.picture)}
    history = ex.history_pane
    if history.room is not None and history.plot is not None:
        entry: dict[str, Any] = {"room": list(history.room), "settled": not room_changed(
            history.room, now(history.probe) or history.room)
            and history._preview_room == history.room}
        if hasattr(history.plot, "describe"):
            entry["described"] = history.plot.describe()
            entry["misfits"] = picture_misfits(history.plot)
            entry["text"] = smallest_text_px(history.plot.figure, history.room[2])
        found["history"] = entry
    compare = ex.compare_pane
    if compare.room is not None and compare.plot is not None:
        figure = compare.plot.legend.figure
        found["compare"] = {"room": list(compare.room),
                            "text": smallest_text_px(figure, compare.room[2]),
                            "settled": not compare.stale and not room_changed(
                                compare.room, now(compare.probe) or compare.room),
                            "css": [round(float(v) / compare.room[2]) for v in
                                    figure.get_size_inches() * figure.dpi]}
    zoom = ex.explore_pane.zoom
    if zoom.plot is not None and zoom.room is not None:
        figure = zoom.plot.figure
        ratio = float(figure.canvas.device_pixel_ratio)
        found["zoom"] = {"room": list(zoom.room), "text": smallest_text_px(figure, ratio),
                         "settled": not room_changed(zoom.room, now(ex.explore_pane.probe)
                                                     or zoom.room),
                         "css": [round(float(v) / ratio) for v in
                                 figure.get_size_inches() * figure.dpi]}
    magnitudes = ex.explore_pane.panels.magnitudes
    if magnitudes.room is not None and magnitudes._svg is not None:
        svg = magnitudes._svg
        found["magnitudes"] = {"room": list(magnitudes.room), "text": 10.0 * svg.scale,
                               "settled": not room_changed(magnitudes.room,
                                                           now(magnitudes.probe)
                                                           or magnitudes.room),
                               "css": [round(svg.width * svg.scale),
                                       round(svg.height * svg.scale)]}
    return found
