"""The pruning methods a step may name, and the rules for their settings.

One table, :data:`METHODS`, says for each method which settings it takes, whether it draws
random numbers (and so needs a seed), whether it prunes whole channels along ``dim``, and which
function and class of ``torch.nn.utils.prune`` implement it. Every other part of the session
(steps, plans, previews, snippets) reads this table instead of repeating it. The pruning methods'
class names and parameters come from the core's one table
(:data:`prune_explorer.prune.validation.METHOD_PARAMETERS`), and their settings are checked by the
core's constraints (:func:`prune_explorer.prune.validation.check`); the session only wraps those
errors in :class:`InvalidStepError` with the field, and turns JSON spellings into values.

Examples
--------
>>> from prune_explorer.session.steps.methods import METHODS
>>> METHODS["ln_structured"].settings
('amount', 'n', 'dim')
>>> METHODS["random_structured"].random
True
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from prune_explorer import prune
from prune_explorer.prune import validation
from prune_explorer.prune.validation import METHOD_PARAMETERS, is_int, show_value

from ..errors import InvalidStepError
from ..model.tensor_kinds import unplain_kind
from ..tensors.packed import PackedMask
from . import calibrated
from .calibrated import Compute

__all__ = [
    "CLASS_TO_NAME",
    "GLOBAL_METHODS",
    "METHODS",
    "SEED_LIMIT",
    "MethodSpec",
    "check_seed",
    "check_settings",
    "core_errors",
    "is_random",
    "method_name",
    "norm_suits_rank",
    "prune_class",
]

#: Seeds are integers in ``range(SEED_LIMIT)`` (accepted by ``torch.manual_seed`` everywhere).
SEED_LIMIT = 2**63


@dataclass(frozen=True)
class MethodSpec:
    """What the session knows about one pruning method.

    ``settings`` are the required keyword settings, in the order torch's function takes them;
    ``name`` is also the function's name in ``torch.nn.utils.prune`` and ``cls`` its class's.
    """

    name: str
    settings: tuple[str, ...]
    cls: str | None
    random: bool = False
    structured: bool = False
    #: takes ``importance=`` (a criterion's scores through torch's ``importance_scores=``)
    scores: bool = False
    #: a method computed from calibration statistics (:mod:`.calibrated`), installed with
    #: ``custom_from_mask`` semantics; None for the core's methods
    compute: Compute | None = None
    #: it also changes the values of the weights it prunes (undo restores them)
    edits_weights: bool = False
    #: settings a call may leave out, with their values (recorded in the step)
    defaults: tuple[tuple[str, Any], ...] = ()


def _core_spec(name: str, random: bool = False, structured: bool = False,
               scores: bool = False) -> MethodSpec:
    """A method of the core: class and settings from its parameter table (the settings a step
    records are the method's own parameters, not ``generator``/``ties``, which the session
    supplies)."""
    cls, params = METHOD_PARAMETERS[name]
    settings = tuple(p for p in params if p not in ("generator", "ties"))
    return MethodSpec(name, settings, cls, random=random, structured=structured, scores=scores)


METHODS: dict[str, MethodSpec] = {
    spec.name: spec
    for spec in (
        _core_spec("identity"),
        _core_spec("random_unstructured", random=True),
        _core_spec("l1_unstructured", scores=True),
        _core_spec("random_structured", random=True, structured=True),
        _core_spec("ln_structured", structured=True, scores=True),
        _core_spec("custom_from_mask"),
        # hardware patterns (prune_explorer.prune.patterns; not in torch.nn.utils.prune, so
        # snippets build their masks with plain torch, see session/codegen/pattern_lines.py)
        _core_spec("semi_structured"),
        _core_spec("block_structured"),
        MethodSpec("global_unstructured", ("pruning_method", "amount"), None, scores=True),
        # computed from calibration (session/steps/calibrated.py), installed as masks
        MethodSpec("wanda_rows", ("sparsity",), None, compute=calibrated.wanda_rows),
        MethodSpec("sparsegpt", ("sparsity", "damping"), None, compute=calibrated.sparsegpt,
                   edits_weights=True, defaults=(("damping", 0.01),)),
        MethodSpec("remove", (), None),
    )
}

#: Class name -> method name (``L1Unstructured`` -> ``l1_unstructured``), from the same table.
CLASS_TO_NAME = {spec.cls: spec.name for spec in METHODS.values() if spec.cls is not None}

#: Methods that ``global_unstructured`` accepts as its ``pruning_method``.
GLOBAL_METHODS = ("l1_unstructured", "random_unstructured")


def prune_class(method: str) -> type[prune.BasePruningMethod]:
    """The class of :mod:`prune_explorer.prune` that implements ``method``.

    Examples
    --------
    >>> prune_class("l1_unstructured").__name__
    'L1Unstructured'
    """
    cls = METHODS[method].cls
    if cls is None:  # global_unstructured and remove are functions only
        raise ValueError(f"prune_class: method must be one with a pruning class; got {method!r}")
    found: type[prune.BasePruningMethod] = getattr(prune, cls)
    return found

def _fail(where: str, field: str, rule: str, value: Any) -> InvalidStepError:
    return InvalidStepError(f"{where}: {field} {rule}; got {show_value(value)}", field)


@contextlib.contextmanager
def core_errors(field: str) -> Iterator[None]:
    """Re-raise the core's argument errors as :class:`InvalidStepError` for ``field``."""
    try:
        yield
    except (TypeError, ValueError, RuntimeError, IndexError, OverflowError) as err:
        if isinstance(err, InvalidStepError):
            raise
        raise InvalidStepError(str(err), field) from None


