"""The model view of the Explore tab: per-layer sparsity of the whole model, now and previewed.

One row per prunable tensor, a button that selects it in the tensor picker, with a thin bar
under its name in the colours of the picture: pruned before (lemon yellow), pruned by the previewed
step (hatched vermillion), kept (dark blue); the percentages on the right. For a global preview
every target's bar moves; for a local one only the shown tensor's.

The numbers come from the session: the current ``zeros`` of :meth:`Session.report` (read by the
explorer once per session change) and, for a preview, :meth:`Session.zeros_after` for a global
step (``O(log n)`` per target on the lazy global L1 path) or the shown tensor's
``PreviewStats.pruned_after`` for a local step (the count the info box shows). A slider move
then rewrites one ``<style>`` widget -- bars and percentages are CSS -- however many rows there
are; the buttons themselves are rebuilt only when the list of tensors changes.

Examples
--------
>>> import torch
>>> from prune_explorer.widgets import Explorer
>>> model = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
>>> ex = Explorer(model, debounce=None)
>>> ex.explore_pane.panels.model_view.open()
>>> ex.ui.amount.value = 0.5
>>> ex.explore_pane.panels.model_view.rows["0.weight"]
LayerSparsity('0.weight', numel=32, zeros=0, zeros_after=16)
>>> ex.explore_pane.panels.model_view.buttons["2.weight"].click()
>>> ex.tensor
'2.weight'
>>> ex.close()
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import ipywidgets as widgets
import torch

from prune_explorer.viz.style import KEPT_COLOR, NEW_PRUNED_COLOR, PRUNED_COLOR

from ...parts.collapsible import Collapsible
from ...parts.html import percent
from .preview import PreviewRequest, PreviewStats

if TYPE_CHECKING:
    from ...context import ExploreContext

__all__ = ["LayerSparsity", "ModelView"]

#: Rows on show before the list scrolls.
VISIBLE_ROWS = 10


@dataclass(frozen=True)
class LayerSparsity:
    """One row: a tensor's entries, its zeros now and after the previewed step
    (``Session.report``'s ``zeros``: masked or exactly 0)."""

    name: str
    numel: int
    zeros: int
    zeros_after: int

    @property
    def sparsity(self) -> float:
        """Fraction pruned now."""
        return self.zeros / self.numel if self.numel else 0.0

    @property
    def sparsity_after(self) -> float:
        """Fraction pruned after the previewed step."""
        return self.zeros_after / self.numel if self.numel else 0.0

    def __repr__(self) -> str:
        return (f"LayerSparsity({self.name!r}, numel={self.numel:,}, zeros={self.zeros:,}, "
                f"zeros_after={self.zeros_after:,})")


_ROW_CSS = """
.{scope} .pe-mv-row {{ width: 100%; height: 26px; margin: 1px 0; display: flex;
  justify-content: space-between; align-items: center; text-align: left; overflow: hidden;
  padding: 0 6px 5px 6px; }}
.{scope} .pe-mv-row::after {{ margin-left: 8px; white-space: nowrap; font-variant-numeric:
  tabular-nums; }}
.{scope} .pe-mv-selected {{ font-weight: bold; outline: 2px solid {kept}; }}
"""


class ModelView(Collapsible):
    """Per-layer sparsity chart; clicking a row selects the tensor (see the module docstring).

    Attributes
    ----------
    rows : dict of str to LayerSparsity
        What the chart shows, by address (empty until the panel is first opened).
    buttons : dict of str to ipywidgets.Button
        One per tensor (CSS class ``pe-mv-row``); clicking selects it.
    accordion : ipywidgets.Accordion
        The collapsible section (class ``pe-modelview``); nothing is computed while closed.
    """

    ex: ExploreContext

    def __init__(self, explorer: ExploreContext) -> None:
        self.ex = explorer
        self.rows: dict[str, LayerSparsity] = {}
        self.buttons: dict[str, widgets.Button] = {}
        self._scope = f"pe-mv-{id(self):x}"
        self._selected: str | None = None
        self.style = widgets.HTML(value="")
        self.legend = widgets.HTML(value=(
            '<span class="pe-mv-legend">'
            + "".join(f'<span style="display:inline-block;width:10px;height:10px;margin:0 3px '
                      f'0 8px;background:{c};border:1px solid #555"></span>{t}' for c, t in (
                          (PRUNED_COLOR, "pruned before"), (NEW_PRUNED_COLOR, "this step"),
                          (KEPT_COLOR, "kept")))
            + " · click a row to show it</span>"))
        self.list = widgets.VBox(layout=widgets.Layout(
            max_height=f"{VISIBLE_ROWS * 28}px", overflow="auto", width="100%"))
        self.list.add_class(self._scope)
        self.box = widgets.VBox([self.legend, self.style, self.list],
                                layout=widgets.Layout(width="100%"))
        self._collapse_into("Model view", self.box, "pe-modelview")

    def _ensure_buttons(self) -> None:
        names = list(self.ex.session.names)
        if list(self.buttons) == names:
            return
        for button in self.buttons.values():
            button.close()
        self.buttons = {}
        for index, name in enumerate(names):
            info = self.ex.session.info(name)
            shape = "×".join(str(s) for s in info.shape) or "scalar"
            also = f"; tied: also {', '.join(info.aliases)}" if info.aliases else ""
            button = widgets.Button(description=name, tooltip=f"show {name} ({shape}{also})",
                                    layout=widgets.Layout(width="100%"))
            button.add_class("pe-mv-row")
            button.add_class(f"pe-mv-r{index}")
            button.on_click(lambda _, name=name: self.ex.select(name))
            self.buttons[name] = button
        self.list.children = tuple(self.buttons.values())
        self._selected = None

    # -- following the preview (the explore pane calls these) -----------------------------------
    def show(self, request: PreviewRequest | None, masks: Mapping[str, torch.Tensor],
             stats: PreviewStats | None) -> None:
        """Chart the current state and what the previewed step (``masks``) would leave."""
        if not self.is_open:
            return
        self._ensure_buttons()
        session = self.ex.session
        after: dict[str, int] = {}
        if request is not None and request.is_global and masks:
            after = session.zeros_after(masks)
        elif request is not None and stats is not None:
            after = {request.target: stats.pruned_after}
        rows = {}
        for name in self.buttons:
            numel = session.info(name).numel
            zeros = self.ex.zeros(name)
            rows[name] = LayerSparsity(name, numel, zeros, after.get(name, zeros))
        self.rows = rows
        self.style.value = self._css()
        self._mark_selected()
        for widget in (self.list, self.legend):
            widget.remove_class("pe-stale")

    def mark_stale(self) -> None:
        """Dim the chart: it is of older settings (the preview failed)."""
        for widget in (self.list, self.legend):
            widget.add_class("pe-stale")

    def _mark_selected(self) -> None:
        name = self.ex.tensor
        if name == self._selected:
            return
        if self._selected in self.buttons:
            self.buttons[self._selected].remove_class("pe-mv-selected")
        if name in self.buttons:
            self.buttons[name].add_class("pe-mv-selected")
        self._selected = name

    def _css(self) -> str:
        scope = self._scope
        rules = [_ROW_CSS.format(scope=scope, kept=KEPT_COLOR)]
        for index, row in enumerate(self.rows.values()):
            now = 100.0 * row.sparsity
            later = max(100.0 * row.sparsity_after, now)
            text = percent(row.sparsity)
            if row.zeros_after != row.zeros:
                text += f" → {percent(row.sparsity_after)}"
            rules.append(
                f".{scope} .pe-mv-r{index} {{ background: linear-gradient(to right, "
                f"{PRUNED_COLOR} 0 {now:.2f}%, transparent {now:.2f}% {later:.2f}%, {KEPT_COLOR} "
                f"{later:.2f}% 100%) left bottom / 100% 5px no-repeat, repeating-linear-"
                f"gradient(-45deg, {NEW_PRUNED_COLOR} 0 2px, #ffffff 2px 4px) left bottom / "
                f"100% 5px no-repeat, var(--jp-layout-color2, #eeeeee); }}\n"
                f'.{scope} .pe-mv-r{index}::after {{ content: "{text}"; }}'
            )
        return "<style>" + "\n".join(rules) + "</style>"

    def __repr__(self) -> str:
        return f"ModelView({len(self.ex.session.names)} tensors, open={self.is_open})"
