"""Panes reach the explorer only through the Protocol they name (``widgets/context.py``): no
tab module imports the ``Explorer``, and every attribute a pane reads of the explorer it was
given is declared by that Protocol. Checked statically (mypy checks the same from the
annotations), and the Explorer satisfies each Protocol at run time.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch

from prune_explorer import widgets as widgets_package
from prune_explorer.session import Session
from prune_explorer.widgets import Explorer, context
from prune_explorer.widgets.context import (
    ExploreContext,
    ExploreSession,
    PaneContext,
    TabContext,
    members,
)

WIDGETS = Path(widgets_package.__file__).parent
PANES = [*sorted((WIDGETS / "tabs").rglob("*.py")), WIDGETS / "parts" / "collapsible.py"]
PROTOCOLS = {"PaneContext": PaneContext, "ExploreContext": ExploreContext,
             "TabContext": TabContext}
#: What each Protocol's ``session`` may be asked (None: the whole Session).
SESSIONS = {"ExploreContext": ExploreSession, "TabContext": None}


def reaches(source: str) -> list[tuple[str, str]]:
    """(Protocol name, attribute) for every attribute read of an explorer given as a
    Protocol: ``self.ex.X``, ``panel.ex.X`` and ``explorer.X`` / ``ex.X`` where that name is a
    parameter annotated with the Protocol. ``self.ex`` is typed by the class's own
    annotation, else by the ``explorer`` parameter of its ``__init__``. Reads of its session
    (``self.ex.session.X``, or ``session.X`` after ``session = self.ex.session``) are reported
    as ``("<Protocol>.session", X)``."""
    tree = ast.parse(source)
    found = []
    for cls in [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)] + [tree]:
        own = _protocol_of_ex(cls)
        for func in (n for n in ast.walk(cls) if isinstance(n, (ast.FunctionDef,
                                                                  ast.AsyncFunctionDef))):
            if cls is tree and _inside_class(tree, func):
                continue  # a method: counted with its class
            params = {a.arg: a.annotation.id for a in func.args.args + func.args.kwonlyargs
                      if isinstance(a.annotation, ast.Name) and a.annotation.id in PROTOCOLS}

            def context_of(node: ast.AST, params=params, own=own) -> str | None:
                if isinstance(node, ast.Name):
                    return params.get(node.id)
                if (isinstance(node, ast.Attribute) and node.attr == "ex"
                        and isinstance(node.value, ast.Name)):
                    if node.value.id == "self":
                        return own
                    if node.value.id == "panel":  # ExplorePanels: its panels' explorer
                        return "ExploreContext"
                return None

            def session_of(node: ast.AST, context_of=context_of) -> str | None:
                if isinstance(node, ast.Attribute) and node.attr == "session":
                    return context_of(node.value)
                return None

            aliases = {}  # local names bound to a context's session
            for node in ast.walk(func):
                if isinstance(node, ast.Assign):
                    for target in node.targets:
                        pairs = ([(target, node.value)] if isinstance(target, ast.Name) else
                                 list(zip(target.elts, node.value.elts, strict=False))
                                 if isinstance(target, ast.Tuple)
                                 and isinstance(node.value, ast.Tuple) else [])
                        for name, value in pairs:
                            protocol = session_of(value)
                            if isinstance(name, ast.Name) and protocol is not None:
                                aliases[name.id] = protocol
            for node in ast.walk(func):
                if not isinstance(node, ast.Attribute):
                    continue
                protocol = context_of(node.value)
                if protocol is not None:
                    found.append((protocol, node.attr))
                    continue
                protocol = session_of(node.value)
                if protocol is None and isinstance(node.value, ast.Name):
                    protocol = aliases.get(node.value.id)
                if protocol is not None:
                    found.append((protocol + ".session", node.attr))
    return found


def _protocol_of_ex(cls: ast.AST) -> str | None:
    if not isinstance(cls, ast.ClassDef):
        return None
    for node in cls.body:  # ex: SomeContext
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                and node.target.id == "ex" and isinstance(node.annotation, ast.Name)):
            return node.annotation.id
    for node in cls.body:
        if isinstance(node, ast.FunctionDef) and node.name == "__init__":
            for arg in node.args.args:
                if arg.arg == "explorer" and isinstance(arg.annotation, ast.Name):
                    return arg.annotation.id
    return None


def _inside_class(tree: ast.Module, func: ast.AST) -> bool:
    return any(func in ast.walk(c) for c in tree.body if isinstance(c, ast.ClassDef))


def test_no_pane_imports_the_explorer():
    for path in PANES:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                assert "Explorer" not in {a.name for a in node.names}, path.name
                assert not (node.module or "").endswith("explorer"), path.name


@pytest.mark.parametrize("path", PANES, ids=lambda p: p.name)
def test_each_pane_reaches_only_what_its_protocol_declares(path):
    for protocol, attribute in reaches(path.read_text(encoding="utf-8")):
        if protocol.endswith(".session"):
            allowed = SESSIONS[protocol.removesuffix(".session")]
            assert allowed is None or attribute in members(allowed), (
                f"{path.name} asks the session {attribute}, which {allowed} does not declare")
            continue
        assert protocol in PROTOCOLS, f"{path.name}: {protocol} is not a context Protocol"
        assert attribute in members(PROTOCOLS[protocol]), (
            f"{path.name} reaches explorer.{attribute}, which {protocol} does not declare")


def test_the_check_sees_the_panes_reaches():
    seen = [r for path in PANES for r in reaches(path.read_text(encoding="utf-8"))]
    attributes = {attribute for _, attribute in seen}
    assert {"session", "ui", "status", "act", "quiet", "tensor", "select",
            "zeros_snapshot"} <= attributes
    asked = {attribute for protocol, attribute in seen if protocol == "ExploreContext.session"}
    assert {"names", "info", "preview_picture", "magnitudes", "tensor", "undo_blocker"} <= asked
    assert len(seen) > 100


def test_the_check_refuses_a_reach_past_the_protocol():
    source = '''
class Pane:
    def __init__(self, explorer: ExploreContext) -> None:
        self.ex = explorer
        explorer.history_pane.invalidate()

    def draw(self) -> None:
        self.ex.compare_pane.invalidate()
        session, name = self.ex.session, "0.weight"
        session.report()
'''
    found = reaches(source)
    assert ("ExploreContext", "history_pane") in found
    assert ("ExploreContext", "compare_pane") in found
    assert ("ExploreContext.session", "report") in found
    assert not {"history_pane", "compare_pane"} & members(ExploreContext)
    assert "report" not in members(ExploreSession)


def test_the_explorer_satisfies_every_protocol():
    ex = Explorer(torch.nn.Sequential(torch.nn.Linear(4, 2)), debounce=None)
    try:
        for protocol in PROTOCOLS.values():
            assert isinstance(ex, protocol)
            for name in members(protocol):
                assert hasattr(ex, name), name
        assert isinstance(ex.session, ExploreSession)
        assert isinstance(ex.session, Session)
        assert members(ExploreSession) < set(dir(Session))  # a part of its API
    finally:
        ex.close()
    assert "ExploreSession" in context.__all__
