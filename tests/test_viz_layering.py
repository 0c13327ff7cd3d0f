"""viz stays a pure matplotlib object-oriented layer: no pyplot, no session, no widgets."""

from __future__ import annotations

import ast
import doctest
import importlib
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import prune_explorer.viz

VIZ_DIR = Path(prune_explorer.viz.__file__).parent
VIZ_FILES = sorted(VIZ_DIR.glob("*.py"))
ALLOWED_TOP_LEVEL = {
    "__future__", "collections", "dataclasses", "io", "math", "struct", "typing", "zlib",
    "numpy", "torch", "matplotlib", "prune_explorer",
}
FORBIDDEN = ("matplotlib.pyplot", "pylab", "ipywidgets", "IPython", "prune_explorer.session",
             "prune_explorer.widgets")


def imported_modules(path: Path) -> list[tuple[str, bool]]:
    """(module, under TYPE_CHECKING) for every import in a file."""
    tree = ast.parse(path.read_text())
    type_checking_nodes = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            type_checking_nodes.update(id(n) for n in ast.walk(node))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, id(node) in type_checking_nodes) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.append((node.module, id(node) in type_checking_nodes))
    return found


def test_viz_has_modules_to_check():
    assert {p.name for p in VIZ_FILES} >= {"views.py", "pooling.py", "plots.py", "preview.py"}


@pytest.mark.parametrize("path", VIZ_FILES, ids=lambda p: p.name)
def test_viz_imports_only_torch_numpy_matplotlib(path):
    for module, type_only in imported_modules(path):
        assert not module.startswith(FORBIDDEN), f"{path.name} imports {module}"
        if not type_only:
            assert module.split(".")[0] in ALLOWED_TOP_LEVEL, f"{path.name} imports {module}"


@pytest.mark.parametrize("path", VIZ_FILES, ids=lambda p: p.name)
def test_viz_never_calls_show_or_pyplot_state(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            assert node.attr not in {"show", "gcf", "gca", "figure", "subplots"} or not (
                isinstance(node.value, ast.Name) and node.value.id in {"plt", "pyplot"}
            ), f"{path.name}:{node.lineno} uses pyplot.{node.attr}"
            assert node.attr != "show", f"{path.name}:{node.lineno} calls .show()"


@pytest.mark.slow  # a fresh interpreter importing torch + matplotlib takes seconds
def test_importing_viz_loads_neither_pyplot_nor_upper_layers():
    code = (
        "import sys, prune_explorer.viz\n"
        "bad = [m for m in ('matplotlib.pyplot', 'ipywidgets', 'prune_explorer.session',"
        " 'prune_explorer.widgets') if m in sys.modules]\n"
        "print(bad)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert result.stdout.strip() == "[]"


@pytest.mark.parametrize(
    "name",
    [
        "prune_explorer.viz",
        *sorted(m.name for m in pkgutil.iter_modules([str(VIZ_DIR)], "prune_explorer.viz.")),
    ],
)
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.failed == 0
