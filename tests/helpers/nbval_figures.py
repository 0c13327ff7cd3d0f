"""pytest plugin: every figure a teaching notebook shows obeys the readability rule.

The rule and its numbers live in :mod:`prune_explorer.viz.notebook` (text >= 10 CSS px as shown
in the 592 px output area of JupyterLab at 1024x768 with the file browser open). nbval runs each
notebook in its own kernel; before the notebook's first cell, this plugin makes that kernel check
every figure the inline backend is about to show (``plt.show()`` and the figures left open at the
end of a cell): a figure that breaks the rule raises there instead of being shown, so the cell
fails with the texts that are too small, as any error in a cell does.

Loaded by the repository's ``conftest.py``; ``pytest -p helpers.nbval_figures`` loads it
elsewhere (``tests/`` on the path).
"""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

#: The kernel-side code (run once per notebook kernel, silently).
INSTALL = """
def _prune_explorer_check_figures():
    import matplotlib_inline.backend_inline as inline
    from matplotlib.figure import Figure
    from prune_explorer.viz.notebook import check_readable

    shown = inline.display
    if getattr(shown, "checks_readable", False):
        return

    def display(obj, *args, **kwargs):
        if isinstance(obj, Figure):
            check_readable(obj)
        return shown(obj, *args, **kwargs)

    display.checks_readable = True
    inline.display = display

_prune_explorer_check_figures()
del _prune_explorer_check_figures
"""


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, Any, Any]:
    result = yield  # the notebook's kernel is started by nbval's setup of the file
    kernel = getattr(item.parent, "kernel", None)
    if Path(str(item.path)).suffix == ".ipynb" and kernel is not None and not getattr(
            kernel, "prune_explorer_checks_figures", False):
        reply = kernel.kc.execute(INSTALL, silent=True, store_history=False, reply=True,
                                  timeout=120)
        content = reply["content"]
        if content["status"] != "ok":
            raise RuntimeError("could not install the figure check in the notebook's kernel: "
                               f"{content.get('ename')}: {content.get('evalue')}")
        kernel.prune_explorer_checks_figures = True
    return result
