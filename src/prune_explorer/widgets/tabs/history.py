"""The History tab: walk the steps of the chosen tensor, units each step pruned highlighted.

The slider (``pe-history``) picks an entry of ``Session.history(name)``: entry 0 is the tensor as
the session found it, entry ``k`` the mask after the ``k``-th step on it (the contents of its
``PruningContainer``, in order). The picture (``pe-history-image``) shows entry ``k`` with the
entries step ``k`` pruned in vermillion, and the table (``pe-history-steps``) lists every step's
method, settings, seed and counts, the shown row highlighted. With nothing to walk (no step on
the tensor yet) the slider is off and the note beside it (``pe-history-note``) says why.

The picture is the Explore tab's kind, a :class:`~prune_explorer.viz.MaskPreview` (one figure,
the static part rendered once: a first visit of a position costs a pooling and a blit, not a new
figure). A step that kept entries the one before had pruned (after a commit, whose zeros the next
mask may keep) is drawn by :func:`~prune_explorer.viz.plot_diff` instead, which also tints those
"revived" entries; the packed counts tell which case it is.

Examples
--------
>>> import torch
>>> from prune_explorer.widgets import Explorer
>>> ex = Explorer(torch.nn.Sequential(torch.nn.Linear(4, 2)), debounce=None)
>>> ex.ui.apply.click()
>>> ex.ui.tabs.selected_index = 1  # History
>>> ex.history_pane.shown, int(ex.history_pane.newly_pruned.sum())  # 0.3 * 8 = 2.4 -> 2
(1, 2)
>>> ex.close()
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets
import numpy as np
import torch

from prune_explorer.session.analysis.wording import describe_step, plural
from prune_explorer.session.history.tensor_history import TensorHistory
from prune_explorer.viz import (
    MaskPreview,
    block_sums,
    make_figure,
    plot_diff,
    render_png,
    shape_only,
)
from prune_explorer.viz.diffs import DiffPlot
from prune_explorer.viz.figures import room_figure

from ..parts.html import esc, frame_table, why_off
from ..parts.pane import Pane
from ..parts.scheduler import LatestOnly
from ..parts.sizeprobe import MIN_HEIGHT, SizeProbe

if TYPE_CHECKING:
    from ..context import TabContext

__all__ = ["HistoryPane"]

#: Pictures of visited history positions kept for the slider (per session state).
_KEEP_DRAWN = 32


def _css_width(png: bytes, room: tuple[int, int, float] | None) -> str | None:
    # The CSS width of a picture drawn at the room's pixel ratio: its pixel width over it
    if room is None:
        return None
    return str(round(int.from_bytes(png[16:20], "big") / room[2]))


class HistoryPane(Pane):
    """Slider, diff picture and step table for the tensor chosen in the picker.

    Attributes
    ----------
    shown : int or None
        The history entry on show.
    newly_pruned : torch.Tensor or None
        Bool mask of the entries pruned by that step (``TensorHistory.newly_pruned``).
    runner : LatestOnly
        Coalesces renders while the slider is dragged.
    plot : MaskPreview or DiffPlot or None
        What drew the last new picture (a position visited before shows its stored picture).
    title : str or None
        The title of the picture on show ("<tensor> · state after step k", then the step).
    """

    def __init__(self, explorer: TabContext) -> None:
        self.ex = explorer
        ui = explorer.ui
        self.slider = ui.add("history", widgets.IntSlider(
            value=0, min=0, max=0, description="step", continuous_update=True,
            layout=widgets.Layout(width="420px"),
        ))
        self.label = ui.add("history_label", widgets.HTML(value=""))
        self.note = ui.add("history_note", widgets.HTML(value=""))  # why the slider is off
        self.note.add_class("pe-button-note")
        self.image = ui.add("history_image", widgets.Image(
            format="png", layout=widgets.Layout(flex="0 0 auto")))
        self.steps = ui.add("history_steps", widgets.HTML(value=""))
        # the picture is drawn for its column, as the browser measures it (the Explore
        # picture's rule); the table sits beside it when there is room, else under it
        self.probe = ui.add("history_probe", SizeProbe(column="pe-history-picture",
                                                       picture="pe-history-image"))
        self.room: tuple[int, int, float] | None = None  # drawn_room() of the last report
        picture = widgets.VBox([self.image, self.probe])
        picture.add_class("pe-history-picture")
        self.box = widgets.VBox([
            self.label, widgets.HBox([self.slider, self.note]),
            widgets.HBox([picture, self.steps],
                         layout=widgets.Layout(flex_flow="row wrap", align_items="flex-start")),
        ])
        self.shown: int | None = None
        self._newly: tuple[TensorHistory, int, torch.Tensor | None] | None = None
        # what a visited position showed, by (tensor, entry, explorer version): the slider
        # goes back to it without unpacking, pooling or rendering again
        self._drawn: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        self._dirty = True
        self.plot: MaskPreview | DiffPlot | None = None
        self.title: str | None = None
        self._preview: MaskPreview | None = None  # made on the first picture
        self._preview_room: tuple[int, int, float] | None = None  # what it is sized for
        self._cells: dict[tuple[Any, ...], np.ndarray] = {}  # see _kept_cells
        self.runner = LatestOnly(self._render, debounce=explorer.debounce,
                                 on_error=lambda err: explorer.status.error(err, "History"))
        self.slider.observe(self._on_slider, names="value")
        self.probe.follow(self._on_room)

    @property
    def newly_pruned(self) -> torch.Tensor | None:
        """Bool mask of the entries pruned by the step on show (``TensorHistory.newly_pruned``;
        unpacked on first access)."""
        if self._newly is None:
            return None
        history, k, mask = self._newly
        if mask is None:
            mask = history.newly_pruned(k)
            self._newly = (history, k, mask)
        return mask

    @property
    def visible(self) -> bool:
        """Whether the History tab is on show (rendering waits until it is)."""
        return self.ex.shows(self)

    def flush(self) -> None:
        """Render the pending picture now."""
        self.runner.flush()

    def close(self) -> None:
        """Stop the background renderer."""
        self.runner.close()

    def invalidate(self, reset_step: bool = False) -> None:
        """The session or the chosen tensor changed: move the slider to the last step, redraw."""
        name = self.ex.tensor
        self._dirty = True
        last = 0 if name is None else len(self.ex.session.history(name)) - 1
        self.slider.disabled = last == 0
        self.note.value = why_off([] if last else [
            "The step slider is off: " + ("no tensor is chosen." if name is None else
                                          f"no step has changed {name} yet.")])
        if name is None:
            return
        with self.ex.quiet():
            self.slider.max = last
            self.slider.value = last
        if self.visible:
            self._request()

    def _on_room(self, room: tuple[int, int, float]) -> None:
        # The column's room changed (a resize, the tab coming into view): draw for it
        self.room = room
        if self.visible:
            self._request()

    def _on_slider(self, change: dict[str, Any]) -> None:
        if self.ex.is_quiet:
            return
        self._request()

    def _request(self) -> None:
        name = self.ex.tensor
        if name is not None:
            self.runner.request((name, int(self.slider.value)))

    def _render(self, what: tuple[str, int]) -> None:
        name, k = what
        version = self.ex.version
        room = self.room  # what it is drawn for (a picture of another room is not reused)
        key = (name, k, version, room)
        if key in self._drawn:
            self._show(key, *self._drawn[key])
            return
        with self.ex.session.lock:
            history = self.ex.session.history(name)
            if k >= len(history):
                return  # the history shrank (undo) since the request
            frame = history.to_frame()
            entry = history[k]
            module_type = self.ex.session.info(name).module_type
        if self.runner.pending:
            return
        shown = "as the session found it" if entry.step is None else f"state after step {k}"
        detail = None if entry.step is None else describe_step(entry.step)
        state = shown if detail is None else f"{shown}: {detail}"
        count = int(frame["newly_pruned"].iloc[k])
        png, plot = self._draw(history, k, (shown, detail), module_type,
                               history.revived_count(k), room)
        steps = frame_table(frame, css_class="pe-history-table", highlight_row=k)
        what_text = "already pruned when the session started" if k == 0 else "pruned by this step"
        label = (
            f'<span class="pe-history-text"><b>{esc(name)}</b> · {esc(state)} · '
            f"{esc(plural(count, 'entry'))} {what_text} (highlighted)</span>"
        )
        if any(drawn[2] != version for drawn in self._drawn):
            self._drawn.clear()  # pictures of older session states are of no use any more
            self._cells.clear()
        while len(self._drawn) >= _KEEP_DRAWN:
            del self._drawn[next(iter(self._drawn))]
        self.plot = plot
        title = str(plot.ax.get_title() if isinstance(plot, MaskPreview)
                    else plot.base.axes.get_title())
        self._drawn[key] = (history, png, steps, label, title)
        self._show(key, history, png, steps, label, title)

    def _draw(self, history: TensorHistory, k: int, state: tuple[str, str | None],
              module_type: str | None, revived: int,
              room: tuple[int, int, float] | None) -> tuple[bytes, MaskPreview | DiffPlot]:
        """The picture of entry ``k`` (``state``: which one, and its step in words) for
        ``room`` (None: the default size): PNG bytes and what drew them."""
        name, (shown, detail) = history.name, state
        entry = history[k]
        # entry 0: its pruned entries were pruned before the session; none pruned: no "before"
        has_before = k > 0 or entry.mask.pruned > 0
        if revived and has_before:
            after = entry.mask.unpack()
            before = history.mask(k - 1) if k > 0 else torch.ones_like(after)
            if room is None:
                fig, ax = make_figure(figsize=(5.0, 4.4), dpi=80)
            else:  # the column's width, as tall as the room allows (at most 0.9 x the width)
                width, height, ratio = room
                fig, ax = room_figure(width, max(MIN_HEIGHT, min(height, round(0.9 * width))),
                                      pixel_ratio=ratio)
            title = f"{name} · {shown}" + ("" if detail is None else f": {detail}")
            plot = plot_diff(ax, before, after, name=name, title=title, module_type=module_type)
            return render_png(fig, compress_level=1), plot
        if self._preview is None:
            self._preview = MaskPreview(figsize=(5.0, 4.4), dpi=80)
        picture, shape = self._preview, entry.mask.shape
        if room is not None and self._preview_room != room:  # for the column, as Explore's
            picture.resize(*room[:2], pixel_ratio=room[2])
            self._preview_room = room
        if len(shape) >= 2:  # the matrix picture from counts per cell, each entry pooled once
            edges = picture.cell_edges(shape)
            before_cells = None
            if k > 0:
                before_cells = self._kept_cells(history, k - 1, edges)
            elif has_before:  # all kept before the session
                before_cells = np.outer(np.diff(edges[0]), np.diff(edges[1]))
            picture.update(shape_only(shape), kept_cells=self._kept_cells(history, k, edges),
                           before_cells=before_cells, name=name, settings=detail,
                           module_type=module_type, label=shown)
        else:
            kept = entry.mask.unpack()
            earlier = None if not has_before else history.mask(k - 1) if k > 0 \
                else torch.ones_like(kept)
            picture.update(kept, before=earlier, name=name, settings=detail,
                           module_type=module_type, label=shown)
        return picture.png(), picture

    def _kept_cells(self, history: TensorHistory, k: int,
                    edges: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        """Kept entries of history entry ``k`` per picture cell (the matrix view), kept for the
        session state: scrubbing to the next position pools only the entry not seen yet."""
        key = (history.name, k, self.ex.version, edges[0].tobytes(), edges[1].tobytes())
        if key not in self._cells:
            while len(self._cells) >= _KEEP_DRAWN:
                del self._cells[next(iter(self._cells))]
            mask = history[k].mask.unpack()
            matrix = mask.reshape(mask.shape[0], math.prod(mask.shape[1:]))  # 0 entries too
            self._cells[key] = block_sums(matrix.numpy(), *edges)
        return self._cells[key]

    def _show(self, key: tuple[Any, ...], history: TensorHistory, png: bytes, steps: str,
              label: str, title: str) -> None:
        k = key[1]
        self.title = title
        self.image.value = png
        width = _css_width(png, key[3])
        if width is not None and self.image.width != width:
            self.image.width = width  # drawn at the pixel ratio: shown at its CSS size
        self.steps.value = steps
        self.label.value = label
        self.shown = k
        if self._newly is None or self._newly[0] is not history or self._newly[1] != k:
            self._newly = (history, k, None)
        self._dirty = False
