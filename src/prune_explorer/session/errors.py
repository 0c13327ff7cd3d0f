"""Exceptions raised by the session layer.

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

__all__ = ["InterruptedAfterCommit", "InvalidStepError", "NotUndoableError", "one_line"]


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
