"""The "why" view of the Explore tab: what the chosen criterion's score of the tensor on show
is made of, and where another criterion's mask of the same step differs.

A collapsible panel under the picture (class ``pe-why-panel``). While open, it follows every
preview: ``|W|``, the input norms ``||X_j||`` from the calibration statistics and the score of
the criterion picked beside the method (``importance``; magnitude when the method takes none),
side by side through the same 2-D view as the picture, with the histogram of the input norms
(:meth:`Session.why <prune_explorer.session.Session.why>`,
:func:`prune_explorer.viz.importance.why_figure`). "compare with" picks criterion B: the
panel then shows where the step's mask with B differs from the one with the picked criterion,
with counts (:meth:`Session.compare_criteria
<prune_explorer.session.Session.compare_criteria>`: the session's previews, what Apply would
install). Before anything is calibrated it says what to call instead of drawing.

The figure is drawn for the panel's width as the browser measures it (a
:class:`~prune_explorer.widgets.parts.sizeprobe.SizeProbe` in the panel), on its own worker
once the controls rest.

Examples
--------
>>> import torch
>>> from prune_explorer.widgets import Explorer
>>> ex = Explorer(torch.nn.Sequential(torch.nn.Linear(8, 4)), debounce=None)
>>> panel = ex.explore_pane.panels.why
>>> panel.open()
>>> "calibrate(batches)" in panel.text.value, panel.image.layout.display
(True, 'none')
>>> _ = ex.session.calibrate([torch.randn(16, 8)])  # the explorer hears of it and redraws
>>> panel.why
WhyData('0.weight', magnitude: |w|, shape (4, 8), 8 input norms over 16 rows)
>>> ex.close()
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import ipywidgets as widgets

from prune_explorer.importance.criteria import CRITERIA
from prune_explorer.session.errors import InvalidStepError
from prune_explorer.viz import render_png
from prune_explorer.viz.importance import why_figure

from ...parts.collapsible import Collapsible
from ...parts.html import esc
from ...parts.scheduler import LatestOnly
from ...parts.sizeprobe import SizeProbe
from .magnitude import HEATMAP_QUIET_S
from .preview import PreviewRequest

if TYPE_CHECKING:
    from collections.abc import Mapping

    import torch

    from prune_explorer.session.analysis.why import CriteriaComparison, WhyData

    from ...context import ExploreContext
    from .preview import PreviewStats

__all__ = ["DEFAULT_WIDTH", "WhyPanel"]

#: The figure's width (CSS px) until the browser reports the panel's (tests, scripts).
DEFAULT_WIDTH = 720


def _words(err: BaseException) -> str:
    """The session's message without the name of the call that raised it."""
    text = str(err)
    head, sep, rest = text.partition(": ")
    return (rest[:1].upper() + rest[1:]) if sep and head.startswith("Session.") else text


