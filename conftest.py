"""Repository-wide pytest hooks: each notebook cell nbval collects gets the ``notebook`` mark.

So ``pytest -m "not notebook"`` skips the teaching notebooks, whatever path collected them.
"""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.suffix == ".ipynb":
            item.add_marker(pytest.mark.notebook)
