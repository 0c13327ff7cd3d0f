"""Every docstring example in the package runs and prints what it shows.

The one place doctests run (``./dev test`` does not add ``--doctest-modules``), one test per module.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import prune_explorer

SLOW = ("prune_explorer.demo",)  # examples that train or load the demo models


def modules() -> list[pytest.param]:
    names = ["prune_explorer"] + [
        m.name for m in pkgutil.walk_packages(prune_explorer.__path__, "prune_explorer.")
    ]
    return [
        pytest.param(name, marks=[pytest.mark.slow] if name.startswith(SLOW) else [], id=name)
        for name in sorted(names)
    ]


@pytest.mark.parametrize("name", modules())
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.failed == 0
    finder = doctest.DocTestFinder()
    shown = sum(len(test.examples) for test in finder.find(module))
    assert result.attempted == shown  # nothing was skipped silently


def test_the_walk_finds_every_layer():
    names = {p.values[0] for p in modules()}
    assert {"prune_explorer.prune.functional", "prune_explorer.session.session",
            "prune_explorer.viz.masks", "prune_explorer.widgets", "prune_explorer.cli"} <= names
