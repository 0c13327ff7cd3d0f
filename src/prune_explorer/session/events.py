"""Plain change notifications: a list of callbacks called with a :class:`SessionEvent`.

The session knows nothing about who listens (a widget, a logger, a test).

Examples
--------
>>> import torch
>>> from prune_explorer import Session
>>> s = Session(torch.nn.Sequential(torch.nn.Linear(4, 2)))
>>> seen = []
>>> stop = s.on_change(seen.append)
>>> _ = s.apply("0.weight", "l1_unstructured", amount=0.5)
>>> seen[0].kind, seen[0].names
('apply', ('0.weight',))
>>> stop()  # unsubscribe
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

from .steps.step import Step
from .transaction.interrupts import machinery

__all__ = ["EVENT_KINDS", "EventEmitter", "SessionEvent"]

#: What can happen to a session.
EVENT_KINDS = ("apply", "undo", "reset", "commit", "to", "calibrate")


@dataclass(frozen=True)
class SessionEvent:
    """Something changed: ``kind`` (one of :data:`EVENT_KINDS`), the tensor addresses affected
    and the steps involved: the step applied or undone, the ``remove`` steps a commit made,
    every step a ``reset`` took back (in the order they were applied); empty for ``to`` and
    ``calibrate`` (whose names are the tensors calibrated)."""

    kind: str
    names: tuple[str, ...]
    steps: tuple[Step, ...] = ()


class EventEmitter:
    """Holds callbacks and calls each, in subscription order, with every event."""

    def __init__(self) -> None:
        self._callbacks: list[Callable[[SessionEvent], object]] = []

    def on_change(self, callback: Callable[[SessionEvent], object]) -> Callable[[], None]:
        """Call ``callback(event)`` after every change; returns a function that unsubscribes."""
        if not callable(callback):
            raise TypeError(f"on_change: callback must be callable; got {callback!r}")
        self._callbacks.append(callback)

        def unsubscribe() -> None:
            if callback in self._callbacks:
                self._callbacks.remove(callback)

        return unsubscribe

    def emit(self, event: SessionEvent) -> None:
        """Call every callback with ``event`` (a failing callback propagates its error)."""
        for callback in list(self._callbacks):
            callback(event)

    @machinery
    def deliver(self, events: Iterable[SessionEvent],
                guard: Callable[[], AbstractContextManager[object]] = nullcontext
                ) -> BaseException | None:
        """Call every callback with each of ``events``, each call inside ``guard()``; a failing
        callback does not keep the others from hearing of the change. Returns the first
        failure (``KeyboardInterrupt`` included), or None."""
        failure: BaseException | None = None
        for event in events:
            for callback in list(self._callbacks):
                try:
                    with guard():
                        callback(event)
                except BaseException as err:  # raised by the caller once all have heard
                    if failure is None:
                        failure = err
        return failure

    def __len__(self) -> int:
        return len(self._callbacks)
