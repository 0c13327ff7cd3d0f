"""The collapsible panels under the Explore tab's picture: model view, magnitudes and why.

Each follows every preview the explore pane draws, and computes nothing while collapsed. A panel
that cannot show the preview says so in itself; it never fails the preview. "Why" (|W|, the
input norms and a criterion's score, :mod:`.why`) takes a row of its own, the full width.

Examples
--------
>>> import torch
>>> from prune_explorer.widgets import Explorer
>>> ex = Explorer(torch.nn.Sequential(torch.nn.Linear(8, 4)), debounce=None)
>>> ex.explore_pane.panels  # doctest: +NORMALIZE_WHITESPACE
ExplorePanels(ModelView(2 tensors, open=False), MagnitudePanel(open=False, cut=None),
              WhyPanel(open=False, shows nothing, compare with none))
>>> ex.close()
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import ipywidgets as widgets
import torch

from .magnitude import MagnitudePanel
from .modelview import ModelView
from .preview import PreviewRequest, PreviewStats
from .why import WhyPanel

if TYPE_CHECKING:
    from ...context import ExploreContext

__all__ = ["ExplorePanels"]


class ExplorePanels:
    """"Model view" and "Magnitudes", side by side where they fit, then "Why" on a row of its
    own (``box``, class ``pe-explore-panels``)."""

    def __init__(self, explorer: ExploreContext) -> None:
        self.model_view = ModelView(explorer)
        self.magnitudes = MagnitudePanel(explorer)
        self.why = WhyPanel(explorer)
        self.box = widgets.HBox(
            [self.model_view.accordion, self.magnitudes.accordion, self.why.accordion],
            layout=widgets.Layout(flex_flow="row wrap", align_items="flex-start",
                                  width="100%"))
        for acc in (self.model_view.accordion, self.magnitudes.accordion):
            acc.layout = widgets.Layout(flex="1 1 400px", min_width="0", max_width="620px")
        self.why.accordion.layout = widgets.Layout(flex="1 1 100%", min_width="0")
        self.box.add_class("pe-explore-panels")

    def show(self, request: PreviewRequest | None, masks: Mapping[str, torch.Tensor],
             stats: PreviewStats | None) -> None:
        """Follow a new preview (on the explore pane's thread)."""
        panels: tuple[tuple[str, ModelView | MagnitudePanel | WhyPanel], ...] = (
            ("Model view", self.model_view), ("Magnitudes", self.magnitudes),
            ("Why", self.why))
        for title, panel in panels:
            try:
                panel.show(request, masks, stats)
            except Exception as err:  # a panel never fails the preview; the next one clears it
                panel.mark_stale()
                panel.ex.status.error(err, title, source="preview")

    def mark_stale(self) -> None:
        """The preview failed: dim the panels."""
        self.model_view.mark_stale()
        self.magnitudes.mark_stale()
        self.why.mark_stale()

    def close(self) -> None:
        """Stop the panels' background work."""
        self.magnitudes.heatmap.close()
        self.why.close()

    def __repr__(self) -> str:
        return f"ExplorePanels({self.model_view!r}, {self.magnitudes!r}, {self.why!r})"
