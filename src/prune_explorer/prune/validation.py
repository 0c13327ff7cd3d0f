"""The one table of parameter constraints, and the checks that read it (public: the session
wraps these errors instead of checking again).

Every pruning parameter has one entry in :data:`CONSTRAINTS`: its rule in words and a test that
returns the exception type to raise (the type ``torch.nn.utils.prune`` raises for the same input)
or None. Every error has one message template, ``"<where>: <param> must be <rule>; got <value>"``,
where ``where`` names the public function or class the user called (passed explicitly). The
session wraps these errors with the step and field instead of checking again.

:data:`METHOD_PARAMETERS` says which parameters each method takes (function name -> class name
and parameter names); the session's method table and hook reader derive from it.

The three underscore names at the bottom are also importable from ``prune_explorer.prune`` because
PyTorch's own test-suite for ``torch.nn.utils.prune`` calls them.

Examples
--------
>>> check("l1_unstructured", "amount", 1.5)
Traceback (most recent call last):
...
ValueError: l1_unstructured: amount must be a float in [0, 1] or an int >= 0; got 1.5
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ._select import TIE_RULES

__all__ = [
    "CONSTRAINTS",
    "METHOD_PARAMETERS",
    "PRUNABLE_DTYPES",
    "Constraint",
    "DeviceMismatchError",
    "ShapeMismatchError",
    "UnprunableTensorError",
    "check",
    "check_dim",
    "check_norm_rank",
    "check_same_device",
    "check_same_shape",
    "check_structured",
    "constraint",
    "count_to_prune",
    "excerpt",
    "is_int",
    "nparams_to_prune",
    "parse_pattern",
    "pattern_counts",
    "problem",
    "quantized_layer",
    "show_value",
    "unprunable",
]


#: The dtypes the pruning API prunes (and masks it stores): torch's floating-point types of
#: 16 to 64 bits. Integer (int8, int4...), bool, complex and float8 weights are refused.
PRUNABLE_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


#: Tensor classes that are never quantized nor sharded: their dtype and device tell all.
_PLAIN_TYPES = (torch.Tensor, torch.nn.Parameter)


class UnprunableTensorError(TypeError):
    """A tensor that holds no values the pruning API can mask in place (see
    :func:`unprunable`). A deliberate deviation from ``torch.nn.utils.prune``, which prunes an
    int8 weight as if it were a float one and fails deep inside torch on a meta weight."""


def unprunable(t: torch.Tensor) -> str | None:
    """Why the pruning API cannot prune ``t``, in words, or None if it can.

    Pruning multiplies a tensor's values by a float mask in place of the parameter: a tensor on
    the meta device has no values (an offloaded or not yet loaded weight); a quantized tensor
    (``torch.ao`` quantization, torchao's tensor subclasses, int8/int4 dtypes) stores integers
    with scales, which a mask of the same dtype cannot express.

    Examples
    --------
    >>> unprunable(torch.ones(2)) is None
    True
    >>> print(unprunable(torch.ones(2, dtype=torch.int8)))  # doctest: +ELLIPSIS
    its dtype is torch.int8 (quantized or integer values): the pruning API prunes ...
    >>> print(unprunable(torch.ones(2, device="meta")))  # doctest: +ELLIPSIS
    it is on the meta device: a shape without values (an offloaded weight, ...
    """
    if type(t) in _PLAIN_TYPES and t.dtype in PRUNABLE_DTYPES and not t.is_meta:
        return None  # the common case, answered without the checks below
    if t.is_meta:
        return ("it is on the meta device: a shape without values (an offloaded weight, as "
                "accelerate's device_map/cpu_offload leave them, or one built under "
                "init_empty_weights); load its values onto a device first")
    cls = type(t)
    if cls.__module__.split(".")[0] == "torchao" or "Quantized" in cls.__name__:
        return (f"it is a quantized tensor ({cls.__module__}.{cls.__name__}): the pruning API "
                "prunes plain floating-point weights; prune the float model, then quantize")
    if t.is_quantized:
        return (f"it is a quantized tensor ({t.dtype}, torch.ao quantization): the pruning API "
                "prunes plain floating-point weights; prune the float model, then quantize")
    if t.dtype not in PRUNABLE_DTYPES:
        floats = "/".join(str(d).removeprefix("torch.") for d in PRUNABLE_DTYPES)
        return (f"its dtype is {t.dtype} (quantized or integer values): the pruning API prunes "
                f"{floats} weights; prune the float model, then quantize")
    return None


def quantized_layer(module: torch.nn.Module) -> bool:
    """Whether ``module`` is a quantized layer of ``torch.ao`` (``quantize_dynamic`` and
    friends), whose weight is packed integers, not a parameter.

    Examples
    --------
    >>> quantized_layer(torch.nn.Linear(2, 2))
    False
    """
    origin = type(module).__module__
    return origin.startswith(("torch.ao.nn.quantized", "torch.nn.quantized")) or hasattr(
        module, "_packed_params")


class ShapeMismatchError(AssertionError, ValueError):
    """Two tensors that must have the same shape do not.

    torch raises ``AssertionError`` here; this class is also a ``ValueError`` so that callers can
    catch it the way they catch every other bad argument.
    """


class DeviceMismatchError(RuntimeError, ValueError):
    """A tensor given with the pruned tensor lives on another device.

    torch raises ``RuntimeError`` here (from inside its arithmetic); this class is also a
    ``ValueError``, like every other bad argument. Moving the tensor is left to the caller: a
    silent copy between devices would hide its cost.
    """


def problem(where: str, argument: str, rule: str, value: Any) -> str:
    """Format the one error message template used across the package."""
    return f"{where}: {argument} must be {rule}; got {show_value(value)}"


#: Longest ``repr`` an error message quotes in full; longer ones are cut (see :func:`excerpt`).
SHOWN_CHARS = 80


def excerpt(text: str, limit: int = SHOWN_CHARS) -> str:
    """``text`` if it has at most ``limit`` characters, else its start, an ellipsis and its
    length, so that a 10 MB value makes a one-line message.

    Examples
    --------
    >>> excerpt("'" + "x" * 100 + "'")
    "'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx... (102 characters)"
    """
    if len(text) <= limit:
        return text
    return f"{text[:limit - 16]}... ({len(text)} characters)"


def show_value(value: Any) -> str:
    """How an error message shows a received value: a tensor by shape and dtype, an integer
    of many digits by its digit count, anything else by its ``repr`` cut to an excerpt.

    Examples
    --------
    >>> show_value(10**400), show_value(-12)
    ('an integer of 401 digits', '-12')
    """
    if isinstance(value, torch.Tensor):
        return f"tensor of shape {tuple(value.shape)} and dtype {value.dtype}"
    if is_int(value) and not -10**20 < value < 10**20:
        digits = int(value).bit_length() * 0.30103  # log10(2); exact below Python's digit limit
        try:
            digits = len(str(abs(int(value))))
        except ValueError:  # more digits than the interpreter converts to text
            return f"an integer of about {int(digits) + 1} digits"
        return f"an integer of {int(digits)} digits"
    return excerpt(repr(value))


def is_int(value: Any) -> bool:
    """An integer of any integral type, not a bool."""
    if type(value) is int:  # the common case, without the abstract-class check
        return True
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _amount_error(value: Any) -> type[Exception] | None:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return TypeError
    if is_int(value):
        return ValueError if value < 0 else None
    try:
        f = float(value)
    except OverflowError:  # e.g. a Fraction beyond the range of a float: not in [0, 1]
        return ValueError
    return ValueError if math.isnan(f) or not 0.0 <= f <= 1.0 else None


def _n_error(value: Any) -> type[Exception] | None:
    if value is None:  # passed through to torch.norm, as torch does
        return None
    if isinstance(value, str):
        return None if value in ("fro", "nuc") else RuntimeError
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return RuntimeError
    try:
        f = float(value)
    except OverflowError:  # torch.norm raises OverflowError too, with no message of ours
        return OverflowError
    return RuntimeError if math.isnan(f) else None


def _vector_n_error(value: Any) -> type[Exception] | None:
    if value is None or value == "nuc":  # a vector norm: no matrix norm, no torch.norm default
        return RuntimeError
    return _n_error(value)


_PATTERN = re.compile(r"\s*(\d+)\s*:\s*(\d+)\s*")


def parse_pattern(pattern: Any) -> tuple[int, int] | None:
    """``"N:M"`` as ``(N, M)``, or None when it is not a valid pattern string."""
    if not isinstance(pattern, str):
        return None
    match = _PATTERN.fullmatch(pattern)
    if match is None:
        return None
    n, m = int(match.group(1)), int(match.group(2))
    return (n, m) if m >= 1 and 0 <= n <= m else None


def pattern_counts(pattern: Any) -> tuple[int, int]:
    """``(N, M)`` of an ``"N:M"`` pattern that the ``"pattern"`` constraint accepts (callers check
    it first; anything else raises ``ValueError``)."""
    parsed = parse_pattern(pattern)
    if parsed is None:
        raise ValueError(problem("pattern_counts", "pattern", CONSTRAINTS["pattern"].rule,
                                 pattern))
    return parsed


def _pattern_error(value: Any) -> type[Exception] | None:
    if not isinstance(value, str):
        return TypeError
    return None if parse_pattern(value) is not None else ValueError


def _block_error(value: Any) -> type[Exception] | None:
    if not isinstance(value, (tuple, list)):
        return TypeError
    ok = len(value) >= 1 and all(is_int(b) and b >= 1 for b in value)
    return None if ok else ValueError


@dataclass(frozen=True)
class Constraint:
    """One parameter's rule (in words, for the message) and its test.

    ``error(value)`` returns the exception type to raise for a bad ``value``, or None.
    """

    rule: str
    error: Callable[[Any], type[Exception] | None]


#: Each constrained parameter of the pruning methods, with its rule and test: ``"param"`` for
#: the rule every method taking it shares, ``"method.param"`` where one method's rule is its own
#: (read both through :func:`constraint`). The session's step and plan reader check settings
#: through the same entries, so it accepts exactly what the methods accept.
CONSTRAINTS: dict[str, Constraint] = {
    "amount": Constraint("a float in [0, 1] or an int >= 0", _amount_error),
    "n": Constraint("a number (int, float, inf or -inf, not nan, within the range of a float), "
                    "'fro' or 'nuc'", _n_error),
    "dim": Constraint("an int", lambda v: None if is_int(v) else TypeError),
    "mask": Constraint("a torch.Tensor",
                       lambda v: None if isinstance(v, torch.Tensor) else TypeError),
    "generator": Constraint(
        "a torch.Generator or None",
        lambda v: None if v is None or isinstance(v, torch.Generator) else TypeError),
    "pattern": Constraint("a string 'N:M' with integers M >= 1 and 0 <= N <= M",
                          _pattern_error),
    "block": Constraint("a tuple of one or more ints >= 1", _block_error),
    "ties": Constraint(f"None or one of {TIE_RULES}",
                       lambda v: None if v is None or v in TIE_RULES else ValueError),
    "block_structured.n": Constraint(
        "a number (int, float, inf or -inf, not nan, within the range of a float) or 'fro' "
        "(a vector norm over each block's entries)", _vector_n_error),
}

#: function name -> (class name, parameters it takes, in torch's order). ``generator`` and
#: ``ties`` are our keyword-only additions.
METHOD_PARAMETERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "identity": ("Identity", ()),
    "random_unstructured": ("RandomUnstructured", ("amount", "generator", "ties")),
    "l1_unstructured": ("L1Unstructured", ("amount", "ties")),
    "random_structured": ("RandomStructured", ("amount", "dim", "generator")),
    "ln_structured": ("LnStructured", ("amount", "n", "dim")),
    "custom_from_mask": ("CustomFromMask", ("mask",)),
    # our hardware patterns (prune/patterns.py), not in torch.nn.utils.prune
    "semi_structured": ("SemiStructured", ("pattern", "dim")),
    "block_structured": ("BlockStructured", ("amount", "block", "n")),
}


def constraint(param: str, method: str | None = None) -> Constraint:
    """The rule of ``param`` for the pruning function ``method`` (its own entry of
    :data:`CONSTRAINTS` if it has one, else the shared one).

    Examples
    --------
    >>> [constraint("n", m).error("nuc") for m in ("ln_structured", "block_structured")]
    [None, <class 'RuntimeError'>]
    """
    return CONSTRAINTS.get(f"{method}.{param}") or CONSTRAINTS[param]


def check(where: str, param: str, value: Any, method: str | None = None) -> Any:
    """Check ``value`` against the constraint of ``param`` (for the pruning function
    ``method``: see :func:`constraint`); return it unchanged.

    Raises the type torch raises for that input, with the package's message template.
    """
    kind = type(value)
    key = (param, method, kind, value) if kind in _REMEMBERED else None
    if key is not None and key in _PASSED:  # checked before: the same rule, type and value
        return value
    c = constraint(param, method)
    error = c.error(value)
    if error is not None:
        shown = type(value).__name__ if param in ("mask", "generator") else value
        raise error(problem(where, param, c.rule, shown))
    if key is not None:
        if len(_PASSED) >= _PASSED_MAX:
            _PASSED.clear()
        _PASSED.add(key)
    return value


#: The types of values whose passed checks :func:`check` remembers: immutable, hashed and
#: compared by value (a bool is not an int here: it has its own type in the key).
_REMEMBERED = frozenset({int, float, str, type(None)})
#: (param, method, type, value) of the values that passed :func:`check`; cleared when full.
_PASSED: set[tuple[str, str | None, type, Any]] = set()
_PASSED_MAX = 4096


def nparams_to_prune(amount: float | numbers.Real, size: int) -> int:
    """How many of ``size`` units ``amount`` prunes: ints are counts, floats round half to even."""
    if type(amount) is float:  # the common case, without the abstract-class check
        return round(amount * size)
    if isinstance(amount, numbers.Integral):
        return int(amount)
    return round(float(amount) * size)


def count_to_prune(amount: Any, size: int, where: str, what: str = "prunable units") -> int:
    """How many of ``size`` units to prune; an int ``amount`` must not exceed ``size``."""
    if type(amount) is float:  # checked in [0, 1] when the method was made
        return round(amount * size)
    if is_int(amount) and amount > size:
        raise ValueError(
            problem(where, "amount", f"at most the number of {what} ({size})", amount)
        )
    return nparams_to_prune(amount, size)


def check_structured(t: torch.Tensor, where: str, name: str | None = None) -> None:
    """Structured pruning removes slices along ``dim``, so it needs at least two dimensions."""
    if t.dim() <= 1:
        what = f"tensor {name!r}" if name else "the pruned tensor"
        # the template of problem(), with the shape shown as a shape rather than a quoted string
        raise ValueError(
            f"{where}: {what} must be at least 2-D for structured pruning (use an unstructured "
            f"method for 1-D tensors such as biases); got shape {tuple(t.shape)}"
        )


def check_dim(dim: Any, ndim: int, where: str, of: str | None = None) -> int:
    """Check ``dim`` against a rank; return it as a non-negative index.

    ``of`` describes the tensor in the message (default: "a <ndim>-D tensor").
    """
    check(where, "dim", dim)
    if not -ndim <= dim < ndim:
        of = of or f"a {ndim}-D tensor"
        raise IndexError(problem(where, "dim", f"in [{-ndim}, {ndim - 1}] for {of}", dim))
    return int(dim) % ndim


def check_norm_rank(n: Any, ndim: int, where: str, of: str | None = None) -> None:
    """Check a named norm against the rank of the pruned tensor.

    The norm of a slice runs over the other ``ndim - 1`` dims: 'nuc' (a matrix norm) needs
    exactly two of them (3-D tensors), 'fro' at most two. ``of`` describes the tensor in the
    message (default: "a <ndim>-D tensor").
    """
    of = of or f"a {ndim}-D tensor"
    if n == "nuc" and ndim != 3:
        raise RuntimeError(problem(
            where, "n", f"a number or 'fro' for {of} ('nuc' is a matrix norm: only for 3-D "
            "tensors, whose slices are matrices)", n))
    if n == "fro" and ndim > 3:
        raise RuntimeError(problem(
            where, "n", f"a number for {of} ('fro' runs over at most two dims: only for "
            "tensors of at most 3-D; n=2 is the same norm)", n))


def check_same_shape(
    scores: torch.Tensor, reference: torch.Tensor, where: str, argument: str, of: str
) -> None:
    """``scores`` must have the shape of ``reference`` (the tensor being pruned)."""
    if not isinstance(scores, torch.Tensor):
        raise TypeError(problem(where, argument, "a torch.Tensor", type(scores).__name__))
    if scores.shape != reference.shape:
        raise ShapeMismatchError(
            problem(where, argument, f"the same shape as {of} {tuple(reference.shape)}",
                    tuple(scores.shape))
        )


def check_same_device(
    tensor: torch.Tensor, reference: torch.Tensor, where: str, argument: str, of: str
) -> None:
    """``tensor`` must live on the device of ``reference`` (the tensor being pruned).

    Examples
    --------
    >>> check_same_device(torch.ones(2, device="meta"), torch.ones(2), "custom_from_mask",
    ...                   "mask", "the pruned tensor")
    Traceback (most recent call last):
    ...
    prune_explorer.prune.validation.DeviceMismatchError: custom_from_mask: mask must be on the \
device of the pruned tensor, cpu; got a tensor on meta (move it first: mask.to(...))
    """
    if tensor.device != reference.device:
        raise DeviceMismatchError(
            f"{where}: {argument} must be on the device of {of}, {reference.device}; got a tensor "
            f"on {tensor.device} (move it first: {argument}.to(...))"
        )


# ----------------------------------------------------------------------------------------------
# Names that PyTorch's own tests import from the prune module.


def _validate_pruning_amount_init(amount: Any) -> None:
    """Check an amount when a pruning method is created (no tensor known yet)."""
    check("amount check", "amount", amount)


def _validate_pruning_amount(amount: Any, tensor_size: int) -> None:
    """Check that an integer amount fits into ``tensor_size`` units."""
    count_to_prune(amount, tensor_size, "amount check")


def _compute_nparams_toprune(amount: Any, tensor_size: int) -> int:
    """Number of units to prune: an int amount is a count, a float one a rounded fraction."""
    return nparams_to_prune(amount, tensor_size)
