"""What the explorer asks of every pane: its widget, and three calls it makes at set times.

A tab of the explorer shows one pane, or several one under another (the Commit tab: Commit,
then Shrink). The explorer builds the panes from :data:`~prune_explorer.widgets.tabs.registry.
TABS` and then, whichever they are:

- ``invalidate()`` when the session changes and when the pane's tab is chosen (a pane that
  draws only while on show asks :meth:`TabContext.shows <prune_explorer.widgets.context.
  TabContext.shows>`);
- ``flush()`` from :meth:`Explorer.flush`: finish any background picture now;
- ``close()`` from :meth:`Explorer.close`: stop background work.

:class:`Pane` does nothing for each; a pane overrides what it needs.

Examples
--------
>>> import ipywidgets as widgets
>>> class Note(Pane):
...     def __init__(self) -> None:
...         self.box = widgets.HTML("a note")
>>> note = Note()
>>> note.invalidate(), note.flush(), note.close()
(None, None, None)
>>> note.widget is note.box
True
"""

from __future__ import annotations

from typing import Any

__all__ = ["Pane"]


class Pane:
    """Base of the explorer's panes: ``box`` is the widget shown; the three calls do nothing.

    Attributes
    ----------
    box : ipywidgets.Widget
        The pane's widget (set by the subclass).
    """

    box: Any

    @property
    def widget(self) -> Any:
        """What the tab shows of this pane (``box`` unless the pane says otherwise)."""
        return self.box

    def invalidate(self) -> None:
        """The session changed, or the pane's tab was chosen: redraw what is on show."""

    def flush(self) -> None:
        """Finish any pending background picture now."""

    def close(self) -> None:
        """Stop background work (the explorer is closing)."""
