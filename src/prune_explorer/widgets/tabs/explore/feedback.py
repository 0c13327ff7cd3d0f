"""What the Explore tab says next to its controls: why a button is off (the session's own
answers, ``Session.undo_blocker``/``reset_blocker``) and where an input error goes (under the
control it names and over the picture, next to the slider).

Examples
--------
>>> import torch
>>> from prune_explorer.widgets import Explorer
>>> ex = Explorer(torch.nn.Sequential(torch.nn.Linear(4, 2)), debounce=None)
>>> refresh_buttons(ex)
>>> "no steps are applied yet" in ex.ui.button_note.value
True
>>> ex.close()
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...parts.html import message, why_off
from ...parts.status import human_error
from .controls import PruningControls

if TYPE_CHECKING:
    from ...context import ExploreContext

__all__ = ["refresh_buttons", "show_input_error"]


def refresh_buttons(ex: ExploreContext, apply_off: str | None = None) -> None:
    """Undo and Reset on exactly when the session would do them (``Session.undo_blocker``,
    ``reset_blocker``); the reason for each button that is off, by the buttons (``apply_off``:
    why Apply is off, where the pane knows better than "no preview")."""
    ui, session = ex.ui, ex.session
    undo_why, reset_why = session.undo_blocker(), session.reset_blocker()
    ui.undo.disabled = undo_why is not None
    ui.reset.disabled = reset_why is not None
    ui.undo.tooltip = "undo the last step" if undo_why is None else f"Undo: {undo_why}"
    ui.reset.tooltip = ("undo every step of this session" if reset_why is None
                        else f"Reset: {reset_why}")
    lines = []
    if ui.apply.disabled:
        why = apply_off or ("no tensor is chosen" if ex.tensor is None else
               "no preview for these settings (the message is by the controls)")
        lines.append(f"Apply is off: {why}.")
    if undo_why is not None and reset_why is not None and not session.steps:
        lines.append("Undo and Reset are off: no steps are applied yet.")
    else:
        if undo_why is not None:
            lines.append(f"Undo is off: {undo_why}.")
        if reset_why is not None:
            lines.append(f"Reset is off: {reset_why}.")
    ui.button_note.value = why_off(lines)


def show_input_error(ex: ExploreContext, c: PruningControls, err: BaseException | None) -> None:
    """Put the error about the controls next to the control it names (``field`` of the
    session's errors, or the control a widget error starts with) and over the picture;
    None clears both."""
    ui = ex.ui
    if err is None:
        for widget in (ui.control_error, ui.input_error):
            widget.value = ""
            widget.layout.display = "none"
        return
    text = message("error", f"Preview failed: {human_error(err, 'Preview')}")
    ui.input_error.value = text
    ui.input_error.layout.display = ""
    field = getattr(err, "field", None) or str(err).split(":", 1)[0].strip()
    near = {"amount": None, "count": None, "n": c.n, "dim": c.dim, "pattern": c.pattern,
            "block": c.block, "mask": c.custom, "custom mask": c.custom,
            "pruning_method": c.global_method, "targets": c.global_targets,
            "importance": c.importance}.get(field)
    if near is None:  # the slider's own error is over the picture already
        ui.control_error.value = ""
        ui.control_error.layout.display = "none"
        return
    children = list(c.box.children)
    for order, child in enumerate(children):
        child.layout.order = str(2 * order)
    ui.control_error.layout.order = str(2 * children.index(near) + 1)
    ui.control_error.value = message("error", "↑ " + human_error(err, "Preview"))
    ui.control_error.layout.display = ""
