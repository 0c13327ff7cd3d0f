"""The explorer's tabs, in order: the one list the explorer builds them from.

Each :class:`Tab` has a title and one or more :class:`Part` (panes shown one under another);
each part names the pane (``explorer.<name>_pane``), the class or function that builds it
(called as ``factory(explorer, **needs)``) and what it needs of the explorer's options
(``needs``: keyword names among :data:`OPTIONS`). The first part names the tab's widget
(``explorer.ui.<name>_tab``). A new tab is one new module under ``tabs/`` and one line here.

Examples
--------
>>> [tab.title for tab in TABS][:2]
['Explore', 'History']
>>> commit = TABS[TAB_TITLES.index("Commit")]
>>> [part.name for part in commit.parts]
['commit', 'shrink']
>>> TABS[0].parts[0].needs
('custom_masks', 'figsize', 'dpi', 'pixel_ratio')
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..parts.pane import Pane
from .commit import CommitPane
from .compare import ComparePane
from .explore.pane import ExplorePane
from .export import ExportPane
from .fine_tune import FineTunePane
from .history import HistoryPane
from .shrink import ShrinkPane

__all__ = ["OPTIONS", "TABS", "TAB_TITLES", "Part", "Tab"]

#: The explorer's options a part may need (passed to its factory by keyword).
OPTIONS = ("custom_masks", "figsize", "dpi", "pixel_ratio", "evaluate", "metric_label",
           "train")


class Part:
    """One pane of a tab: its name, how to build it, which of the explorer's options it takes.

    Parameters
    ----------
    name : str
        The pane is ``explorer.<name>_pane`` (an identifier).
    factory : callable
        ``factory(explorer, **{need: option})`` returns the :class:`Pane`.
    needs : tuple of str, default ()
        The explorer's options the factory takes by keyword (see :data:`OPTIONS`).
    """

    __slots__ = ("factory", "name", "needs")

    def __init__(self, name: str, factory: Callable[..., Pane],
                 needs: tuple[str, ...] = ()) -> None:
        if not name.isidentifier():
            raise ValueError(f"Part: name must be an identifier; got {name!r}")
        unknown = [need for need in needs if need not in OPTIONS]
        if unknown:
            raise ValueError(f"Part {name!r}: needs must be among {list(OPTIONS)}; got "
                             f"{unknown}")
        self.name, self.factory, self.needs = name, factory, tuple(needs)

    def build(self, explorer: Any, options: dict[str, Any]) -> Pane:
        """The pane, built for ``explorer`` with the options it needs."""
        return self.factory(explorer, **{need: options[need] for need in self.needs})

    def __repr__(self) -> str:
        needs = f", needs={self.needs!r}" if self.needs else ""
        return f"Part({self.name!r}, {getattr(self.factory, '__name__', self.factory)}{needs})"


class Tab:
    """A tab: its title and its parts, shown one under another.

    Parameters
    ----------
    title : str
        The tab's title (the browser tests click tabs by title).
    *parts : Part
        At least one; the first names the tab (``explorer.ui.<name>_tab``).
    """

    __slots__ = ("parts", "title")

    def __init__(self, title: str, *parts: Part) -> None:
        if not parts:
            raise ValueError(f"Tab {title!r}: give at least one Part; got none")
        self.title, self.parts = title, parts

    @property
    def name(self) -> str:
        """The first part's name: the tab widget is ``explorer.ui.<name>_tab``."""
        return self.parts[0].name

    def __repr__(self) -> str:
        return f"Tab({self.title!r}, {', '.join(map(repr, self.parts))})"


TABS: tuple[Tab, ...] = (
    Tab("Explore", Part("explore", ExplorePane,
                        needs=("custom_masks", "figsize", "dpi", "pixel_ratio"))),
    Tab("History", Part("history", HistoryPane)),
    Tab("Global vs local", Part("compare", ComparePane)),
    Tab("Commit", Part("commit", CommitPane), Part("shrink", ShrinkPane)),
    Tab("Export", Part("export", ExportPane)),
    Tab("Fine-tune", Part("fine_tune", FineTunePane, needs=("train", "evaluate", "metric_label"))),
)

#: The titles, in order (``explorer.selected_tab`` is an index into them).
TAB_TITLES = tuple(tab.title for tab in TABS)
