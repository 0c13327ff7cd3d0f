"""The notebook runs check every figure they show (tests/helpers/nbval_figures.py): a figure whose
text is shown under 10 px at 1024x768 fails its cell, a figure sized for the output area passes.

Runs pytest with nbval on a two-cell notebook in a scratch folder, in a subprocess (its own kernel).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from helpers import REPO
from helpers.browser import write_notebook

pytest.importorskip("nbval")

pytestmark = [pytest.mark.slow, pytest.mark.notebook]

FITS = """%matplotlib inline
import matplotlib.pyplot as plt
from prune_explorer import viz
fig, ax = plt.subplots(figsize=viz.notebook_figsize(3), layout="constrained")
ax.plot([0, 1], [1, 0], label="kept")
ax.legend(fontsize="small")
plt.show()"""
TOO_WIDE = """fig, axes = plt.subplots(1, 3, figsize=(13, 3.6), layout="constrained")
for ax in axes:
    ax.plot([0, 1], [1, 0], label="kept")
    ax.legend(fontsize="small")"""  # shown at the end of the cell, not by plt.show()


def test_a_figure_too_wide_for_the_output_area_fails_its_cell(tmp_path):
    write_notebook(tmp_path / "figures.ipynb", [FITS, TOO_WIDE, FITS])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(REPO / "src"), str(REPO / "tests"), env.get("PYTHONPATH", "")])
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "helpers.nbval_figures",
         "--nbval-lax", "-q", "figures.ipynb"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    out = run.stdout + run.stderr
    assert run.returncode == 1, out
    assert "1 failed, 2 passed" in out, out
    assert "FAILED figures.ipynb::Cell 1" in out, out
    assert "check_readable: text must be >= 10 px as shown in a 592 px output area" in out, out