class WhyPanel(Collapsible):
    """``|W|``, ``||X_j||`` and the score of the tensor on show, and a comparison of criteria.

    Attributes
    ----------
    against : ipywidgets.Dropdown
        Criterion B of the comparison (``""``: none); class ``pe-why-against``.
    text : ipywidgets.HTML
        What the picture shows, the comparison's counts, or what to do first (class
        ``pe-why-text``).
    image : ipywidgets.Image
        The figure (class ``pe-why-picture``), hidden while there is nothing to draw.
    why : WhyData or None
        What the picture is drawn from.
    comparison : CriteriaComparison or None
        The masks compared (None: no criterion B, or the method takes no criterion).
    renders : int
        Figures drawn so far.
    """

    ex: ExploreContext

    def __init__(self, explorer: ExploreContext) -> None:
        self.ex = explorer
        self.why: WhyData | None = None
        self.comparison: CriteriaComparison | None = None
        self.renders = 0
        self._last: PreviewRequest | None = None
        self.against = widgets.Dropdown(
            options=[("none", "")] + [(name, name) for name in CRITERIA], value="",
            description="compare with", style={"description_width": "initial"},
            tooltip="criterion B: where the step's mask with B differs from the picked one")
        self.against.add_class("pe-why-against")
        self.text = widgets.HTML(value="")
        self.text.add_class("pe-why-text")
        self.image = widgets.Image(format="png", layout=widgets.Layout(display="none"))
        self.image.add_class("pe-why-picture")
        self.probe = SizeProbe(column="pe-why-column")  # width and ratio only: no picture cap
        self.box = widgets.VBox([self.against, self.text, self.image, self.probe],
                                layout=widgets.Layout(width="100%"))
        self.box.add_class("pe-why-column")
        self._collapse_into("Why: |W|, input norms ‖X‖ and the score", self.box,
                            "pe-why-panel")
        quiet = None if explorer.debounce is None else max(explorer.debounce, HEATMAP_QUIET_S)
        self.runner = LatestOnly(self._render, debounce=quiet, name="prune-explorer-why",
                                 on_error=self._failed)
        self.against.observe(lambda _: self._again(), names="value")
        self.probe.observe(lambda _: self._again(), names=["width", "pixel_ratio"])

    # -- following the preview (the explore pane calls these) -----------------------------------
    def show(self, request: PreviewRequest | None, masks: Mapping[str, torch.Tensor],
             stats: PreviewStats | None) -> None:
        """Draw the view for ``request`` (coalesced; nothing while collapsed)."""
        if not self.is_open or request is None:
            return
        self._last = request
        self.runner.request(request)

    def _again(self) -> None:
        if self.is_open and self._last is not None:
            self.runner.request(self._last)

    def _room(self) -> tuple[int, float]:
        room = self.probe.room()
        if room is None:
            return DEFAULT_WIDTH, 1.0
        width, _, ratio = room
        return max(240, min(int(width), 2400)), min(max(float(ratio), 1.0), 4.0)

    def _render(self, request: PreviewRequest) -> None:
        session = self.ex.session
        importance = str(request.settings.get("importance", "magnitude"))
        try:
            why = session.why(request.target, importance)
        except InvalidStepError as err:  # nothing calibrated, or no statistic for it
            self.why = self.comparison = None
            self.text.value = f'<span class="pe-why-message">{esc(_words(err))}</span>'
            self.image.layout.display = "none"
            self._current()
            return
        comparison, note = None, ""
        against = self.against.value
        if against:
            settings = {k: v for k, v in request.settings.items() if k != "importance"}
            try:
                comparison = session.compare_criteria(
                    request.target, request.method, importance=importance, against=against,
                    targets=list(request.targets) if request.is_global else None, **settings)
            except InvalidStepError as err:
                note = _words(err)
        width, ratio = self._room()
        drawn = why_figure(why, comparison, width=width, pixel_ratio=ratio)
        png = render_png(drawn.figure)
        self.why, self.comparison = why, comparison
        self.image.value = png
        self.image.width = str(drawn.css_size[0])
        self.image.layout.display = ""
        inputs = ("no input features, so no input norms" if why.input_norms is None else
                  f"input norms over {why.rows:,} calibration rows"
                  + (f", {why.dead_inputs:,} inputs never active" if why.dead_inputs else ""))
        lines = [f"{request.target}: {importance} scores {why.formula}; {inputs}"]
        if comparison is not None:
            lines.append(comparison.sentence())
        elif note:
            lines.append(note)
        self.text.value = "".join(f'<div class="pe-why-line">{esc(line)}</div>'
                                  for line in lines)
        self.renders += 1
        self._current()

    def _current(self) -> None:
        for widget in (self.text, self.image):
            widget.remove_class("pe-stale")

    def _failed(self, err: BaseException) -> None:
        self.mark_stale()
        self.ex.status.error(err, "Why view", source="preview")

    def mark_stale(self) -> None:
        """Dim the view: it is of older settings (the preview failed)."""
        for widget in (self.text, self.image):
            widget.add_class("pe-stale")

    def close(self) -> None:
        """Stop its worker."""
        self.runner.close()

    def __repr__(self) -> str:
        shown = "nothing" if self.why is None else repr(self.why.name)
        against = self.against.value or "none"
        return f"WhyPanel(open={self.is_open}, shows {shown}, compare with {against})"
