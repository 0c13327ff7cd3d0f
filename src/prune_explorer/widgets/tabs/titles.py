"""The explorer's tabs, in order (the browser tests click them by title).

Examples
--------
>>> TAB_TITLES[HISTORY_TAB]
'History'
"""

from __future__ import annotations

__all__ = ["COMMIT_TAB", "COMPARE_TAB", "EXPLORE_TAB", "EXPORT_TAB", "HISTORY_TAB", "TAB_TITLES"]

TAB_TITLES = ("Explore", "History", "Global vs local", "Commit", "Export")
EXPLORE_TAB, HISTORY_TAB, COMPARE_TAB, COMMIT_TAB, EXPORT_TAB = range(len(TAB_TITLES))
