"""Every module a docstring names exists: dotted ``prune_explorer.…`` names, ``:mod:`` roles
(relative ones too, as Sphinx reads them) and file names such as ``journal.py``.

Docstrings are where a newcomer looks for the room that holds something; a name left behind
by a move sends them nowhere.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

import prune_explorer

PACKAGE = Path(prune_explorer.__file__).parent
SOURCES = sorted(PACKAGE.rglob("*.py"))
FILES = {p.relative_to(PACKAGE).as_posix() for p in SOURCES}
REPOSITORY = PACKAGE.parents[1]  # src/.. : a docstring may name a test file (tests/...)
OUTSIDE = {"jupyter_server_config.py"}  # files of other programs a docstring talks about

DOTTED = re.compile(r"(?<![\w.])prune_explorer(?:\.\w+)+")
MOD_ROLE = re.compile(r":mod:`~?(\.*[\w.]*)(?:\s*<([^>]+)>)?`")
FILE = re.compile(r"`{1,2}([\w/]+\.py)`{1,2}")


def module_of(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def docstrings(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = [tree] + [n for n in ast.walk(tree)
                      if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))]
    return [doc for n in nodes if (doc := ast.get_docstring(n, clean=False))]


def resolves(name: str) -> bool:
    """Whether ``name`` is a module of the package, or an attribute of one."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def absolute(ref: str, package: str) -> str:
    """A ``:mod:`` target as Sphinx resolves it from ``package`` (leading dots: relative)."""
    dots = len(ref) - len(ref.lstrip("."))
    if not dots:
        return ref if ref.startswith("prune_explorer") else f"{package}.{ref}"
    anchor = package.rsplit(".", dots - 1)[0] if dots > 1 else package
    rest = ref[dots:]
    return f"{anchor}.{rest}" if rest else anchor


def missing(path: Path) -> list[str]:
    module = module_of(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for doc in docstrings(path):
        for name in DOTTED.findall(doc):
            if not resolves(name.rstrip(".")):
                found.append(name)
        for ref, target in MOD_ROLE.findall(doc):
            ref = (target or ref).strip()
            if ref and not resolves(absolute(ref, package)):
                found.append(f":mod:`{ref}`")
        for name in FILE.findall(doc):
            if name.startswith("tests/"):
                if (REPOSITORY / "tests").is_dir() and not (REPOSITORY / name).is_file():
                    found.append(name)
            elif name not in OUTSIDE and not any(f == name or f.endswith("/" + name)
                                                 for f in FILES):
                found.append(name)
    return found


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_docstrings_name_only_modules_that_exist(path):
    assert missing(path) == []


@pytest.mark.parametrize(("doc", "expected"), [
    ("see ``prune_explorer.session.compute``", ["prune_explorer.session.compute"]),
    ("see :mod:`.patterncode` and :mod:`.masks`", [":mod:`.patterncode`"]),
    ("the cut (``compute.py``) and :mod:`prune_explorer.session.preview.masks`", ["compute.py"]),
])
def test_the_check_finds_a_module_that_does_not_exist(tmp_path, monkeypatch, doc, expected):
    fake = PACKAGE / "session" / "preview" / "_not_a_module.py"  # where the doc would sit
    monkeypatch.setattr(Path, "read_text", lambda self, encoding=None: f'"""{doc}"""\n')
    assert missing(fake) == expected
