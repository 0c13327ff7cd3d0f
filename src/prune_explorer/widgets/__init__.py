"""The explorer widget: pick a tensor, preview, apply, walk the history, compare, commit, export.

The only part of prune-explorer that imports ipywidgets. A thin view over
:class:`prune_explorer.session.Session`: controls become session calls, and the widgets redraw
on the session's change events. Pictures come from :mod:`prune_explorer.viz` as PNG bytes in
``ipywidgets.Image`` widgets, so nothing needs a JupyterLab extension beyond ipywidgets 8.

Examples
--------
>>> from prune_explorer.demo import load_mlp
>>> from prune_explorer.widgets import explore
>>> ex = explore(load_mlp(), debounce=None)  # in a notebook, end the cell with `ex` to show it
>>> ex.ui.method.value = "ln_structured"
>>> ex.ui.dim.value = 0
>>> ex.preview_stats.units_pruned  # 0.3 of the 128 output rows of fc1
38
>>> ex.close()
"""

from prune_explorer.widgets.errors import WidgetInputError
from prune_explorer.widgets.explorer import UI, Explorer, explore
from prune_explorer.widgets.parts.scheduler import LatestOnly
from prune_explorer.widgets.tabs.explore.preview import PreviewRequest, PreviewStats
from prune_explorer.widgets.tabs.titles import TAB_TITLES

__all__ = [
    "TAB_TITLES",
    "UI",
    "Explorer",
    "LatestOnly",
    "PreviewRequest",
    "PreviewStats",
    "WidgetInputError",
    "explore",
]
