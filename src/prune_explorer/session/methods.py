"""The pruning methods a step may name, and the rules for their settings.

One table, :data:`METHODS`, says for each method which settings it takes, whether it draws
random numbers (and so needs a seed), whether it prunes whole channels along ``dim``, and which
function and class of ``torch.nn.utils.prune`` implement it. Every other part of the session
(steps, plans, previews, snippets) reads this table instead of repeating it.

Examples
--------
>>> from prune_explorer.session.methods import METHODS
>>> METHODS["ln_structured"].settings
('amount', 'n', 'dim')
>>> METHODS["random_structured"].random
True
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from prune_explorer.prune.patterns import PATTERN_CONSTRAINTS, parse_pattern

from .errors import InvalidStepError
from .packed import PackedMask

__all__ = [
    "GLOBAL_METHODS",
    "METHODS",
    "SEED_LIMIT",
    "MethodSpec",
    "check_seed",
    "check_settings",
    "is_random",
]

#: Seeds are integers in ``range(SEED_LIMIT)`` (accepted by ``torch.manual_seed`` everywhere).
SEED_LIMIT = 2**63


@dataclass(frozen=True)
class MethodSpec:
    """What the session knows about one pruning method.

    ``name`` is also the function's name in ``torch.nn.utils.prune`` and ``cls`` its class's
    (None for the two functions without one); ``settings`` are the required keyword settings,
    in the order torch's function takes them.
    """

    name: str
    settings: tuple[str, ...]
    cls: str | None
    random: bool = False
    structured: bool = False


METHODS: dict[str, MethodSpec] = {
    spec.name: spec
    for spec in (
        MethodSpec("identity", (), "Identity"),
        MethodSpec("random_unstructured", ("amount",), "RandomUnstructured", random=True),
        MethodSpec("l1_unstructured", ("amount",), "L1Unstructured"),
        MethodSpec("random_structured", ("amount", "dim"), "RandomStructured", random=True,
                   structured=True),
        MethodSpec("ln_structured", ("amount", "n", "dim"), "LnStructured", structured=True),
        MethodSpec("custom_from_mask", ("mask",), "CustomFromMask"),
        # hardware patterns (prune_explorer.prune.patterns; no function in torch.nn.utils.prune,
        # so snippets build their masks with plain torch, see session/patterncode.py)
        MethodSpec("semi_structured", ("pattern", "dim"), "SemiStructured"),
        MethodSpec("block_structured", ("amount", "block", "n"), "BlockStructured"),
        MethodSpec("global_unstructured", ("pruning_method", "amount"), None),
        MethodSpec("remove", (), None),
    )
}

#: Methods that ``global_unstructured`` accepts as its ``pruning_method``.
GLOBAL_METHODS = ("l1_unstructured", "random_unstructured")

_AMOUNT_RULE = "must be a float in [0, 1] or an int >= 0"
_N_RULE = "must be a number (int, float, inf or -inf, not nan), 'fro' or 'nuc'"


def _fail(where: str, field: str, rule: str, value: Any) -> InvalidStepError:
    return InvalidStepError(f"{where}: {field} {rule}; got {_show(value)}", field)


def _show(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"tensor of shape {tuple(value.shape)} and dtype {value.dtype}"
    return repr(value)


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def check_amount(value: Any, where: str) -> int | float:
    """Validate ``amount`` the way torch does, but reject bools; returns a plain int or float."""
    if _is_int(value):
        if value < 0:
            raise _fail(where, "amount", _AMOUNT_RULE, value)
        return int(value)
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        value_f = float(value)
        if not 0.0 <= value_f <= 1.0:  # also rejects nan
            raise _fail(where, "amount", _AMOUNT_RULE, value)
        return value_f
    raise _fail(where, "amount", _AMOUNT_RULE, value)


def check_n(value: Any, where: str) -> int | float | str:
    """Validate the norm order ``n`` of ``ln_structured`` ("inf"/"-inf" strings become floats).

    Whether ``'fro'``/``'nuc'`` suit the tensor's rank is checked against the model later.
    """
    if isinstance(value, str):
        if value in ("fro", "nuc"):
            return value
        if value in ("inf", "-inf"):
            return float(value)
        raise _fail(where, "n", _N_RULE, value)
    if _is_int(value):
        return int(value)
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        if math.isnan(float(value)):
            raise _fail(where, "n", _N_RULE, value)
        return float(value)
    raise _fail(where, "n", _N_RULE, value)


def check_dim(value: Any, where: str) -> int:
    """Validate ``dim`` as an int (range is checked against the tensor later)."""
    if not _is_int(value):
        raise _fail(where, "dim", "must be an int", value)
    return int(value)


def check_mask(value: Any, where: str) -> PackedMask:
    """Validate a custom mask (0/1 or bool tensor, or a PackedMask); returns it packed on CPU."""
    if isinstance(value, PackedMask):
        return value.to("cpu")
    if not isinstance(value, torch.Tensor):
        raise _fail(where, "mask", "must be a torch.Tensor of 0/1 values or a PackedMask", value)
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
    """Validate an ``"N:M"`` pattern string (whether M fits the tensor is checked on apply)."""
    if parse_pattern(value) is None:
        raise _fail(where, "pattern", "must be " + PATTERN_CONSTRAINTS["pattern"].rule, value)
    return str(value)


def check_block(value: Any, where: str) -> tuple[int, ...]:
    """Validate a block shape (a JSON list becomes a tuple); its fit is checked on apply."""
    if PATTERN_CONSTRAINTS["block"].error(value) is not None:
        raise _fail(where, "block", "must be " + PATTERN_CONSTRAINTS["block"].rule, value)
    return tuple(int(b) for b in value)


_CHECKS = {
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
                f"{where}: unexpected setting {key!r} for {spec.name}; "
                f"its settings are: {allowed}",
                key,
            )
    out: dict[str, Any] = {}
    for key in spec.settings:
        if key not in settings:
            raise InvalidStepError(
                f"{where}: missing setting {key!r} for {spec.name}; "
                f"it needs: {', '.join(spec.settings)}",
                key,
            )
        out[key] = _CHECKS[key](settings[key], where)
    return out


def is_random(spec: MethodSpec, settings: Mapping[str, Any]) -> bool:
    """Whether a step of this method with these settings draws random numbers."""
    if spec.name == "global_unstructured":
        return METHODS[settings["pruning_method"]].random
    return spec.random


def check_seed(value: Any, where: str) -> int:
    """Validate a seed: an int in ``[0, 2**63)``."""
    if not _is_int(value) or not 0 <= value < SEED_LIMIT:
        raise _fail(where, "seed", "must be an int in [0, 2**63)", value)
    return int(value)
