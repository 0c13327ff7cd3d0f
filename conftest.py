"""Repository-wide pytest hooks.

* Each notebook cell nbval collects gets the ``notebook`` mark, so ``pytest -m "not notebook"``
  skips the teaching notebooks, whatever path collected them.
* A test module whose import fails because an optional package is not installed (a GPU image
  with torch but no JupyterLab, say) is skipped with the package's name instead of breaking the
  collection of the whole run: ``pytest -m cuda`` must run wherever torch and pytest do.
* Every figure a notebook shows under nbval is checked against the readability rule of
  ``prune_explorer.viz.notebook`` (the plugin ``tests/helpers/nbval_figures.py``).
* Before each test, a Ctrl-C that ``tests/helpers/interrupts.Interrupter`` raised from its tracer
  and that CPython 3.11 left behind as the thread's "exception being handled" is cleared, so it
  cannot become the ``__context__`` of a later test's exceptions (see ``_no_leaked_interrupt``).
"""

from __future__ import annotations

import ctypes
import sys
from pathlib import Path

import pytest

# Every figure a teaching notebook shows is readable at 1024x768 (tests/helpers/nbval_figures.py).
# Only where this file sits beside the repository's tests/ (pyproject's ``pythonpath``): a copy of
# it elsewhere (tests/project/test_optional_deps.py) keeps its other hooks.
if (Path(__file__).parent / "tests" / "helpers" / "nbval_figures.py").is_file():
    pytest_plugins = ["helpers.nbval_figures"]

#: Packages a test module may import at module level that a bare torch machine may lack (the
#: notebook, widget, browser and shrink layers and their test tools). Anything else missing is
#: still a collection error.
OPTIONAL_PACKAGES = frozenset({
    "anywidget", "ipympl", "ipywidgets", "IPython", "jupyterlab", "jupyter_server", "nbclient",
    "nbformat", "nbval", "playwright", "torch_pruning", "hypothesis", "peft", "accelerate",
})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.suffix == ".ipynb":
            item.add_marker(pytest.mark.notebook)


class _Module(pytest.Module):
    """A test module that is skipped when an optional package it imports is missing."""

    def collect(self):  # type: ignore[no-untyped-def]
        try:
            return super().collect()
        except self.CollectError as error:
            missing = error.__cause__
            if (isinstance(missing, ModuleNotFoundError) and missing.name is not None
                    and missing.name.partition(".")[0] in OPTIONAL_PACKAGES):
                pytest.skip(f"{self.path.name} needs the optional package {missing.name!r}, "
                            f"which is not installed", allow_module_level=True)
            raise


def pytest_pycollect_makemodule(
    module_path: Path, parent: pytest.Collector
) -> pytest.Module | None:
    if module_path.name == "__init__.py":
        return None  # a package's own collector
    return _Module.from_parent(parent, path=module_path)


@pytest.fixture(autouse=True)
def _no_leaked_interrupt() -> None:
    """Before each test, clear an injected KeyboardInterrupt an earlier test left behind as the
    thread's handled exception.

    The interrupt tests raise KeyboardInterrupt from a ``sys.settrace`` tracer at places a real
    signal can land (a return, a loop's jump back). Raised from a tracer at such a place (a
    ``return`` event inside ``torch.no_grad().__exit__``, say), CPython 3.11 can skip the
    restore of the thread's handled exception: ``sys.exc_info()`` then still shows the interrupt
    at the top level of every later test, and their exceptions get it as ``__context__``. No
    real signal does this (CPython delivers those at the eval loop's own checks), and the
    interrupt tests check the product's state, not this leftover. A plain (not generator)
    fixture, so the thread's own exception state is the one cleared.
    """
    if isinstance(sys.exc_info()[1], KeyboardInterrupt) and hasattr(
            ctypes.pythonapi, "PyErr_SetHandledException"):
        clear = ctypes.pythonapi.PyErr_SetHandledException
        clear.argtypes, clear.restype = [ctypes.py_object], None
        clear(None)
