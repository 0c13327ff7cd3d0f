"""The explorer's tab titles in order, and the index of each existing tab, read from the one
list :data:`~prune_explorer.widgets.tabs.registry.TABS` (the browser tests click them by title).

Examples
--------
>>> TAB_TITLES[HISTORY_TAB]
'History'
"""

from __future__ import annotations

from .registry import TAB_TITLES

__all__ = ["COMMIT_TAB", "COMPARE_TAB", "EXPLORE_TAB", "EXPORT_TAB", "HISTORY_TAB", "TAB_TITLES"]

EXPLORE_TAB, HISTORY_TAB, COMPARE_TAB, COMMIT_TAB, EXPORT_TAB = (
    TAB_TITLES.index(title) for title in ("Explore", "History", "Global vs local", "Commit",
                                          "Export"))
