"""The plan file format, both ways: the document, every step field, the versions and the amounts.

Writing: :func:`plan_to_dict` and :func:`step_to_dict` (what :meth:`Plan.to_dict` and
:meth:`Step.to_dict <prune_explorer.session.Step.to_dict>` return). Reading:
:func:`load_document` turns bytes into a JSON document, every failure an
:class:`InvalidPlanError`; :func:`steps_from_dict` and :func:`step_from_dict` check it field by
field. Nothing else in the package knows the layout of a plan file.

:func:`load_document` is the one parser behind :meth:`Plan.from_json`, :meth:`Plan.load`, the
CLI and the explorer's import. It accepts ``str`` or ``bytes``; bytes must be UTF-8 (a leading
byte-order mark, as Windows editors write, is dropped). Only ``json`` is used -- no pickle, no
eval -- and what ``json`` would let through as a raw Python error or a silent surprise is
refused with a message that names the step and the field where there is one:

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

import base64
import binascii
import json
import math
import numbers
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from prune_explorer.prune.validation import excerpt, problem, show_value

from ..errors import InvalidPlanError, InvalidPlanStepError, InvalidStepError
from ..steps import step as step_module
from ..steps.methods import check_method
from ..steps.step import Step, check_address
from ..steps.training import TRAINING_METHODS, TrainingStep
from ..tensors.packed import PackedMask

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
    "plan_to_dict",
    "step_from_dict",
    "step_to_dict",
    "steps_from_dict",
    "tied_from_dict",
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


# -- the plan document -----------------------------------------------------------------------------
def plan_to_dict(steps: Iterable[Step], tied: Mapping[str, Sequence[str]] | None = None
                 ) -> dict[str, Any]:
    """The JSON-ready document of a plan of ``steps`` (the current version), with the model's
    ``tied`` tensors when they are known (``{}``: none)."""
    document: dict[str, Any] = {
        "format": PLAN_FORMAT,
        "version": PLAN_VERSION,
        "steps": [step_to_dict(step) for step in steps],
    }
    if tied is not None:
        document["tied"] = {name: list(aliases) for name, aliases in tied.items()}
    return document


def steps_from_dict(data: Any, where: str) -> list[Step]:
    """The steps of a plan document (version 1 or 2), strictly checked.

    Raises
    ------
    InvalidPlanError
        For any problem; when it lies in one step it is an :class:`InvalidPlanStepError`
        (also an :class:`InvalidStepError`) with ``step`` and ``field`` set.
    """
    if not isinstance(data, dict):
        raise InvalidPlanError(
            f"{where}: a plan must be a JSON object; got {type(data).__name__}"
        )
    if data.get("format") != PLAN_FORMAT:
        got = show_value(data["format"]) if "format" in data else "no 'format' field"
        raise InvalidPlanError(
            f"{where}: not a prune-explorer plan: format must be {PLAN_FORMAT!r}; got {got}",
            "format",
        )
    version = data.get("version")
    if type(version) is not int or version not in READ_VERSIONS:
        got = show_value(version) if "version" in data else "no 'version' field"
        readable = " or ".join(str(v) for v in READ_VERSIONS)
        raise InvalidPlanError(
            f"{where}: version must be the integer {readable}; got {got}", "version"
        )
    for key in data:
        if key not in ("format", "version", "steps", "tied"):
            raise InvalidPlanError(
                f"{where}: unexpected field {show_value(key)}; a plan has: format, version, "
                "steps and optionally tied",
                key,
            )
    if "steps" not in data:
        raise InvalidPlanError(f"{where}: missing field 'steps'", "steps")
    if not isinstance(data["steps"], list):
        raise InvalidPlanError(f"{where}: steps must be a list; got "
                               f"{show_value(data['steps'])}",
                               "steps")
    steps = []
    for index, item in enumerate(data["steps"]):
        try:
            steps.append(step_from_dict(item, f"{where}: steps[{index}]", version))
        except InvalidStepError as err:
            raise InvalidPlanStepError(str(err), err.field, index) from None
    return steps


# -- one step --------------------------------------------------------------------------------------
def step_to_dict(step: Step) -> dict[str, Any]:
    """A step as a version-2 plan file holds it (see :meth:`Step.to_dict
    <prune_explorer.session.Step.to_dict>`)."""
    if isinstance(step, TrainingStep):  # no target, no seed: the method and its settings
        return {"method": step.method, **step.settings}
    out: dict[str, Any] = {"method": step.method}
    if step.is_global:
        out["targets"] = list(step.targets)
    else:
        out["target"] = step.target
    for key, value in step.settings.items():
        if isinstance(value, PackedMask):
            value = {
                "shape": list(value.shape),
                "bits": base64.b64encode(value.to_bytes()).decode("ascii"),
            }
        elif key == "amount":
            value = amount_to_json(value)
        elif isinstance(value, float) and math.isinf(value):
            value = "inf" if value > 0 else "-inf"
        out[key] = value
    if step.seed is not None:
        out["seed"] = step.seed
    if step.importance != "magnitude":  # magnitude: no field, as plans written before
        out["importance"] = step.importance
    return out


def step_from_dict(data: Any, where: str = "Step.from_dict", version: int | None = None) -> Step:
    """Strictly rebuild a step from :func:`step_to_dict` output, read as a plan file of
    ``version`` holds it (None: :data:`PLAN_VERSION`).

    Every field must be present with the right type, and no other field may appear.
    """
    if version is None:
        version = PLAN_VERSION
    if version not in READ_VERSIONS:
        raise ValueError(f"{where}: version must be one of {READ_VERSIONS}; got {version!r}")
    if not isinstance(data, dict):
        raise InvalidStepError(
            f"{where}: a step must be a JSON object; got {type(data).__name__}", None
        )
    if "method" not in data:
        raise InvalidStepError(f"{where}: missing field 'method'", "method")
    if isinstance(data["method"], str) and data["method"] in TRAINING_METHODS:
        return TrainingStep._read(data, where)
    spec = check_method(data["method"], where)
    target_key = "targets" if spec.name == "global_unstructured" else "target"
    fields = ["method", target_key, *spec.settings]
    optional = ("seed", "importance") if spec.scores else ("seed",)
    for key in data:
        if key not in fields and key not in optional:
            raise InvalidStepError(
                f"{where}: unexpected field {show_value(key)} for {spec.name}; "
                f"its fields are: {', '.join(fields)}",
                key,
            )
    for key in fields:
        if key not in data:
            raise InvalidStepError(
                f"{where}: missing field {key!r}; {spec.name} needs: {', '.join(fields)}",
                key,
            )
    random = (spec.random if spec.name != "global_unstructured"
              else data["pruning_method"] == "random_unstructured")
    if random and "seed" not in data:
        raise InvalidStepError(f"{where}: missing field 'seed'; {spec.name} is random and "
                               "records its seed", "seed")
    settings = {key: data[key] for key in spec.settings}
    if "mask" in settings:
        settings["mask"] = _mask_from_json(settings["mask"], where)
    if "amount" in settings:
        settings["amount"] = amount_from_json(settings["amount"], version, where)
    if target_key == "targets" and not isinstance(data["targets"], list):
        raise InvalidStepError(
            f"{where}: targets must be a list of tensor addresses; got "
            f"{show_value(data['targets'])}",
            "targets",
        )
    step = Step._build(where, spec.name, data[target_key], settings, data.get("seed"),
                       data.get("importance"))
    if not step.is_random and "seed" in data:
        raise InvalidStepError(
            f"{where}: unexpected field 'seed' for {spec.name}, which draws no random "
            f"numbers; its fields are: {', '.join(fields)}",
            "seed",
        )
    return step


def _mask_from_json(value: Any, where: str) -> PackedMask:
    rule = "must be an object {'shape': [ints], 'bits': base64 string}"
    if not isinstance(value, dict) or set(value) != {"shape", "bits"}:
        raise InvalidStepError(f"{where}: mask {rule}; got {show_value(value)}", "mask")
    shape, bits = value["shape"], value["bits"]
    if not isinstance(shape, list) or not all(
        isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape
    ):
        raise InvalidStepError(f"{where}: mask.shape must be a list of ints >= 0; got "
                               f"{show_value(shape)}",
                               "mask")
    if not isinstance(bits, str):
        raise InvalidStepError(f"{where}: mask.bits must be a base64 string; got "
                               f"{show_value(bits)}", "mask")
    try:
        raw = base64.b64decode(bits.encode("ascii"), validate=True)
        return PackedMask.from_bytes(shape, raw)
    except (binascii.Error, UnicodeEncodeError, ValueError) as err:
        raise InvalidStepError(f"{where}: mask.bits is not a valid packed mask: "
                               f"{excerpt(str(err))}",
                               "mask") from None


# Step.to_dict and Step.from_dict write and read through this module (steps/ sits below plans/).
step_module.FORMAT.writer = step_to_dict
step_module.FORMAT.reader = step_from_dict


def tied_from_dict(value: Any, where: str) -> dict[str, tuple[str, ...]]:
    """The ``tied`` field of a plan document, checked: addresses to non-empty lists of other
    addresses, every address once."""
    rule = ("tied must map each tied tensor's address to the list of its other names, e.g. "
            "{\"transformer.wte.weight\": [\"lm_head.weight\"]}")
    if not isinstance(value, dict):
        raise InvalidPlanError(f"{where}: {rule}; got {show_value(value)}", "tied")
    seen: set[str] = set()
    tied: dict[str, tuple[str, ...]] = {}
    for name, aliases in value.items():
        if not isinstance(aliases, list) or not aliases:
            raise InvalidPlanError(
                f"{where}: {rule}; got {show_value(aliases)} for {show_value(name)}", "tied")
        try:
            names = [check_address(a, f"{where}:", "tied") for a in (name, *aliases)]
        except InvalidStepError as err:
            raise InvalidPlanError(str(err), "tied") from None
        for address in names:
            if address in seen:
                raise InvalidPlanError(
                    f"{where}: tied names {show_value(address)} twice; each address belongs to "
                    "one tied tensor, once", "tied")
            seen.add(address)
        tied[names[0]] = tuple(names[1:])
    return tied
