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
from collections.abc import Callable
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
    # calibration statistics and criteria: torch and the core only, so any layer may use them
    "importance": Rule(frozenset({"torch", "prune_explorer.prune", "prune_explorer.importance"}),
                       (*ABOVE_PRUNE, "numpy", *UI)),
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


CORE = PACKAGE / "prune"


def core_graph(folder: Path) -> dict[str, set[str]]:
    """module -> the modules of the same package it imports at run time (deferred imports
    inside functions included, ``TYPE_CHECKING`` ones not; the package itself is no node)."""
    package = module_name(folder / "__init__.py")
    modules = {module_name(p) for p in folder.glob("*.py") if p.name != "__init__.py"}
    graph: dict[str, set[str]] = {}
    for path in sorted(folder.glob("*.py")):
        if path.name == "__init__.py":
            continue
        found = {m for m, type_only in imports(path, package) if not type_only}
        graph[module_name(path)] = {m for m in found if m in modules} - {module_name(path)}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_core_has_no_import_cycle():
    """The core's modules form layers: no module imports, even inside a function, one that
    imports it back."""
    graph = core_graph(CORE)
    assert len(graph) > 10
    assert any(graph.values())
    assert cycles(graph) == []


def test_the_cycle_check_finds_a_deferred_cycle(tmp_path):
    folder = tmp_path / "pkg"
    folder.mkdir()
    (folder / "__init__.py").write_text("from . import a\n", encoding="utf-8")
    (folder / "a.py").write_text("from . import b\n", encoding="utf-8")
    (folder / "b.py").write_text("def f():\n    from .c import x\n", encoding="utf-8")
    (folder / "c.py").write_text("from typing import TYPE_CHECKING\nfrom .a import y\n"
                                 "if TYPE_CHECKING:\n    from .b import z\n", encoding="utf-8")
    graph = {k.rsplit(".", 1)[1]: {m.rsplit(".", 1)[1] for m in v} for k, v in
             _graph_of(folder).items()}
    assert graph == {"a": {"b"}, "b": {"c"}, "c": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def _graph_of(folder: Path) -> dict[str, set[str]]:
    package = folder.name
    modules = {f"{package}.{p.stem}" for p in folder.glob("*.py") if p.name != "__init__.py"}
    return {f"{package}.{p.stem}": {m for m, t in imports(p, package) if not t and m in modules}
            for p in folder.glob("*.py") if p.name != "__init__.py"}


@pytest.mark.parametrize("path", sorted((PACKAGE / "session").rglob("*.py")),
                         ids=lambda p: str(p.relative_to(PACKAGE)))
def test_the_session_reaches_the_core_through_its_interface(path):
    """Besides the public API, the session takes from the core only what ``prune.engine``
    exports: never a private core module (``prune._radix``, ``prune._module``, ...)."""
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(
        ".")[0]
    private = sorted({m for m, _ in imports(path, package)
                      if m.startswith("prune_explorer.prune._")})
    assert private == []


SESSION = PACKAGE / "session"


def session_graph(folder: Path = SESSION, prefix: str = "prune_explorer.") -> dict[str, set[str]]:
    """module -> the modules of the session package (``folder``) it imports: at run time,
    inside a function, or only for types under ``TYPE_CHECKING`` -- every import is an edge.
    Package ``__init__`` modules are nodes too (``from .. import Session`` imports one)."""
    paths = sorted(folder.rglob("*.py"))

    def name(path: Path) -> str:
        parts = path.relative_to(folder.parent).with_suffix("").parts
        return prefix + ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

    modules = {name(p) for p in paths}
    graph: dict[str, set[str]] = {}
    for path in paths:
        module = name(path)
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        graph[module] = {m for m, _ in imports(path, package) if m in modules} - {module}
    return graph


def room_of(module: str, base: str = "prune_explorer.session") -> str | None:
    """The session sub-package (``history``, ``steps``...) a module belongs to; None for the
    modules directly in ``session/`` (``session.py``, ``errors.py``...) and the package."""
    parts = module[len(base) + 1:].split(".") if module != base else []
    return parts[0] if len(parts) > 1 or (parts and module in _PACKAGES) else None


_PACKAGES = {module_name(p) for p in SESSION.rglob("__init__.py")}


def rooms_both_ways(graph: dict[str, set[str]], base: str = "prune_explorer.session",
                    rooms: Callable[[str], str | None] | None = None) -> list[tuple[str, str]]:
    """The pairs of session sub-packages that import each other (any module of one importing
    any module of the other, each way), sorted."""
    room = rooms or (lambda m: room_of(m, base))
    pairs = {(room(m), room(d)) for m, deps in graph.items() for d in deps}
    pairs = {(a, b) for a, b in pairs if a is not None and b is not None and a != b}
    return sorted((a, b) for a, b in pairs if (b, a) in pairs and a < b)


def test_no_two_session_rooms_import_each_other():
    """The session's sub-packages are layered: when ``steps/`` imports ``model/``, nothing in
    ``model/`` imports ``steps/`` (not even for types, not even inside a function)."""
    graph = session_graph()
    assert len({room_of(m) for m in graph} - {None}) >= 8
    assert rooms_both_ways(graph) == []


def test_the_session_has_no_import_cycle():
    """No session module imports, even only for types or inside a function, one that imports
    it back (no ``Session`` imported for its types by the session's own parts)."""
    graph = session_graph()
    assert len(graph) > 40
    assert any(graph.values())
    assert cycles(graph) == []


def test_the_session_checks_see_type_only_and_deferred_imports(tmp_path):
    folder = tmp_path / "sess"
    for room in ("a", "b"):
        (folder / room).mkdir(parents=True)
        (folder / room / "__init__.py").write_text("", encoding="utf-8")
    (folder / "__init__.py").write_text("from .top import Top\n", encoding="utf-8")
    (folder / "top.py").write_text("from .a.one import x\n", encoding="utf-8")
    (folder / "a" / "one.py").write_text("def f():\n    from ..b.two import y\n", encoding="utf-8")
    (folder / "b" / "two.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..a.one import x\n"
        "    from .. import Top\n", encoding="utf-8")
    graph = session_graph(folder, prefix="")
    assert graph["sess.b.two"] == {"sess", "sess.a.one"}
    assert rooms_both_ways(graph, rooms=lambda m: m.split(".")[1]
                           if m.count(".") >= 2 else None) == [("a", "b")]
    assert cycles(graph) == [["sess", "sess.a.one", "sess.b.two", "sess.top"]]
