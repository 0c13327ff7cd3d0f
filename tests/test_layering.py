"""The layers keep to their imports: prune/ imports only torch; session/ never imports ipywidgets,
matplotlib or the layers above it; viz/ is matplotlib's object-oriented API with no pyplot state,
no session and no widgets; widgets/ is the only importer of ipywidgets.

Checked statically (every import statement, including those under ``TYPE_CHECKING`` for the
forbidden lists) and, for the three lower layers, by importing them in a fresh interpreter.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import prune_explorer

PACKAGE = Path(prune_explorer.__file__).parent
STDLIB = frozenset(sys.stdlib_module_names)
UI = ("ipywidgets", "IPython")
ABOVE_PRUNE = tuple(
    f"prune_explorer.{room}" for room in ("session", "viz", "widgets", "demo", "cli")
)


@dataclass(frozen=True)
class Rule:
    """What the modules of one folder may import.

    ``allowed``: top-level third-party packages and ``prune_explorer`` modules a runtime import
    may name (the standard library is always allowed); ``None`` means anything not forbidden.
    ``forbidden``: module prefixes no import may name, not even under ``TYPE_CHECKING``.
    """

    allowed: frozenset[str] | None
    forbidden: tuple[str, ...]


RULES = {
    "prune": Rule(frozenset({"torch", "prune_explorer.prune"}), (*ABOVE_PRUNE, "numpy", *UI)),
    "session": Rule(None, ("matplotlib", "prune_explorer.viz", "prune_explorer.widgets",
                           "prune_explorer.cli", *UI)),
    # viz names a layer's axes from the core's one table of layer axes (torch only)
    "viz": Rule(frozenset({"numpy", "torch", "matplotlib", "prune_explorer.viz",
                           "prune_explorer.prune.layers"}),
                ("matplotlib.pyplot", "pylab", "prune_explorer.session",
                 "prune_explorer.widgets", *UI)),
    "demo": Rule(None, ("prune_explorer.widgets", *UI)),
}
OUTSIDE_WIDGETS = Rule(None, UI)  # every other module of the package (cli.py, __init__.py)


def rule_for(path: Path) -> Rule | None:
    relative = path.relative_to(PACKAGE)
    if relative.parts[0] == "widgets":
        return None
    return RULES.get(relative.parts[0], OUTSIDE_WIDGETS)


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, package: str) -> list[tuple[str, bool]]:
    """(absolute module, under TYPE_CHECKING) for every import in a file.

    ``from a import b`` yields both ``a`` and ``a.b`` (``b`` may be a submodule); relative
    imports are resolved against ``package``.
    """
    tree = ast.parse(path.read_text(encoding="utf-8"))
    type_only = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            type_only.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, id(node) in type_only) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            found.append((base, id(node) in type_only))
            found += [(f"{base}.{alias.name}", id(node) in type_only) for alias in node.names]
    return found


def violations(path: Path, rule: Rule, package: str) -> list[str]:
    problems = []
    for module, type_only in imports(path, package):
        if any(module == f or module.startswith(f + ".") for f in rule.forbidden):
            problems.append(f"{path.name} imports {module} (forbidden here)")
            continue
        if type_only or rule.allowed is None:
            continue
        top = module.split(".")[0]
        if top in STDLIB or top in rule.allowed or top == "__future__":
            continue
        if top == "prune_explorer" and (
            module == "prune_explorer"
            or any(module == a or module.startswith(a + ".") for a in rule.allowed)
        ):
            continue
        problems.append(f"{path.name} imports {module} (not in {sorted(rule.allowed)})")
    return problems


SOURCES = sorted(PACKAGE.rglob("*.py"))
CHECKED = [p for p in SOURCES if rule_for(p) is not None]


def test_every_room_has_modules_to_check():
    rooms = {p.relative_to(PACKAGE).parts[0] for p in CHECKED}
    assert set(RULES) <= rooms
    assert len(CHECKED) > 20


@pytest.mark.parametrize("path", CHECKED, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_keep_to_the_layer(path):
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(
        ".")[0]
    assert violations(path, rule_for(path), package) == []


@pytest.mark.parametrize(
    ("source", "room", "expected"),
    [
        ("import numpy as np\n", "prune", "imports numpy (forbidden here)"),
        ("from prune_explorer import session\n", "prune",
         "imports prune_explorer.session (forbidden here)"),
        ("import pandas\n", "prune", "imports pandas (not in"),
        ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import ipywidgets\n",
         "session", "imports ipywidgets (forbidden here)"),
        ("from ..viz import masks\n", "session", "imports prune_explorer.viz (forbidden here)"),
        ("from matplotlib import pyplot\n", "viz", "imports matplotlib.pyplot (forbidden here)"),
        ("import ipywidgets\n", "cli", "imports ipywidgets (forbidden here)"),
    ],
)
def test_the_check_catches_a_forbidden_import(tmp_path, source, room, expected):
    path = tmp_path / "bad.py"
    path.write_text(source, encoding="utf-8")
    rule = RULES.get(room, OUTSIDE_WIDGETS)
    [problem] = violations(path, rule, f"prune_explorer.{room}")[:1]
    assert expected in problem


def test_the_check_allows_what_the_layer_may_import(tmp_path):
    path = tmp_path / "ok.py"
    path.write_text("import math\nimport torch\nfrom . import _module\n"
                    "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pandas\n",
                    encoding="utf-8")
    assert violations(path, RULES["prune"], "prune_explorer.prune") == []


@pytest.mark.parametrize("path", sorted((PACKAGE / "viz").glob("*.py")), ids=lambda p: p.name)
def test_viz_never_calls_show_or_pyplot_state(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            assert node.attr not in {"show", "gcf", "gca", "figure", "subplots"} or not (
                isinstance(node.value, ast.Name) and node.value.id in {"plt", "pyplot"}
            ), f"{path.name}:{node.lineno} uses pyplot.{node.attr}"
            assert node.attr != "show", f"{path.name}:{node.lineno} calls .show()"


@pytest.mark.slow  # a fresh interpreter importing torch (and matplotlib) takes seconds
@pytest.mark.parametrize("room", ["prune", "session", "viz"])
def test_importing_a_layer_loads_nothing_it_may_not_import(room):
    forbidden = [f for f in RULES[room].forbidden if f != "numpy"]  # torch itself loads numpy
    code = (
        f"import sys, prune_explorer.{room}\n"
        f"print([m for m in {forbidden!r} if m in sys.modules])\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert result.stdout.strip() == "[]"


MAX_LINES = 500


def test_no_source_file_is_over_500_lines():
    """Each file keeps to one job a reader can take in at a sitting: none over 500 lines."""
    lengths = {
        str(path.relative_to(PACKAGE)): len(path.read_text(encoding="utf-8").splitlines())
        for path in sorted(PACKAGE.rglob("*.py"))
    }
    assert lengths, f"no .py files found under {PACKAGE}"
    too_long = {name: n for name, n in lengths.items() if n > MAX_LINES}
    assert not too_long, f"files over {MAX_LINES} lines (split them by job): {too_long}"
