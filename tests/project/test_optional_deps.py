"""A test module whose optional package is missing is skipped, never a collection error.

The repository's ``conftest.py`` turns a ``ModuleNotFoundError`` for one of its
``OPTIONAL_PACKAGES`` (raised while importing a test module) into a module-level skip naming the
package, so ``pytest -m cuda`` collects on a bare torch machine. Any other import error still
fails the collection.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _pytest(folder: Path) -> subprocess.CompletedProcess[str]:
    shutil.copy(REPO / "conftest.py", folder / "conftest.py")
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-p", "no:nbval",
         "-o", "addopts=", "--rootdir", str(folder), str(folder)],
        capture_output=True, text=True, cwd=folder, timeout=120,
    )


def _module(folder: Path, name: str, missing: str) -> None:
    # what ``import <missing>`` raises where the package is not installed
    (folder / name).write_text(
        f"raise ModuleNotFoundError(\"No module named '{missing}'\", name={missing!r})\n\n"
        "def test_never_runs():\n    raise AssertionError\n"
    )


def test_a_missing_optional_package_skips_the_module(tmp_path):
    _module(tmp_path, "test_needs_widgets.py", "ipywidgets.widgets")
    (tmp_path / "test_plain.py").write_text("def test_runs():\n    pass\n")
    done = _pytest(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed, 1 skipped" in done.stdout
    assert "test_needs_widgets.py needs the optional package 'ipywidgets.widgets'" in done.stdout


def test_any_other_missing_package_is_still_an_error(tmp_path):
    _module(tmp_path, "test_needs_numpy.py", "numpy")
    done = _pytest(tmp_path)
    assert done.returncode != 0
    assert "1 error" in done.stdout, done.stdout
