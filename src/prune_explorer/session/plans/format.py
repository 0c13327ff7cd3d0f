"""Reading plan files: bytes to a JSON document, with every failure an :class:`InvalidPlanError`.

This is the one parser behind :meth:`Plan.from_json`, :meth:`Plan.load`, the CLI and the
explorer's import. It accepts ``str`` or ``bytes``; bytes must be UTF-8 (a leading byte-order
mark, as Windows editors write, is dropped). Only ``json`` is used -- no pickle, no eval -- and
what ``json`` would let through as a raw Python error or a silent surprise is refused with a
message that names the step and the field where there is one:

- nesting deeper than :data:`MAX_DEPTH` (a plan needs 5 levels; ``"[" * 200000`` would otherwise
  be a ``RecursionError``);
- integers of more than 4300 digits (Python's own limit for ``int(str)``);
- numbers beyond the range of a float (``1e400`` would become ``inf``), and the non-JSON
  constants ``NaN``, ``Infinity`` and ``-Infinity``;
- a key twice in one object.

Amounts
-------
``amount`` means a fraction of the entries when it is a float and a number of entries when it is
an int, so ``1.0`` prunes everything and ``1`` prunes one entry. JSON writers in many languages
drop the ``.0``, so version 2 of the format writes the meaning out: ``{"fraction": 0.5}`` or
``{"count": 3}``. Version 1 files, with bare numbers, are read exactly as before.

Examples
--------
>>> from prune_explorer.session.plans.format import load_document
>>> load_document(b'\\xef\\xbb\\xbf{"version": 2}', "demo")
{'version': 2}
>>> try:
...     load_document('{"steps": [{"n": 1e400}]}', "demo")
... except ValueError as err:
...     print(err)
demo: steps[0]: n must be a finite number; got 1e400, which is beyond the range of a float
"""

from __future__ import annotations

import json
import math
import numbers
import re
from typing import Any

from prune_explorer.prune.validation import problem, show_value

from ..errors import InvalidStepError

__all__ = [
    "MAX_DEPTH",
    "PLAN_FORMAT",
    "PLAN_VERSION",
    "READ_VERSIONS",
    "InvalidPlanError",
    "InvalidPlanStepError",
    "amount_from_json",
    "amount_to_json",
    "load_document",
    "plan_text",
]

PLAN_FORMAT = "prune-explorer-plan"
#: The version :meth:`Plan.to_json` writes.
PLAN_VERSION = 2
#: The versions that can be read.
READ_VERSIONS = (1, 2)
#: Deepest nesting of arrays and objects a plan document may have (a valid one has 5).
MAX_DEPTH = 16
_MAX_DIGITS = 4300
_BOM = "\ufeff"


class InvalidPlanError(ValueError):
    """A plan document is not valid: not UTF-8 JSON, wrong layout, or a bad step.

    ``step`` is the index of the offending step and ``field`` the offending field, when there
    is one.
    """

    def __init__(self, message: str, field: str | None = None, step: int | None = None) -> None:
        super().__init__(message)
        self.field = field
        self.step = step


class InvalidPlanStepError(InvalidPlanError, InvalidStepError):
    """One step of a plan document is invalid (both an ``InvalidPlanError`` and an
    ``InvalidStepError``, so either ``except`` catches it)."""


class _Refused:
    """Stands in for a number that ``json`` read but a plan must not hold, or for the value of
    a key written twice (``rule`` is then None), until :func:`_check_tree` knows its place."""

    def __init__(self, text: str, rule: str | None, detail: str = "") -> None:
        self.text, self.rule, self.detail = text, rule, detail

    def message(self, place: str, name: str) -> str:
        if self.rule is None:
            return f"{place}: field {self.text} appears twice in one object"
        detail = f", {self.detail}" if self.detail else ""
        return f"{place}: {name} {self.rule}; got {self.text}{detail}"


def _parse_int(text: str) -> int | _Refused:
    digits = len(text.lstrip("-"))
    if digits > _MAX_DIGITS:
        return _Refused(f"an integer of {digits} digits",
                        f"must be an integer of at most {_MAX_DIGITS} digits")
    try:
        return int(text)
    except ValueError:  # the interpreter's own digit limit may be lower
        return _Refused(f"an integer of {digits} digits", "must be an integer Python can read")


def _parse_float(text: str) -> float | _Refused:
    value = float(text)
    if math.isinf(value):
        shown = text if len(text) <= 40 else text[:37] + "..."
        return _Refused(shown, "must be a finite number", "which is beyond the range of a float")
    return value


def _parse_constant(name: str) -> _Refused:
    return _Refused(name, "must be a JSON number", "which is not valid JSON (write 'inf' or "
                    "'-inf' as a string for an infinite n)")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # A repeated key is marked here and refused by _check_tree, which knows the step.
    out: dict[str, Any] = {}
    for key, value in pairs:
        out[key] = _Refused(show_value(key), None) if key in out else value
    return out


def _locate(where: str, path: list[Any]) -> tuple[str, str | None, int | None]:
    """``where`` extended to the step (``steps[i]``), plus the field and step index."""
    if len(path) >= 2 and path[0] == "steps" and isinstance(path[1], int):
        field = path[2] if len(path) >= 3 and isinstance(path[2], str) else None
        return f"{where}: steps[{path[1]}]", field, path[1]
    field = path[0] if path and isinstance(path[0], str) else None
    return where, field, None


