"""Repository-wide pytest hooks.

* Each notebook cell nbval collects gets the ``notebook`` mark, so ``pytest -m "not notebook"``
  skips the teaching notebooks, whatever path collected them.
* A test module whose import fails because an optional package is not installed (a GPU image
  with torch but no JupyterLab, say) is skipped with the package's name instead of breaking the
  collection of the whole run: ``pytest -m cuda`` must run wherever torch and pytest do.
"""

from __future__ import annotations

from pathlib import Path

import pytest

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
