"""Argument checks shared by every pruning method and function.

Every check raises the exception *type* that ``torch.nn.utils.prune`` raises for the same input,
with one message template: ``"<where>: <argument> must be <rule>; got <value>"``.
``where`` names the
public function or class the user called, so the message points at their line, not ours.

The three underscore names at the bottom are also importable from ``prune_explorer.prune`` because
PyTorch's own test-suite for ``torch.nn.utils.prune`` calls them.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import torch

__all__ = [
    "ShapeMismatchError",
    "check_amount",
    "check_amount_fits",
    "check_dim",
    "check_n",
    "check_structured",
    "nparams_to_prune",
    "problem",
]

_AMOUNT_RULE = "a float in [0, 1] or an int >= 0"


class ShapeMismatchError(AssertionError, ValueError):
    """Two tensors that must have the same shape do not.

    torch raises ``AssertionError`` here; this class is also a ``ValueError`` so that callers can
    catch it the way they catch every other bad argument.
    """


def problem(where: str, argument: str, rule: str, value: Any) -> str:
    """Format the one error message template used across the package."""
    return f"{where}: {argument} must be {rule}; got {value!r}"


def check_amount(amount: Any, where: str) -> None:
    """Check an ``amount`` on its own: a fraction in [0, 1] or a non-negative count."""
    if isinstance(amount, bool) or not isinstance(amount, numbers.Real):
        raise TypeError(problem(where, "amount", _AMOUNT_RULE, amount))
    if isinstance(amount, numbers.Integral):
        if amount < 0:
            raise ValueError(problem(where, "amount", _AMOUNT_RULE, amount))
        return
    value = float(amount)
    if math.isnan(value) or value < 0.0 or value > 1.0:
        raise ValueError(problem(where, "amount", _AMOUNT_RULE, amount))


def nparams_to_prune(amount: numbers.Real, size: int) -> int:
    """How many of ``size`` units ``amount`` prunes: ints are counts, floats round half to even."""
    if isinstance(amount, numbers.Integral):
        return int(amount)
    return round(float(amount) * size)


def check_amount_fits(amount: Any, size: int, where: str, what: str = "units") -> None:
    """Check that an integer ``amount`` does not exceed the ``size`` units available."""
    if isinstance(amount, numbers.Integral) and not isinstance(amount, bool) and amount > size:
        raise ValueError(
            problem(where, "amount", f"at most the number of prunable {what} ({size})", amount)
        )


def check_structured(t: torch.Tensor, where: str, name: str | None = None) -> None:
    """Structured pruning removes slices along ``dim``, so it needs at least two dimensions."""
    if t.dim() <= 1:
        what = f"tensor {name!r}" if name else "the pruned tensor"
        raise ValueError(
            problem(where, what, "at least 2-D for structured pruning (use an unstructured "
                    "method for 1-D tensors such as biases)", f"shape {tuple(t.shape)}")
        )


def check_dim_type(dim: Any, where: str) -> None:
    """``dim`` must be a plain integer (not a bool, float or string)."""
    if isinstance(dim, bool) or not isinstance(dim, numbers.Integral):
        raise TypeError(problem(where, "dim", "an int", dim))


def check_dim(t: torch.Tensor, dim: Any, where: str) -> int:
    """Check ``dim`` against the rank of ``t`` and return it as a non-negative index."""
    check_dim_type(dim, where)
    rank = t.dim()
    if not -rank <= dim < rank:
        raise IndexError(
            problem(where, "dim", f"in [{-rank}, {rank - 1}] for a {rank}-D tensor", dim)
        )
    return int(dim) % rank


_NAMED_NORMS = ("fro", "nuc")


def check_n(n: Any, where: str, t: torch.Tensor | None = None, dim: int | None = None) -> None:
    """Check the norm order ``n``: a real number (inf and -inf included), 'fro' or 'nuc'.

    'nuc' is a matrix norm: torch accepts it only when the norm runs over exactly two dimensions,
    i.e. for 3-D tensors; 'fro' over at most two (tensors up to 3-D). ``None`` is passed through
    to ``torch.norm`` as torch does.
    """
    if n is None:
        return
    if isinstance(n, str):
        if n not in _NAMED_NORMS:
            raise RuntimeError(problem(where, "n", "a real number, inf, -inf, 'fro' or 'nuc'", n))
        # the norm runs over every dim but one: 'nuc' needs exactly two, 'fro' at most two
        if n == "nuc" and t is not None and t.dim() != 3:
            raise RuntimeError(
                problem(where, "n", "'nuc' only for 3-D tensors (a norm over two dims)", n)
                + f" (tensor is {t.dim()}-D)"
            )
        if n == "fro" and t is not None and t.dim() > 3:
            raise RuntimeError(
                problem(where, "n", "'fro' only for tensors of at most 3-D (a norm over at most "
                        "two dims); use n=2 for the same norm on higher ranks", n)
                + f" (tensor is {t.dim()}-D)"
            )
        return
    if isinstance(n, bool) or not isinstance(n, numbers.Real) or math.isnan(float(n)):
        raise RuntimeError(problem(where, "n", "a real number, inf, -inf, 'fro' or 'nuc'", n))


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


# ----------------------------------------------------------------------------------------------
# Names that PyTorch's own tests import from the prune module.


def _validate_pruning_amount_init(amount: Any) -> None:
    """Check an amount when a pruning method is created (no tensor known yet)."""
    check_amount(amount, "amount check")


def _validate_pruning_amount(amount: Any, tensor_size: int) -> None:
    """Check that an integer amount fits into ``tensor_size`` units."""
    check_amount_fits(amount, tensor_size, "amount check")


def _compute_nparams_toprune(amount: Any, tensor_size: int) -> int:
    """Number of units to prune: an int amount is a count, a float one a rounded fraction."""
    return nparams_to_prune(amount, tensor_size)
