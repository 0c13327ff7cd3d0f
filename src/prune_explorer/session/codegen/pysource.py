"""Safe pieces of generated Python source: the one escaper for untrusted text.

Names and addresses come from models and plan files, so they may hold anything: line breaks that
would end a comment, quotes that would end a string, a NUL that stops the parser, bidirectional
controls that make code read differently from how it runs. Every piece of such text that reaches
generated code -- inside a string literal or shown in a comment -- goes through :func:`py_str`,
which returns a double-quoted literal made of printable characters only. In particular it never
holds a character that Python's tokenizer or ``str.splitlines()`` treat as a line end
(``\\n``, ``\\r``, ``\\v``, ``\\f``, ``\\x1c``-``\\x1e``, ``\\x85``, U+2028, U+2029), so it
cannot end a comment, and it evaluates back to exactly the original text.

Examples
--------
>>> from prune_explorer.session.codegen.pysource import py_str, py_comment
>>> print(py_str('fc"\\n__import__("os")#'))
"fc\\"\\n__import__(\\"os\\")#"
>>> print(py_comment("features.0.weight"), py_comment("x\\u2028y"))
features.0.weight "x\\u2028y"
"""

from __future__ import annotations

import keyword
import math
import re
from typing import Any

__all__ = ["py_attribute", "py_comment", "py_literal", "py_set_attribute", "py_str"]

# Printable ASCII other than the quote and the backslash: copied as they are.
_PLAIN = re.compile(r"[ !#-\[\]-~]*")
# What a comment may show without quotes: the usual tensor addresses.
_BARE = re.compile(r"[A-Za-z0-9_.]+")
# Escapes that read better than their \x form.
_SHORT = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(char: str) -> str:
    if char in _SHORT:
        return _SHORT[char]
    if char.isprintable():  # False for controls, separators, format chars, surrogates...
        return char
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def py_str(text: str) -> str:
    """A double-quoted Python string literal that evaluates to ``text``.

    Only printable characters appear in it (everything else is a ``\\x``/``\\u``/``\\U``
    escape), so it is one line whatever ``text`` holds, and safe in a comment as well.
    """
    if not isinstance(text, str):
        raise TypeError(f"py_str: text must be a str; got {type(text).__name__}")
    if _PLAIN.fullmatch(text):
        return f'"{text}"'
    return '"' + "".join(_escape(char) for char in text) + '"'


def py_comment(text: str) -> str:
    """``text`` for a comment: as it is when it is a plain address, else as :func:`py_str`."""
    return text if _BARE.fullmatch(text) else py_str(text)


def py_attribute(expr: str, name: str) -> str:
    """``expr.name`` when ``name`` is a plain ASCII identifier, else ``getattr(expr, "...")``.

    Non-ASCII identifiers are spelled with ``getattr`` because Python NFKC-normalises them in
    source (``model.ｗ`` would read ``model.w``).
    """
    if name.isascii() and name.isidentifier() and not keyword.iskeyword(name):
        return f"{expr}.{name}"
    return f"getattr({expr}, {py_str(name)})"


def py_set_attribute(expr: str, name: str, value: str) -> str:
    """The statement setting ``expr.name`` to the expression ``value``: an assignment when
    ``name`` is a plain ASCII identifier, else ``setattr(expr, "...", value)`` (a ``getattr``
    call cannot be assigned to).

    Examples
    --------
    >>> py_set_attribute("module", "weight_mask", "m"), py_set_attribute("module", "w-1", "m")
    ('module.weight_mask = m', 'setattr(module, "w-1", m)')
    """
    target = py_attribute(expr, name)
    if target.startswith("getattr("):
        return f"setattr({expr}, {py_str(name)}, {value})"
    return f"{target} = {value}"


def py_literal(value: Any) -> str:
    """A Python expression for a setting's value: strings through :func:`py_str`, infinities as
    ``float("inf")``, numbers and ``None`` as their repr.

    Examples
    --------
    >>> py_literal(0.5), py_literal(float("-inf")), py_literal("fro")
    ('0.5', 'float("-inf")', '"fro"')
    """
    if isinstance(value, float) and math.isinf(value):
        return 'float("inf")' if value > 0 else 'float("-inf")'
    if isinstance(value, str):
        return py_str(value)
    if value is None or isinstance(value, (bool, int, float)):
        return repr(value)
    raise TypeError(f"py_literal: value must be a str, number or None; got {type(value).__name__}")
