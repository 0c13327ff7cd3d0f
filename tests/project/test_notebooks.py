"""The teaching notebooks as files: one copy, at the top level, stripped, and marked for pytest.

``notebooks/*.ipynb`` is the only copy: people edit it in JupyterLab, ruff lints its code cells,
nbval executes it (``pytest`` collects it through ``testpaths``), and the package ships it as the
data ``prune-explorer lab`` copies out (``src/prune_explorer/notebooks`` is a link to it, which
the wheel resolves into files).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import REPO
from prune_explorer.cli import bundled_notebooks

nbformat = pytest.importorskip("nbformat")  # optional: absent on a bare torch machine

NOTEBOOKS = REPO / "notebooks"
EXPECTED_NOTEBOOKS = [
    "01_quickstart.ipynb",
    "02_pruning_concepts.ipynb",
    "03_global_vs_local.ipynb",
    "04_plan_export.ipynb",
    "05_patterns_and_shrink.ipynb",
    "06_fine_tune_loop.ipynb",
    "07_importance.ipynb",
]
STRIP_HINT = (
    "clear the outputs before committing: Edit -> Clear Outputs of All Cells in JupyterLab, or "
    "jupyter nbconvert --clear-output --inplace notebooks/*.ipynb"
)
# folders that hold no sources (besides every dot-folder: .venv, .git, .ipynb_checkpoints)
NOT_SOURCES = {"venv", "build", "dist", "test-artifacts", "prune-explorer-notebooks"}


def test_the_top_level_folder_is_the_only_copy():
    assert sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")) == EXPECTED_NOTEBOOKS
    everywhere = []
    for folder, subfolders, files in os.walk(REPO):
        subfolders[:] = [d for d in subfolders if d not in NOT_SOURCES and not d.startswith(".")]
        everywhere += [Path(folder, f).relative_to(REPO) for f in files if f.endswith(".ipynb")]
    assert sorted(everywhere) == [NOTEBOOKS.relative_to(REPO) / n for n in EXPECTED_NOTEBOOKS]


def test_the_installed_copy_is_the_top_level_folder():
    bundled = bundled_notebooks()
    assert sorted(bundled) == EXPECTED_NOTEBOOKS
    for name, data in bundled.items():
        assert data == (NOTEBOOKS / name).read_bytes()


@pytest.mark.parametrize("name", EXPECTED_NOTEBOOKS)
def test_notebooks_are_stripped_and_use_python3(name):
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    nbformat.validate(nb)
    assert nb.metadata.kernelspec.name == "python3"
    assert "widgets" not in nb.metadata, f"{name} carries saved widget state; {STRIP_HINT}"
    code_cells = [c for c in nb.cells if c.cell_type == "code"]
    assert code_cells
    for cell in code_cells:
        assert cell.outputs == [], f"{name} has outputs; {STRIP_HINT}"
        assert cell.execution_count is None, f"{name} has execution counts; {STRIP_HINT}"
    text = json.dumps(nb)
    assert "ipympl" not in text
    assert "%matplotlib widget" not in text


def test_quickstart_opens_the_explorer_on_the_demo_model():
    nb = nbformat.read(NOTEBOOKS / "01_quickstart.ipynb", as_version=4)
    source = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "from prune_explorer import explore" in source
    assert "model = load_mlp()" in source
    # the accuracy readout, and the Fine-tune tab's training function
    assert "explorer = explore(model, evaluate=evaluate, train=train)" in source


def collected(*args: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         *args, str(NOTEBOOKS)],
        capture_output=True, text=True, cwd=REPO, timeout=300,
    )
    return result.stdout


@pytest.mark.slow  # two fresh pytest processes
def test_not_notebook_deselects_every_notebook_cell():
    assert "no tests collected" in collected("-m", "not notebook")
    # the mark comes from conftest.py's hook: without it the same filter keeps every cell
    assert "01_quickstart.ipynb::Cell 0" in collected("-m", "not notebook", "--noconftest")