def _core_check(field: str, value: Any, where: str, method: str | None = None) -> Any:
    with core_errors(field):
        return validation.check(where, field, value, method)


def check_amount(value: Any, where: str) -> int | float:
    """Validate ``amount`` (the core's rule); returns a plain int or float."""
    _core_check("amount", value, where)
    return int(value) if is_int(value) else float(value)


def check_n(value: Any, where: str, method: str = "ln_structured") -> int | float | str:
    """Validate the norm order ``n`` of ``method`` (the core's rule for that method; the JSON
    spellings "inf"/"-inf" become floats, and None, which torch passes on to ``torch.norm``, is
    refused).

    Whether ``'fro'``/``'nuc'`` suit the tensor's rank is checked against the model later.
    """
    if isinstance(value, str) and value in ("inf", "-inf"):
        return float(value)
    if value is None:
        raise InvalidStepError(validation.problem(
            where, "n", validation.constraint("n", method).rule, value), "n")
    _core_check("n", value, where, method)
    return value if isinstance(value, str) else int(value) if is_int(value) else float(value)


def norm_suits_rank(n: Any, ndim: int) -> bool:
    """Whether the norm order ``n`` of ``ln_structured`` can prune an ``ndim``-D tensor (the
    core's rule, :func:`prune_explorer.prune.validation.check_norm_rank`): what the explorer
    offers for the tensor on show.

    Examples
    --------
    >>> [n for n in (2, "fro", "nuc") if norm_suits_rank(n, 4)], norm_suits_rank("nuc", 3)
    ([2], True)
    """
    try:
        validation.check_norm_rank(n, ndim, "norm_suits_rank")
    except RuntimeError:
        return False
    return True


def check_dim(value: Any, where: str) -> int:
    """Validate ``dim`` as an int (the core's rule; the range is checked against the tensor
    later)."""
    return int(_core_check("dim", value, where))


def check_mask(value: Any, where: str) -> PackedMask:
    """Validate a custom mask (0/1 or bool tensor, or a PackedMask); returns it packed on CPU."""
    if isinstance(value, PackedMask):
        return value.to("cpu")
    if not isinstance(value, torch.Tensor):
        raise _fail(where, "mask", "must be a torch.Tensor of 0/1 values or a PackedMask", value)
    kind = unplain_kind(value)
    if kind is not None:
        raise _fail(where, "mask", f"must be a dense tensor of 0/1 values, not {kind}", value)
    if value.dtype != torch.bool and (
        value.is_complex() or not bool(((value == 0) | (value == 1)).all())
    ):
        raise _fail(where, "mask", "must hold only 0 and 1 (or bools)", value)
    return PackedMask.from_tensor(value.detach().cpu())