def _check_tree(document: Any, where: str) -> None:
    """Refuse numbers marked by the hooks and nesting deeper than MAX_DEPTH (iteratively)."""
    stack: list[tuple[Any, list[Any]]] = [(document, [])]
    while stack:
        value, path = stack.pop()
        if isinstance(value, _Refused):
            place, field, step = _locate(where, path)
            name = field if field is not None else "a number"
            error = InvalidPlanStepError if step is not None else InvalidPlanError
            raise error(value.message(place, name), field, step)
        if isinstance(value, (dict, list)):
            if len(path) >= MAX_DEPTH:
                place, field, step = _locate(where, path)
                raise InvalidPlanError(
                    f"{place}: the document is nested more than {MAX_DEPTH} levels deep; "
                    "a plan needs 5", field, step)
            items = value.items() if isinstance(value, dict) else enumerate(value)
            stack.extend((child, [*path, key]) for key, child in reversed(list(items)))


def plan_text(data: str | bytes | bytearray, where: str = "Plan.from_json") -> str:
    """The text of a plan: bytes decoded as UTF-8, a leading byte-order mark dropped."""
    if isinstance(data, (bytes, bytearray)):
        try:
            data = bytes(data).decode("utf-8")
        except UnicodeDecodeError as err:
            raise InvalidPlanError(
                f"{where}: the document is not UTF-8 text: byte {err.start} "
                f"(0x{data[err.start]:02x}) is not valid UTF-8; a plan is JSON in UTF-8"
            ) from None
    elif not isinstance(data, str):
        raise InvalidPlanError(
            f"{where}: text must be str or bytes; got {type(data).__name__}"
        )
    return data[1:] if data.startswith(_BOM) else data


def load_document(data: str | bytes | bytearray, where: str = "Plan.from_json") -> Any:
    """Parse plan text (str or UTF-8 bytes) into plain JSON values, refusing what a plan
    cannot hold (see the module docstring)."""
    text = plan_text(data, where)
    try:
        document = json.loads(text, object_pairs_hook=_no_duplicates, parse_int=_parse_int,
                              parse_float=_parse_float, parse_constant=_parse_constant)
    except json.JSONDecodeError as err:
        raise InvalidPlanError(f"{where}: not valid JSON: {err}") from None
    except RecursionError:
        place, field, step = _locate(where, _path_at_depth(text, MAX_DEPTH))
        error = InvalidPlanStepError if step is not None else InvalidPlanError
        raise error(f"{place}: the document is nested too deeply to be read; a plan needs 5 "
                    "levels", field, step) from None
    _check_tree(document, where)
    return document


# A JSON string (escapes included) or one structural character.
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{},]')


def _path_at_depth(text: str, depth: int) -> list[Any]:
    """Keys and indexes down to the first array or object nested ``depth`` levels deep in
    ``text`` (JSON too deep for ``json``), to say which step and field it is in."""
    stack: list[list[Any]] = []  # [opening character, current index or key]
    for match in _TOKEN.finditer(text):
        token = match.group()
        if token in "[{":
            if len(stack) >= depth:
                break
            stack.append([token, 0 if token == "[" else None])
        elif token in "]}":
            if stack:
                stack.pop()
        elif token == ",":
            if stack:
                stack[-1][1] = stack[-1][1] + 1 if stack[-1][0] == "[" else None
        elif stack and stack[-1][0] == "{" and stack[-1][1] is None:  # a key
            try:
                stack[-1][1] = json.loads(token)
            except ValueError:
                stack[-1][1] = token
    return [entry[1] for entry in stack]


# -- amounts ---------------------------------------------------------------------------------------
_AMOUNT_RULE = ('must be {"fraction": a number in [0, 1]} or {"count": an int >= 0} in a '
                "version-2 plan")


def amount_to_json(value: int | float) -> dict[str, int | float]:
    """The version-2 form of an amount: ``{"count": int}`` or ``{"fraction": float}``."""
    return {"count": value} if isinstance(value, int) else {"fraction": value}


def amount_from_json(value: Any, version: int, where: str) -> Any:
    """The amount of a step as Python reads it (an int count or a float fraction).

    Version 1 holds bare numbers, returned as they are (their range is checked with the other
    settings). Version 2 holds the explicit form of :func:`amount_to_json`; a count may be
    written ``3.0`` and a fraction ``1``, since their meaning no longer depends on the ``.0``.
    """
    if version == 1:
        return value
    if not isinstance(value, dict) or len(value) != 1 or not set(value) <= {"fraction", "count"}:
        raise InvalidStepError(f"{where}: amount {_AMOUNT_RULE}; got {show_value(value)}",
                               "amount")
    (kind, number), = value.items()
    if not isinstance(number, numbers.Real) or isinstance(number, bool):
        raise InvalidStepError(problem(where, f"amount.{kind}", "a number", number), "amount")
    if kind == "fraction":
        try:
            return float(number)
        except OverflowError:  # an int beyond the range of a float: not in [0, 1] either
            raise InvalidStepError(problem(where, "amount.fraction", "a number in [0, 1]",
                                           number), "amount") from None
    if isinstance(number, int):
        return number
    as_float = float(number)
    if not as_float.is_integer():
        raise InvalidStepError(problem(where, "amount.count", "a whole number", number),
                               "amount")
    return int(as_float)
