"""A panel that lives in a one-section Accordion: collapsed at first, computing only while open.

The Explore tab's "Model view" and "Magnitudes" are such panels: they follow every preview
while expanded, and expanding one asks the explorer for a preview so it fills at once.

Examples
--------
>>> import torch
>>> from prune_explorer.widgets import Explorer
>>> ex = Explorer(torch.nn.Sequential(torch.nn.Linear(4, 2)), debounce=None)
>>> panel = ex.explore_pane.panels.model_view
>>> panel.is_open
False
>>> panel.open()
>>> panel.is_open, panel.accordion.titles
(True, ('Model view',))
>>> ex.close()
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import ipywidgets as widgets

if TYPE_CHECKING:
    from ..context import PaneContext

__all__ = ["Collapsible"]


class Collapsible:
    """Base of a collapsible panel: ``accordion`` (CSS class given), ``is_open``, ``open()``."""

    ex: PaneContext
    accordion: widgets.Accordion

    def _collapse_into(self, title: str, body: widgets.Widget, css: str) -> None:
        """Put ``body`` in a collapsed one-section Accordion with CSS class ``css``."""
        self.accordion = widgets.Accordion(children=[body], titles=(title,), selected_index=None)
        self.accordion.add_class(css)
        self.accordion.observe(self._on_toggle, names="selected_index")

    @property
    def is_open(self) -> bool:
        """True while the section is expanded."""
        return self.accordion.selected_index == 0

    def open(self) -> None:
        """Expand the section (it then follows every preview)."""
        self.accordion.selected_index = 0

    def _on_toggle(self, change: dict[str, object]) -> None:
        if change["new"] == 0:
            self.ex.request_preview()  # fill it from the current controls