def check_pruning_method(value: Any, where: str) -> str:
    """Validate the ``pruning_method`` of a global step (a method name, not a class)."""
    if not isinstance(value, str) or value not in GLOBAL_METHODS:
        rule = "must be one of " + ", ".join(repr(m) for m in GLOBAL_METHODS)
        raise _fail(where, "pruning_method", rule, value)
    return value


def check_pattern(value: Any, where: str) -> str:
    """Validate an ``"N:M"`` pattern (the core's rule; whether M fits the tensor is checked
    when the step is previewed or applied)."""
    return str(_core_check("pattern", value, where))


def check_block(value: Any, where: str) -> tuple[int, ...]:
    """Validate a block shape (the core's rule); a JSON list becomes a tuple."""
    return tuple(int(b) for b in _core_check("block", value, where))


def check_sparsity(value: Any, where: str) -> float | str:
    """Validate the ``sparsity`` of a calibrated method: a fraction in [0, 1) or ``"N:M"``."""
    if isinstance(value, str):
        return check_pattern(value, where)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise _fail(where, "sparsity", "must be a float in [0, 1) or an 'N:M' pattern string",
                    value)
    return float(value)


def check_damping(value: Any, where: str) -> float:
    """Validate SparseGPT's ``damping``: a float > 0 (a fraction of the Hessian's mean
    diagonal)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            0 < value < float("inf")):
        raise _fail(where, "damping", "must be a finite float > 0", value)
    return float(value)


_CHECKS = {
    "sparsity": check_sparsity,
    "damping": check_damping,
    "pattern": check_pattern,
    "block": check_block,
    "amount": check_amount,
    "n": check_n,
    "dim": check_dim,
    "mask": check_mask,
    "pruning_method": check_pruning_method,
}


def check_method(value: Any, where: str) -> MethodSpec:
    """Look up a method name; raises with the list of known names."""
    if not isinstance(value, str) or value not in METHODS:
        known = ", ".join(repr(m) for m in METHODS)
        raise _fail(where, "method", f"must be one of {known}", value)
    return METHODS[value]


def check_settings(spec: MethodSpec, settings: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Validate the settings of ``spec``: exactly its fields, each of the right type and range.

    Returns the normalised settings in the method's canonical order.
    """
    for key in settings:
        if key not in spec.settings:
            allowed = ", ".join(spec.settings) if spec.settings else "none"
            raise InvalidStepError(
                f"{where}: unexpected setting {show_value(key)} for {spec.name}; "
                f"its settings are: {allowed}",
                key,
            )
    out: dict[str, Any] = {}
    settings = {**dict(spec.defaults), **settings}
    for key in spec.settings:
        if key not in settings:
            raise InvalidStepError(
                f"{where}: missing setting {key!r} for {spec.name}; "
                f"it needs: {', '.join(spec.settings)}",
                key,
            )
        # a method's own rule for a setting (the core's "method.setting" entry) where it has one
        out[key] = (check_n(settings[key], where, spec.name) if key == "n"
                    else _CHECKS[key](settings[key], where))
    return out


def is_random(spec: MethodSpec, settings: Mapping[str, Any]) -> bool:
    """Whether a step of this method with these settings draws random numbers."""
    if spec.name == "global_unstructured":
        return METHODS[settings["pruning_method"]].random
    return spec.random


def check_seed(value: Any, where: str) -> int:
    """Validate a seed: an int in ``[0, 2**63)``."""
    if not is_int(value) or not 0 <= value < SEED_LIMIT:
        raise _fail(where, "seed", "must be an int in [0, 2**63)", value)
    return int(value)


def method_name(method: Any) -> str:
    """Function-style name of a pruning method (``L1Unstructured`` -> ``l1_unstructured``)."""
    cls = type(method).__name__
    return CLASS_TO_NAME.get(cls, cls)
