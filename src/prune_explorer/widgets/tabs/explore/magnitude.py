"""The magnitude view of the Explore tab: why a magnitude step prunes these weights.

A histogram of ``|w|`` of the shown tensor's unpruned entries (``l1_unstructured``, local or
global) or of the norms of its unpruned channels along the step's ``dim`` (``ln_structured``),
log-scaled, with the part the previewed step prunes shaded and a line at its cut: the smallest
importance that stays kept, taken from the session's own selection
(:meth:`Session.magnitudes`, ``cut(k)`` with ``k`` the units the preview prunes), so the line is
where Apply cuts. Random methods, custom masks and the rest do not cut by magnitude: the panel
shows the histogram and says so.

The sorted importances and the bars are computed once per tensor state (the session's
:class:`~prune_explorer.session.preview.magnitudes.MagnitudeCache`, invalidated with its order
cache);
a slider move only finds ``k``-th value and redraws the shading in a small SVG.

Examples
--------
>>> import torch
>>> from prune_explorer.widgets import Explorer
>>> ex = Explorer(torch.nn.Sequential(torch.nn.Linear(8, 4)), debounce=None)
>>> panel = ex.explore_pane.panels.magnitudes
>>> panel.open()
>>> ex.ui.amount.value = 0.25
>>> panel.pruned, panel.cut == float(ex.session.tensor("0.weight").abs().flatten().sort()[0][8])
(8, True)
>>> ex.close()
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets
import torch

from prune_explorer.session.preview.magnitudes import Magnitudes
from prune_explorer.session.preview.masks import kept_count
from prune_explorer.viz import make_figure, plot_mask, render_png
from prune_explorer.viz.figures import room_figure, room_scale
from prune_explorer.viz.histogram import HistogramSVG

from ...parts.collapsible import Collapsible
from ...parts.html import esc
from ...parts.scheduler import LatestOnly
from ...parts.sizeprobe import MIN_HEIGHT, SizeProbe
from .preview import PreviewRequest, PreviewStats

if TYPE_CHECKING:
    from ...context import ExploreContext

__all__ = ["HEATMAP_QUIET_S", "MagnitudePanel", "WeightHeatmap"]

#: The weight heatmap pools every entry, so it is drawn only once the controls rest this long.
HEATMAP_QUIET_S = 0.4


def _ranking(request: PreviewRequest) -> tuple[str, Any, int | None] | None:
    """(method, n, dim) of the magnitude the step ranks by; None if it does not."""
    if request.is_global:
        method = request.settings.get("pruning_method")
        return ("l1_unstructured", None, None) if method == "l1_unstructured" else None
    if request.method == "l1_unstructured":
        return ("l1_unstructured", None, None)
    if request.method == "ln_structured":
        return ("ln_structured", request.settings.get("n"), request.settings.get("dim"))
    return None


class MagnitudePanel(Collapsible):
    """Histogram of the importances of the shown tensor with the preview's cut.

    Attributes
    ----------
    magnitudes : Magnitudes or None
        The session's sorted importances the histogram is of.
    pruned : int or None
        Units the preview prunes from them (None: no magnitude cut).
    cut : float or None
        The smallest importance the preview keeps (None: no cut, or everything pruned).
    picture : ipywidgets.HTML
        The SVG (class ``pe-magnitudes-picture``); ``caption``: the sentence under it.
    """

    ex: ExploreContext

    def __init__(self, explorer: ExploreContext) -> None:
        self.ex = explorer
        self.magnitudes: Magnitudes | None = None
        self.pruned: int | None = None
        self.cut: float | None = None
        self._svg: HistogramSVG | None = None
        self._svg_room: tuple[int, int, float] | None = None  # what it was drawn for
        self.picture = widgets.HTML(value="")
        self.picture.add_class("pe-magnitudes-picture")
        self.caption = widgets.HTML(value="")
        self.caption.add_class("pe-magnitudes-caption")
        self.heatmap = WeightHeatmap(explorer)
        # drawn for the panel's width, as the browser measures it (the Explore picture's rule)
        self.probe = SizeProbe(column="pe-magnitudes-column", picture="pe-magnitudes-picture")
        self.room: tuple[int, int, float] | None = None  # drawn_room() of the last report
        self.box = widgets.VBox([self.picture, self.caption, self.heatmap.box, self.probe])
        self.box.add_class("pe-magnitudes-column")
        self._collapse_into("Magnitudes", self.box, "pe-magnitudes")
        self.probe.follow(self._on_room)

    def _on_room(self, room: tuple[int, int, float]) -> None:
        self.room = self.heatmap.room = room  # the next show() draws the bars for it
        if self.is_open:
            self.ex.request_preview()

    # -- following the preview (the explore pane calls these) -----------------------------------
    def show(self, request: PreviewRequest | None, masks: Mapping[str, torch.Tensor],
             stats: PreviewStats | None) -> None:
        """Histogram of ``request.target`` with the cut of the previewed step."""
        if not self.is_open or request is None:
            return
        ranking = _ranking(request)
        method, n, dim = ranking if ranking is not None else ("", None, None)
        mags = self.ex.session.magnitudes(request.target, n=n, dim=dim)  # cached per state
        room = self.room  # read once: the browser may report another while this draws
        svg = self._svg
        if mags is not self.magnitudes or svg is None or self._svg_room != room:
            edges, counts = mags.histogram()
            width, scale = 380, 1.0
            if room is not None:  # the panel's width; text by the explorer's rule
                width = round(room[0] / room_scale(*room[:2]))
                scale = room[0] / width  # the panel's width exactly
            svg = HistogramSVG(edges, counts, zeros=mags.zeros,
                               xlabel=mags.norm if dim is None else
                               f"{mags.norm} of each slice along dim {dim}",
                               width=width, scale=scale)
            self._svg, self._svg_room = svg, room
            self.magnitudes = mags
        pruned = None
        if ranking is not None and request.target in masks:
            if request.is_global:
                pruned = mags.count - kept_count(masks, request.target)
            elif stats is not None:
                pruned = stats.units_pruned
        self.pruned = pruned
        self.cut = None if pruned is None else mags.cut(pruned)
        note = self._sentence(request, mags, method, ranking is not None)
        self.picture.value = svg.svg(
            self.cut, caption=note, prune_all=pruned is not None and self.cut is None)
        self.caption.value = f'<span class="pe-magnitudes-text">{esc(note)}</span>'
        for widget in (self.picture, self.caption):
            widget.remove_class("pe-stale")
        self.heatmap.show(request, masks)

    def _sentence(self, request: PreviewRequest, mags: Magnitudes, method: str,
                  ranked: bool) -> str:
        what = f"{mags.count:,} unpruned {mags.unit}"
        extra = ""
        if mags.zeros:
            extra += f" {mags.zeros:,} are exactly 0 (off the log axis; cut first)."
        if mags.pruned:
            extra += f" {mags.pruned:,} {mags.unit} already pruned are not shown."
        if not ranked:
            return (f"{request.method} does not prune by magnitude: there is no magnitude cut. "
                    f"Histogram of {mags.norm} of the {what}.{extra}")
        if self.pruned is None:
            return (f"{request.target} is not among the global targets: no cut. Histogram of "
                    f"{mags.norm} of the {what}.{extra}")
        if self.cut is None:
            return f"{method} prunes all {what}.{extra}"
        return (f"{method} prunes the {self.pruned:,} smallest of {what} (shaded): it keeps "
                f"{mags.norm} ≥ {self.cut:.4g} (the line).{extra}")

    def mark_stale(self) -> None:
        """Dim the picture: it is of older settings (the preview failed)."""
        for widget in (self.picture, self.caption, self.heatmap.image):
            widget.add_class("pe-stale")

    def __repr__(self) -> str:
        return f"MagnitudePanel(open={self.is_open}, cut={self.cut})"


class WeightHeatmap:
    """The weights as a heatmap, ``|w|`` of what the previewed step keeps, pruned cells pale
    yellow (``viz.plot_mask(mode="magnitude")``), behind a checkbox (``toggle``, class
    ``pe-weight-heatmap``). It pools every entry, so it is drawn off the slider path: on its
    own worker once the controls rest :data:`HEATMAP_QUIET_S` seconds (at once when the
    explorer is synchronous, ``debounce=None``)."""

    def __init__(self, explorer: ExploreContext) -> None:
        self.ex = explorer
        self.renders = 0
        self.room: tuple[int, int, float] | None = None  # the panel's, drawn_room()
        self.toggle = widgets.Checkbox(value=False, indent=False,
                                       description="weight heatmap (|w|)",
                                       tooltip="|w| of the kept weights in blues; pruned "
                                               "cells lemon yellow",
                                       layout=widgets.Layout(width="auto"))
        self.toggle.add_class("pe-weight-heatmap")
        self.image = widgets.Image(format="png", layout=widgets.Layout(display="none"))
        self.image.add_class("pe-weight-heatmap-picture")
        self.box = widgets.VBox([self.toggle, self.image])
        quiet = None if explorer.debounce is None else max(explorer.debounce, HEATMAP_QUIET_S)
        self.runner = LatestOnly(self._render, debounce=quiet, name="prune-explorer-heatmap",
                                 on_error=lambda err: explorer.status.error(
                                     err, "Weight heatmap", source="preview"))
        self._last: tuple[PreviewRequest, Mapping[str, torch.Tensor]] | None = None
        self.toggle.observe(self._on_toggle, names="value")

    def _on_toggle(self, change: dict[str, object]) -> None:
        self.image.layout.display = "" if change["new"] else "none"
        if change["new"] and self._last is not None:
            self.runner.request(self._last)

    def show(self, request: PreviewRequest, masks: Mapping[str, torch.Tensor]) -> None:
        """Ask for the heatmap of this preview (coalesced; nothing while unchecked)."""
        self._last = (request, masks)
        if self.toggle.value:
            self.runner.request(self._last)

    def _render(self, job: tuple[PreviewRequest, Mapping[str, torch.Tensor]]) -> None:
        request, masks = job
        session = self.ex.session
        name = request.target
        preview = name in masks
        mask = masks[name] if preview else session.mask(name)  # a lazy global mask: built here
        room = self.room
        if room is None:
            fig, ax = make_figure(figsize=(4.8, 4.0), dpi=80)
        else:  # the panel's width, 5:6 as tall where the room allows
            width, height, ratio = room
            fig, ax = room_figure(width, max(MIN_HEIGHT, min(height, round(5 * width / 6))),
                                  pixel_ratio=ratio)
        plot_mask(ax, mask, weight=session.tensor(name), mode="magnitude", name=name,
                  method=request.method if preview else None,
                  settings=request.title_settings() if preview else None,
                  module_type=session.info(name).module_type)
        self.image.value = render_png(fig)
        if room is not None:  # drawn at the pixel ratio: shown at its CSS size
            self.image.width = str(round(fig.get_size_inches()[0] * fig.dpi / room[2]))
        self.image.remove_class("pe-stale")
        self.renders += 1

    def close(self) -> None:
        """Stop its worker."""
        self.runner.close()
