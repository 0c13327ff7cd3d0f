"""The Shrink action of the Commit tab: a physically smaller copy of the model, measured.

*Shrink* (``pe-shrink``) calls :meth:`Session.shrink` on example inputs -- the explorer's
``example_inputs``, or one zero batch in the demo models' own input layout -- and shows the
report (parameters, FLOPs, state_dict bytes, CPU latency, before and after; channels removed and
kept). The new model is :attr:`ShrinkPane.report` ``.model``; the session's model and its history
are unchanged, and shrinking is not an undoable step, which the pane says. With no weight
zero (nothing pruned) the button is off and its note (``pe-shrink-note``) says why.

Examples
--------
>>> import torch
>>> from prune_explorer.widgets import Explorer
>>> ex = Explorer(torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2)),
...               debounce=None)
>>> ex.example_inputs = torch.zeros(1, 4)
>>> ex.ui.shrink.disabled  # nothing is pruned yet
True
>>> _ = ex.session.apply("0.weight", "ln_structured", amount=1, n=1, dim=0)
>>> ex.ui.shrink.click()
>>> type(ex.shrink_pane.report).__name__
'ShrinkReport'
>>> ex.close()
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import ipywidgets as widgets

from prune_explorer.session.analysis.wording import plural

from ..errors import WidgetInputError
from ..parts.html import why_off
from ..parts.pane import Pane

if TYPE_CHECKING:
    from ..context import TabContext

__all__ = ["ShrinkPane", "example_inputs_for"]

_DEMO_SHAPES = {"flat": (1, 64), "image": (1, 1, 8, 8)}


def example_inputs_for(explorer: TabContext) -> Any:
    """The explorer's ``example_inputs``, else a zero batch for a demo model's layout."""
    given = getattr(explorer, "example_inputs", None)
    if given is not None:
        return given
    layout = getattr(explorer.model, "input_layout", None)
    if layout in _DEMO_SHAPES:
        import torch

        device = next(explorer.model.parameters()).device
        return torch.zeros(_DEMO_SHAPES[layout], device=device)
    raise WidgetInputError("Shrink: set explorer.example_inputs to one input batch of the model "
                           "(e.g. torch.zeros(1, 3, 32, 32)) so that it can be traced")


class ShrinkPane(Pane):
    """The Shrink button and its report."""

    def __init__(self, explorer: TabContext) -> None:
        self.ex = explorer
        self.button = explorer.ui.add("shrink", widgets.Button(
            description="Shrink", tooltip="remove the channels pruning made dead, in a new "
            "model (the session's model is unchanged)"))
        self.details = explorer.ui.add("shrink_details", widgets.HTML(value=""))
        hint = widgets.HTML(
            "<b>Shrink</b> builds a new, smaller model without the channels the structured "
            "masks made dead (Torch-Pruning removes them with their dependent layers) and "
            "measures both. The session's model is unchanged and shrink is <b>not</b> part of "
            "undo; the new model is <code>explorer.shrink_pane.report.model</code>."
        )
        self.note = explorer.ui.add("shrink_note", widgets.HTML(value=""))  # why it is off
        self.note.add_class("pe-button-note")
        self.box = widgets.VBox([hint, self.button, self.note, self.details])
        self.report: Any = None
        self.button.on_click(lambda _: self.do_shrink())  # on/off: refresh(), on each change

    @property
    def why_off(self) -> str | None:
        """Why Shrink would do nothing now (no weight is zero: no channel can be dead), or
        None."""
        if any(self.ex.zeros_snapshot().values()):
            return None
        return "nothing is pruned (no weight is zero), so no channel can be removed"

    def invalidate(self) -> None:
        """The session changed: Shrink on or off (:meth:`refresh`)."""
        self.refresh()

    def refresh(self) -> None:
        """Shrink on only when some weight is zero (pruned, or committed), else off with the
        reason beside it."""
        why = self.why_off
        self.button.disabled = why is not None
        self.note.value = why_off([] if why is None else [f"Shrink is off: {why}"])

    def do_shrink(self) -> None:
        """Shrink a copy of the model and show the report."""
        def run(_: Any) -> Any:
            if self.why_off is not None:
                raise WidgetInputError(f"Shrink: {self.why_off}")
            report = self.ex.session.shrink(example_inputs_for(self.ex), repeats=5)
            self.report = report
            self.details.value = report._repr_html_()
            return report

        self.ex.act("Shrink", run,
                    done=lambda r: f"Shrink: removed {plural(sum(r.removed.values()), 'channel')} "
                                   "in a new model (the session's model is unchanged).")
