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
