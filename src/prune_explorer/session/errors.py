"""Every exception and warning the session layer raises, in one place (the modules that raise
them re-export theirs: ``prune_explorer.session.plans.format.InvalidPlanError`` is this one).

Examples
--------
>>> from prune_explorer.session import Step, InvalidStepError
>>> try:
...     Step("l1_unstructured", "fc.weight", amount=1.5)
... except InvalidStepError as err:
...     print(err)
Step: amount must be a float in [0, 1] or an int >= 0; got 1.5
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "InterruptedAfterCommit",
    "InvalidDescriptionError",
    "InvalidMaskError",
    "InvalidPlanError",
    "InvalidPlanStepError",
    "InvalidStepError",
    "InvalidTensorError",
    "ModelChangedError",
    "NotUndoableError",
    "PruningNotMergedError",
    "PruningNotSavedWarning",
    "ShrinkError",
    "StateDictMismatchError",
    "one_line",
]


class InvalidStepError(ValueError, TypeError):
    """A pruning step (method, target, setting or seed) is not valid.

    Subclasses both ``ValueError`` and ``TypeError`` so callers may catch either: a wrong type
    and a wrong value are reported the same way. ``field`` names the offending field
    (``"amount"``, ``"target"``, ...) when there is one.
    """

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class NotUndoableError(RuntimeError):
    """``undo``/``reset`` would have to go back past a ``commit``, which is permanent."""


class InterruptedAfterCommit(KeyboardInterrupt):
    """Ctrl-C arrived after an action took effect, while its change events were sent.

    The action is done -- model, history and plan are as after it -- and every subscriber was
    called, but one may not have finished (an explorer redraws itself). Raised so that a loop of
    actions still stops; ``Session.revision`` says whether an action changed the session.
    """


def one_line(exc: BaseException) -> str:
    """The exception's type and the first sentence of its message, on one line (for messages
    that quote an error from a library).

    Examples
    --------
    >>> one_line(ValueError("bad value.  Try\\n again."))
    'ValueError: bad value.'
    """
    text = " ".join(str(exc).split())
    cut = text.find(". ")
    text = text[: cut + 1] if 0 < cut < 200 else text[:200]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


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


class InvalidTensorError(ValueError):
    """A tensor of a ``state_dict`` holds no plain data (sparse, nested, quantized, meta,
    complex: see :mod:`~prune_explorer.session.model.tensor_kinds`); ``key`` names it."""

    def __init__(self, message: str, key: str) -> None:
        super().__init__(message)
        self.key = key


class InvalidMaskError(InvalidTensorError):
    """A saved ``<name>_mask`` is not a valid pruning mask; ``key`` names it."""


class StateDictMismatchError(ValueError):
    """The ``state_dict`` does not fit the model; ``problems`` lists each mismatch in words."""

    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = tuple(problems)


class PruningNotSavedWarning(UserWarning):
    """Saving a model whose pruning a library's loader would not restore."""


class PruningNotMergedError(RuntimeError):
    """Merging an adapter (peft's LoRA) into a layer still pruned through a hook, which would
    lose the adapter's delta."""


class ModelChangedError(NotUndoableError):
    """The model's pruning of a tensor is no longer what the session left there."""


class InvalidDescriptionError(ValueError):
    """A shrunk-architecture description that does not fit the format or the model."""


class ShrinkError(RuntimeError):
    """Shrink could not trace or shrink the model; the cause is in the message."""
